/* SPDX-License-Identifier: MIT */
/* trampoline.c - see trampoline.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "native/trampoline.h"
#include "target/remote_mem.h"

struct py_trampoline {
	pid_t pid;
	int state;		/* 0: not looked for; 1: found and understood; -1: neither */
	size_t len;
	unsigned char code[PY_TRAMPOLINE_MAX];
	struct py_trampoline_step steps[PY_TRAMPOLINE_MAX];
};

int py_trampoline__new(pid_t pid, struct py_trampoline **out)
{
	struct py_trampoline *t = calloc(1, sizeof(*t));

	*out = t;
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	return 0;
}

void py_trampoline__free(struct py_trampoline *t)
{
	free(t);
}

void py_trampoline__reset(struct py_trampoline *t)
{
	t->state = 0;
}

/*
 * The frame is followed as the code runs: sp_off is CFA - %rsp. Each step
 * is the state before the instruction at its offset runs (a return
 * address names the call it follows, whose state is the one after the
 * callee returned).
 */
int py_trampoline__decode(const unsigned char *code, size_t len,
			  struct py_trampoline_step *steps)
{
	struct py_trampoline_step st = { .cfa_reg = CFI_REG_SP, .cfa_off = 8 };
	int sp_off = 8, fp_at_sp = -1;	/* the sp_off at which %rbp = %rsp */
	size_t i = 0, n;
	bool ret = false;

	if (!len || len > PY_TRAMPOLINE_MAX)
		return -ENOTSUP;
	while (i < len && !ret) {
		const unsigned char *p = code + i;
		size_t left = len - i;

		if (left >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) {
			n = 4;			/* endbr64 */
		} else if (p[0] == 0x55) {	/* push %rbp */
			n = 1;
		} else if (left >= 3 && p[0] == 0x48 && p[1] == 0x89 && p[2] == 0xe5) {
			n = 3;			/* mov %rsp,%rbp */
		} else if (left >= 4 && p[0] == 0x48 && p[1] == 0x83 &&
			   (p[2] == 0xec || p[2] == 0xc4) && !(p[3] & 0x80)) {
			n = 4;			/* sub/add $imm8,%rsp */
		} else if (left >= 2 && p[0] == 0xff && (p[1] & 0xf8) == 0xd0) {
			n = 2;			/* call *%reg */
		} else if (left >= 3 && p[0] == 0x41 && p[1] == 0xff && (p[2] & 0xf8) == 0xd0) {
			n = 3;			/* call *%r8-15 */
		} else if (p[0] == 0x5d) {	/* pop %rbp */
			n = 1;
		} else if (p[0] == 0xc3) {	/* ret */
			n = 1;
		} else {
			return -ENOTSUP;
		}
		for (size_t k = 0; k < n; k++)
			steps[i + k] = st;
		switch (p[0]) {
		case 0x55:
			sp_off += 8;
			if (st.cfa_reg == CFI_REG_SP)
				st.cfa_off = (int8_t)sp_off;
			if (!st.fp_saved) {
				st.fp_saved = 1;
				st.fp_off = (int8_t)-sp_off;
			}
			break;
		case 0x48:
			if (p[1] == 0x83) {
				sp_off += p[2] == 0xec ? p[3] : -p[3];
				if (sp_off < 8 || sp_off > 120)
					return -ENOTSUP;
				if (st.cfa_reg == CFI_REG_SP)
					st.cfa_off = (int8_t)sp_off;
				break;
			}
			if (st.cfa_reg == CFI_REG_SP) {
				st.cfa_reg = CFI_REG_FP;
				st.cfa_off = (int8_t)sp_off;
			}
			fp_at_sp = sp_off;
			break;
		case 0x5d:
			/* %rbp gets its saved value back only from its slot */
			if (!st.fp_saved || -st.fp_off != sp_off)
				return -ENOTSUP;
			if (st.cfa_reg == CFI_REG_FP && fp_at_sp != sp_off)
				return -ENOTSUP;
			sp_off -= 8;
			st.fp_saved = 0;
			st.fp_off = 0;
			st.cfa_reg = CFI_REG_SP;
			st.cfa_off = (int8_t)sp_off;
			fp_at_sp = -1;
			break;
		case 0xc3:
			if (st.cfa_reg != CFI_REG_SP || sp_off != 8 || st.fp_saved)
				return -ENOTSUP;
			ret = true;
			break;
		}
		i += n;
	}
	/* the template ends at its ret; anything after it is not ours */
	return ret && i == len ? 0 : -ENOTSUP;
}

static int find_template(struct py_trampoline *t, struct native_modules *mods)
{
	uint64_t start, end;

	t->state = -1;
#if !defined(__x86_64__)
	/* the decoder reads x86-64 instructions: elsewhere a copy is JIT code */
	(void)mods;
	(void)start;
	(void)end;
	return -ENOENT;
#endif
	if (native_modules__symbol(mods, "_Py_trampoline_func_start", &start) ||
	    native_modules__symbol(mods, "_Py_trampoline_func_end", &end) || end <= start ||
	    end - start > PY_TRAMPOLINE_MAX)
		return -ENOENT;
	t->len = end - start;
	/* the target's own bytes: the template may sit in .rodata (3.14+) */
	if (remote_read(t->pid, start, t->code, t->len) ||
	    py_trampoline__decode(t->code, t->len, t->steps))
		return -ENOENT;
	t->state = 1;
	return 0;
}

static void fill_row(const struct py_trampoline_step *st, struct cfi_row *row)
{
	uint64_t pc = row->pc;

	memset(row, 0, sizeof(*row));
	row->pc = pc;
	row->end = pc + 1;
	row->kind = CFI_SIMPLE;
	row->trampoline = 1;
	row->cfa_reg = st->cfa_reg;
	row->cfa_off = st->cfa_off;
	/* what the x86-64 ABI's CFI says of the registers the code leaves alone */
	for (int reg = 0; reg < CFI_NREGS; reg++)
		row->r[reg].rule = CFI_UNDEF;
	row->r[3].rule = CFI_SAME;				/* %rbx */
	for (int reg = 12; reg <= 15; reg++)
		row->r[reg].rule = CFI_SAME;			/* %r12-%r15 */
	row->r[CFI_REG_FP].rule = st->fp_saved ? CFI_AT_CFA : CFI_SAME;
	row->r[CFI_REG_FP].off = st->fp_off;
	row->r[CFI_REG_SP].rule = CFI_VAL_CFA;
	row->r[CFI_REG_RA].rule = CFI_AT_CFA;
	row->r[CFI_REG_RA].off = -8;
}

int py_trampoline__row(struct py_trampoline *t, struct native_modules *mods, uint64_t lo,
		       uint64_t hi, struct cfi_row *row)
{
	unsigned char win[2 * PY_TRAMPOLINE_MAX];
	uint64_t pc = row->pc, from, to;
	size_t len, at = 0;
	int found = 0;

	if (t->state == 0)
		find_template(t, mods);
	if (t->state != 1 || pc < lo || pc >= hi)
		return -ENOENT;
	len = t->len;
	/* every copy that could hold pc, clipped to its mapping */
	from = pc - lo >= len - 1 ? pc - (len - 1) : lo;
	to = hi - pc >= len ? pc + len : hi;
	if (remote_read(t->pid, from, win, to - from))
		return -ENOENT;
	for (size_t k = 0; k < len; k++) {
		uint64_t start = pc - k;

		if (start < from || start + len > to)
			continue;
		if (!memcmp(win + (start - from), t->code, len)) {
			found++;
			at = k;
		}
	}
	if (found != 1)
		return -ENOENT;
	fill_row(&t->steps[at], row);
	return 0;
}
