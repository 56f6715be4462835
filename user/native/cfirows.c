/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <dwarf.h>
#include "native/cfirows.h"

struct cfirows {
	struct cfi_row *slots;	/* open addressing; pc 0 marks a free slot */
	size_t cap, n, max;
	struct cfi_row nowhere;	/* pc 0's */
};

int cfirows__new(size_t max, struct cfirows **out)
{
	struct cfirows *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->max = max < 64 ? 64 : max;
	*out = c;
	return 0;
}

void cfirows__free(struct cfirows *c)
{
	if (!c)
		return;
	free(c->slots);
	free(c);
}

void cfirows__clear(struct cfirows *c)
{
	if (c->slots)
		memset(c->slots, 0, c->cap * sizeof(*c->slots));
	c->n = 0;
}

static size_t slot_of(uint64_t pc, size_t cap)
{
	/* Fibonacci hashing: return addresses share their low bits poorly */
	return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static int cfirows__grow(struct cfirows *c)
{
	size_t cap = c->cap ? c->cap * 2 : 256;
	struct cfi_row *slots;

	if (cap > c->max * 2) {
		/* full: start again rather than hold every pc ever seen */
		cfirows__clear(c);
		return 0;
	}
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < c->cap; i++) {
		size_t j;

		if (!c->slots[i].pc)
			continue;
		for (j = slot_of(c->slots[i].pc, cap); slots[j].pc; j = (j + 1) & (cap - 1))
			;
		slots[j] = c->slots[i];
	}
	free(c->slots);
	c->slots = slots;
	c->cap = cap;
	return 0;
}

/* "saved at CFA + N" and its kin, as libdw spells them (dwarf_frame_register). */
static bool decode_rule(Dwarf_Frame *frame, int reg, struct cfi_row *row)
{
	Dwarf_Op mem[3], *ops;
	uint64_t off = 0;
	size_t nops;
	bool val = false;

	if (dwarf_frame_register(frame, reg, mem, &ops, &nops) != 0)
		return false;
	if (nops == 0) {
		row->r[reg].rule = ops ? CFI_UNDEF : CFI_SAME;
		return true;
	}
	if (nops == 1 && ops[0].atom == DW_OP_regx && ops[0].number < CFI_NREGS) {
		row->r[reg].rule = CFI_REG;
		row->r[reg].reg = (uint8_t)ops[0].number;
		return true;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	for (size_t i = 1; i < nops; i++) {
		if (ops[i].atom == DW_OP_plus_uconst && i == 1)
			off = ops[i].number;
		else if (ops[i].atom == DW_OP_stack_value && i == nops - 1)
			val = true;
		else
			return false;
	}
	/* offsets are small and signed (libdw keeps them in a uint64_t) */
	if ((int64_t)off < INT32_MIN || (int64_t)off > INT32_MAX)
		return false;
	row->r[reg].rule = val ? CFI_VAL_CFA : CFI_AT_CFA;
	row->r[reg].off = (int32_t)(int64_t)off;
	return true;
}

void cfirows__decode(struct cfi_row *row, Dwfl_Module *mod, uint64_t pc)
{
	Dwarf_Frame *frame = NULL;
	Dwarf_Addr bias, start, end;
	Dwarf_CFI *cfi;
	Dwarf_Op *ops;
	size_t nops;
	bool signal;
	int ra;

	memset(row, 0, sizeof(*row));
	row->pc = pc;
	row->end = pc + 1;
	/* libdwfl's order: .eh_frame, then .debug_frame */
	cfi = dwfl_module_eh_cfi(mod, &bias);
	if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0) {
		frame = NULL;
		cfi = dwfl_module_dwarf_cfi(mod, &bias);
		if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0) {
			row->kind = CFI_NO_CFI;
			return;
		}
	}
	ra = dwarf_frame_info(frame, &start, &end, &signal);
	row->end = end + bias;
	row->signal = signal;
	row->kind = CFI_SIMPLE;
	if (ra != CFI_REG_RA || dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 ||
	    ops[0].atom != DW_OP_bregx || ops[0].number >= CFI_NREGS)
		row->kind = CFI_COMPLEX;
	else {
		row->cfa_reg = (uint8_t)ops[0].number;
		row->cfa_off = (int64_t)ops[0].number2;
	}
	for (int reg = 0; reg < CFI_NREGS; reg++) {
		if (!decode_rule(frame, reg, row)) {
			row->r[reg].rule = CFI_EXPR;
			row->kind = CFI_COMPLEX;
		}
	}
	/* whatever the rest, an undefined return address ends the stack (not
	 * one an expression computes: a signal trampoline's) */
	row->outermost = row->r[CFI_REG_RA].rule == CFI_UNDEF;
	free(frame);
}

static void decode(struct cfi_row *row, struct native_modules *mods, uint64_t pc)
{
	Dwfl_Module *mod = native_modules__at(mods, pc);
	uint64_t off;

	if (!mod) {
		memset(row, 0, sizeof(*row));
		row->pc = pc;
		row->end = pc + 1;
		row->kind = CFI_NO_MODULE;
		return;
	}
	cfirows__decode(row, mod, pc);
	/* The dynamic loader's entry code (glibc's _start and _dl_start_user,
	 * calling _dl_start and _dl_init) has no CFI, yet is the first frame
	 * of the process: a return address into it ends the stack, complete
	 * (samples of ld.so's relocations were cut there). */
	if (row->kind == CFI_NO_CFI)
		row->outermost = !native_modules__entry_offset(mods, pc, &off) &&
				 off < CFI_ENTRY_CODE;
}

struct cfi_row *cfirows__get(struct cfirows *c, struct native_modules *mods, uint64_t pc)
{
	size_t i;

	if (!pc) {
		/* 0 marks free slots; no code lives there */
		memset(&c->nowhere, 0, sizeof(c->nowhere));
		c->nowhere.kind = CFI_NO_MODULE;
		return &c->nowhere;
	}
	if (c->cap) {
		for (i = slot_of(pc, c->cap); c->slots[i].pc; i = (i + 1) & (c->cap - 1))
			if (c->slots[i].pc == pc)
				return &c->slots[i];
	}
	if ((c->n + 1) * 2 > c->cap && cfirows__grow(c))
		return NULL;
	for (i = slot_of(pc, c->cap); c->slots[i].pc; i = (i + 1) & (c->cap - 1))
		;
	decode(&c->slots[i], mods, pc);
	c->n++;
	return &c->slots[i];
}

size_t cfirows__count(const struct cfirows *c)
{
	return c ? c->n : 0;
}

size_t cfirows__bytes(const struct cfirows *c)
{
	return c ? sizeof(*c) + c->cap * sizeof(*c->slots) : 0;
}
