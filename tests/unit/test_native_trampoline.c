// SPDX-License-Identifier: MIT
/*
 * test_native_trampoline.c - CPython's perf trampolines (-X perf) and perf
 * maps, for the native unwinder: the rows read from the template's
 * instructions (user/native/trampoline.c), templates that must give none,
 * and names read from a perf map file (user/native/perfmap.c), grown while
 * it is read, as a writer appends to it.
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

#include "native/perfmap.h"
#include "native/trampoline.h"

#define CODE(...) ((const unsigned char[]){ __VA_ARGS__ }), \
		  sizeof((const unsigned char[]){ __VA_ARGS__ })

static void expect(const struct py_trampoline_step *s, int reg, int off, int fp_saved, int fp_off)
{
	assert_int_equal(s->cfa_reg, reg);
	assert_int_equal(s->cfa_off, off);
	assert_int_equal(s->fp_saved, fp_saved);
	if (fp_saved)
		assert_int_equal(s->fp_off, fp_off);
}

/* Debian's 3.13-3.15 template: endbr64; push %rbp; mov %rsp,%rbp;
 * call *%rcx; pop %rbp; ret */
static void test_debian_template(void **state)
{
	struct py_trampoline_step st[PY_TRAMPOLINE_MAX];

	(void)state;
	assert_int_equal(py_trampoline__decode(CODE(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89,
						    0xe5, 0xff, 0xd1, 0x5d, 0xc3), st), 0);
	for (int i = 0; i < 4; i++)	/* endbr64, then at the push */
		expect(&st[i], CFI_REG_SP, 8, 0, 0);
	expect(&st[4], CFI_REG_SP, 8, 0, 0);
	for (int i = 5; i < 8; i++)	/* at the mov: %rbp pushed */
		expect(&st[i], CFI_REG_SP, 16, 1, -16);
	for (int i = 8; i < 10; i++)	/* the call (and its return address) */
		expect(&st[i], CFI_REG_FP, 16, 1, -16);
	expect(&st[10], CFI_REG_FP, 16, 1, -16);	/* at the pop */
	expect(&st[11], CFI_REG_SP, 8, 0, 0);		/* at the ret */
}

/* without endbr64 (3.12 builds without CET), calling through %r11 */
static void test_other_templates(void **state)
{
	struct py_trampoline_step st[PY_TRAMPOLINE_MAX];

	(void)state;
	assert_int_equal(py_trampoline__decode(CODE(0x55, 0x48, 0x89, 0xe5, 0x41, 0xff, 0xd3,
						    0x5d, 0xc3), st), 0);
	expect(&st[0], CFI_REG_SP, 8, 0, 0);
	expect(&st[1], CFI_REG_SP, 16, 1, -16);
	expect(&st[6], CFI_REG_FP, 16, 1, -16);
	expect(&st[7], CFI_REG_FP, 16, 1, -16);
	expect(&st[8], CFI_REG_SP, 8, 0, 0);
}

/* pyenv's 3.12 (no frame pointer): sub $8,%rsp; call *%rcx; add $8,%rsp; ret */
static void test_no_frame_pointer(void **state)
{
	struct py_trampoline_step st[PY_TRAMPOLINE_MAX];

	(void)state;
	assert_int_equal(py_trampoline__decode(CODE(0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48,
						    0x83, 0xc4, 0x08, 0xc3), st), 0);
	for (int i = 0; i < 4; i++)
		expect(&st[i], CFI_REG_SP, 8, 0, 0);
	for (int i = 4; i < 10; i++)	/* the call, and at the add */
		expect(&st[i], CFI_REG_SP, 16, 0, 0);
	expect(&st[10], CFI_REG_SP, 8, 0, 0);
	/* an add that leaves the return address below sp */
	assert_int_equal(py_trampoline__decode(CODE(0x48, 0x83, 0xc4, 0x08, 0xc3), st), -ENOTSUP);
}

/* what the decoder must refuse: an instruction it does not know (sub
 * $8,%rsp), a stack that does not balance, a template that does not end at
 * its ret, an empty one */
static void test_refused(void **state)
{
	struct py_trampoline_step st[PY_TRAMPOLINE_MAX];

	(void)state;
	assert_int_equal(py_trampoline__decode(CODE(0x55, 0x48, 0x81, 0xec, 0, 1, 0, 0, 0xff,
						    0xd1, 0x5d, 0xc3), st), -ENOTSUP);
	assert_int_equal(py_trampoline__decode(CODE(0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0xc3),
					       st), -ENOTSUP);
	assert_int_equal(py_trampoline__decode(CODE(0x5d, 0xc3), st), -ENOTSUP);
	assert_int_equal(py_trampoline__decode(CODE(0x55, 0x5d, 0xc3, 0x90), st), -ENOTSUP);
	assert_int_equal(py_trampoline__decode(CODE(0x55, 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1,
						    0x5d, 0xc3), st), -ENOTSUP);
	assert_int_equal(py_trampoline__decode(CODE(0xc3), st), 0);
	assert_int_equal(py_trampoline__decode((const unsigned char *)"", 0, st), -ENOTSUP);
}

/* Our own perf map (our pid is ours in our namespace as well, and our
 * root is /): lines appended while it is read, a half-written line, the
 * later of two lines for one address, lines not of the format. */
static void test_perfmap(void **state)
{
	char path[64];
	struct perfmap *m;
	uint64_t start = 0;
	const char *name;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("7f0000001000 40 py::first:/a.py\n"
	      "not a line\n"
	      "7f0000002000 0 py::empty:/a.py\n"
	      "7f0000003000 10 py::half", f);
	fflush(f);
	assert_int_equal(perfmap__new(getpid(), &m), 0);
	assert_string_equal(perfmap__path(m), path);
	name = perfmap__lookup(m, 0x7f000000103f, &start);
	assert_non_null(name);
	assert_string_equal(name, "py::first:/a.py");
	assert_true(start == 0x7f0000001000);
	assert_null(perfmap__lookup(m, 0x7f0000001040, &start));
	assert_null(perfmap__lookup(m, 0x7f0000002000, &start));
	assert_null(perfmap__lookup(m, 0x7f0000003004, &start));	/* not whole yet */
	assert_int_equal(perfmap__count(m), 1);
	/* the writer finishes its line and adds one that replaces the first */
	fputs("way:/b.py\n7f0000001000 20 py::again:/c.py\n", f);
	fclose(f);
	name = perfmap__lookup(m, 0x7f0000003004, &start);
	assert_non_null(name);
	assert_string_equal(name, "py::halfway:/b.py");
	assert_true(start == 0x7f0000003000);
	name = perfmap__lookup(m, 0x7f0000001010, &start);
	assert_non_null(name);
	assert_string_equal(name, "py::again:/c.py");
	assert_int_equal(perfmap__count(m), 3);
	perfmap__free(m);
	unlink(path);

	/* no map: no names, no error */
	assert_int_equal(perfmap__new(getpid(), &m), 0);
	assert_null(perfmap__lookup(m, 0x7f0000001010, &start));
	perfmap__free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debian_template),
		cmocka_unit_test(test_other_templates),
		cmocka_unit_test(test_no_frame_pointer),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_perfmap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
