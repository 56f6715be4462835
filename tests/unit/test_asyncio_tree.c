// SPDX-License-Identifier: MIT
/*
 * The await tree (user/asyncio/tree.c) over snapshots built here: the shape of
 * `python -m asyncio pstree`, cycles listed and cut, a task awaited twice drawn
 * once, deep chains going on at the margin, long frame chains elided, and
 * graphs that would make a recursive printer crash (a 20,000-deep chain, a
 * task awaiting itself). Under ASan/UBSan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "asyncio/asyncio.h"
#include "symbols/symbolizer.h"

/* Task i has id 0x1000 * (i + 1), the name given, @nf frames "fK" (K = 0 the
 * innermost) in file "f.py" at line 10 + K. */
static void add_task(struct asyncio_snapshot *s, const char *name, size_t nf)
{
	struct asyncio_task *t;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->tasks = realloc(s->tasks, s->cap * sizeof(*s->tasks));
		assert_non_null(s->tasks);
	}
	t = &s->tasks[s->n];
	memset(t, 0, sizeof(*t));
	t->addr = 0x1000 * (s->n + 1);
	t->name = strdup(name);
	t->frames = calloc(nf + 1, sizeof(*t->frames));
	for (size_t k = 0; k < nf; k++) {
		static const char *const fnames[] = { "f0", "f1", "f2", "f3", "f4", "f5" };

		t->frames[k] = (struct py_sym){ k < 6 ? fnames[k] : "fN", "f.py", (int)(10 + k), 1 };
	}
	t->nframes = nf;
	s->n++;
}

/* Task @child is awaited by task @parent. */
static void awaits(struct asyncio_snapshot *s, size_t parent, size_t child)
{
	struct asyncio_task *t = &s->tasks[child];

	t->awaited_by = realloc(t->awaited_by, (t->nawaited + 1) * sizeof(uint64_t));
	t->awaited_by[t->nawaited++] = s->tasks[parent].addr;
}

static char *render(const struct asyncio_snapshot *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(asyncio_tree__print(f, s), 0);
	fclose(f);
	return buf;
}

static void test_pstree_shape(void **state)
{
	struct asyncio_snapshot s = { 0 };
	char *out;

	(void)state;
	add_task(&s, "main", 2);	/* 0 */
	add_task(&s, "a", 1);		/* 1 */
	add_task(&s, "b", 0);		/* 2 */
	add_task(&s, "lo\nne", 1);	/* 3: a newline stays inside its line */
	awaits(&s, 0, 1);
	awaits(&s, 0, 2);
	out = render(&s);
	assert_string_equal(out,
		"└── (T) main [0x1000]\n"
		"    └──  f1 f.py:11\n"
		"        └──  f0 f.py:10\n"
		"            ├── (T) a [0x2000]\n"
		"            │   └──  f0 f.py:10\n"
		"            └── (T) b [0x3000]\n"
		"└── (T) lo?ne [0x4000]\n"
		"    └──  f0 f.py:10\n");
	free(out);
	asyncio_snapshot__free(&s);
}

static void test_cycles_and_shared(void **state)
{
	struct asyncio_snapshot s = { 0 };
	char *out;

	(void)state;
	add_task(&s, "a", 1);	/* 0: a awaits b, b awaits a */
	add_task(&s, "b", 1);
	add_task(&s, "p", 0);	/* 2, 3 both await shared (4) */
	add_task(&s, "q", 0);
	add_task(&s, "shared", 0);
	add_task(&s, "self", 0);	/* 5 awaits itself */
	awaits(&s, 0, 1);
	awaits(&s, 1, 0);
	awaits(&s, 2, 4);
	awaits(&s, 3, 4);
	awaits(&s, 5, 5);
	s.tasks[3].torn = 1;
	s.tasks[3].state = ASYNCIO_TASK_RUNNING;
	out = render(&s);
	assert_string_equal(out,
		"The await graph has cycles: they are shown once and not followed.\n"
		"cycle: a → b → a\n"
		"cycle: self → self\n"
		"\n"
		"└── (T) p [0x3000]\n"
		"    └── (T) shared [0x5000]\n"
		"└── (T) q [0x4000, running, torn]\n"
		"    └── (T) shared [0x5000] (shown above)\n"
		"└── (T) a [0x1000]\n"
		"    └──  f0 f.py:10\n"
		"        └── (T) b [0x2000]\n"
		"            └──  f0 f.py:10\n"
		"                └── (T) a [0x1000] (cycle: awaits a task above, not followed)\n"
		"└── (T) self [0x6000]\n"
		"    └── (T) self [0x6000] (cycle: awaits a task above, not followed)\n");
	free(out);
	asyncio_snapshot__free(&s);
}

/* A chain far deeper than any recursion would survive: every task drawn,
 * bounded indentation. */
static void test_deep_chain(void **state)
{
	struct asyncio_snapshot s = { 0 };
	const size_t n = 20000;
	size_t lines = 0, longest = 0, cur = 0, drawn = 0;
	char *out, *p;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "t%zu", i);
		add_task(&s, name, 1);
		if (i)
			awaits(&s, i - 1, i);
	}
	out = render(&s);
	/* Line by line: strstr over the whole text per hit is quadratic
	 * under ASan, whose interceptor measures the rest of the haystack. */
	for (p = out; *p; p++) {
		if (*p != '\n') {
			cur++;
			continue;
		}
		lines++;
		longest = cur > longest ? cur : longest;
		/* a task drawn in full: "(T) tN [0x...]" ends its line */
		if (cur && p[-1] == ']' && memmem(p - cur, cur, "(T) t", 5))
			drawn++;
		cur = 0;
	}
	/* each task drawn once in full, plus a line where its branch was cut */
	assert_int_equal(drawn, n);
	assert_true(lines >= 2 * n && lines < 2 * n + n / 50);
	assert_true(longest < 2000);
	assert_non_null(strstr(out, "(continued below)"));
	free(out);
	asyncio_snapshot__free(&s);
}

static void test_long_frames_elided(void **state)
{
	struct asyncio_snapshot s = { 0 };
	size_t frame_lines = 0;
	char *out, *p;

	(void)state;
	add_task(&s, "deep", 1536);
	out = render(&s);
	for (p = out; (p = strstr(p, " f.py:")); p++)
		frame_lines++;
	assert_int_equal(frame_lines, 63);
	assert_non_null(strstr(out, " ... 1473 frames ...\n"));
	assert_non_null(strstr(out, " f0 f.py:10\n"));		/* the innermost */
	assert_non_null(strstr(out, " fN f.py:1545\n"));	/* the outermost */
	free(out);
	asyncio_snapshot__free(&s);
}

static void test_empty(void **state)
{
	struct asyncio_snapshot s = { 0 };
	char *out;

	(void)state;
	out = render(&s);
	assert_string_equal(out, "");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pstree_shape),
		cmocka_unit_test(test_cycles_and_shared),
		cmocka_unit_test(test_deep_chain),
		cmocka_unit_test(test_long_frames_elided),
		cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
