// SPDX-License-Identifier: MIT
/*
 * test_gil_wait.c - the GIL-wait rule (thread_state__gil_wait(), the one
 * home of it for dump's states and --mode gil's intervals): asleep in
 * futex(2) on a word inside the GIL's struct, its first byte to its last,
 * and nothing else: another system call, a word just outside, no call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <cmocka.h>

#include "target/pyproc.h"
#include "target/thread_state.h"

static void test_rule(void **state)
{
	const struct py_gil_gc g = { .gil = 0x7f0000001000, .gil_size = 240 };

	(void)state;
	assert_true(thread_state__gil_wait(&g, SYS_futex, g.gil));
	assert_true(thread_state__gil_wait(&g, SYS_futex, g.gil + 8));
	assert_true(thread_state__gil_wait(&g, SYS_futex, g.gil + g.gil_size - 1));
	assert_false(thread_state__gil_wait(&g, SYS_futex, g.gil + g.gil_size));
	assert_false(thread_state__gil_wait(&g, SYS_futex, g.gil - 1));
	assert_false(thread_state__gil_wait(&g, SYS_futex, 0));
	assert_false(thread_state__gil_wait(&g, SYS_futex, UINT64_MAX));
	assert_false(thread_state__gil_wait(&g, SYS_read, g.gil + 8));
	assert_false(thread_state__gil_wait(&g, SYS_nanosleep, g.gil + 8));
	assert_false(thread_state__gil_wait(&g, -1, g.gil + 8));
}

/* A GIL not found yet (all zeros) holds no word. */
static void test_unknown_gil(void **state)
{
	const struct py_gil_gc g = { 0 };

	(void)state;
	assert_false(thread_state__gil_wait(&g, SYS_futex, 0));
	assert_false(thread_state__gil_wait(&g, SYS_futex, 16));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule),
		cmocka_unit_test(test_unknown_gil),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
