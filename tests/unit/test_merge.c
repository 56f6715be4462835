// SPDX-License-Identifier: MIT
/* Unit tests of user/native/merge.c: native and Python frames in call order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "native/merge.h"

#define I(e) { .eval = (e), .interp = true }
#define X { .eval = false, .interp = false }
#define P(i) { MERGE_PYTHON, (i) }
#define N(i) { MERGE_NATIVE, (i) }
#define CUT { MERGE_CUT, 0 }

static void expect(const struct merge_item *got, uint32_t n, const struct merge_item *want,
		   uint32_t nwant)
{
	assert_int_equal(n, nwant);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(got[i].kind, want[i].kind);
		assert_int_equal(got[i].idx, want[i].idx);
	}
}

/* sorted(xs, key=f): f's run above the C sort, above the caller's run;
 * main() below the outermost run folded, libc's start kept. */
static void test_callback(void **state)
{
	const struct merge_native nat[] = { I(true), I(false), I(false), I(true), I(false), X };
	const uint32_t runs[] = { 1, 2 };
	const struct merge_item want[] = { P(0), N(1), N(2), P(1), P(2), N(5) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks(nat, 6, true, runs, 2, 3, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* A C extension at the leaf (zlib), called from one run. */
static void test_leaf_extension(void **state)
{
	const struct merge_native nat[] = { X, X, I(true), I(false) };
	const uint32_t runs[] = { 2 };
	const struct merge_item want[] = { N(0), N(1), P(0), P(1) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks(nat, 4, true, runs, 1, 2, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* An empty run (a call of the evaluation loop returning: its frames are
 * popped) pairs with its evaluation frame all the same. */
static void test_empty_run(void **state)
{
	const struct merge_native nat[] = { I(true), I(false), I(true), X };
	const uint32_t runs[] = { 0, 3 };
	const struct merge_item want[] = { N(1), P(0), P(1), P(2), N(3) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks(nat, 4, true, runs, 2, 3, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* One evaluation frame more than runs: the innermost call is being entered
 * or left, with no Python frame linked: an empty run of its own. */
static void test_entering(void **state)
{
	const struct merge_native nat[] = { I(true), I(false), I(true), X };
	const uint32_t runs[] = { 2 };
	const struct merge_item want[] = { N(1), P(0), P(1), N(3) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks(nat, 4, true, runs, 1, 2, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* Two evaluation frames more than runs: the leaf natives, the cut, then
 * every Python frame. */
static void test_mismatch(void **state)
{
	const struct merge_native nat[] = { X, I(true), I(false), I(true), I(true) };
	const uint32_t runs[] = { 2 };
	const struct merge_item want[] = { N(0), CUT, P(0), P(1) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_false(merge__stacks(nat, 5, true, runs, 1, 2, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* A complete unwind with fewer evaluation frames than runs: a cut too. */
static void test_missing_eval(void **state)
{
	const struct merge_native nat[] = { I(true), X };
	const uint32_t runs[] = { 1, 1 };
	const struct merge_item want[] = { CUT, P(0), P(1) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_false(merge__stacks(nat, 2, true, runs, 2, 2, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* The unwind stopped short: what it reached is merged, the rest follows
 * the cut; no interpreter frame is folded (the outermost run is not known). */
static void test_short_unwind(void **state)
{
	const struct merge_native nat[] = { X, I(true), I(false) };
	const uint32_t runs[] = { 1, 2 };
	const struct merge_item want[] = { N(0), P(0), N(2), CUT, P(1), P(2) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_false(merge__stacks(nat, 3, false, runs, 2, 3, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* By entry (3.12+): E(k) is an evaluation frame holding run k's entry frame. */
#define E(k) { .eval = true, .interp = true, .run1 = (k) + 1 }

/* Runs pair by address as by count when both agree: sorted(key=f). */
static void test_by_entry(void **state)
{
	const struct merge_native nat[] = { E(0), I(false), I(false), E(1), I(false), X };
	const uint32_t runs[] = { 1, 2 };
	const struct merge_item want[] = { P(0), N(1), N(2), P(1), P(2), N(5) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks_by_entry(nat, 6, true, runs, 2, 3, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* A greenlet runs on top of its parent's suspended C stack: the parent's
 * evaluation frame holds no run of the chain. By count it took the
 * greenlet's run (the innermost evaluation frame counted as one being
 * entered) and put the greenlet's C frames above its Python frames; by
 * entry it is dropped, and the frames below the outermost run folded. */
static void test_greenlet_parent(void **state)
{
	/* leaf: the greenlet's loop; its start (greenlet.so, X); the parent's
	 * switch call (I), the parent's loop (I(true)), main (I), libc (X) */
	const struct merge_native nat[] = { E(0), X, I(false), I(true), I(false), X };
	const uint32_t runs[] = { 3 };
	const struct merge_item want[] = { P(0), P(1), P(2), N(1), N(5) };
	const struct merge_item by_count[] = { N(1), N(2), P(0), P(1), P(2), N(5) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks_by_entry(nat, 6, true, runs, 1, 3, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
	/* what the count made of it (the reason for pairing by address) */
	assert_true(merge__stacks(nat, 6, true, runs, 1, 3, out, 16, &n));
	expect(out, n, by_count, sizeof(by_count) / sizeof(by_count[0]));
}

/* Entering (no entry frame linked yet): the innermost evaluation frame
 * holds no run and is dropped, as by count. */
static void test_by_entry_entering(void **state)
{
	const struct merge_native nat[] = { I(true), I(false), E(0), X };
	const uint32_t runs[] = { 2 };
	const struct merge_item want[] = { N(1), P(0), P(1), N(3) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks_by_entry(nat, 4, true, runs, 1, 2, out, 16, &n));
	expect(out, n, want, sizeof(want) / sizeof(want[0]));
}

/* Disagreements: runs out of order; a complete unwind that reached one run
 * of two; a short unwind: what it reached, the cut, the rest. */
static void test_by_entry_cut(void **state)
{
	const struct merge_native swapped[] = { X, E(1), I(false), E(0), X };
	const struct merge_native one[] = { E(0), X };
	const struct merge_native shrt[] = { X, E(0), I(false) };
	const uint32_t runs[] = { 1, 2 };
	const struct merge_item want_swapped[] = { N(0), CUT, P(0), P(1), P(2) };
	const struct merge_item want_one[] = { CUT, P(0), P(1), P(2) };
	const struct merge_item want_short[] = { N(0), P(0), N(2), CUT, P(1), P(2) };
	struct merge_item out[16];
	uint32_t n;

	(void)state;
	assert_false(merge__stacks_by_entry(swapped, 5, true, runs, 2, 3, out, 16, &n));
	expect(out, n, want_swapped, sizeof(want_swapped) / sizeof(want_swapped[0]));
	assert_false(merge__stacks_by_entry(one, 2, true, runs, 2, 3, out, 16, &n));
	expect(out, n, want_one, sizeof(want_one) / sizeof(want_one[0]));
	assert_false(merge__stacks_by_entry(shrt, 3, false, runs, 2, 3, out, 16, &n));
	expect(out, n, want_short, sizeof(want_short) / sizeof(want_short[0]));
}

/* The output is bounded by max. */
static void test_bounded(void **state)
{
	const struct merge_native nat[] = { X, X, I(true) };
	const uint32_t runs[] = { 5 };
	struct merge_item out[3];
	uint32_t n;

	(void)state;
	assert_true(merge__stacks(nat, 3, true, runs, 1, 5, out, 3, &n));
	assert_int_equal(n, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_callback),     cmocka_unit_test(test_leaf_extension),
		cmocka_unit_test(test_empty_run),    cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_entering),
		cmocka_unit_test(test_missing_eval), cmocka_unit_test(test_short_unwind),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_by_entry),
		cmocka_unit_test(test_greenlet_parent),
		cmocka_unit_test(test_by_entry_entering),
		cmocka_unit_test(test_by_entry_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
