// SPDX-License-Identifier: MIT
/*
 * test_native_unwind.c - the native unwinder (user/native/unwind.c) and its
 * symbol index (user/native/symindex.c), on samples this process takes of
 * itself: the registers at a known call site and a copy of its own stack, so
 * every frame is known.
 *
 * Checks: the whole stack down to _start, complete; every truncation of the
 * copy gives a prefix of it, complete exactly when the copy holds what the
 * whole unwind read; missing registers likewise; a frame limit; a pc in a
 * library dlopen()ed after the unwinder was made (refresh, its rate limit);
 * garbage stacks and registers (no crash, no frame beyond the limit);
 * perf's register layout; the symbol index against a linear scan.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <asm/perf_regs.h>
#include <cmocka.h>

#include "native/symindex.h"
#include "native/unwind.h"

#define MAX_FRAMES 256
#define COPY_MAX 65536

/*
 * capture_regs(struct native_regs *r): every register as its caller will
 * see them once it returns (rip: the return address, rsp: above it), so the
 * sample is the caller interrupted right after the call. Callee-saved
 * registers, the ones unwinding needs, are exact; the others are whatever
 * the call left.
 */
void capture_regs(struct native_regs *r);
__asm__(".text\n"
	".globl capture_regs\n"
	".type capture_regs, @function\n"
	"capture_regs:\n"
	"	.cfi_startproc\n"
	"	movq %rax, 0(%rdi)\n"
	"	movq %rdx, 8(%rdi)\n"
	"	movq %rcx, 16(%rdi)\n"
	"	movq %rbx, 24(%rdi)\n"
	"	movq %rsi, 32(%rdi)\n"
	"	movq %rdi, 40(%rdi)\n"
	"	movq %rbp, 48(%rdi)\n"
	"	leaq 8(%rsp), %rax\n"
	"	movq %rax, 56(%rdi)\n"
	"	movq %r8, 64(%rdi)\n"
	"	movq %r9, 72(%rdi)\n"
	"	movq %r10, 80(%rdi)\n"
	"	movq %r11, 88(%rdi)\n"
	"	movq %r12, 96(%rdi)\n"
	"	movq %r13, 104(%rdi)\n"
	"	movq %r14, 112(%rdi)\n"
	"	movq %r15, 120(%rdi)\n"
	"	movq (%rsp), %rax\n"
	"	movq %rax, 128(%rdi)\n"
	"	movl $0x1ffff, 136(%rdi)\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size capture_regs, .-capture_regs\n");

/*
 * An epilogue as GCC writes it: the pops adjust the CFA but leave the
 * registers' save rules (no .cfi_restore), so at the pops and the ret the
 * CFI points below sp. And a leaf that saves rbx in the red zone, below sp
 * too, while rbx holds something else.
 */
void epi_fn(void);
void epi_pop_rbp(void);
void epi_ret(void);
void redzone_fn(void);
void redzone_body(void);
void fp_fn(void);
void fp_tail(void);
void fp_tail_bad(void);
void fp_target(void);
__asm__(".text\n"
	".globl epi_fn, epi_pop_rbp, epi_ret, redzone_fn, redzone_body\n"
	".type epi_fn, @function\n"
	"epi_fn:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset rbp, -16\n"
	"	pushq %rbx\n"
	"	.cfi_def_cfa_offset 24\n"
	"	.cfi_offset rbx, -24\n"
	"	xorl %ebx, %ebx\n"
	"	popq %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"epi_pop_rbp:\n"
	"	popq %rbp\n"
	"	.cfi_def_cfa_offset 8\n"
	"epi_ret:\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size epi_fn, .-epi_fn\n"
	".type redzone_fn, @function\n"
	"redzone_fn:\n"
	"	.cfi_startproc\n"
	"	movq %rbx, -8(%rsp)\n"
	"	.cfi_offset rbx, -16\n"
	"redzone_body:\n"
	"	xorl %ebx, %ebx\n"
	"	movq -8(%rsp), %rbx\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size redzone_fn, .-redzone_fn\n"
	/* a frame-pointer function's end: leave, then a tail call whose
	 * argument is moved first (what CPython 3.15's build does) */
	".type fp_fn, @function\n"
	"fp_fn:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset rbp, -16\n"
	"	movq %rsp, %rbp\n"
	"	.cfi_def_cfa_register rbp\n"
	"	testq %rax, %rax\n"
	"	je 1f\n"
	"	leave\n"
	"	.cfi_remember_state\n"
	"	.cfi_def_cfa rsp, 8\n"
	"fp_tail:\n"
	"	movq %rax, %rdi\n"
	"	jmp fp_target\n"
	"	.cfi_restore_state\n"
	"1:	leave\n"
	"	.cfi_def_cfa rsp, 8\n"
	"fp_tail_bad:\n"
	"	movq %rax, %rbx\n"
	"	jmp fp_target\n"
	"	.cfi_endproc\n"
	".size fp_fn, .-fp_fn\n"
	".type fp_target, @function\n"
	"fp_target:\n"
	"	ret\n"
	".size fp_target, .-fp_target\n");

/*
 * A function whose CFA is a DWARF expression (as in PLT stubs and realigned
 * frames): its rows are left to libdwfl. It calls @cb(@c) with rbx saved.
 */
void expr_fn(void *c, void (*cb)(void *));
__asm__(".text\n"
	".globl expr_fn\n"
	".type expr_fn, @function\n"
	"expr_fn:\n"
	"	.cfi_startproc\n"
	"	pushq %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset rbx, -16\n"
	/* DW_CFA_def_cfa_expression { DW_OP_breg7 (rsp) 16 } */
	"	.cfi_escape 0x0f, 0x02, 0x77, 0x10\n"
	"	movq %rdi, %rbx\n"
	"	movq %rsi, %rax\n"
	"	call *%rax\n"
	"	movq %rbx, %rax\n"
	"	popq %rbx\n"
	"	.cfi_escape 0x0f, 0x02, 0x77, 0x08\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size expr_fn, .-expr_fn\n");

struct capture {
	struct native_regs regs;
	unsigned char *stack;
	size_t len;
};

/* The end of our [stack] mapping: how much there is to copy above sp. */
static uint64_t stack_top(uint64_t sp)
{
	char line[512];
	uint64_t top = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;

		if (sscanf(line, "%llx-%llx", &s, &e) == 2 && sp >= s && sp < e) {
			top = e;
			break;
		}
	}
	fclose(f);
	assert_true(top > sp);
	return top;
}

/* A raw copy of our own stack: ASan must not check the other frames' redzones. */
__attribute__((no_sanitize_address, noinline))
static void copy_stack(unsigned char *dst, uint64_t from, size_t len)
{
	const volatile unsigned char *src = (const volatile unsigned char *)(uintptr_t)from;

	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
}

__attribute__((noinline, noclone))
static void take_sample(struct capture *c)
{
	uint64_t top;

	capture_regs(&c->regs);
	/* only the region above sp is copied: our callees write below it */
	top = stack_top(c->regs.r[NATIVE_REG_SP]);
	c->len = top - c->regs.r[NATIVE_REG_SP];
	if (c->len > COPY_MAX)
		c->len = COPY_MAX;
	c->stack = malloc(COPY_MAX);
	assert_non_null(c->stack);
	copy_stack(c->stack, c->regs.r[NATIVE_REG_SP], c->len);
}

/* Three frames of our own whose names the unwind must show, in order. */
static volatile int sink;

__attribute__((noinline, noclone))
static int level3(struct capture *c)
{
	volatile char pad[64];

	pad[0] = 1;
	take_sample(c);
	return pad[0] + sink;
}

__attribute__((noinline, noclone))
static int level2(struct capture *c)
{
	volatile char pad[96];

	pad[0] = 2;
	return level3(c) + pad[0];
}

__attribute__((noinline, noclone))
static int level1(struct capture *c)
{
	volatile char pad[128];

	pad[0] = 3;
	return level2(c) + pad[0];
}

/* Unwinds @len bytes copied from the stack at the registers' sp. */
static int unwind_sp(struct native_unwinder *u, const struct native_regs *regs,
		     const void *data, size_t len, struct native_frame *out, size_t max,
		     size_t *n, int *complete)
{
	struct native_stack st = { .data = data, .addr = regs->r[NATIVE_REG_SP], .len = len };

	return native_unwinder__unwind(u, regs, &st, out, max, n, complete);
}

static void capture__free(struct capture *c)
{
	free(c->stack);
	c->stack = NULL;
}

static int unwinder_new(struct native_unwinder **u)
{
	int err = native_unwinder__new(getpid(), u);

	assert_int_equal(err, 0);
	assert_non_null(*u);
	return 0;
}

static size_t index_of(const struct native_frame *f, size_t n, const char *sym, size_t from)
{
	for (size_t i = from; i < n; i++)
		if (f[i].symbol && strcmp(f[i].symbol, sym) == 0)
			return i;
	return SIZE_MAX;
}

static void print_stack(const struct native_frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  #%-2zu %16llx %s+0x%llx (%s)\n", i, (unsigned long long)f[i].pc,
			f[i].symbol ? f[i].symbol : "[unknown]", (unsigned long long)f[i].offset,
			f[i].module ? f[i].module : "?");
}

static void test_whole_stack(void **state)
{
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder *u;
	struct capture c = { 0 };
	size_t n, a, b, d, m;
	int complete;

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, MAX_FRAMES, &n,
						 &complete), 0);
	print_stack(f, n);
	assert_int_equal(complete, 1);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_OUTERMOST);
	/* the sampled frame is exact, the callers are return addresses; each
	 * frame's sp above its callee's */
	assert_true(f[0].flags & NATIVE_FRAME_EXACT);
	assert_int_equal(f[0].sp, c.regs.r[NATIVE_REG_SP]);
	for (size_t i = 1; i < n; i++)
		assert_true(f[i].sp > f[i - 1].sp);
	assert_string_equal(f[0].symbol, "take_sample");
	for (size_t i = 1; i < n; i++)
		assert_false(f[i].flags & NATIVE_FRAME_EXACT);
	a = index_of(f, n, "level3", 0);
	b = index_of(f, n, "level2", a);
	d = index_of(f, n, "level1", b);
	m = index_of(f, n, "main", d);
	assert_int_equal(a, 1);
	assert_int_equal(b, 2);
	assert_int_equal(d, 3);
	assert_true(m != SIZE_MAX);
	assert_string_equal(f[n - 1].symbol, "_start");
	/* glibc's versioned names without their version */
	for (size_t i = 0; i < n; i++)
		assert_null(f[i].symbol ? strchr(f[i].symbol, '@') : NULL);
	/* an exact pc names its own instruction's function, offsets match */
	for (size_t i = 0; i < n; i++) {
		assert_non_null(f[i].module);
		if (f[i].symbol)
			assert_true(f[i].offset < 1u << 20);
	}
	/* the same sample twice: the same frames (caches change nothing) */
	{
		struct native_frame g[MAX_FRAMES];
		size_t n2;
		int c2;

		assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, g,
							 MAX_FRAMES, &n2, &c2), 0);
		assert_int_equal(n2, n);
		assert_int_equal(c2, 1);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(g[i].pc, f[i].pc);
			assert_ptr_equal(g[i].symbol, f[i].symbol);
		}
	}
	fprintf(stderr, "  %zu frames, %zu stack bytes read\n", n,
		native_unwinder__last(u)->stack_used);
	capture__free(&c);
	native_unwinder__free(u);
}

/* Every truncation of the copy: a prefix, complete iff the copy suffices. */
static void test_truncated_copies(void **state)
{
	struct native_frame full[MAX_FRAMES], f[MAX_FRAMES];
	struct native_unwinder *u;
	struct capture c = { 0 };
	size_t n, nf, used;
	int complete;

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, full, MAX_FRAMES,
						 &nf, &complete), 0);
	assert_int_equal(complete, 1);
	used = native_unwinder__last(u)->stack_used;
	assert_true(used > 0 && used <= c.len);
	for (size_t len = 0; len <= used + 64; len += len < 64 ? 1 : 8) {
		assert_int_equal(unwind_sp(u, &c.regs, c.stack, len, f, MAX_FRAMES,
							 &n, &complete), 0);
		assert_true(n >= 1 && n <= nf);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(f[i].pc, full[i].pc);
		assert_int_equal(complete, len >= used);
		if (complete)
			assert_int_equal(n, nf);
		else
			assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_STACK);
	}
	/* no copy at all: the sampled frame only */
	assert_int_equal(unwind_sp(u, &c.regs, NULL, 0, f, MAX_FRAMES, &n,
						 &complete), 0);
	assert_int_equal(complete, 0);
	assert_true(n >= 1);
	assert_int_equal(f[0].pc, full[0].pc);
	capture__free(&c);
	native_unwinder__free(u);
}

/* Registers not sampled are unknown, never zero: a prefix, or all of it when
 * only registers CFI never needs are missing. */
static void test_missing_registers(void **state)
{
	const uint32_t callee_saved = (1u << NATIVE_REG_BX) | (1u << NATIVE_REG_BP) |
				      (1u << NATIVE_REG_R12) | (1u << NATIVE_REG_R13) |
				      (1u << NATIVE_REG_R14) | (1u << NATIVE_REG_R15);
	const uint32_t need = (1u << NATIVE_REG_IP) | (1u << NATIVE_REG_SP);
	struct native_frame full[MAX_FRAMES], f[MAX_FRAMES];
	struct native_unwinder *u;
	struct native_regs r;
	struct capture c = { 0 };
	size_t n, nf;
	int complete;

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, full, MAX_FRAMES,
						 &nf, &complete), 0);
	assert_int_equal(complete, 1);

	r = c.regs;
	r.valid = need | callee_saved;
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n,
						 &complete), 0);
	assert_int_equal(complete, 1);
	assert_int_equal(n, nf);

	/* each callee-saved register missing in turn, then all of them */
	for (int reg = -1; reg < NATIVE_REG_COUNT; reg++) {
		r = c.regs;
		if (reg < 0)
			r.valid = need;
		else if (callee_saved & (1u << reg))
			r.valid &= ~(1u << reg);
		else
			continue;
		assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES,
							 &n, &complete), 0);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(f[i].pc, full[i].pc);
		if (!complete)
			assert_int_not_equal(native_unwinder__last(u)->end, NATIVE_END_OUTERMOST);
		else
			assert_int_equal(n, nf);
	}
	/* IP and SP are required */
	r = c.regs;
	r.valid &= ~(1u << NATIVE_REG_IP);
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n,
						 &complete), -EINVAL);
	assert_int_equal(n, 0);
	r = c.regs;
	r.valid &= ~(1u << NATIVE_REG_SP);
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n,
						 &complete), -EINVAL);
	capture__free(&c);
	native_unwinder__free(u);
}

static void test_max_frames(void **state)
{
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder *u;
	struct capture c = { 0 };
	size_t n, nf;
	int complete;

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, MAX_FRAMES, &nf,
						 &complete), 0);
	assert_int_equal(complete, 1);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, 3, &n,
						 &complete), 0);
	assert_int_equal(n, 3);
	assert_int_equal(complete, 0);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_MAX);
	/* exactly enough room: the outermost frame fits, complete */
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, nf, &n,
						 &complete), 0);
	assert_int_equal(n, nf);
	assert_int_equal(complete, 1);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, 0, &n,
						 &complete), 0);
	assert_int_equal(n, 0);
	assert_int_equal(complete, 0);
	capture__free(&c);
	native_unwinder__free(u);
}

/*
 * Samples made up from a real one: as if level3's call had gone to epi_fn
 * (or redzone_fn) and the tick came at one of its instructions. The words
 * its frame pushed lie below the copy unless the copy starts lower.
 */
struct fake {
	struct native_regs regs;
	unsigned char *data;
	uint64_t addr;
	size_t len;
};

static void fake_make(struct fake *fk, const struct capture *c, void (*pc)(void),
		      const uint64_t *above, int nabove, const uint64_t *below, int nbelow)
{
	size_t pre = (size_t)(nabove + nbelow) * 8;
	uint64_t sp;

	fk->regs = c->regs;
	fk->regs.r[NATIVE_REG_IP] = (uint64_t)(uintptr_t)pc;
	/* the return address into level3's capture point, then what sits above */
	sp = c->regs.r[NATIVE_REG_SP] - 8 * (uint64_t)(1 + nabove);
	fk->regs.r[NATIVE_REG_SP] = sp;
	fk->len = pre + 8 + c->len;
	fk->data = malloc(fk->len);
	assert_non_null(fk->data);
	fk->addr = sp - 8 * (uint64_t)nbelow;
	for (int i = 0; i < nbelow; i++)
		memcpy(fk->data + 8 * i, &below[i], 8);
	for (int i = 0; i < nabove; i++)
		memcpy(fk->data + 8 * (nbelow + i), &above[i], 8);
	memcpy(fk->data + pre, &c->regs.r[NATIVE_REG_IP], 8);
	memcpy(fk->data + pre + 8, c->stack, c->len);
}

static int fake_unwind(struct native_unwinder *u, struct fake *fk, int with_below,
		       struct native_frame *f, size_t *n, int *complete)
{
	struct native_stack st = { fk->data, fk->addr, fk->len };

	if (!with_below) {
		size_t skip = (size_t)(fk->regs.r[NATIVE_REG_SP] - fk->addr);

		st = (struct native_stack){ fk->data + skip, fk->regs.r[NATIVE_REG_SP],
					    fk->len - skip };
	}
	return native_unwinder__unwind(u, &fk->regs, &st, f, MAX_FRAMES, n, complete);
}

static void expect_whole(const struct native_frame *f, size_t n, const struct native_frame *full,
			 size_t nf, const char *leaf)
{
	assert_int_equal(n, nf + 1);
	assert_string_equal(f[0].symbol, leaf);
	for (size_t i = 0; i < nf; i++)
		assert_int_equal(f[i + 1].pc, full[i].pc);
}

static void test_epilogue(void **state)
{
	struct native_frame full[MAX_FRAMES], f[MAX_FRAMES];
	struct native_unwinder *u;
	struct capture c = { 0 };
	struct fake fk;
	size_t n, nf;
	int complete;

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, full, MAX_FRAMES, &nf,
				   &complete), 0);
	assert_int_equal(complete, 1);

	/* at epi's ret: rbx and rbp popped, their slots just below sp */
	{
		uint64_t below[2] = { c.regs.r[NATIVE_REG_BX], c.regs.r[NATIVE_REG_BP] };

		fake_make(&fk, &c, epi_ret, NULL, 0, below, 2);
		/* a copy with the red zone: read from it */
		assert_int_equal(fake_unwind(u, &fk, 1, f, &n, &complete), 0);
		assert_int_equal(complete, 1);
		assert_int_equal(native_unwinder__last(u)->epilogue, 0);
		expect_whole(f, n, full, nf, "epi_fn");
		/* from sp: the pops and ret at the pc say they are in the registers */
		fk.regs.r[NATIVE_REG_BX] = c.regs.r[NATIVE_REG_BX];
		assert_int_equal(fake_unwind(u, &fk, 0, f, &n, &complete), 0);
		assert_int_equal(complete, 1);
		assert_int_equal(native_unwinder__last(u)->epilogue, 1);
		expect_whole(f, n, full, nf, "epi_fn");
		/* the copy may not start above sp */
		fk.addr = fk.regs.r[NATIVE_REG_SP] + 8;
		assert_int_equal(fake_unwind(u, &fk, 1, f, &n, &complete), -EINVAL);
		free(fk.data);
	}
	/* at the pop of rbp: rbx popped (below sp), rbp still on the stack, and
	 * the register holds something else: it must come from the stack */
	{
		uint64_t above[1] = { c.regs.r[NATIVE_REG_BP] };
		uint64_t below[1] = { c.regs.r[NATIVE_REG_BX] };

		fake_make(&fk, &c, epi_pop_rbp, above, 1, below, 1);
		fk.regs.r[NATIVE_REG_BP] = 0xdead;
		assert_int_equal(fake_unwind(u, &fk, 0, f, &n, &complete), 0);
		assert_int_equal(native_unwinder__last(u)->epilogue, 1);
		assert_int_equal(complete, 1);
		expect_whole(f, n, full, nf, "epi_fn");
		free(fk.data);
	}
	/* after leave, before a tail call: rbp restored (its slot below sp) */
	{
		uint64_t below[1] = { c.regs.r[NATIVE_REG_BP] };

		fake_make(&fk, &c, fp_tail, NULL, 0, below, 1);
		assert_int_equal(fake_unwind(u, &fk, 0, f, &n, &complete), 0);
		assert_int_equal(native_unwinder__last(u)->epilogue, 1);
		assert_int_equal(complete, 1);
		expect_whole(f, n, full, nf, "fp_fn");
		free(fk.data);
		/* but not when what is left writes a callee-saved register */
		fake_make(&fk, &c, fp_tail_bad, NULL, 0, below, 1);
		assert_int_equal(fake_unwind(u, &fk, 0, f, &n, &complete), 0);
		assert_int_equal(native_unwinder__last(u)->epilogue, 0);
		assert_int_equal(complete, 0);
		assert_string_equal(f[0].symbol, "fp_fn");
		for (size_t i = 1; i < n; i++)
			assert_int_equal(f[i].pc, full[i - 1].pc);
		free(fk.data);
	}
	/* in a leaf's body with rbx saved in the red zone: not an epilogue, rbx
	 * is unknown (never its clobbered value), frames still exact */
	{
		uint64_t below[1] = { c.regs.r[NATIVE_REG_BX] };

		fake_make(&fk, &c, redzone_body, NULL, 0, below, 1);
		fk.regs.r[NATIVE_REG_BX] = 0;
		assert_int_equal(fake_unwind(u, &fk, 0, f, &n, &complete), 0);
		assert_int_equal(native_unwinder__last(u)->epilogue, 0);
		assert_string_equal(f[0].symbol, "redzone_fn");
		for (size_t i = 1; i < n; i++)
			assert_int_equal(f[i].pc, full[i - 1].pc);
		/* with the red zone copied, the saved rbx is read */
		assert_int_equal(fake_unwind(u, &fk, 1, f, &n, &complete), 0);
		assert_int_equal(complete, 1);
		expect_whole(f, n, full, nf, "redzone_fn");
		free(fk.data);
	}
	capture__free(&c);
	native_unwinder__free(u);
}

/* ---- through a signal handler: the kernel's frame, libc's trampoline ---- */

static struct capture sig_capture;

static void on_signal(int sig)
{
	(void)sig;
	level1(&sig_capture);
	sink++;
}

__attribute__((noinline, noclone))
static void signal_level(void)
{
	raise(SIGUSR1);
	sink++;
}

static void test_signal_frame(void **state)
{
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder *u;
	struct sigaction sa = { .sa_handler = on_signal }, old;
	size_t n, h, t;
	int complete;

	(void)state;
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	signal_level();
	sigaction(SIGUSR1, &old, NULL);
	unwinder_new(&u);
	assert_int_equal(unwind_sp(u, &sig_capture.regs, sig_capture.stack, sig_capture.len, f,
				   MAX_FRAMES, &n, &complete), 0);
	print_stack(f, n);
	assert_int_equal(complete, 1);
	h = index_of(f, n, "on_signal", 0);
	assert_true(h != SIZE_MAX);
	/* the handler returns into the trampoline (its exact pc), whose caller
	 * is the code the signal interrupted (an exact pc too) */
	t = h + 1;
	assert_true(t + 1 < n);
	assert_true(f[t].flags & NATIVE_FRAME_EXACT);
	assert_true(f[t + 1].flags & NATIVE_FRAME_EXACT);
	if (f[t].symbol)	/* libc with its symbols */
		assert_string_equal(f[t].symbol, "__restore_rt");
	assert_true(index_of(f, n, "signal_level", t) != SIZE_MAX);
	assert_string_equal(f[n - 1].symbol, "_start");
	capture__free(&sig_capture);
	native_unwinder__free(u);
}

/* ---- CFI with expressions: a step by libdwfl ---- */

static void expr_cb(void *c)
{
	level1(c);
	sink++;		/* not a tail call */
}

__attribute__((noinline, noclone))
static void expr_level(struct capture *c)
{
	expr_fn(c, expr_cb);
	sink++;
}

static void test_cfa_expression(void **state)
{
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder_stats st;
	struct native_unwinder *u;
	struct capture c = { 0 };
	size_t n, i;
	int complete;

	(void)state;
	unwinder_new(&u);
	expr_level(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	print_stack(f, n);
	assert_int_equal(complete, 1);
	i = index_of(f, n, "expr_cb", 0);
	assert_true(i != SIZE_MAX);
	assert_string_equal(f[i + 1].symbol, "expr_fn");
	assert_string_equal(f[i + 2].symbol, "expr_level");
	assert_string_equal(f[n - 1].symbol, "_start");
	native_unwinder__stats(u, &st);
	assert_true(st.libdwfl_steps >= 1);
	capture__free(&c);
	native_unwinder__free(u);
}

/* ---- a library loaded after the unwinder was made ---- */

struct expat_api {
	void *(*create)(const char *);
	void (*set_element_handler)(void *, void (*)(void *, const char *, const char **),
				    void (*)(void *, const char *));
	void (*set_user_data)(void *, void *);
	int (*parse)(void *, const char *, int, int);
	void (*parser_free)(void *);
};

static void on_start(void *ud, const char *name, const char **attrs)
{
	(void)name;
	(void)attrs;
	sink += level1(ud);	/* not a tail call: on_start keeps its frame */
}

static void on_end(void *ud, const char *name)
{
	(void)ud;
	(void)name;
}

/* A sample taken inside libexpat's XML_Parse (its element callback). */
static void *sample_in_expat(struct capture *c)
{
	struct expat_api x;
	void *lib, *p;

	if (dlopen("libexpat.so.1", RTLD_NOW | RTLD_NOLOAD))
		return NULL;	/* already mapped: nothing new to find */
	lib = dlopen("libexpat.so.1", RTLD_NOW);
	if (!lib)
		return NULL;
	*(void **)&x.create = dlsym(lib, "XML_ParserCreate");
	*(void **)&x.set_element_handler = dlsym(lib, "XML_SetElementHandler");
	*(void **)&x.set_user_data = dlsym(lib, "XML_SetUserData");
	*(void **)&x.parse = dlsym(lib, "XML_Parse");
	*(void **)&x.parser_free = dlsym(lib, "XML_ParserFree");
	assert_non_null(x.create);
	assert_non_null(x.parse);
	p = x.create(NULL);
	assert_non_null(p);
	x.set_user_data(p, c);
	x.set_element_handler(p, on_start, on_end);
	assert_int_equal(x.parse(p, "<a/>", 4, 1), 1);
	x.parser_free(p);
	return lib;
}

static void test_new_library(void **state)
{
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder_stats st;
	struct native_unwinder *u;
	struct capture c = { 0 };
	size_t n, i;
	void *lib;
	int complete;

	(void)state;
	unwinder_new(&u);
	/* an interval of 4 s, but the process grew since the unwinder looked:
	 * the maps are read again after a 20th of it, and libexpat's CFI used */
	native_unwinder__set_refresh_interval(u, 4000000000ull);
	usleep(250000);
	lib = sample_in_expat(&c);
	if (!lib) {
		native_unwinder__free(u);
		skip();
	}
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	print_stack(f, n);
	assert_int_equal(complete, 1);
	assert_int_equal(native_unwinder__last(u)->refreshed, 1);
	i = index_of(f, n, "on_start", 0);
	assert_true(i != SIZE_MAX);
	assert_non_null(f[i + 1].module);
	assert_non_null(strstr(f[i + 1].module, "libexpat"));
	/* XML_Parse may tail-call XML_ParseBuffer */
	assert_non_null(f[n - 1].symbol);
	for (i = i + 1; i < n; i++)
		if (f[i].symbol && strncmp(f[i].symbol, "XML_Parse", 9) == 0)
			break;
	assert_true(i < n);
	native_unwinder__stats(u, &st);
	assert_int_equal(st.refreshes, 2);
	assert_int_equal(st.unwinds, 1);
	assert_int_equal(st.complete, 1);
	capture__free(&c);
	native_unwinder__free(u);
	dlclose(lib);
}

/* A pc in nothing mapped: no refresh within the interval; one past it;
 * anonymous code said as such. */
static void test_refresh_limits(void **state)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder_stats st;
	struct native_unwinder *u;
	struct capture c = { 0 };
	struct native_regs r;
	unsigned char *code;
	size_t n;
	int complete;

	(void)state;
	/* anonymous executable memory, there before the unwinder looks */
	code = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	assert_true(code != MAP_FAILED);
	level1(&c);
	unwinder_new(&u);
	native_unwinder__set_refresh_interval(u, UINT64_MAX);
	r = c.regs;
	r.r[NATIVE_REG_IP] = 0x1000;	/* nothing is mapped there */
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	assert_int_equal(n, 1);
	assert_int_equal(complete, 0);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_NO_MODULE);
	assert_int_equal(native_unwinder__last(u)->refreshed, 0);
	assert_null(f[0].module);
	native_unwinder__set_refresh_interval(u, 0);
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_NO_MODULE);
	assert_int_equal(native_unwinder__last(u)->refreshed, 1);
	/* JIT-like code: no CFI there, said apart from an unknown pc */
	r.r[NATIVE_REG_IP] = (uint64_t)(uintptr_t)code + 16;
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	assert_int_equal(n, 1);
	assert_int_equal(complete, 0);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_ANON_CODE);
	native_unwinder__stats(u, &st);
	assert_int_equal(st.ends[NATIVE_END_ANON_CODE], 1);
	assert_int_equal(st.ends[NATIVE_END_NO_MODULE], 2);
	capture__free(&c);
	native_unwinder__free(u);
	munmap(code, page);
}

/* Maps @lib from @offset over @at (in a region of ours). */
static void map_file(const char *lib, unsigned char *at, size_t len, int prot, off_t offset)
{
	void *p;
	int fd = open(lib, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	p = mmap(at, len, prot, MAP_PRIVATE | MAP_FIXED, fd, offset);
	close(fd);
	assert_ptr_equal(p, at);
}

/*
 * A library's file mapped again just below it (seen in CI: libdw reading
 * libbz2 in this very process), with JIT-like code between: the module is
 * the library's own mappings, the code anonymous, not the library's. Laid
 * out by hand in a region of ours: the reader's page, the code, then the
 * library's header and code as a loader maps them.
 */
static void test_file_mapped_again(void **state)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct native_frame f[MAX_FRAMES];
	struct native_unwinder *u;
	struct native_module mod;
	struct capture c = { 0 };
	struct native_regs r;
	unsigned char *region;
	size_t n;
	int complete;
	Dl_info info;

	(void)state;
	assert_true(dladdr((void *)_cmocka_run_group_tests, &info) && info.dli_fname);
	region = mmap(NULL, 4 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(region != MAP_FAILED);
	map_file(info.dli_fname, region, page, PROT_READ, 0);
	assert_ptr_equal(mmap(region + page, page, PROT_READ | PROT_WRITE | PROT_EXEC,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), region + page);
	map_file(info.dli_fname, region + 2 * page, page, PROT_READ, 0);
	map_file(info.dli_fname, region + 3 * page, page, PROT_READ | PROT_EXEC, (off_t)page);
	level1(&c);
	unwinder_new(&u);
	assert_int_equal(native_unwinder__module(u, (uint64_t)(uintptr_t)region + 3 * page, &mod),
			 0);
	assert_int_equal(mod.start, (uint64_t)(uintptr_t)region + 2 * page);
	assert_int_equal(native_unwinder__module(u, (uint64_t)(uintptr_t)region + 16, &mod),
			 -ENOENT);
	r = c.regs;
	r.r[NATIVE_REG_IP] = (uint64_t)(uintptr_t)region + page + 16;
	assert_int_equal(unwind_sp(u, &r, c.stack, c.len, f, MAX_FRAMES, &n, &complete), 0);
	assert_int_equal(native_unwinder__last(u)->end, NATIVE_END_ANON_CODE);
	capture__free(&c);
	native_unwinder__free(u);
	munmap(region, 4 * page);
}

/* ---- garbage: never a crash, never more frames than asked ---- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_garbage(void **state)
{
	struct native_frame f[64], orig[64];
	size_t norig;
	int differ = 0;
	struct native_unwinder *u;
	struct capture c = { 0 };
	unsigned char *junk;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t n;
	int complete, completes[3] = { 0 };

	(void)state;
	unwinder_new(&u);
	level1(&c);
	assert_int_equal(unwind_sp(u, &c.regs, c.stack, c.len, orig, 64, &norig,
						 &complete), 0);
	assert_int_equal(complete, 1);
	junk = malloc(c.len);
	assert_non_null(junk);
	for (int iter = 0; iter < 3000; iter++) {
		struct native_regs r = c.regs;
		const void *stk = c.stack;

		switch (iter % 3) {
		case 0:	/* the right registers, a stack of noise */
			for (size_t i = 0; i < c.len; i++)
				junk[i] = (unsigned char)rng_next(&seed);
			stk = junk;
			break;
		case 1:	/* noise registers, the real stack */
			for (int i = 0; i < NATIVE_REG_COUNT; i++)
				r.r[i] = rng_next(&seed);
			if (iter & 4)	/* a pc in a real function */
				r.r[NATIVE_REG_IP] = (uint64_t)(uintptr_t)&level2 + iter % 64;
			break;
		default:	/* the real stack with words of it swapped for pointers into it */
			memcpy(junk, c.stack, c.len);
			for (int k = 0; k < 16; k++) {
				size_t at = (rng_next(&seed) % (c.len / 8)) * 8;
				uint64_t v = c.regs.r[NATIVE_REG_SP] + rng_next(&seed) % c.len;

				memcpy(junk + at, &v, 8);
			}
			stk = junk;
			break;
		}
		assert_int_equal(unwind_sp(u, &r, stk, c.len, f, 64, &n, &complete),
				 0);
		assert_true(n <= 64);
		completes[iter % 3] += complete;
		if (complete && iter % 3 == 2) {
			int same = n == norig;

			for (size_t i = 0; same && i < n; i++)
				same = f[i].pc == orig[i].pc;
			differ += !same;
		}
	}
	/* a noise stack never ends where CFI says a thread starts */
	fprintf(stderr, "  complete of 1000 each: noise stack %d, noise registers %d, "
		"stack words replaced %d (%d of them not the real stack)\n", completes[0],
		completes[1], completes[2], differ);
	assert_int_equal(completes[0], 0);
	free(junk);
	capture__free(&c);
	native_unwinder__free(u);
}

static void test_symbolize(void **state)
{
	struct native_unwinder *u;
	struct native_frame f;
	char exe[PATH_MAX];
	ssize_t len;

	(void)state;
	unwinder_new(&u);
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = '\0';
	assert_int_equal(native_unwinder__symbolize(u, (uint64_t)(uintptr_t)&level2, 1, &f), 0);
	assert_string_equal(f.symbol, "level2");
	assert_int_equal(f.offset, 0);
	assert_string_equal(f.module, exe);
	assert_true(f.module_base > 0 && f.module_base <= f.pc);
	/* a return address right after a function is named by its call */
	assert_int_equal(native_unwinder__symbolize(u, (uint64_t)(uintptr_t)&level2 + 1, 0, &f),
			 0);
	assert_string_equal(f.symbol, "level2");
	assert_int_equal(f.offset, 1);
	assert_int_equal(native_unwinder__symbolize(u, (uint64_t)(uintptr_t)&level2, 0, &f), 0);
	assert_true(f.symbol == NULL || strcmp(f.symbol, "level2") != 0);
	/* libc's aliases: the non-weak one */
	assert_int_equal(native_unwinder__symbolize(u, (uint64_t)(uintptr_t)&getauxval + 4, 1,
						    &f), 0);
	assert_string_equal(f.symbol, "__getauxval");
	assert_int_equal(f.offset, 4);
	assert_non_null(strstr(f.module, "libc.so"));
	/* nowhere */
	assert_int_equal(native_unwinder__symbolize(u, 16, 1, &f), -ENOENT);
	assert_null(f.module);
	assert_null(f.symbol);
	native_unwinder__free(u);
}

static void test_errors(void **state)
{
	struct native_unwinder *u = (void *)1;

	(void)state;
	assert_int_equal(native_unwinder__new(INT_MAX, &u), -ESRCH);
	assert_null(u);
	native_unwinder__free(NULL);
	assert_string_equal(native_end__name(NATIVE_END_OUTERMOST), "outermost");
	assert_string_equal(native_end__name(NATIVE_END__COUNT), "?");
}

static void test_perf_regs(void **state)
{
	uint64_t mask = native_regs__perf_mask(), vals[64];
	struct native_regs r;
	size_t n = 0;

	(void)state;
	/* no segment or flags register: the unwinder has no use for them */
	assert_int_equal(__builtin_popcountll(mask), NATIVE_REG_COUNT);
	assert_false(mask & (1ull << PERF_REG_X86_FLAGS));
	for (int bit = 0; bit < 64; bit++)
		if (mask & (1ull << bit))
			vals[n++] = 1000 + bit;
	assert_int_equal(native_regs__from_perf(&r, mask, vals, n), 0);
	assert_int_equal(r.valid, (1u << NATIVE_REG_COUNT) - 1);
	assert_int_equal(r.r[NATIVE_REG_AX], 1000 + PERF_REG_X86_AX);
	assert_int_equal(r.r[NATIVE_REG_DX], 1000 + PERF_REG_X86_DX);
	assert_int_equal(r.r[NATIVE_REG_BX], 1000 + PERF_REG_X86_BX);
	assert_int_equal(r.r[NATIVE_REG_SP], 1000 + PERF_REG_X86_SP);
	assert_int_equal(r.r[NATIVE_REG_BP], 1000 + PERF_REG_X86_BP);
	assert_int_equal(r.r[NATIVE_REG_R8], 1000 + PERF_REG_X86_R8);
	assert_int_equal(r.r[NATIVE_REG_R15], 1000 + PERF_REG_X86_R15);
	assert_int_equal(r.r[NATIVE_REG_IP], 1000 + PERF_REG_X86_IP);
	/* a mask with flags and segments too (perf's usual one): those skipped */
	mask |= (1ull << PERF_REG_X86_FLAGS) | (1ull << PERF_REG_X86_CS);
	n = 0;
	for (int bit = 0; bit < 64; bit++)
		if (mask & (1ull << bit))
			vals[n++] = 1000 + bit;
	assert_int_equal(native_regs__from_perf(&r, mask, vals, n), 0);
	assert_int_equal(r.r[NATIVE_REG_IP], 1000 + PERF_REG_X86_IP);
	assert_int_equal(r.r[NATIVE_REG_R8], 1000 + PERF_REG_X86_R8);
	assert_int_equal(native_regs__from_perf(&r, mask, vals, n - 1), -EINVAL);
	assert_int_equal(native_regs__from_perf(&r, mask, vals, n + 1), -EINVAL);
	/* only ip and sp */
	vals[0] = 7;
	vals[1] = 8;
	assert_int_equal(native_regs__from_perf(&r, (1ull << PERF_REG_X86_SP) |
						(1ull << PERF_REG_X86_IP), vals, 2), 0);
	assert_int_equal(r.valid, (1u << NATIVE_REG_SP) | (1u << NATIVE_REG_IP));
	assert_int_equal(r.r[NATIVE_REG_SP], 7);
	assert_int_equal(r.r[NATIVE_REG_IP], 8);
}

/* ---- the symbol index ---- */

struct ref_sym {
	uint64_t addr, end;
	const char *name;
	int bind;
};

static int ref_better(const struct ref_sym *a, const struct ref_sym *b)
{
	int c;

	if (a->bind != b->bind)
		return a->bind < b->bind;
	c = (int)strspn(a->name, "_") - (int)strspn(b->name, "_");
	if (c)
		return c < 0;
	return strcmp(a->name, b->name) < 0;
}

/* The innermost containing start; of its aliases the best name, the longest end. */
static const char *ref_lookup(const struct ref_sym *s, size_t n, uint64_t addr, uint64_t *off)
{
	const struct ref_sym *best = NULL;
	uint64_t start = 0;
	int found = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end = 0;

		/* an address's reach is its aliases' longest */
		for (size_t j = 0; j < n; j++)
			if (s[j].addr == s[i].addr && s[j].end > end)
				end = s[j].end;
		if (addr < s[i].addr || addr >= end)
			continue;
		if (!found || s[i].addr > start) {
			found = 1;
			start = s[i].addr;
			best = &s[i];
		} else if (s[i].addr == start && ref_better(&s[i], best)) {
			best = &s[i];
		}
	}
	if (!best)
		return NULL;
	*off = addr - best->addr;
	return best->name;
}

static void test_symindex(void **state)
{
	static const char *const names[] = { "a", "_a", "__a", "b", "c", "_d", "e", "f" };
	struct ref_sym s[300];
	struct symindex *idx;
	uint64_t seed = 12345;
	size_t n = 0;

	(void)state;
	assert_int_equal(symindex__new(&idx), 0);
	/* nothing in it yet */
	assert_int_equal(symindex__finish(idx), 0);
	assert_null(symindex__lookup(idx, 100, NULL));
	for (int i = 0; i < 300; i++) {
		uint64_t addr = rng_next(&seed) % 5000, size = rng_next(&seed) % 80;
		const char *name = names[rng_next(&seed) % 8];
		int bind = (int)(rng_next(&seed) % 3);

		assert_int_equal(symindex__add(idx, addr, size, name, (enum symindex_bind)bind), 0);
		/* a sizeless one names its first byte */
		s[n++] = (struct ref_sym){ addr, addr + (size ? size : 1), name, bind };
	}
	assert_int_equal(symindex__add(idx, UINT64_MAX - 2, 10, "wraps", SYMINDEX_GLOBAL), 0);
	/* versions cut (the copy is the index's), a name of only a version kept */
	assert_int_equal(symindex__add(idx, 6000, 10, "vers@@GLIBC_2.34", SYMINDEX_GLOBAL), 0);
	assert_int_equal(symindex__add(idx, 6010, 10, "old@GLIBC_2.2.5", SYMINDEX_GLOBAL), 0);
	assert_int_equal(symindex__add(idx, 6020, 10, "@odd", SYMINDEX_GLOBAL), 0);
	assert_int_equal(symindex__add(idx, 10, 10, "", SYMINDEX_GLOBAL), 0);
	assert_int_equal(symindex__add(idx, 10, 10, NULL, SYMINDEX_GLOBAL), 0);
	assert_int_equal(symindex__finish(idx), 0);
	assert_true(symindex__count(idx) <= n + 4);
	assert_true(symindex__bytes(idx) > 0);
	for (uint64_t a = 0; a < 5200; a++) {	/* the versioned ones lie above */
		uint64_t o1 = 999, o2 = 999;
		const char *want = ref_lookup(s, n, a, &o1);
		const char *got = symindex__lookup(idx, a, &o2);

		if (!want) {
			assert_null(got);
			continue;
		}
		assert_non_null(got);
		assert_string_equal(got, want);
		assert_int_equal(o2, o1);
	}
	assert_null(symindex__lookup(idx, UINT64_MAX, NULL));
	assert_string_equal(symindex__lookup(idx, 6005, NULL), "vers");
	assert_string_equal(symindex__lookup(idx, 6019, NULL), "old");
	assert_string_equal(symindex__lookup(idx, 6020, NULL), "@odd");
	symindex__free(idx);
	symindex__free(NULL);
	assert_null(symindex__lookup(NULL, 1, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symindex),
		cmocka_unit_test(test_perf_regs),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_symbolize),
		cmocka_unit_test(test_whole_stack),
		cmocka_unit_test(test_truncated_copies),
		cmocka_unit_test(test_missing_registers),
		cmocka_unit_test(test_max_frames),
		cmocka_unit_test(test_epilogue),
		cmocka_unit_test(test_cfa_expression),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_new_library),
		cmocka_unit_test(test_refresh_limits),
		cmocka_unit_test(test_file_mapped_again),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
