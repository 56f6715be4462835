// SPDX-License-Identifier: MIT
/*
 * test_verifier_log.c - the verifier's statistics log read
 * (user/sampling/bpf/verifier.c): the figures of an accepted program as 5.10
 * and 6.x print them (the largest of the program's and subprograms' stack
 * frames), none in
 * a rejection or garbage, the verdict of a rejection (its last line that is
 * not a figure), and the 20% headroom check on either limit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sampling/bpf/internal.h"

/* As print_verification_stats() writes them (5.10 to 6.18). */
static const char accepted[] =
	"verification time 61234 usec\n"
	"stack depth 320+0+8+0\n"
	"processed 46219 insns (limit 1000000) max_states_per_insn 12 total_states 2087 "
	"peak_states 1200 mark_read 371\n";

static const char rejected[] =
	"0: R1=ctx() R10=fp0\n"
	"; if (bpf_probe_read_user(sc->win, fsize, (const void *)fp))\n"
	"1021: (85) call bpf_probe_read_user#112\n"
	"R2 unbounded memory access, use 'var &= const' or 'if (var < const)'\n"
	"verification time 41003 usec\n"
	"stack depth 320+0\n"
	"processed 48211 insns (limit 1000000) max_states_per_insn 9 total_states 2301 "
	"peak_states 1301 mark_read 402\n";

static void test_accepted(void **state)
{
	struct verifier_figures f;
	char line[200];

	(void)state;
	assert_int_equal(verifier__parse(accepted, &f), 0);
	assert_true(f.known);
	assert_int_equal(f.insns, 46219);
	assert_int_equal(f.limit, 1000000);
	assert_int_equal(f.stack, 320);		/* the largest frame */
	assert_int_equal(f.subprogs, 4);
	assert_int_equal(f.stack_limit, 512);
	assert_false(verifier__near_limit(&f, 20));
	verifier__describe("pyprof_sample", &f, line, sizeof(line));
	assert_string_equal(line, "pyprof_sample 46219 insns of 1000000 (4.6%), "
			    "stack 320 of 512 bytes");
}

static void test_no_stack_figure(void **state)
{
	struct verifier_figures f = { .known = true, .insns = 26395, .limit = 1000000 };
	char line[200];

	(void)state;
	verifier__describe("pyprof_sample", &f, line, sizeof(line));
	assert_string_equal(line, "pyprof_sample 26395 insns of 1000000 (2.6%), stack not said");
}

static void test_no_figures(void **state)
{
	static const char *const bad[] = {
		"", "\n", "processed", "processed x insns (limit 1000000)",
		"processed 12 insns (limit 0)", "invalid argument\n",
	};
	struct verifier_figures f;
	char line[64];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f.known = true;
		assert_int_equal(verifier__parse(bad[i], &f), -ENOENT);
		assert_false(f.known);
		assert_false(verifier__near_limit(&f, 20));
	}
	verifier__describe("p", &f, line, sizeof(line));
	assert_string_equal(line, "p: no figures");
}

static void test_reason(void **state)
{
	char why[256], tiny[8];

	(void)state;
	verifier__reason(rejected, why, sizeof(why));
	assert_string_equal(why, "R2 unbounded memory access, use 'var &= const' or "
			    "'if (var < const)'");
	verifier__reason("only one line, no newline", why, sizeof(why));
	assert_string_equal(why, "only one line, no newline");
	verifier__reason(accepted, why, sizeof(why));
	assert_string_equal(why, "");
	verifier__reason("", why, sizeof(why));
	assert_string_equal(why, "");
	/* 5.10 logs each global function's check, passed, at any level. */
	verifier__reason("Validating walk_frame__step() func#9...\n"
			 "Func#9 is safe for any args that match its prototype\n"
			 "processed 37374 insns (limit 1000000) max_states_per_insn 4\n",
			 why, sizeof(why));
	assert_string_equal(why, "");
	verifier__reason("a long reason\n\n  \n", tiny, sizeof(tiny));
	assert_string_equal(tiny, "a long ");
}

static void test_near_limit(void **state)
{
	struct verifier_figures f = {
		.known = true, .insns = 799999, .limit = 1000000, .stack = 400, .stack_limit = 512,
	};

	(void)state;
	assert_false(verifier__near_limit(&f, 20));
	f.insns = 800000;			/* 80% of the instructions */
	assert_true(verifier__near_limit(&f, 20));
	f.insns = 1;
	f.stack = 410;				/* 80.1% of the stack */
	assert_true(verifier__near_limit(&f, 20));
	f.stack_limit = 0;			/* from the program's info: no stack */
	f.stack = 600;
	assert_false(verifier__near_limit(&f, 20));
	f.stack_limit = 512;
	f.limit = 4096;				/* before 5.2: 4,096 instructions */
	f.stack = 0;
	f.insns = 3300;
	assert_true(verifier__near_limit(&f, 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_no_stack_figure),
		cmocka_unit_test(test_no_figures),
		cmocka_unit_test(test_reason),
		cmocka_unit_test(test_near_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
