// SPDX-License-Identifier: MIT
/*
 * test_record_sources.c - the recorder's source stage
 * (user/commands/record_sources.c): noting a sample's files opens nothing
 * (a file created after the note is still read: the reading happens later),
 * only absolute paths of Python frames are noted, each once, the outer frames
 * a previous sample had are skipped, and the files are read in the order
 * they were noted, with their flags. Reads this process's own files (its
 * root is the host's).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "commands/record_sources.h"

static char dir[] = "/tmp/test_record_sources.XXXXXX";

struct got {
	char path[8][256];
	char text[8][64];
	uint32_t flags[8];
	int n;
};

static int take(void *ctx, const struct out_source *src)
{
	struct got *g = ctx;

	assert_true(g->n < 8);
	snprintf(g->path[g->n], sizeof(g->path[g->n]), "%s", src->path);
	snprintf(g->text[g->n], sizeof(g->text[g->n]), "%s", src->text ? src->text : "-");
	g->flags[g->n++] = src->flags;
	return 0;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_note_then_read(void **state)
{
	struct record_sources rs = { 0 };
	char a[128], b[128], nul[128];
	struct py_sym fr[5] = { 0 };
	uint8_t kinds[5] = { OUT_FRAME_PYTHON, OUT_FRAME_NATIVE, OUT_FRAME_PYTHON,
			     OUT_FRAME_PYTHON, OUT_FRAME_PYTHON };
	struct out_sample s = { .pid = getpid(), .frames = fr, .kinds = kinds, .nframes = 5 };
	struct got g = { 0 };

	(void)state;
	snprintf(a, sizeof(a), "%s/a.py", dir);
	snprintf(b, sizeof(b), "%s/b.py", dir);
	snprintf(nul, sizeof(nul), "%s/nul.py", dir);
	fr[0].file = a;
	fr[1].file = "/usr/lib/libc.so.6";	/* native: not a source */
	fr[2].file = "<string>";
	fr[3].file = a;
	fr[4].file = b;
	assert_int_equal(record_sources__note(&rs, &s), 0);
	assert_int_equal(rs.ntodo, 2);
	/* Nothing was opened yet: files made now are what is read. */
	put(a, "x = 1\n");
	put(b, "y = 2\n");
	/* Seen before: nothing more to note; an outer frame of the previous
	 * sample (unchanged) is not looked at. */
	assert_int_equal(record_sources__note(&rs, &s), 0);
	fr[4].file = nul;
	s.unchanged = 1;
	assert_int_equal(record_sources__note(&rs, &s), 0);
	assert_int_equal(rs.ntodo, 2);
	assert_int_equal(record_sources__read_noted(&rs, take, &g), 0);
	assert_int_equal(g.n, 2);
	assert_string_equal(g.path[0], a);
	assert_string_equal(g.text[0], "x = 1\n");
	assert_string_equal(g.path[1], b);
	assert_string_equal(g.text[1], "y = 2\n");
	assert_int_equal(rs.ntodo, 0);
	assert_int_equal(rs.bytes, 12);
	/* Read once: a second call hands nothing. */
	assert_int_equal(record_sources__read_noted(&rs, take, &g), 0);
	assert_int_equal(g.n, 2);
	/* A file missing when read: unreadable, no text. */
	s.unchanged = 0;
	assert_int_equal(record_sources__note(&rs, &s), 0);
	assert_int_equal(record_sources__read_noted(&rs, take, &g), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.path[2], nul);
	assert_string_equal(g.text[2], "-");
	assert_int_equal(g.flags[2], OUT_SRC_UNREADABLE);
	record_sources__free(&rs);
	unlink(a);
	unlink(b);
}

static int fail_take(void *ctx, const struct out_source *src)
{
	(void)src;
	++*(int *)ctx;
	return -ENOSPC;
}

/* The first error of the consumer ends the reading; the rest is dropped. */
static void test_consumer_error(void **state)
{
	struct record_sources rs = { 0 };
	struct py_sym fr[2] = { { .file = "/nonexistent/a.py" }, { .file = "/nonexistent/b.py" } };
	struct out_sample s = { .pid = getpid(), .frames = fr, .nframes = 2 };
	int calls = 0;

	(void)state;
	assert_int_equal(record_sources__note(&rs, &s), 0);
	assert_int_equal(record_sources__read_noted(&rs, fail_take, &calls), -ENOSPC);
	assert_int_equal(calls, 1);
	assert_int_equal(rs.ntodo, 0);
	record_sources__free(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_note_then_read),
		cmocka_unit_test(test_consumer_error),
	};
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
