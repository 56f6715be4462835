/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * filter.bpf.h - --filter: the tracepoint program's test of a hit's record
 * against the compiled expression in tp_filter (pyprof.h), before the hit
 * is counted or sampled. The record's first PYPROF_FILTER_REC bytes are
 * copied once (the loader takes no field beyond them); a string is read
 * into the scratch's fstr: from the copy (a char array, a __data_loc
 * string) or from the thread's memory (a user pointer, as a system call's
 * filename: one not paged in reads as no match, as in the kernel's filter).
 */
#ifndef PYPROF_FILTER_BPF_H
#define PYPROF_FILTER_BPF_H

#include "maps.bpf.h"

/* A number of @size bytes at @off of the copied record, little-endian
 * (x86-64 and AArch64), sign-extended when @is_signed. */
static __always_inline __u64 rec_number(struct scratch *sc, __u32 off, __u32 size, bool is_signed)
{
	__u64 v = 0;

	for (__u32 i = 0; i < 8; i++)
		if (i < size)
			v |= (__u64)sc->frec[(off + i) & (PYPROF_FILTER_REC - 1)] << (8 * i);
	if (is_signed && size && size < 8) {
		__u32 sh = 64 - 8 * size;

		v = (__u64)((__s64)(v << sh) >> sh);
	}
	return v;
}

/* The string field of @op into sc->fstr; its length, or -1. */
static __always_inline int rec_string(struct scratch *sc, const volatile struct pyprof_filter_op *op)
{
	__u32 off = op->offset, len = 0, i;
	__u64 loc, ptr;
	long n;

	switch (op->kind) {
	case PYPROF_FFIELD_PTR:
		ptr = rec_number(sc, off, 8, false);
		n = bpf_probe_read_user_str(sc->fstr, sizeof(sc->fstr), (const void *)ptr);
		return n > 0 ? (int)n - 1 : -1;
	case PYPROF_FFIELD_LOC:
		loc = rec_number(sc, off, 4, false);
		off = loc & 0xffff;
		len = (__u32)(loc >> 16);
		break;
	case PYPROF_FFIELD_STR:
		len = op->size;
		break;
	default:
		return -1;
	}
	/* from the copy, up to its NUL */
	for (i = 0; i < PYPROF_FILTER_STR - 1; i++) {
		char c;

		if (i >= len || off + i >= PYPROF_FILTER_REC)
			break;
		c = (char)sc->frec[(off + i) & (PYPROF_FILTER_REC - 1)];
		if (!c)
			break;
		sc->fstr[i & (PYPROF_FILTER_STR - 1)] = c;
	}
	sc->fstr[i & (PYPROF_FILTER_STR - 1)] = 0;
	return (int)i;
}

/* Does the string just read (@len bytes) compare as @op says with its pattern? */
static __always_inline bool string_matches(struct scratch *sc,
					   const volatile struct pyprof_filter_op *op, int len)
{
	__u32 k = op->str & (PYPROF_FILTER_STRS - 1);
	__u32 plen = tp_filter.str_len[k], from = 0;
	bool same = true;

	if (len < 0)
		return false;
	if (op->value == PYPROF_FGLOB_EXACT && (__u32)len != plen)
		same = false;
	else if ((__u32)len < plen)
		same = false;
	else if (op->value == PYPROF_FGLOB_SUFFIX)
		from = (__u32)len - plen;
	for (__u32 i = 0; i < PYPROF_FILTER_STR - 1 && same; i++) {
		if (i >= plen)
			break;
		if (sc->fstr[(from + i) & (PYPROF_FILTER_STR - 1)] !=
		    tp_filter.strs[k][i & (PYPROF_FILTER_STR - 1)])
			same = false;
	}
	return op->negate ? !same : same;
}

static __always_inline bool number_matches(const volatile struct pyprof_filter_op *op, __u64 v)
{
	__u64 w = op->value;
	bool s = op->is_signed;

	switch (op->cmp) {
	case PYPROF_FCMP_EQ:
		return v == w;
	case PYPROF_FCMP_NE:
		return v != w;
	case PYPROF_FCMP_LT:
		return s ? (__s64)v < (__s64)w : v < w;
	case PYPROF_FCMP_LE:
		return s ? (__s64)v <= (__s64)w : v <= w;
	case PYPROF_FCMP_GT:
		return s ? (__s64)v > (__s64)w : v > w;
	case PYPROF_FCMP_GE:
		return s ? (__s64)v >= (__s64)w : v >= w;
	case PYPROF_FCMP_AND:
		return (v & w) != 0;
	}
	return false;
}

/* Does the hit whose record is at @ctx pass --filter? True without one. */
static __always_inline bool filter_passes(struct scratch *sc, void *ctx)
{
	__u32 stack = 0, sp = 0;	/* the values, a bit each, top at sp - 1 */

	if (!tp_filter.nops)
		return true;
	if (bpf_probe_read_kernel(sc->frec, sizeof(sc->frec), ctx))
		return false;
	for (__u32 i = 0; i < PYPROF_FILTER_OPS; i++) {
		const volatile struct pyprof_filter_op *op = &tp_filter.ops[i];
		bool v, a, b;

		if (i >= tp_filter.nops)
			break;
		switch (op->op) {
		case PYPROF_FOP_PRED:
			if (op->kind == PYPROF_FFIELD_NUM)
				v = number_matches(op, rec_number(sc, op->offset, op->size,
								  op->is_signed));
			else
				v = string_matches(sc, op, rec_string(sc, op));
			if (sp >= 31)
				return false;
			stack = (stack & ~(1u << sp)) | ((__u32)v << sp);
			sp++;
			break;
		case PYPROF_FOP_NOT:
			if (!sp)
				return false;
			stack ^= 1u << (sp - 1);
			break;
		case PYPROF_FOP_AND:
		case PYPROF_FOP_OR:
			if (sp < 2)
				return false;
			a = stack >> (sp - 1) & 1;
			b = stack >> (sp - 2) & 1;
			v = op->op == PYPROF_FOP_AND ? a && b : a || b;
			sp--;
			stack = (stack & ~(1u << (sp - 1))) | ((__u32)v << (sp - 1));
			break;
		default:
			return false;
		}
	}
	return sp == 1 && (stack & 1);
}

#endif
