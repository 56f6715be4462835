// SPDX-License-Identifier: MIT
/*
 * test_top_aggregate.c - user/top/aggregate.c, the counts behind `top`: own
 * and total per function and per line (a recursion counted once per
 * sample), the window's buckets falling out as it rotates while the
 * cumulative figures stay, one thread's view, status rows, the sort
 * orders, and format.c's row text cut to a width. Runs under ASan/UBSan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "output/output.h"
#include "types/raw_sample.h"
#include "commands/top/aggregate.h"
#include "commands/top/top.h"

#define SEC 1000000000ull

static int add(struct top_agg *a, pid_t tid, uint64_t w, const struct py_sym *f, uint32_t n)
{
	struct out_sample s = {
		.comm = "python3", .pid = 100, .tid = tid, .thread_name = tid == 100 ? "main" : "w",
		.period_ns = w, .status = n ? SAMPLE_COMPLETE : SAMPLE_NO_PYSTATE,
		.nframes = n, .frames = f,
	};

	return top_agg__add(a, &s);
}

static const struct top_row *find(const struct top_row *r, size_t n, const char *fn, int line)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(r[i].function, fn) && (line < 0 || r[i].line == line))
			return &r[i];
	return NULL;
}

/* f <- g <- main, and g <- main: own and total, sorted by own then total. */
static void test_own_total(void **state)
{
	struct py_sym s1[] = { { "f", "a.py", 5, 4 }, { "g", "a.py", 12, 10 },
			       { "main", "a.py", 30, 29 } };
	struct py_sym s2[] = { { "g", "a.py", 13, 10 }, { "main", "a.py", 30, 29 } };
	struct top_view v = { .recent = 0, .thread = TOP_ALL_THREADS, .sort = TOP_SORT_OWN };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(5, &a), 0);
	top_agg__rotate(a, 0.0);
	assert_int_equal(add(a, 100, 10, s1, 3), 0);
	assert_int_equal(add(a, 100, 10, s2, 2), 0);
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 3);
	assert_int_equal(t.weight, 20);
	assert_int_equal(t.samples, 2);
	/* g (own 10, total 20) before f (own 10, total 10); main last */
	assert_string_equal(r[0].function, "g");
	assert_int_equal(r[0].own, 10);
	assert_int_equal(r[0].total, 20);
	assert_int_equal(r[0].line, 10);	/* the function's first line */
	assert_string_equal(r[1].function, "f");
	assert_int_equal(r[1].own, 10);
	assert_int_equal(r[1].total, 10);
	assert_string_equal(r[2].function, "main");
	assert_int_equal(r[2].own, 0);
	assert_int_equal(r[2].total, 20);
	assert_int_equal(r[2].total_samples, 2);

	v.sort = TOP_SORT_TOTAL;	/* ties on total: own, then the name */
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_string_equal(r[0].function, "g");
	assert_string_equal(r[1].function, "main");
	assert_string_equal(r[2].function, "f");
	v.sort = TOP_SORT_NAME;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_string_equal(r[0].function, "f");
	assert_string_equal(r[1].function, "g");
	assert_string_equal(r[2].function, "main");

	/* lines: g at 12 and at 13 are rows of their own */
	v.lines = 1;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 4);
	assert_non_null(find(r, n, "g", 12));
	assert_int_equal(find(r, n, "g", 12)->own, 0);
	assert_int_equal(find(r, n, "g", 12)->total, 10);
	assert_int_equal(find(r, n, "g", 13)->own, 10);
	assert_null(find(r, n, "g", 10));
	top_agg__free(a);
}

/* A recursion counts once in total, per function and per line. */
static void test_recursion(void **state)
{
	struct py_sym s[] = { { "f", "a.py", 5, 4 }, { "f", "a.py", 6, 4 },
			      { "f", "a.py", 6, 4 }, { "main", "a.py", 30, 29 } };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(3, &a), 0);
	top_agg__rotate(a, 0.0);
	assert_int_equal(add(a, 100, 7, s, 4), 0);
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_int_equal(find(r, n, "f", -1)->total, 7);
	assert_int_equal(find(r, n, "f", -1)->own, 7);
	v.lines = 1;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 3);
	assert_int_equal(find(r, n, "f", 6)->total, 7);
	assert_int_equal(find(r, n, "f", 6)->own, 0);
	assert_int_equal(find(r, n, "f", 5)->own, 7);
	top_agg__free(a);
}

/* Two buckets: a sample falls out of the recent view two rotations later. */
static void test_window(void **state)
{
	struct py_sym x[] = { { "old", "a.py", 1, 1 } };
	struct py_sym y[] = { { "new", "a.py", 2, 2 } };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(2, &a), 0);
	top_agg__rotate(a, 10.0);
	assert_int_equal(add(a, 100, SEC, x, 1), 0);
	top_agg__rotate(a, 11.0);
	assert_int_equal(add(a, 100, SEC, y, 1), 0);
	assert_int_equal(top_agg__rows(a, &v, 11.5, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_true(t.seconds > 1.49 && t.seconds < 1.51);
	top_agg__rotate(a, 12.0);
	assert_int_equal(top_agg__rows(a, &v, 12.5, &r, &n, &t), 0);
	assert_int_equal(n, 1);
	assert_string_equal(r[0].function, "new");
	assert_int_equal(t.weight, SEC);
	assert_true(t.seconds > 1.49 && t.seconds < 1.51);
	top_agg__rotate(a, 13.0);
	assert_int_equal(top_agg__rows(a, &v, 13.5, &r, &n, &t), 0);
	assert_int_equal(n, 0);
	assert_int_equal(t.weight, 0);
	v.recent = 0;	/* since the start: both, over 3.5 s */
	assert_int_equal(top_agg__rows(a, &v, 13.5, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_int_equal(t.weight, 2 * SEC);
	assert_true(t.seconds > 3.49 && t.seconds < 3.51);
	top_agg__free(a);
}

/* One thread's view has its rows and its weight only. */
static void test_threads(void **state)
{
	struct py_sym m[] = { { "work", "a.py", 3, 2 }, { "main", "a.py", 9, 9 } };
	struct py_sym w[] = { { "side", "b.py", 4, 4 }, { "run", "t.py", 1, 1 } };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(5, &a), 0);
	top_agg__rotate(a, 0.0);
	assert_int_equal(add(a, 100, 3, m, 2), 0);
	assert_int_equal(add(a, 101, 1, w, 2), 0);
	assert_int_equal(add(a, 101, 1, w, 2), 0);
	assert_int_equal(add(a, 100, 0, NULL, 0), 0);	/* no frames: its status */
	assert_int_equal(top_agg__nthreads(a), 2);
	assert_int_equal(top_agg__nprocs(a), 1);
	assert_int_equal(top_agg__thread(a, 1)->tid, 101);
	assert_string_equal(top_agg__thread(a, 1)->name, "w");
	assert_int_equal(top_agg__thread(a, 1)->samples, 2);
	assert_int_equal(top_agg__thread(a, 1)->recent, 2);
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 5);
	assert_int_equal(t.weight, 3 + 1 + 1 + 1);	/* a period of 0 weighs 1 */
	assert_non_null(find(r, n, "[no-python-state]", -1));
	v.thread = 1;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_non_null(find(r, n, "side", -1));
	assert_non_null(find(r, n, "run", -1));
	assert_int_equal(t.weight, 2);
	assert_int_equal(t.samples, 2);
	v.thread = 0;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 3);
	assert_null(find(r, n, "side", -1));
	assert_int_equal(t.weight, 4);

	/* another process: one process's view is the sum of its threads' */
	{
		struct out_sample o = { .comm = "other", .pid = 200, .tid = 200,
					.period_ns = 5, .nframes = 2, .frames = m };

		assert_int_equal(top_agg__add(a, &o), 0);
	}
	assert_int_equal(top_agg__nprocs(a), 2);
	v.thread = TOP_ALL_THREADS;
	v.pid = 100;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 5);
	assert_int_equal(find(r, n, "work", -1)->own, 3);
	assert_int_equal(find(r, n, "side", -1)->own, 2);
	assert_int_equal(t.weight, 6);
	v.pid = 200;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_int_equal(find(r, n, "work", -1)->own, 5);
	assert_int_equal(t.weight, 5);
	v.pid = 0;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(find(r, n, "work", -1)->own, 8);
	assert_int_equal(t.weight, 11);
	top_agg__free(a);
}

/* A truncated stack: its frames, and [truncated] as a total-only row. */
static void test_truncated(void **state)
{
	struct py_sym f[] = { { "deep", "a.py", 3, 2 }, { "deep", "a.py", 4, 2 } };
	struct out_sample s = { .comm = "python3", .pid = 1, .tid = 1, .period_ns = 5,
				.status = SAMPLE_TRUNCATED, .nframes = 2, .frames = f };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS, .sort = TOP_SORT_OWN };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(1, &a), 0);
	top_agg__rotate(a, 0.0);
	assert_int_equal(top_agg__add(a, &s), 0);
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 2);
	assert_string_equal(r[0].function, "deep");
	assert_int_equal(r[0].own, 5);
	assert_string_equal(r[1].function, "[truncated]");
	assert_int_equal(r[1].own, 0);
	assert_int_equal(r[1].total, 5);
	v.lines = 1;
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 3);
	assert_non_null(find(r, n, "[truncated]", -1));
	top_agg__free(a);
}

/* Leaf frames are the innermost: own goes to them, total to the rest. */
static void test_leaf(void **state)
{
	struct py_sym f[] = { { "wait", "a.py", 3, 2 }, { "main", "a.py", 9, 9 } };
	struct out_leaf leaf[] = { { OUT_FRAME_STATUS, "[syscall] read" },
				   { OUT_FRAME_KERNEL, "do_sys_poll" } };
	struct out_sample s = { .comm = "python3", .pid = 1, .tid = 1, .period_ns = 2,
				.status = SAMPLE_COMPLETE, .nframes = 2, .frames = f,
				.leaf = leaf, .nleaf = 2 };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS, .sort = TOP_SORT_OWN };
	struct top_agg *a;
	const struct top_row *r;
	struct top_totals t;
	size_t n;

	(void)state;
	assert_int_equal(top_agg__new(1, &a), 0);
	top_agg__rotate(a, 0.0);
	assert_int_equal(top_agg__add(a, &s), 0);
	s.nleaf = 0;	/* a CPU sample of the same stack */
	assert_int_equal(top_agg__add(a, &s), 0);
	assert_int_equal(top_agg__rows(a, &v, 1.0, &r, &n, &t), 0);
	assert_int_equal(n, 4);
	assert_string_equal(r[0].function, "wait");	/* own 2 as do_sys_poll, total 4 */
	assert_int_equal(r[0].own, 2);
	assert_int_equal(r[0].total, 4);
	assert_string_equal(r[1].function, "do_sys_poll");
	assert_int_equal(r[1].own, 2);
	assert_int_equal(r[1].total, 2);
	assert_int_equal(find(r, n, "[syscall] read", -1)->own, 0);
	assert_int_equal(find(r, n, "[syscall] read", -1)->total, 2);
	top_agg__free(a);
}

/* A row's text at a width: the file keeps its end, the line stays. */
static void test_format_row(void **state)
{
	struct top_row row = { "hot", "/a/long/path/to/the/module.py", 16, SEC, 2 * SEC, 1, 2 };
	struct record_info info = { .pid = 1, .comm = "python3", .python_version = "3.14.0",
				    .mode = "cpu", .freq_hz = 99, .backend = "BPF" };
	struct record_status st = { 0 };
	struct top_view v = { .recent = 1, .thread = TOP_ALL_THREADS };
	struct top_snapshot s = { .info = &info, .status = &st, .view = &v, .rows = &row,
				  .nrows = 1, .totals = { 4 * SEC, 4, 4.0 }, .window_s = 5 };
	char buf[256];

	(void)state;
	top_fmt__row(&s, 0, buf, sizeof(buf), 0);
	assert_string_equal(buf, "   25.0    50.0     1.00s     2.00s  hot "
			    "(/a/long/path/to/the/module.py:16)");
	top_fmt__row(&s, 0, buf, sizeof(buf), 60);
	assert_string_equal(buf, "   25.0    50.0     1.00s     2.00s  hot (...e/module.py:16)");
	assert_int_equal(strlen(buf), 60);
	top_fmt__row(&s, 0, buf, sizeof(buf), 45);	/* no room for the file */
	assert_string_equal(buf, "   25.0    50.0     1.00s     2.00s  hot");
	top_fmt__row(&s, 0, buf, sizeof(buf), 20);
	assert_int_equal(strlen(buf), 20);
	top_fmt__header(&s, 2, buf, sizeof(buf), 0);
	assert_string_equal(buf, "view: last 5 s, functions, all threads, sorted by own");
	/* a name cannot drive the terminal; a cut path does not split a character */
	row = (struct top_row){ "x\033[2J\x9b\xff", "/\xc3\xa9\xc3\xa9\xc3\xa9/m.py", 1, 0, 0, 0, 0 };
	top_fmt__row(&s, 0, buf, sizeof(buf), 0);
	assert_string_equal(buf, "    0.0     0.0     0.00s     0.00s  x?[2J?? (/\xc3\xa9\xc3\xa9\xc3\xa9/m.py:1)");
	top_fmt__row(&s, 0, buf, sizeof(buf), 59);
	assert_string_equal(buf, "    0.0     0.0     0.00s     0.00s  x?[2J?? (...\xc3\xa9/m.py:1)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_total),
		cmocka_unit_test(test_recursion),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_leaf),
		cmocka_unit_test(test_format_row),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
