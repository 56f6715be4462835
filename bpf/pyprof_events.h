/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * pyprof_events.h - part of pyprof.h, the records the BPF side and userspace
 * share: what -e's events add (plain __u8/__u32/__u64 fields).
 */
#ifndef PYPROF_EVENTS_H
#define PYPROF_EVENTS_H

/* pyprof_sample.flags bits 24-25: the index of the -e event (its link's
 * attach cookie) the sample was taken at, with several at once. */
#define PYPROF_SF_EVENT_SHIFT	24
#define PYPROF_MAX_EVENTS	4

/*
 * --filter EXPR of a tracepoint event: the kernel's filter syntax, compiled
 * by the loader (user/sampling/tp_filter.c) into postfix operations the
 * tracepoint program evaluates on the hit's record before anything else
 * (the kernel's own filter runs after the BPF programs of a tracepoint, so
 * it cannot spare them a hit). A predicate reads a field of the record (a
 * number, a char array, a __data_loc string or a user string pointer) and
 * compares it with a number or one of strs[] (exactly, as a prefix "abc*"
 * or as a suffix "*abc"); AND, OR and NOT combine the values on a stack.
 */
#define PYPROF_FILTER_OPS	16
#define PYPROF_FILTER_STRS	4
#define PYPROF_FILTER_STR	64	/* a string read: its first 63 bytes */
#define PYPROF_FILTER_REC	256	/* the record's bytes a filter reads */

enum {
	PYPROF_FOP_PRED = 1,
	PYPROF_FOP_AND,
	PYPROF_FOP_OR,
	PYPROF_FOP_NOT,
};

enum {	/* pyprof_filter_op.cmp */
	PYPROF_FCMP_EQ = 1,
	PYPROF_FCMP_NE,
	PYPROF_FCMP_LT,
	PYPROF_FCMP_LE,
	PYPROF_FCMP_GT,
	PYPROF_FCMP_GE,
	PYPROF_FCMP_AND,	/* (field & value) != 0 */
	PYPROF_FCMP_GLOB,	/* strings: value says how: PYPROF_FGLOB_* */
};

enum {	/* pyprof_filter_op.kind */
	PYPROF_FFIELD_NUM = 1,
	PYPROF_FFIELD_STR,	/* char NAME[size] in the record */
	PYPROF_FFIELD_LOC,	/* __data_loc char[]: u32, offset | length << 16 */
	PYPROF_FFIELD_PTR,	/* const char *: a user address */
};

enum {	/* a string comparison's value */
	PYPROF_FGLOB_EXACT = 0,
	PYPROF_FGLOB_PREFIX,
	PYPROF_FGLOB_SUFFIX,
};

struct pyprof_filter_op {
	__u8 op;		/* PYPROF_FOP_* */
	__u8 cmp;		/* PYPROF_FCMP_* */
	__u8 kind;		/* PYPROF_FFIELD_* */
	__u8 size;		/* a number's bytes: 1, 2, 4, 8; a char array's */
	__u8 is_signed;
	__u8 str;		/* strings: index in strs[] */
	__u8 negate;		/* strings: != */
	__u8 pad;
	__u32 offset;		/* the field's, in the record */
	__u32 pad2;
	__u64 value;		/* numbers: the operand; strings: PYPROF_FGLOB_* */
};

struct pyprof_filter {
	__u32 nops;		/* 0: no filter */
	__u32 event;		/* the tracepoint's index among -e's events */
	struct pyprof_filter_op ops[PYPROF_FILTER_OPS];
	__u32 str_len[PYPROF_FILTER_STRS];
	char strs[PYPROF_FILTER_STRS][PYPROF_FILTER_STR];
};

#endif
