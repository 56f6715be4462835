// SPDX-License-Identifier: MIT
/*
 * test_opnames.c - the instruction names' look-up (target/opcodes/opnames.h):
 * a version's table by PY_VERSION_HEX, "[op] NAME" leaves, "[op] <N>" for a
 * byte with no instruction or an unknown version. (The tables themselves
 * are checked against each interpreter's dis by tests/test_opcodes.py.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "target/opcodes/opnames.h"

static void test_known(void **state)
{
	char buf[48];

	(void)state;
	/* numbers as each interpreter's opcode module says (gen-opcodes.py) */
	assert_string_equal(opnames__name(0x030b07f0, 5), "BINARY_OP_ADD_INT");
	assert_string_equal(opnames__name(0x030c01f0, 7), "BINARY_OP_ADD_INT");
	assert_string_equal(opnames__name(0x030d00f0, 151), "BINARY_OP_ADD_INT");
	assert_string_equal(opnames__name(0x030e0af0, 130), "BINARY_OP_ADD_INT");
	assert_string_equal(opnames__name(0x030f02f0, 186), "LOAD_ATTR_INSTANCE_VALUE");
	assert_string_equal(opnames__name(0x030f02f0, 0), "CACHE");
	assert_string_equal(opnames__leaf(0x030d00f0, 70, buf, sizeof(buf)),
			    "[op] ENTER_EXECUTOR");
}

static void test_unknown(void **state)
{
	char buf[48];

	(void)state;
	assert_null(opnames__name(0x030f02f0, 121));	/* a gap in 3.15's numbers */
	assert_string_equal(opnames__leaf(0x030f02f0, 121, buf, sizeof(buf)), "[op] <121>");
	assert_null(opnames__name(0x030a0df0, 5));	/* 3.10: no table */
	assert_null(opnames__name(0x04000000, 5));
	assert_string_equal(opnames__leaf(0x03100000, 255, buf, sizeof(buf)), "[op] <255>");
	/* a short buffer is cut, still a string */
	assert_string_equal(opnames__leaf(0x030d00f0, 151, buf, 8), "[op] BI");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known),
		cmocka_unit_test(test_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
