// SPDX-License-Identifier: MIT
/*
 * test_procdir.c - the /proc iterator (user/target/procdir.c): an entry's
 * name is an id only when it is digits alone in [1, INT_MAX]; /proc's
 * processes include ours, /proc/self/task our threads (a thread started for
 * the test among them), and a process that is gone says -ESRCH.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "target/procdir.h"

static void test_parse_id(void **state)
{
	static const char *const bad[] = {
		"", ".", "..", "self", "thread-self", "sys", "0", "00", "012", "-1", "+1",
		" 1", "1 ", "12a", "1.5", "2147483648", "99999999999999999999",
	};
	pid_t id = 7;

	(void)state;
	assert_int_equal(procdir__parse_id("1", &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(procdir__parse_id("4194304", &id), 0);
	assert_int_equal(id, 4194304);
	assert_int_equal(procdir__parse_id("2147483647", &id), 0);
	assert_int_equal(id, INT_MAX);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		id = 7;
		assert_int_equal(procdir__parse_id(bad[i], &id), -EINVAL);
		assert_int_equal(id, 7);	/* untouched */
	}
}

static void test_pids(void **state)
{
	struct procdir it;
	int ours = 0, count = 0;
	pid_t id;

	(void)state;
	assert_int_equal(procdir__open_pids(&it), 0);
	while (procdir__next(&it, &id)) {
		assert_true(id > 0);
		ours += id == getpid();
		count++;
	}
	procdir__close(&it);
	procdir__close(&it);	/* twice: a no-op */
	assert_int_equal(ours, 1);
	assert_true(count >= 1);
}

static int fds[2];

static void *blocked(void *arg)
{
	char c;

	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return read(fds[0], &c, 1) == 1 ? NULL : arg;
}

static void test_tids(void **state)
{
	pid_t other = 0, id;
	struct procdir it;
	int seen_main = 0, seen_other = 0;
	pthread_t t;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pthread_create(&t, NULL, blocked, &other), 0);
	while (!__atomic_load_n(&other, __ATOMIC_SEQ_CST))
		usleep(1000);
	assert_int_equal(procdir__open_tids(&it, getpid()), 0);
	while (procdir__next(&it, &id)) {
		seen_main += id == getpid();
		seen_other += id == other;
	}
	procdir__close(&it);
	assert_int_equal(write(fds[1], "x", 1), 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(seen_main, 1);
	assert_int_equal(seen_other, 1);
}

static void test_gone(void **state)
{
	struct procdir it = { 0 };
	pid_t child = fork(), id;

	(void)state;
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(procdir__open_tids(&it, child), -ESRCH);
	assert_false(procdir__next(&it, &id));	/* not opened: nothing */
	procdir__close(&it);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_id),
		cmocka_unit_test(test_pids),
		cmocka_unit_test(test_tids),
		cmocka_unit_test(test_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
