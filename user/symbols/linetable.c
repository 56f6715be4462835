// SPDX-License-Identifier: MIT
/*
 * linetable.c - decoding of CPython 3.11+ location tables, see linetable.h.
 *
 * Format (CPython's Objects/locations.md; each fact checked against the
 * 3.11 to 3.15 interpreters by tests/test_linetable.py):
 *   entry header byte: bit 7 set, bits 3..6 the kind, bits 0..2 the number
 *   of code units covered minus one; then a payload depending on the kind.
 *   Line deltas are relative to the line of the previous entry that had one
 *   (co_firstlineno before the first entry); entries without a location do
 *   not move it.
 *   varint: 6-bit chunks, least significant first, bit 6 = more follow.
 *   signed varint: magnitude in bits 1.., sign in bit 0.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include "symbols/linetable.h"

#define LT_ENTRY_BIT		0x80
#define LT_KIND(b)		(((b) >> 3) & 15)
#define LT_UNITS(b)		(((b) & 7) + 1)
#define LT_CODE_UNIT_BYTES	2

enum lt_kind {
	LT_SHORT_LAST = 9,	/* 0..9: same line, both columns in one byte */
	LT_ONE_LINE_FIRST = 10,	/* 10..12: line delta kind - 10, two column bytes */
	LT_ONE_LINE_LAST = 12,
	LT_NO_COLUMNS = 13,	/* signed line delta, no columns */
	LT_LONG = 14,		/* line, end line delta, column + 1, end column + 1 */
	LT_NO_LOCATION = 15,	/* no payload */
};

#define LT_VARINT_MORE		0x40
#define LT_VARINT_VALUE		0x3f
#define LT_VARINT_SHIFT		6
/*
 * CPython writes varints from C unsigned ints: six chunks hold 36 bits,
 * enough for any 32-bit value. A longer one can only be corruption, and the
 * bound keeps the shift defined.
 */
#define LT_VARINT_MAX_CHUNKS	6

struct lt_decoder {
	const uint8_t *p;
	const uint8_t *end;
	int64_t addr;		/* byte offset of the next entry */
	int64_t line;		/* line the next delta applies to */
};

static int lt_to_int(int64_t v, int *out)
{
	if (v < INT_MIN || v > INT_MAX)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/*
 * One payload byte. A byte with bit 7 set starts the next entry, so meeting
 * one here means the current entry was cut short.
 */
static int lt_byte(struct lt_decoder *d, unsigned int *out)
{
	if (d->p >= d->end || (*d->p & LT_ENTRY_BIT))
		return -EINVAL;
	*out = *d->p++;
	return 0;
}

static int lt_varint(struct lt_decoder *d, uint32_t *out)
{
	uint64_t val = 0;
	unsigned int b, i;
	int err;

	for (i = 0; i < LT_VARINT_MAX_CHUNKS; i++) {
		err = lt_byte(d, &b);
		if (err)
			return err;
		val |= (uint64_t)(b & LT_VARINT_VALUE) << (i * LT_VARINT_SHIFT);
		if (!(b & LT_VARINT_MORE)) {
			if (val > UINT32_MAX)
				return -EINVAL;
			*out = (uint32_t)val;
			return 0;
		}
	}
	return -EINVAL;
}

static int lt_svarint(struct lt_decoder *d, int64_t *out)
{
	uint32_t u;
	int err;

	err = lt_varint(d, &u);
	if (err)
		return err;
	/* 64-bit so that negating the largest magnitude cannot overflow */
	*out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return 0;
}

/* A column stored as value + 1, where 0 means unknown. */
static int lt_column(uint32_t stored, int *out)
{
	if (!stored) {
		*out = -1;
		return 0;
	}
	return lt_to_int((int64_t)stored - 1, out);
}

static int lt_init(struct lt_decoder *d, const uint8_t *table, size_t len,
		   int firstlineno)
{
	if ((!table && len) || len > LINETABLE_MAX_LEN)
		return -EINVAL;
	d->p = table;
	d->end = table ? table + len : table;
	d->addr = 0;
	d->line = firstlineno;
	return 0;
}

static bool lt_done(const struct lt_decoder *d)
{
	return d->p >= d->end;
}

/* Decode the entry at d->p into r; the caller checked !lt_done(d). */
static int lt_next(struct lt_decoder *d, struct linetable_range *r)
{
	unsigned int head, kind, b0, b1;
	int64_t delta = 0, end_line;
	uint32_t end_delta = 0, col1, end_col1;
	int col = -1, end_col = -1;
	bool has_location = true;
	int err;

	head = *d->p++;
	if (!(head & LT_ENTRY_BIT))
		return -EINVAL;
	kind = LT_KIND(head);

	if (kind <= LT_SHORT_LAST) {
		/* column = kind * 8 + bits 4..6, end column = column + bits 0..3 */
		err = lt_byte(d, &b0);
		if (err)
			return err;
		col = (int)(kind * 8 + ((b0 >> 4) & 7));
		end_col = col + (int)(b0 & 15);
	} else if (kind <= LT_ONE_LINE_LAST) {
		delta = kind - LT_ONE_LINE_FIRST;
		err = lt_byte(d, &b0);
		if (!err)
			err = lt_byte(d, &b1);
		if (err)
			return err;
		col = (int)b0;
		end_col = (int)b1;
	} else if (kind == LT_NO_COLUMNS) {
		err = lt_svarint(d, &delta);
		if (err)
			return err;
	} else if (kind == LT_LONG) {
		err = lt_svarint(d, &delta);
		if (!err)
			err = lt_varint(d, &end_delta);
		if (!err)
			err = lt_varint(d, &col1);
		if (!err)
			err = lt_varint(d, &end_col1);
		if (!err)
			err = lt_column(col1, &col);
		if (!err)
			err = lt_column(end_col1, &end_col);
		if (err)
			return err;
	} else {
		has_location = false;
	}

	/*
	 * Both operands are within int range (checked on every step, and
	 * deltas are at most 2^31 in magnitude), so int64_t cannot overflow.
	 */
	d->line += delta;
	end_line = d->line + end_delta;
	r->start = d->addr;
	r->end = d->addr + (int64_t)LT_UNITS(head) * LT_CODE_UNIT_BYTES;
	d->addr = r->end;
	if (!has_location) {
		r->line = LINETABLE_NO_LINE;
		r->end_line = -1;
		r->col = -1;
		r->end_col = -1;
		return 0;
	}
	r->col = col;
	r->end_col = end_col;
	err = lt_to_int(d->line, &r->line);
	if (!err)
		err = lt_to_int(end_line, &r->end_line);
	return err;
}

int linetable__range_at(const uint8_t *table, size_t len, int firstlineno,
			int64_t byte_offset, struct linetable_range *range)
{
	struct lt_decoder d;
	size_t i;
	int err;

	if (!range)
		return -EINVAL;
	err = lt_init(&d, table, len, firstlineno);
	if (err)
		return err;
	if (byte_offset < 0)
		return -ERANGE;
	/* every entry consumes at least one byte: at most len iterations */
	for (i = 0; i < len && !lt_done(&d); i++) {
		err = lt_next(&d, range);
		if (err)
			return err;
		if (byte_offset < range->end)
			return 0;
	}
	return -ERANGE;
}

int linetable__line_at(const uint8_t *table, size_t len, int firstlineno,
		       int64_t byte_offset, int *line)
{
	struct linetable_range r;
	int err;

	if (!line)
		return -EINVAL;
	/* PyCode_Addr2Line() answers a negative offset without the table */
	if (byte_offset < 0) {
		*line = firstlineno;
		return 0;
	}
	err = linetable__range_at(table, len, firstlineno, byte_offset, &r);
	if (err)
		return err;
	*line = r.line;
	return 0;
}

int linetable__ranges(const uint8_t *table, size_t len, int firstlineno,
		      struct linetable_range *out, size_t cap, size_t *count)
{
	struct linetable_range r;
	struct lt_decoder d;
	size_t i, n = 0;
	int err;

	if (!count || (!out && cap))
		return -EINVAL;
	err = lt_init(&d, table, len, firstlineno);
	if (err)
		return err;
	for (i = 0; i < len && !lt_done(&d); i++) {
		err = lt_next(&d, &r);
		if (err)
			return err;
		if (n < cap)
			out[n] = r;
		n++;
	}
	*count = n;
	return n > cap ? -ENOSPC : 0;
}

size_t linetable__whole_prefix(const uint8_t *table, size_t len, int firstlineno)
{
	struct linetable_range r;
	struct lt_decoder d;
	size_t whole = 0;

	if (lt_init(&d, table, len, firstlineno))
		return 0;
	while (!lt_done(&d) && !lt_next(&d, &r))
		whole = (size_t)(d.p - table);
	return whole;
}
