// SPDX-License-Identifier: MIT
/*
 * test_call_sites.c - a 3.11/3.12 caller's instruction as one that may have
 * pushed its callee or not (target/call_sites.h): the decoding of synthetic
 * adaptive bytecode (cache units whose data bytes look like instructions
 * are skipped), what stops it, which synthetic frames count as pushed
 * inline, and the verdicts read from a fake code object in this very
 * process (kept, or not kept when "plain").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "target/call_sites.h"
#include "target/offsets_legacy.h"
#include "target/opcodes/opnames.h"

#define V311 0x030b07f0u
#define V312 0x030c01f0u

/* The byte of instruction @name in @names (the generated tables). */
static uint8_t op(const char *const *names, const char *name)
{
	for (int i = 0; i < 256; i++) {
		if (names[i] && !strcmp(names[i], name))
			return (uint8_t)i;
	}
	fail_msg("no instruction %s", name);
	return 0;
}

/* 3.12's worker(): `while True: c1()` as tests/targets/recall_chain.py
 * has it, specialised: units 0 RESUME, 1 NOP, 2 LOAD_GLOBAL_MODULE (+4),
 * 7 CALL_PY_EXACT_ARGS (+3), 11 POP_TOP, 12 JUMP_BACKWARD. The cache
 * units hold bytes that are instructions' numbers. */
static size_t worker_312(unsigned char *b)
{
	const char *const *n = opnames_312;
	const uint8_t u[13] = {
		op(n, "RESUME"), op(n, "NOP"), op(n, "LOAD_GLOBAL_MODULE"),
		op(n, "CALL"), op(n, "CALL_PY_EXACT_ARGS"), op(n, "SEND"), 0,
		op(n, "CALL_PY_EXACT_ARGS"), op(n, "JUMP_BACKWARD"), op(n, "POP_TOP"), 0,
		op(n, "POP_TOP"), op(n, "JUMP_BACKWARD"),
	};

	for (size_t i = 0; i < 13; i++) {
		b[2 * i] = u[i];
		b[2 * i + 1] = (uint8_t)i;	/* the argument, or cache data */
	}
	return 26;
}

static void test_decode_312(void **state)
{
	const struct opfamily *t = opfamily__table(V312);
	unsigned char b[26];
	size_t len = worker_312(b);

	(void)state;
	assert_non_null(t);
	/* the call, its opcode unit and each of its caches (the last is where
	 * a 3.12 caller points while its callee runs) */
	for (size_t u = 7; u <= 10; u++)
		assert_int_equal(call_sites__decode(t, b, len, u), CALL_SITE_CALLS);
	/* after the call: a caller there was copied at another instant */
	assert_int_equal(call_sites__decode(t, b, len, 11), CALL_SITE_PLAIN);
	assert_int_equal(call_sites__decode(t, b, len, 12), CALL_SITE_PLAIN);
	assert_int_equal(call_sites__decode(t, b, len, 0), CALL_SITE_PLAIN);
	/* LOAD_GLOBAL's caches hold CALL and SEND bytes: still LOAD_GLOBAL */
	for (size_t u = 2; u <= 6; u++)
		assert_int_equal(call_sites__decode(t, b, len, u), CALL_SITE_PLAIN);
	/* past the bytes given */
	assert_int_equal(call_sites__decode(t, b, len, 13), CALL_SITE_UNKNOWN);
	assert_int_equal(call_sites__decode(t, b, 22, 11), CALL_SITE_UNKNOWN);
	assert_int_equal(call_sites__decode(NULL, b, len, 12), CALL_SITE_UNKNOWN);
}

static void test_families(void **state)
{
	const char *const *n11 = opnames_311, *const *n12 = opnames_312;
	const struct opfamily *t11 = opfamily__table(V311), *t12 = opfamily__table(V312);
	unsigned char b[2] = { 0, 0 };

	(void)state;
	assert_non_null(t11);
	assert_null(opfamily__table(0x030d00f0));	/* 3.13+: instr is the current one */
	assert_null(opfamily__table(0x030a0df0));
	/* a family is judged whole: specialisation moves within it */
	b[0] = op(n12, "LOAD_ATTR_INSTANCE_VALUE");	/* 3.12: LOAD_ATTR_PROPERTY's */
	assert_int_equal(call_sites__decode(t12, b, 2, 0), CALL_SITE_CALLS);
	b[0] = op(n11, "LOAD_ATTR_INSTANCE_VALUE");	/* 3.11 has no such member */
	assert_int_equal(call_sites__decode(t11, b, 2, 0), CALL_SITE_PLAIN);
	b[0] = op(n11, "BINARY_SUBSCR_LIST_INT");	/* BINARY_SUBSCR_GETITEM's */
	assert_int_equal(call_sites__decode(t11, b, 2, 0), CALL_SITE_CALLS);
	b[0] = op(n12, "FOR_ITER_RANGE");		/* FOR_ITER_GEN's */
	assert_int_equal(call_sites__decode(t12, b, 2, 0), CALL_SITE_CALLS);
	b[0] = op(n12, "CALL_FUNCTION_EX");
	assert_int_equal(call_sites__decode(t12, b, 2, 0), CALL_SITE_CALLS);
	b[0] = op(n12, "BINARY_OP_ADD_INT");		/* __add__ comes through C */
	assert_int_equal(call_sites__decode(t12, b, 2, 0), CALL_SITE_PLAIN);
	b[0] = op(n11, "JUMP_BACKWARD_QUICK");
	assert_int_equal(call_sites__decode(t11, b, 2, 0), CALL_SITE_PLAIN);
}

static void test_decode_311(void **state)
{
	const char *const *n = opnames_311;
	const struct opfamily *t = opfamily__table(V311);
	/* units 0 PRECALL_PYFUNC (+1), 2 CALL_PY_EXACT_ARGS (+4), 7 POP_TOP,
	 * 8 EXTENDED_ARG_QUICK, 9 JUMP_BACKWARD */
	const uint8_t u[10] = {
		op(n, "PRECALL_PYFUNC"), 0, op(n, "CALL_PY_EXACT_ARGS"), op(n, "POP_TOP"),
		op(n, "JUMP_BACKWARD"), 0, op(n, "NOP"), op(n, "POP_TOP"),
		op(n, "EXTENDED_ARG_QUICK"), op(n, "JUMP_BACKWARD"),
	};
	unsigned char b[20] = { 0 };

	(void)state;
	for (size_t i = 0; i < 10; i++)
		b[2 * i] = u[i];
	assert_int_equal(call_sites__decode(t, b, 20, 6), CALL_SITE_CALLS);	/* 3.11 points here */
	assert_int_equal(call_sites__decode(t, b, 20, 4), CALL_SITE_CALLS);
	assert_int_equal(call_sites__decode(t, b, 20, 7), CALL_SITE_PLAIN);
	assert_int_equal(call_sites__decode(t, b, 20, 8), CALL_SITE_PLAIN);
	assert_int_equal(call_sites__decode(t, b, 20, 9), CALL_SITE_PLAIN);
}

static void test_stops(void **state)
{
	const char *const *n = opnames_312;
	const struct opfamily *t = opfamily__table(V312);
	unsigned char b[8] = { 0 };

	(void)state;
	/* traced code: INSTRUMENTED_LINE hides an instruction of unknown size */
	b[0] = op(n, "INSTRUMENTED_LINE");
	b[2] = op(n, "POP_TOP");
	assert_int_equal(call_sites__decode(t, b, 4, 1), CALL_SITE_UNKNOWN);
	assert_int_equal(call_sites__decode(t, b, 4, 0), CALL_SITE_UNKNOWN);
	/* a CACHE byte where an instruction begins: not bytecode as decoded */
	b[0] = 0;
	assert_int_equal(call_sites__decode(t, b, 4, 1), CALL_SITE_UNKNOWN);
	/* a family whose caches run past the unit asked: that instruction */
	b[0] = op(n, "LOAD_ATTR");
	assert_int_equal(call_sites__decode(t, b, 8, 3), CALL_SITE_CALLS);
}

static void test_pushed_inline(void **state)
{
	struct py_offsets o11, o12, o13 = { 0 };
	unsigned char f[PY_MAX_STRUCT_COPY] = { 0 };

	(void)state;
	assert_int_equal(offsets_legacy__get(V311, &o11), 0);
	assert_int_equal(offsets_legacy__get(V312, &o12), 0);
	/* 3.11: a frame of the thread, is_entry clear: its caller called it */
	assert_int_equal(call_sites__pushed_inline(&o11, f, 0), 1);
	f[o11.frame_is_entry] = 1;	/* called from C */
	assert_int_equal(call_sites__pushed_inline(&o11, f, 0), 0);
	f[o11.frame_is_entry] = 0;
	assert_int_equal(call_sites__pushed_inline(&o11, f, 1), 0);	/* a generator's */
	/* 3.12: thread-owned; its entry frames (CSTACK) are never */
	assert_int_equal(call_sites__pushed_inline(&o12, f, 0), 1);
	assert_int_equal(call_sites__pushed_inline(&o12, f, 3), 0);
	assert_int_equal(call_sites__pushed_inline(&o12, f, 1), 0);
	/* 3.13+ frames point at the current instruction: not asked */
	o13.frame_owner_interp_min = 3;
	assert_int_equal(call_sites__pushed_inline(&o13, f, 0), 0);
}

/* A fake 3.12 code object in this process, read through process_vm_readv. */
static void test_at(void **state)
{
	static struct call_sites cs;
	static unsigned char code[512 + CALL_SITES_MAX_BYTES] __attribute__((aligned(16)));
	struct py_offsets o;
	enum call_site site;
	uint64_t base = (uint64_t)(uintptr_t)code, first;
	pid_t me = getpid();

	(void)state;
	assert_int_equal(offsets_legacy__get(V312, &o), 0);
	first = base + o.code_adaptive;
	worker_312(code + o.code_adaptive);
	call_sites__init(&cs, V312);
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 2 * 10, &site), 0);
	assert_int_equal(site, CALL_SITE_CALLS);
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 2 * 12, &site), 0);
	assert_int_equal(site, CALL_SITE_PLAIN);
	assert_int_equal(cs.plain, 1);
	/* a call site is kept: the bytes are not read again */
	code[o.code_adaptive + 2 * 7] = op(opnames_312, "POP_TOP");
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 2 * 10, &site), 0);
	assert_int_equal(site, CALL_SITE_CALLS);
	code[o.code_adaptive + 2 * 7] = op(opnames_312, "CALL_PY_EXACT_ARGS");
	/* "plain" is not: a code object made at the same address is read */
	code[o.code_adaptive + 2 * 11] = op(opnames_312, "CALL");
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 2 * 12, &site), 0);
	assert_int_equal(site, CALL_SITE_CALLS);
	/* before the first instruction (a frame just pushed), odd, too far */
	assert_int_equal(call_sites__at(&cs, me, &o, base, first - 2, &site), 0);
	assert_int_equal(site, CALL_SITE_UNKNOWN);
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 3, &site), 0);
	assert_int_equal(site, CALL_SITE_UNKNOWN);
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + CALL_SITES_MAX_BYTES, &site), 0);
	assert_int_equal(site, CALL_SITE_UNKNOWN);
	/* unreadable: unknown, not an error */
	assert_int_equal(call_sites__at(&cs, me, &o, 16, 16 + o.code_adaptive + 24, &site), 0);
	assert_int_equal(site, CALL_SITE_UNKNOWN);
	/* not 3.11/3.12: nothing is told */
	call_sites__init(&cs, 0x030d00f0);
	assert_int_equal(call_sites__at(&cs, me, &o, base, first + 2 * 12, &site), 0);
	assert_int_equal(site, CALL_SITE_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_312),
		cmocka_unit_test(test_families),
		cmocka_unit_test(test_decode_311),
		cmocka_unit_test(test_stops),
		cmocka_unit_test(test_pushed_inline),
		cmocka_unit_test(test_at),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
