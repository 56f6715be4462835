/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <elfutils/libdwfl.h>
#include "native/cfirows.h"
#include "native/modules.h"
#include "native/perfmap.h"
#include "native/trampoline.h"
#include "native/unwind.h"
#include "native/x86_tail.h"
#include "util/clock.h"

#define DEFAULT_REFRESH_NS (100ull * 1000 * 1000)
#define MAX_ROWS 16384		/* decoded CFI rows kept (~200 bytes each) */

/* The sample being unwound. */
struct sample {
	const unsigned char *stack;
	uint64_t base;		/* the address stack[0] was copied from */
	size_t len;
	uint64_t sp;
	bool read_beyond;	/* a read at or past the end of the copy */
	size_t used, missed;	/* end offsets from sp read, and the lowest one refused */
	int epilogue;		/* -1: not looked at yet */
	/* a step left to libdwfl: from these registers, to those */
	const struct native_regs *step_from;
	struct native_regs *step_to;
	int step_frames;
};

struct native_unwinder {
	pid_t pid;
	struct native_modules *mods;
	Dwfl *dwfl;		/* the modules' */
	struct cfirows *rows;
	struct py_trampoline *tramp;
	struct perfmap *perfmap;	/* names for anonymous code */
	uint64_t refresh_ns, last_refresh;
	struct sample s;
	struct native_unwind_info last;
	struct native_unwinder_stats st;
};

static const char *const end_names[NATIVE_END__COUNT] = {
	[NATIVE_END_OUTERMOST] = "outermost",
	[NATIVE_END_MAX] = "max-frames",
	[NATIVE_END_STACK] = "stack-copy",
	[NATIVE_END_NO_MODULE] = "no-module",
	[NATIVE_END_ANON_CODE] = "anon-code",
	[NATIVE_END_NO_CFI] = "no-cfi",
	[NATIVE_END_BAD] = "bad-cfi",
};

const char *native_end__name(enum native_end end)
{
	return (unsigned int)end < NATIVE_END__COUNT ? end_names[end] : "?";
}

/* ---- libdwfl callbacks: the one thread of a sample ---- */

static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
	struct native_unwinder *u = dwfl_arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return u->pid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = dwfl_arg;
	return true;
}

/* A word of the copy; reads elsewhere fail (and are counted). */
static bool stack_read(struct native_unwinder *u, uint64_t addr, uint64_t *val)
{
	struct sample *s = &u->s;
	uint64_t off = addr - s->base;

	if (addr >= s->base && s->len >= sizeof(*val) && off <= s->len - sizeof(*val)) {
		memcpy(val, s->stack + off, sizeof(*val));
		if (addr >= s->sp && addr - s->sp + sizeof(*val) > s->used)
			s->used = addr - s->sp + sizeof(*val);
		return true;
	}
	if (addr >= s->sp) {
		off = addr - s->sp;
		s->read_beyond = true;
		if (off <= SIZE_MAX - sizeof(*val) &&
		    (!s->missed || off + sizeof(*val) < s->missed))
			s->missed = off + sizeof(*val);
	}
	u->st.reads_outside++;
	return false;
}

/* Only the copy: anything else would be read at another moment than the
 * sample, and CFI of user code addresses only the stack. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg)
{
	(void)dwfl;
	return stack_read(dwfl_arg, addr, result);
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	struct native_unwinder *u = thread_arg;
	const struct native_regs *regs = u->s.step_from;

	/* each run of sampled registers; the others stay unknown to libdwfl */
	for (int i = 0; i < NATIVE_REG_COUNT;) {
		int j = i;

		if (!(regs->valid & NATIVE_REG_BIT(i))) {
			i++;
			continue;
		}
		while (j < NATIVE_REG_COUNT && (regs->valid & NATIVE_REG_BIT(j)))
			j++;
		if (!dwfl_thread_state_registers(thread, i, (unsigned int)(j - i), &regs->r[i]))
			return false;
		i = j;
	}
	dwfl_thread_state_register_pc(thread, regs->r[NATIVE_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

int native_unwinder__refresh(struct native_unwinder *u)
{
	u->last_refresh = mono_ns();
	u->st.refreshes++;
	/* rows name modules that may go: decoded again as needed */
	cfirows__clear(u->rows);
	py_trampoline__reset(u->tramp);
	return native_modules__refresh(u->mods);
}

void native_unwinder__set_refresh_interval(struct native_unwinder *u, uint64_t ns)
{
	u->refresh_ns = ns;
}

void native_unwinder__free(struct native_unwinder *u)
{
	if (!u)
		return;
	native_modules__free(u->mods);
	cfirows__free(u->rows);
	py_trampoline__free(u->tramp);
	perfmap__free(u->perfmap);
	free(u);
}

int native_unwinder__new(pid_t pid, struct native_unwinder **out)
{
	struct native_unwinder *u;
	int err;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->pid = pid;
	u->refresh_ns = DEFAULT_REFRESH_NS;
	u->last_refresh = mono_ns();
	u->st.refreshes = 1;
	err = cfirows__new(MAX_ROWS, &u->rows);
	if (err)
		goto err_free;
	err = py_trampoline__new(pid, &u->tramp);
	if (!err)
		err = perfmap__new(pid, &u->perfmap);
	if (err)
		goto err_free;
	err = native_modules__new(pid, &u->mods);
	if (err)
		goto err_free;
	u->dwfl = native_modules__dwfl(u->mods);
	/* the architecture comes from the first module libdwfl can read */
	if (!dwfl_attach_state(u->dwfl, NULL, pid, &thread_callbacks, u)) {
		err = -ENOEXEC;
		goto err_free;
	}
	*out = u;
	return 0;

err_free:
	native_unwinder__free(u);
	return err;
}

int native_unwinder__symbolize(struct native_unwinder *u, uint64_t pc, int exact,
			       struct native_frame *f)
{
	uint64_t lookup = exact || !pc ? pc : pc - 1;
	struct native_name nm;

	*f = (struct native_frame){ .pc = pc, .flags = exact ? NATIVE_FRAME_EXACT : 0 };
	if (native_modules__name(u->mods, lookup, &nm))
		return -ENOENT;
	f->module = nm.path;
	f->module_base = nm.base;
	f->module_end = nm.end;
	f->build_id = nm.build_id;
	f->build_id_len = nm.build_id_len;
	if (nm.symbol) {
		f->symbol = nm.symbol;
		f->offset = pc - nm.sym_start;
	}
	return 0;
}

int native_unwinder__module(struct native_unwinder *u, uint64_t pc, struct native_module *out)
{
	return native_modules__info(u->mods, pc, out);
}

/* ---- unwinding ---- */

/*
 * Is the sampled pc at the end of its function (x86_tail.h)? AArch64 code
 * has CFI for its epilogues (unwind.h): a register said saved below sp is
 * not one an epilogue popped.
 */
static bool epilogue_at(struct native_unwinder *u, uint64_t pc)
{
#if defined(__x86_64__)
	const unsigned char *p;
	size_t left;

	return (p = native_modules__code(u->mods, pc, &left)) && x86_tail__is_tail(p, left);
#else
	(void)u;
	(void)pc;
	return false;
#endif
}

/* A return address without its pointer-authentication signature (unwind.h). */
static uint64_t strip_pac(uint64_t ra)
{
	return NATIVE_VA_BITS < 64 ? ra & ((1ull << (NATIVE_VA_BITS & 63)) - 1) : ra;
}

/*
 * A register the sampled frame's CFI says is saved below sp, where the copy
 * does not reach (GCC's epilogues restore registers without restore rules):
 * at the end of a function (x86_tail.h) it holds its caller's value
 * already. Anywhere else (a leaf that saved it in the red zone, and uses
 * it) it does not, and stays unknown.
 */
static bool popped(struct native_unwinder *u, const struct native_regs *cur, int reg,
		   uint64_t *val)
{
	struct sample *s = &u->s;

	if (!(cur->valid & NATIVE_REG_BIT(reg)))
		return false;
	if (s->epilogue < 0)
		s->epilogue = epilogue_at(u, cur->r[NATIVE_REG_IP]);
	if (!s->epilogue)
		return false;
	*val = cur->r[reg];
	u->last.epilogue = 1;
	return true;
}

/* Applies a decoded row: @cur's caller in @next. false: it cannot be. */
static bool step_row(struct native_unwinder *u, const struct cfi_row *row,
		     const struct native_regs *cur, struct native_regs *next, bool first)
{
	struct sample *s = &u->s;
	uint64_t cfa;

	if (!(cur->valid & NATIVE_REG_BIT(row->cfa_reg)))
		return false;
	cfa = cur->r[row->cfa_reg] + (uint64_t)row->cfa_off;
	next->valid = 0;
	for (int reg = 0; reg < CFI_NREGS; reg++) {
		uint64_t v, at = cfa + (uint64_t)(int64_t)row->r[reg].off;
		int from = row->r[reg].reg;

		switch (row->r[reg].rule) {
		case CFI_SAME:
			from = reg;
			/* fall through */
		case CFI_REG:
			if (!(cur->valid & NATIVE_REG_BIT(from)))
				continue;
			v = cur->r[from];
			break;
		case CFI_AT_CFA:
			if (stack_read(u, at, &v))
				break;
			if (!first || at + 8 > s->sp || at >= s->base || !popped(u, cur, reg, &v))
				continue;
			break;
		case CFI_VAL_CFA:
			v = at;
			break;
		default:
			continue;
		}
		next->r[reg] = v;
		next->valid |= NATIVE_REG_BIT(reg);
	}
	/* the caller's sp is the CFA, by definition, when no rule says
	 * otherwise (libdw's AArch64 defaults give sp none) */
	if (row->r[NATIVE_REG_SP].rule == CFI_SAME || row->r[NATIVE_REG_SP].rule == CFI_UNDEF) {
		next->r[NATIVE_REG_SP] = cfa;
		next->valid |= NATIVE_REG_BIT(NATIVE_REG_SP);
	}
	/* the caller's pc is the return address (x86-64: the same register) */
	if (!(next->valid & NATIVE_REG_BIT(NATIVE_REG_RA)))
		return false;
	next->r[NATIVE_REG_IP] = strip_pac(next->r[NATIVE_REG_RA]);
	next->valid |= NATIVE_REG_BIT(NATIVE_REG_IP);
	return next->r[NATIVE_REG_IP] != 0;
}

static int step_frame_cb(Dwfl_Frame *state, void *arg)
{
	struct native_unwinder *u = arg;
	struct native_regs *next = u->s.step_to;
	Dwarf_Addr pc;

	if (u->s.step_frames++ == 0)
		return DWARF_CB_OK;	/* the frame we start from: let libdwfl unwind it */
	next->valid = 0;
	for (int reg = 0; reg < NATIVE_REG_IP; reg++) {
		Dwarf_Word v;

		if (dwfl_frame_reg(state, (unsigned int)reg, &v) == 0) {
			next->r[reg] = v;
			next->valid |= NATIVE_REG_BIT(reg);
		}
	}
	if (dwfl_frame_pc(state, &pc, NULL)) {
		next->r[NATIVE_REG_IP] = strip_pac(pc);
		next->valid |= NATIVE_REG_BIT(NATIVE_REG_IP);
	}
	return DWARF_CB_ABORT;
}

/*
 * One step by libdwfl, for a row with expressions: it starts from @cur as
 * from a sampled frame (the row at the pc itself; the caller checked it is
 * the row of pc - 1 too).
 */
static bool step_libdwfl(struct native_unwinder *u, const struct native_regs *cur,
			 struct native_regs *next)
{
	struct sample *s = &u->s;

	u->st.libdwfl_steps++;
	s->step_from = cur;
	s->step_to = next;
	s->step_frames = 0;
	next->valid = 0;
	dwfl_getthread_frames(u->dwfl, u->pid, step_frame_cb, u);
	return s->step_frames == 2 && (next->valid & NATIVE_REG_BIT(NATIVE_REG_IP)) &&
	       next->r[NATIVE_REG_IP];
}

/* A pc in no module: a copy of CPython's perf trampoline gets its row
 * (trampoline.h); other anonymous code stays without one. Once per row. */
static void anon_row(struct native_unwinder *u, struct cfi_row *row)
{
	uint64_t lo, hi;

	if (row->anon_tried || !row->pc)
		return;
	if (!native_modules__anon_range(u->mods, row->pc, &lo, &hi) &&
	    !py_trampoline__row(u->tramp, u->mods, lo, hi, row))
		u->st.trampoline_rows++;
	row->anon_tried = 1;
}

/*
 * Functions that start a stack of their own, below which the memory is not
 * their callers' frames: greenlet's first switch into a greenlet runs it
 * from g_initialstub on top of the C stack of whichever greenlet started it,
 * and that greenlet's stack has been saved away and overwritten since (the
 * unwind went on into stale frames: 99% of a 3.15 greenlet program's samples
 * cut). The stack ends there, complete, as a thread's ends at its start;
 * its Python frames end at the greenlet's function likewise.
 */
static bool stack_root(const char *symbol)
{
	static const char *const roots[] = {
		"_ZN8greenlet12UserGreenlet13g_initialstubEPv",	/* greenlet 3 (C++) */
		"g_initialstub",				/* greenlet 1 and 2 (C) */
	};

	for (size_t i = 0; symbol && i < sizeof(roots) / sizeof(roots[0]); i++)
		if (!strcmp(symbol, roots[i]))
			return true;
	return false;
}

/* Fills @f's names from @row (named once per row). */
static void name_frame(struct native_unwinder *u, struct cfi_row *row, struct native_frame *f)
{
	if (!row->named) {
		struct native_name nm;

		row->named = 1;
		if (!native_modules__name(u->mods, row->pc, &nm)) {
			row->path = nm.path;
			row->module_base = nm.base;
			row->module_end = nm.end;
			row->build_id = nm.build_id;
			row->build_id_len = nm.build_id_len;
			row->symbol = nm.symbol;
			row->sym_start = nm.sym_start;
		} else if ((row->symbol = perfmap__lookup(u->perfmap, row->pc,
							  &row->sym_start))) {
			/* JIT code the target named, as perf names it: the map
			 * file its DSO, the address not relative to it */
			row->path = perfmap__path(u->perfmap);
		}
		row->stack_root = stack_root(row->symbol);
	}
	f->module = row->path;
	f->module_base = row->module_base;
	f->module_end = row->module_end;
	f->build_id = row->build_id;
	f->build_id_len = row->build_id_len;
	if (row->symbol) {
		f->symbol = row->symbol;
		f->offset = f->pc - row->sym_start;
	}
}

/*
 * May a caller's sp equal its callee's? On AArch64 a function interrupted
 * before it made a frame (a leaf, or a prologue) has its return address in
 * x30 and its caller's sp: yes, for the frame the sample (or a signal)
 * interrupted. A call leaves the callee's sp lower (x86-64: the return
 * address pushed; AArch64: x30 saved before the next call), so never for
 * a return address: the unwind would go round.
 */
static bool same_sp_ok(bool exact)
{
#if defined(__aarch64__)
	return exact;
#else
	(void)exact;
	return false;
#endif
}

static enum native_end unwind_once(struct native_unwinder *u, const struct native_regs *regs,
				   const struct native_stack *stack, struct native_frame *out,
				   size_t max, size_t *n)
{
	struct sample *s = &u->s;
	struct native_regs cur = *regs, next;
	bool exact = true;

	*s = (struct sample){ .sp = regs->r[NATIVE_REG_SP], .epilogue = -1 };
	if (stack && stack->data) {
		s->stack = stack->data;
		s->base = stack->addr;
		s->len = stack->len;
	}
	u->last.epilogue = 0;
	for (*n = 0;; cur = next) {
		uint64_t pc = cur.r[NATIVE_REG_IP];
		struct native_frame *f = &out[*n];
		struct cfi_row *row;
		bool ok;

		if (*n == max)
			return NATIVE_END_MAX;
		row = cfirows__get(u->rows, u->mods, exact ? pc : pc - 1);
		if (!row)
			return NATIVE_END_BAD;
		if (row->kind == CFI_NO_MODULE)
			anon_row(u, row);
		*f = (struct native_frame){ .pc = pc, .flags = exact ? NATIVE_FRAME_EXACT : 0,
					    .sp = cur.r[NATIVE_REG_SP] };
		if (row->trampoline)
			f->flags |= NATIVE_FRAME_TRAMPOLINE;
		(*n)++;
		/* a return address into a signal trampoline is where it starts */
		if (!exact && row->kind <= CFI_COMPLEX && row->signal) {
			native_unwinder__symbolize(u, pc, 1, f);
			f->sp = cur.r[NATIVE_REG_SP];
		} else {
			name_frame(u, row, f);
		}
		if (row->kind == CFI_NO_MODULE)
			return NATIVE_END_NO_MODULE;
		if (row->outermost || row->stack_root)
			return NATIVE_END_OUTERMOST;
		if (row->kind == CFI_NO_CFI)
			return NATIVE_END_NO_CFI;
		if (row->kind == CFI_SIMPLE)
			ok = step_row(u, row, &cur, &next, *n == 1);
		/* libdwfl starts at the pc: the row of pc - 1 must reach it */
		else if (exact || row->signal || row->end > pc)
			ok = step_libdwfl(u, &cur, &next);
		else
			ok = false;
		if (!ok)
			return s->read_beyond ? NATIVE_END_STACK : NATIVE_END_BAD;
		/* a caller's stack pointer is above its callee's (but a signal
		 * may have interrupted code on another stack) */
		if (!row->signal && (!(next.valid & NATIVE_REG_BIT(NATIVE_REG_SP)) ||
				     next.r[NATIVE_REG_SP] < cur.r[NATIVE_REG_SP] ||
				     (next.r[NATIVE_REG_SP] == cur.r[NATIVE_REG_SP] &&
				      !same_sp_ok(exact))))
			return NATIVE_END_BAD;
		/* the caller of a trampoline was interrupted, not calling */
		exact = row->signal;
	}
}

int native_unwinder__unwind(struct native_unwinder *u, const struct native_regs *regs,
			    const struct native_stack *stack, struct native_frame *out,
			    size_t max, size_t *n, int *complete)
{
	const uint64_t need = NATIVE_REG_BIT(NATIVE_REG_IP) | NATIVE_REG_BIT(NATIVE_REG_SP);
	struct sample *s = &u->s;
	enum native_end end;

	*n = 0;
	*complete = 0;
	if ((regs->valid & need) != need ||
	    (stack && stack->data && stack->addr > regs->r[NATIVE_REG_SP]))
		return -EINVAL;
	u->last.refreshed = 0;
	end = unwind_once(u, regs, stack, out, max, n);
	/* a pc in no module: maybe one mapped since we looked. Soon (a 20th of
	 * the interval: 5 ms) when the process's size says its mappings changed
	 * (an import loading extension modules, but also any large allocation);
	 * else not within the interval (garbage pcs); seldom in JIT code. */
	if (end == NATIVE_END_NO_MODULE) {
		const struct native_frame *f = &out[*n - 1];
		uint64_t pc = f->flags & NATIVE_FRAME_EXACT ? f->pc : f->pc - 1;
		uint64_t wait = u->refresh_ns;

		if (native_modules__in_anon(u->mods, pc))
			wait = wait > UINT64_MAX / 10 ? UINT64_MAX : wait * 10;
		else if (native_modules__grew(u->mods))
			wait /= 20;
		if (mono_ns() - u->last_refresh >= wait && native_unwinder__refresh(u) == 0) {
			u->last.refreshed = 1;
			end = unwind_once(u, regs, stack, out, max, n);
		}
		f = &out[*n - 1];
		pc = f->flags & NATIVE_FRAME_EXACT ? f->pc : f->pc - 1;
		if (end == NATIVE_END_NO_MODULE && native_modules__in_anon(u->mods, pc))
			end = NATIVE_END_ANON_CODE;
	}
	u->last.end = end;
	u->last.stack_used = end == NATIVE_END_STACK && s->missed ? s->missed : s->used;
	u->st.unwinds++;
	u->st.ends[end]++;
	u->st.epilogues += (uint64_t)u->last.epilogue;
	if (end == NATIVE_END_OUTERMOST)
		u->st.complete++;
	*complete = end == NATIVE_END_OUTERMOST;
	return 0;
}

const struct native_unwind_info *native_unwinder__last(const struct native_unwinder *u)
{
	return &u->last;
}

void native_unwinder__stats(const struct native_unwinder *u, struct native_unwinder_stats *out)
{
	*out = u->st;
	out->rows = cfirows__count(u->rows);
	out->rows_bytes = cfirows__bytes(u->rows);
	native_modules__count(u->mods, &out->modules, &out->symbols, &out->symindex_bytes);
	out->perfmap_refused = perfmap__refused(u->perfmap);
	out->perfmap_path = perfmap__path(u->perfmap);
}
