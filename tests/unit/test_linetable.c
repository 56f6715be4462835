// SPDX-License-Identifier: MIT
/*
 * test_linetable.c - location-table decoding (user/symbols/linetable.c).
 *
 *   test_linetable            synthetic tables: every kind of entry, the
 *                             edges of the format, truncated and corrupted
 *                             tables (the binary runs under ASan/UBSan, and
 *                             every table sits in a buffer of its exact size)
 *   test_linetable FIXTURE    also every (offset, line, columns) a real
 *                             interpreter reported, from
 *                             tests/tools/dump_linetables.py
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "symbols/linetable.h"

/* ------------------------------------------------------------------------ */
/* A table writer, from the format description, to build synthetic tables. */

struct tw {
	uint8_t buf[4096];
	size_t len;
	/* the expected decoding, entry by entry */
	struct linetable_range r[512];
	size_t n;
	int64_t addr;
	int64_t line;
};

static void tw_init(struct tw *w, int firstlineno)
{
	memset(w, 0, sizeof(*w));
	w->line = firstlineno;
}

static void tw_byte(struct tw *w, unsigned int b)
{
	assert_true(w->len < sizeof(w->buf));
	w->buf[w->len++] = (uint8_t)b;
}

static void tw_varint(struct tw *w, uint64_t v)
{
	while (v >= 0x40) {
		tw_byte(w, 0x40 | (v & 0x3f));
		v >>= 6;
	}
	tw_byte(w, (unsigned int)v);
}

static void tw_svarint(struct tw *w, int64_t v)
{
	tw_varint(w, v < 0 ? ((uint64_t)-v << 1) | 1 : (uint64_t)v << 1);
}

static void tw_head(struct tw *w, unsigned int kind, unsigned int units)
{
	assert_true(units >= 1 && units <= 8);
	tw_byte(w, 0x80 | (kind << 3) | (units - 1));
}

static void tw_expect(struct tw *w, unsigned int units, int line, int end_line,
		      int col, int end_col)
{
	struct linetable_range *r = &w->r[w->n++];

	assert_true(w->n <= sizeof(w->r) / sizeof(w->r[0]));
	r->start = w->addr;
	r->end = w->addr + units * 2;
	r->line = line;
	r->end_line = end_line;
	r->col = col;
	r->end_col = end_col;
	w->addr = r->end;
}

/* kinds 0..9: col = kind * 8 + (b >> 4 & 7), end_col = col + (b & 15) */
static void tw_short(struct tw *w, unsigned int units, int col, int end_col)
{
	assert_true(col >= 0 && col < 80 && end_col >= col && end_col - col < 16);
	tw_head(w, (unsigned int)col / 8, units);
	tw_byte(w, ((unsigned int)(col & 7) << 4) | (unsigned int)(end_col - col));
	tw_expect(w, units, (int)w->line, (int)w->line, col, end_col);
}

static void tw_one_line(struct tw *w, unsigned int units, int delta, int col, int end_col)
{
	assert_true(delta >= 0 && delta <= 2 && col < 128 && end_col < 128);
	tw_head(w, 10 + (unsigned int)delta, units);
	tw_byte(w, (unsigned int)col);
	tw_byte(w, (unsigned int)end_col);
	w->line += delta;
	tw_expect(w, units, (int)w->line, (int)w->line, col, end_col);
}

static void tw_no_columns(struct tw *w, unsigned int units, int64_t delta)
{
	tw_head(w, 13, units);
	tw_svarint(w, delta);
	w->line += delta;
	tw_expect(w, units, (int)w->line, (int)w->line, -1, -1);
}

/* columns are given 0-based, -1 for unknown; they are stored + 1 */
static void tw_long(struct tw *w, unsigned int units, int64_t delta, uint64_t end_delta,
		    int col, int end_col)
{
	tw_head(w, 14, units);
	tw_svarint(w, delta);
	tw_varint(w, end_delta);
	tw_varint(w, (uint64_t)((int64_t)col + 1));
	tw_varint(w, (uint64_t)((int64_t)end_col + 1));
	w->line += delta;
	tw_expect(w, units, (int)w->line, (int)(w->line + (int64_t)end_delta), col, end_col);
}

static void tw_none(struct tw *w, unsigned int units)
{
	tw_head(w, 15, units);
	tw_expect(w, units, LINETABLE_NO_LINE, -1, -1, -1);
}

/* The table in a heap buffer of exactly its size, so ASan sees any overread. */
static uint8_t *exact_copy(const uint8_t *p, size_t len)
{
	uint8_t *q = malloc(len ? len : 1);

	assert_non_null(q);
	if (len)
		memcpy(q, p, len);
	return q;
}

/* Check line_at, range_at and ranges against the expected entries. */
static void check_table(const uint8_t *table, size_t len, int firstlineno,
			const struct linetable_range *want, size_t n)
{
	struct linetable_range got[512], r;
	uint8_t *t = exact_copy(table, len);
	size_t count = 0, i;
	int64_t off;
	int line;

	assert_int_equal(linetable__ranges(t, len, firstlineno, got, 512, &count), 0);
	assert_int_equal(count, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(got[i].start, want[i].start);
		assert_int_equal(got[i].end, want[i].end);
		assert_int_equal(got[i].line, want[i].line);
		assert_int_equal(got[i].end_line, want[i].end_line);
		assert_int_equal(got[i].col, want[i].col);
		assert_int_equal(got[i].end_col, want[i].end_col);
		for (off = want[i].start; off < want[i].end; off++) {
			assert_int_equal(linetable__line_at(t, len, firstlineno, off, &line), 0);
			assert_int_equal(line, want[i].line);
			assert_int_equal(linetable__range_at(t, len, firstlineno, off, &r), 0);
			assert_int_equal(r.start, want[i].start);
			assert_int_equal(r.end, want[i].end);
		}
	}
	off = n ? want[n - 1].end : 0;
	assert_int_equal(linetable__line_at(t, len, firstlineno, off, &line), -ERANGE);
	assert_int_equal(linetable__line_at(t, len, firstlineno, INT64_MAX, &line), -ERANGE);
	free(t);
}

static void tw_check(struct tw *w, int firstlineno)
{
	check_table(w->buf, w->len, firstlineno, w->r, w->n);
}

/* ------------------------------------------------------------------------ */

static void test_every_kind(void **state)
{
	struct tw w;
	int col;

	(void)state;
	tw_init(&w, 10);
	/* every short-form kind 0..9, each column group's edges */
	for (col = 0; col < 80; col += 7)
		tw_short(&w, 1 + (unsigned int)col % 8, col, col + col % 16);
	tw_short(&w, 8, 79, 79 + 15);
	tw_one_line(&w, 2, 0, 0, 127);
	tw_one_line(&w, 1, 1, 127, 0);
	tw_one_line(&w, 3, 2, 5, 9);
	tw_no_columns(&w, 4, 0);
	tw_no_columns(&w, 1, -7);
	tw_no_columns(&w, 1, 31);
	tw_no_columns(&w, 1, 32);	/* 64: the first two-chunk svarint */
	tw_long(&w, 8, 0, 0, 0, 0);
	tw_long(&w, 1, -3, 4, 200, 5000);
	tw_long(&w, 1, 1, 0, -1, -1);	/* stored 0: unknown column */
	tw_none(&w, 1);
	tw_none(&w, 8);
	tw_short(&w, 1, 3, 4);		/* after no-location entries: same line */
	tw_check(&w, 10);
}

/* Entries without location never move the line the next delta applies to. */
static void test_no_location_keeps_line(void **state)
{
	struct tw w;

	(void)state;
	tw_init(&w, 100);
	tw_none(&w, 2);
	tw_no_columns(&w, 1, 5);
	tw_none(&w, 1);
	tw_none(&w, 1);
	tw_one_line(&w, 1, 2, 1, 2);
	assert_int_equal(w.r[4].line, 107);
	tw_check(&w, 100);
}

/*
 * Tables as CPython 3.12 to 3.14 write them for the module "x=1\ny=2\n":
 * the module's RESUME sits on line 0 (delta -1 from co_firstlineno 1);
 * 3.15 gives RESUME two code units.
 */
static void test_real_module_table(void **state)
{
	static const uint8_t t312[] = {
		0xf0, 0x03, 0x01, 0x01, 0x01, 0xd8, 0x02, 0x03, 0x80, 0x01,
		0xd8, 0x02, 0x03, 0x81, 0x01,
	};
	static const uint8_t t315[] = {
		0xf1, 0x03, 0x01, 0x01, 0x01, 0xd8, 0x02, 0x03, 0x80, 0x01,
		0xd8, 0x02, 0x03, 0x82, 0x01,
	};
	static const int lines312[] = { 0, 1, 1, 2, 2, 2 };
	static const int lines315[] = { 0, 0, 1, 1, 2, 2, 2, 2 };
	size_t i;
	int line;

	(void)state;
	for (i = 0; i < 6; i++) {
		assert_int_equal(linetable__line_at(t312, sizeof(t312), 1, (int64_t)i * 2,
						    &line), 0);
		assert_int_equal(line, lines312[i]);
	}
	assert_int_equal(linetable__line_at(t312, sizeof(t312), 1, 12, &line), -ERANGE);
	for (i = 0; i < 8; i++) {
		assert_int_equal(linetable__line_at(t315, sizeof(t315), 1, (int64_t)i * 2,
						    &line), 0);
		assert_int_equal(line, lines315[i]);
	}
	assert_int_equal(linetable__line_at(t315, sizeof(t315), 1, 16, &line), -ERANGE);
}

static void test_negative_offset(void **state)
{
	static const uint8_t garbage[] = { 0x00, 0xff };
	struct linetable_range r;
	int line = 0;

	(void)state;
	/* PyCode_Addr2Line(): co_firstlineno, the table is not read */
	assert_int_equal(linetable__line_at(garbage, sizeof(garbage), 42, -2, &line), 0);
	assert_int_equal(line, 42);
	assert_int_equal(linetable__line_at(NULL, 0, -5, -1, &line), 0);
	assert_int_equal(line, -5);
	assert_int_equal(linetable__line_at(garbage, 2, 7, INT64_MIN, &line), 0);
	assert_int_equal(line, 7);
	/* no entry covers a negative offset */
	assert_int_equal(linetable__range_at(garbage, 2, 7, -2, &r), -ERANGE);
}

static void test_empty_and_args(void **state)
{
	static const uint8_t one[] = { 0xf8 };	/* one no-location unit */
	struct linetable_range r[2];
	size_t count = 99;
	int line;

	(void)state;
	assert_int_equal(linetable__line_at(NULL, 0, 1, 0, &line), -ERANGE);
	assert_int_equal(linetable__line_at(one, 0, 1, 0, &line), -ERANGE);
	assert_int_equal(linetable__ranges(NULL, 0, 1, NULL, 0, &count), 0);
	assert_int_equal(count, 0);

	assert_int_equal(linetable__line_at(NULL, 1, 1, 0, &line), -EINVAL);
	assert_int_equal(linetable__line_at(one, 1, 1, 0, NULL), -EINVAL);
	assert_int_equal(linetable__range_at(one, 1, 1, 0, NULL), -EINVAL);
	assert_int_equal(linetable__ranges(one, 1, 1, NULL, 1, &count), -EINVAL);
	assert_int_equal(linetable__ranges(one, 1, 1, r, 2, NULL), -EINVAL);
	assert_int_equal(linetable__line_at(one, LINETABLE_MAX_LEN + 1, 1, 0, &line), -EINVAL);

	assert_int_equal(linetable__line_at(one, 1, 1, 0, &line), 0);
	assert_int_equal(line, LINETABLE_NO_LINE);
	assert_int_equal(linetable__line_at(one, 1, 1, 1, &line), 0);	/* odd offset */
	assert_int_equal(linetable__line_at(one, 1, 1, 2, &line), -ERANGE);
}

static void test_ranges_capacity(void **state)
{
	struct linetable_range r[3];
	struct tw w;
	size_t count = 0;
	int i;

	(void)state;
	tw_init(&w, 1);
	for (i = 0; i < 5; i++)
		tw_no_columns(&w, 1, 1);
	assert_int_equal(linetable__ranges(w.buf, w.len, 1, NULL, 0, &count), -ENOSPC);
	assert_int_equal(count, 5);
	assert_int_equal(linetable__ranges(w.buf, w.len, 1, r, 3, &count), -ENOSPC);
	assert_int_equal(count, 5);
	assert_int_equal(r[2].line, 4);
}

/* Bytes that break the entry structure. */
static void test_strict_structure(void **state)
{
	/* no header bit on the first byte */
	static const uint8_t no_head[] = { 0x68, 0x01 };
	/* a short-form column byte with bit 7 set */
	static const uint8_t bad_short[] = { 0x80, 0x81 };
	/* a one-line entry whose second column byte is a header */
	static const uint8_t bad_one_line[] = { 0xd0, 0x01, 0xf8 };
	/* a varint ending on a continuation chunk, then a header */
	static const uint8_t bad_varint[] = { 0xe8, 0x42, 0xf8 };
	int line;

	(void)state;
	assert_int_equal(linetable__line_at(no_head, 2, 1, 0, &line), -EINVAL);
	assert_int_equal(linetable__line_at(bad_short, 2, 1, 0, &line), -EINVAL);
	assert_int_equal(linetable__line_at(bad_one_line, 3, 1, 0, &line), -EINVAL);
	assert_int_equal(linetable__line_at(bad_varint, 3, 1, 0, &line), -EINVAL);
}

static void test_huge_deltas(void **state)
{
	struct tw w;
	int line;
	size_t count;

	(void)state;
	/* up to INT_MAX is a line */
	tw_init(&w, 1);
	tw_no_columns(&w, 1, (int64_t)INT_MAX - 1);
	tw_check(&w, 1);
	/* one more is not */
	tw_no_columns(&w, 1, 1);
	assert_int_equal(linetable__line_at(w.buf, w.len, 1, 2, &line), -EINVAL);
	assert_int_equal(linetable__ranges(w.buf, w.len, 1, NULL, 0, &count), -EINVAL);

	/* down to INT_MIN, and not below */
	tw_init(&w, -2);
	tw_no_columns(&w, 1, (int64_t)INT_MIN + 2);
	tw_check(&w, -2);
	tw_no_columns(&w, 1, -1);
	assert_int_equal(linetable__line_at(w.buf, w.len, -2, 2, &line), -EINVAL);

	/* the largest 32-bit svarint magnitude in both directions, repeatedly */
	tw_init(&w, 0);
	tw_long(&w, 1, (int64_t)UINT32_MAX >> 1, 0, 0, 0);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 0, &line), 0);
	assert_int_equal(line, INT_MAX);
	tw_init(&w, 0);
	tw_head(&w, 13, 1);
	tw_varint(&w, UINT32_MAX);	/* -(2^31 - 1) */
	tw_head(&w, 13, 1);
	tw_varint(&w, UINT32_MAX);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 0, &line), 0);
	assert_int_equal(line, -INT_MAX);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 2, &line), -EINVAL);

	/* a varint beyond 32 bits, and one beyond six chunks */
	tw_init(&w, 0);
	tw_head(&w, 13, 1);
	tw_varint(&w, (uint64_t)UINT32_MAX + 1);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 0, &line), -EINVAL);
	tw_init(&w, 0);
	tw_head(&w, 13, 1);
	tw_varint(&w, (uint64_t)1 << 40);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 0, &line), -EINVAL);
	tw_init(&w, 0);
	tw_head(&w, 13, 1);
	tw_varint(&w, (uint64_t)1 << 62);
	assert_int_equal(linetable__line_at(w.buf, w.len, 0, 0, &line), -EINVAL);

	/* an end line past INT_MAX */
	tw_init(&w, INT_MAX - 3);
	tw_long(&w, 1, 0, 3, 0, 0);
	tw_check(&w, INT_MAX - 3);
	tw_init(&w, INT_MAX - 3);
	tw_long(&w, 1, 0, 4, 0, 0);
	assert_int_equal(linetable__line_at(w.buf, w.len, INT_MAX - 3, 0, &line), -EINVAL);

	/* columns past INT_MAX (stored + 1) */
	tw_init(&w, 1);
	tw_long(&w, 1, 0, 0, INT_MAX, 0);
	tw_check(&w, 1);
	tw_init(&w, 1);
	tw_head(&w, 14, 1);
	tw_svarint(&w, 0);
	tw_varint(&w, 0);
	tw_varint(&w, UINT32_MAX);
	tw_varint(&w, 0);
	assert_int_equal(linetable__line_at(w.buf, w.len, 1, 0, &line), -EINVAL);

	/* firstlineno at the ends of int with zero deltas */
	tw_init(&w, INT_MIN);
	tw_short(&w, 1, 0, 0);
	tw_check(&w, INT_MIN);
}

/* A table exercising every kind and multi-chunk varints. */
static void build_mixed(struct tw *w, int firstlineno)
{
	int i;

	tw_init(w, firstlineno);
	tw_long(w, 1, -1, 1, -1, -1);
	for (i = 0; i < 6; i++) {
		tw_short(w, 1 + (unsigned int)i % 8, i * 13 % 80, i * 13 % 80 + 3);
		tw_one_line(w, 2, i % 3, i, i + 40);
		tw_no_columns(w, 3, i * 1000 - 2500);
		tw_none(w, 1);
		tw_long(w, 5, 70000 - i * 30000, (uint64_t)i * 100, i * 300, i * 301);
	}
}

/*
 * Every prefix of a valid table: offsets in complete entries decode as in
 * the whole table; past them, a cut at an entry boundary is -ERANGE and a
 * cut inside an entry is -EINVAL. Nothing is read past the prefix.
 */
static void test_truncated(void **state)
{
	struct tw w;
	size_t cut, e, full, count;
	uint8_t *t;
	int64_t off;
	int line, rc, at_boundary;

	(void)state;
	build_mixed(&w, 500);
	check_table(w.buf, w.len, 500, w.r, w.n);
	for (cut = 0; cut <= w.len; cut++) {
		t = exact_copy(w.buf, cut);
		/*
		 * Entries start at header bytes: those before the cut are the
		 * entries begun, all complete when the cut falls on a header
		 * (or the end), all but the last otherwise.
		 */
		full = 0;
		for (e = 0; e < cut; e++)
			if (w.buf[e] & 0x80)
				full++;
		at_boundary = cut == w.len || (w.buf[cut] & 0x80);
		if (!at_boundary)
			full--;
		for (off = -2; off < w.r[w.n - 1].end + 4; off++) {
			rc = linetable__line_at(t, cut, 500, off, &line);
			if (off < 0) {
				assert_int_equal(rc, 0);
				assert_int_equal(line, 500);
			} else if (full && off < w.r[full - 1].end) {
				assert_int_equal(rc, 0);
				for (e = 0; off >= w.r[e].end; e++)
					;
				assert_int_equal(line, w.r[e].line);
			} else {
				assert_int_equal(rc, at_boundary ? -ERANGE : -EINVAL);
			}
		}
		/* The whole entries of the cut: up to the last header before it
		 * (the cut itself when it falls on one). */
		e = cut;
		if (!at_boundary) {
			e = cut - 1;
			while (e && !(w.buf[e] & 0x80))
				e--;
		}
		assert_int_equal(linetable__whole_prefix(t, cut, 500), e);
		assert_int_equal(linetable__ranges(t, e, 500, NULL, 0, &count), full ? -ENOSPC : 0);
		assert_int_equal(count, full);
		rc = linetable__ranges(t, cut, 500, NULL, 0, &count);
		if (at_boundary) {
			assert_int_equal(rc, full ? -ENOSPC : 0);
			assert_int_equal(count, full);
		} else {
			assert_int_equal(rc, -EINVAL);
		}
		free(t);
	}
}

/* xorshift64: a deterministic, seedable sequence for the fuzz tests */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A decode must end in 0, -EINVAL or -ERANGE, never read out of bounds, and
 * line_at must agree with ranges whenever the whole table decodes.
 */
static void fuzz_one(const uint8_t *table, size_t len, int firstlineno)
{
	struct linetable_range *ranges, r;
	size_t count = 0, i;
	int64_t off;
	int line, rc, rc_all;

	/* an entry takes at least one byte */
	ranges = calloc(len + 1, sizeof(*ranges));
	assert_non_null(ranges);
	rc_all = linetable__ranges(table, len, firstlineno, ranges, len + 1, &count);
	assert_true(rc_all == 0 || rc_all == -EINVAL);
	if (rc_all) {
		for (off = -1; off < 512; off++) {
			rc = linetable__line_at(table, len, firstlineno, off, &line);
			assert_true(rc == 0 || rc == -EINVAL || rc == -ERANGE);
		}
		free(ranges);
		return;
	}
	assert_true(count <= len);
	for (i = 0; i < count; i++) {
		const struct linetable_range *g = &ranges[i];

		assert_true(g->end > g->start && g->end - g->start <= 16);
		assert_true(i ? g->start == ranges[i - 1].end : g->start == 0);
		/* the first and the last byte of the range (always >= 2 bytes) */
		for (off = g->start; off < g->end; off += g->end - g->start - 1) {
			assert_int_equal(linetable__line_at(table, len, firstlineno, off, &line),
					 0);
			assert_int_equal(line, g->line);
			assert_int_equal(linetable__range_at(table, len, firstlineno, off, &r), 0);
			assert_memory_equal(&r, g, sizeof(r));
		}
	}
	off = count ? ranges[count - 1].end : 0;
	assert_int_equal(linetable__line_at(table, len, firstlineno, off, &line), -ERANGE);
	free(ranges);
}

static void test_corrupted_random(void **state)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct tw w;
	uint8_t *t;
	size_t i, round, nmut;

	(void)state;
	build_mixed(&w, 12);
	for (round = 0; round < 3000; round++) {
		t = exact_copy(w.buf, w.len);
		nmut = 1 + next_rand(&seed) % 4;
		for (i = 0; i < nmut; i++) {
			size_t at = next_rand(&seed) % w.len;

			switch (next_rand(&seed) % 3) {
			case 0:
				t[at] ^= (uint8_t)(1u << (next_rand(&seed) % 8));
				break;
			case 1:
				t[at] = (uint8_t)next_rand(&seed);
				break;
			default:
				t[at] = (next_rand(&seed) & 1) ? 0xff : 0x7f;
				break;
			}
		}
		fuzz_one(t, w.len, (int)(next_rand(&seed) % 3) - 1 + (round % 2 ? INT_MAX - 1 : 1));
		free(t);
	}
}

static void test_garbage_random(void **state)
{
	uint64_t seed = 0x1234567887654321ull;
	size_t round, len, i;
	uint8_t *t;

	(void)state;
	for (round = 0; round < 3000; round++) {
		len = next_rand(&seed) % 64;
		t = exact_copy(NULL, 0);
		free(t);
		t = malloc(len ? len : 1);
		assert_non_null(t);
		for (i = 0; i < len; i++) {
			uint64_t v = next_rand(&seed);

			/* mostly well-formed-looking bytes, to get past headers */
			t[i] = (uint8_t)(i == 0 || v % 4 == 0 ? v | 0x80 : v & 0x7f);
		}
		fuzz_one(t, len, (int)(next_rand(&seed) % 100));
		free(t);
	}
}

/* ------------------------------------------------------------------------ */
/* Fixtures written by tests/tools/dump_linetables.py under a real Python.  */

struct fixture_code {
	int firstlineno;
	int64_t nbytes;
	uint8_t *table;
	size_t len;
	struct linetable_range *ranges;
	size_t count;
	char name[256];
};

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decode hex ("-" is empty) into an exact-size heap buffer. */
static uint8_t *hex_decode(const char *s, size_t *len)
{
	size_t n = strcmp(s, "-") ? strlen(s) : 0, i;
	uint8_t *out;

	assert_int_equal(n % 2, 0);
	out = malloc(n / 2 ? n / 2 : 1);
	assert_non_null(out);
	for (i = 0; i < n / 2; i++) {
		int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);

		assert_true(hi >= 0 && lo >= 0);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return out;
}

static void fixture_code_done(struct fixture_code *c)
{
	size_t k;
	int line;

	if (!c->table)
		return;
	/* the entries cover the code exactly: nothing short, nothing over */
	assert_true(c->count > 0);
	if (c->ranges[c->count - 1].end != c->nbytes)
		fail_msg("%s: table covers %lld bytes, code has %lld", c->name,
			 (long long)c->ranges[c->count - 1].end, (long long)c->nbytes);
	assert_int_equal(linetable__line_at(c->table, c->len, c->firstlineno, c->nbytes, &line),
			 -ERANGE);
	assert_int_equal(linetable__line_at(c->table, c->len, c->firstlineno, -2, &line), 0);
	assert_int_equal(line, c->firstlineno);
	/* real tables cut at a spread of places (every place: test_truncated) */
	for (k = 0; k < 8 && c->len; k++) {
		size_t cut = c->len * k / 8 + k % 2;
		uint8_t *t = exact_copy(c->table, cut);

		fuzz_one(t, cut, c->firstlineno);
		free(t);
	}
	free(c->table);
	free(c->ranges);
	c->table = NULL;
	c->ranges = NULL;
}

static void fixture_code_start(struct fixture_code *c, char *rest)
{
	char *fl, *nb, *hex, *name, *save = NULL;
	size_t count = 0;
	int rc;

	fl = strtok_r(rest, " ", &save);
	nb = strtok_r(NULL, " ", &save);
	hex = strtok_r(NULL, " ", &save);
	name = strtok_r(NULL, "\n", &save);
	assert_non_null(fl);
	assert_non_null(nb);
	assert_non_null(hex);
	c->firstlineno = (int)strtol(fl, NULL, 10);
	c->nbytes = strtoll(nb, NULL, 10);
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "?");
	c->table = hex_decode(hex, &c->len);
	rc = linetable__ranges(c->table, c->len, c->firstlineno, NULL, 0, &count);
	if (rc != 0 && rc != -ENOSPC)
		fail_msg("%s: linetable__ranges: %d", c->name, rc);
	c->ranges = calloc(count ? count : 1, sizeof(*c->ranges));
	assert_non_null(c->ranges);
	assert_int_equal(linetable__ranges(c->table, c->len, c->firstlineno, c->ranges,
					   count, &c->count), 0);
	assert_int_equal(c->count, count);
}

static void fixture_check_unit(struct fixture_code *c, const char *rest)
{
	long long off;
	int line, end_line, col, end_col, got;
	struct linetable_range r;

	if (sscanf(rest, "%lld %d %d %d %d", &off, &line, &end_line, &col, &end_col) != 5)
		fail_msg("bad instruction record: %s", rest);
	assert_non_null(c->table);
	got = 0x7fffffff;
	if (linetable__line_at(c->table, c->len, c->firstlineno, off, &got) != 0 || got != line)
		fail_msg("%s (firstlineno %d): offset %lld: line %d, want %d", c->name,
			 c->firstlineno, off, got, line);
	assert_int_equal(linetable__range_at(c->table, c->len, c->firstlineno, off, &r), 0);
	if (r.end_line != end_line || r.col != col || r.end_col != end_col)
		fail_msg("%s: offset %lld: positions (%d, %d, %d, %d), want (%d, %d, %d, %d)",
			 c->name, off, r.line, r.end_line, r.col, r.end_col,
			 line, end_line, col, end_col);
}

static void test_fixture(void **state)
{
	const char *path = *state;
	struct fixture_code c = { 0 };
	size_t ncodes = 0, nunits = 0, linecap = 0;
	size_t want_codes = 0, want_units = 0;
	char *linebuf = NULL, version[64] = "?";
	int ended = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	while (getline(&linebuf, &linecap, f) > 0) {
		linebuf[strcspn(linebuf, "\n")] = '\0';
		if (linebuf[0] == '#' || !linebuf[0])
			continue;
		assert_false(ended);
		if (!strncmp(linebuf, "python ", 7)) {
			snprintf(version, sizeof(version), "%s", linebuf + 7);
		} else if (!strncmp(linebuf, "code ", 5)) {
			fixture_code_done(&c);
			fixture_code_start(&c, linebuf + 5);
			ncodes++;
		} else if (!strncmp(linebuf, "i ", 2)) {
			fixture_check_unit(&c, linebuf + 2);
			nunits++;
		} else if (!strncmp(linebuf, "str ", 4)) {
			continue;	/* test_unicode's part */
		} else if (!strncmp(linebuf, "end ", 4)) {
			fixture_code_done(&c);
			if (sscanf(linebuf + 4, "%zu %zu", &want_codes, &want_units) != 2)
				fail_msg("bad end record: %s", linebuf);
			ended = 1;
		} else {
			fail_msg("unknown record: %s", linebuf);
		}
	}
	free(linebuf);
	fclose(f);
	if (!ended)
		fail_msg("%s: no end record: the fixture is truncated", path);
	assert_int_equal(ncodes, want_codes);
	assert_int_equal(nunits, want_units);
	assert_true(ncodes > 0 && nunits > 0);
	printf("fixture %s: python %s: checked %zu code objects, %zu instructions\n",
	       path, version, ncodes, nunits);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest synthetic[] = {
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_no_location_keeps_line),
		cmocka_unit_test(test_real_module_table),
		cmocka_unit_test(test_negative_offset),
		cmocka_unit_test(test_empty_and_args),
		cmocka_unit_test(test_ranges_capacity),
		cmocka_unit_test(test_strict_structure),
		cmocka_unit_test(test_huge_deltas),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupted_random),
		cmocka_unit_test(test_garbage_random),
	};
	int failed;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [FIXTURE]\n", argv[0]);
		return 2;
	}
	failed = cmocka_run_group_tests_name("linetable", synthetic, NULL, NULL);
	if (argc == 2) {
		const struct CMUnitTest fixture[] = {
			cmocka_unit_test_prestate(test_fixture, argv[1]),
		};

		failed += cmocka_run_group_tests_name("linetable fixture", fixture, NULL, NULL);
	}
	return failed ? 1 : 0;
}
