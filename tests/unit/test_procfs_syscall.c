// SPDX-License-Identifier: MIT
/*
 * test_procfs_syscall.c - /proc/PID/task/TID/syscall parsed
 * (procfs__syscall_parse): a blocked call's number and first argument, a
 * task blocked outside any call, a running one (-EAGAIN), text of any other
 * form refused, from buffers with no NUL; and read live: a thread of ours
 * blocked in read() on a pipe is in system call 0 on that pipe's fd.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "target/procfs.h"

/* parse @text without its NUL */
static int parse(const char *text, long *nr, uint64_t *arg0)
{
	size_t len = strlen(text);
	char *copy = malloc(len ? len : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, text, len);
	rc = procfs__syscall_parse(copy, len, nr, arg0);
	free(copy);
	return rc;
}

static void test_forms(void **state)
{
	long nr = 7;
	uint64_t a = 7;

	(void)state;
	assert_int_equal(parse("202 0x7f00c0de0010 0x189 0x0 0x0 0x0 0xffffffff "
			       "0x7ffd5f0 0x7f11\n", &nr, &a), 0);
	assert_int_equal(nr, 202);
	assert_int_equal(a, 0x7f00c0de0010ull);
	assert_int_equal(parse("-1 0x7ffd5f0 0x7f11\n", &nr, &a), 0);
	assert_int_equal(nr, -1);
	assert_int_equal(parse("running\n", &nr, &a), -EAGAIN);
	assert_int_equal(parse("0 0xffffffffffffffff", &nr, &a), 0);
	assert_int_equal(a, UINT64_MAX);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"", "x", "202", "202 ", "202 7f", "202 0x", "202 0xg", "99999 0x1",
		"202 0x11111111111111111", "12345678901234567890 0x1", " 202 0x1",
	};
	long nr;
	uint64_t a;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse(bad[i], &nr, &a), -EINVAL);
}

static int pipefd[2];
static volatile pid_t reader_tid;

static void *reader(void *arg)
{
	char c;

	(void)arg;
	reader_tid = (pid_t)syscall(SYS_gettid);
	if (read(pipefd[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static void test_live(void **state)
{
	pthread_t t;
	long nr = -2;
	uint64_t a = 0;

	(void)state;
	assert_int_equal(pipe(pipefd), 0);
	assert_int_equal(pthread_create(&t, NULL, reader, NULL), 0);
	/* until it blocks in read(): no time bound, the state says it */
	for (;;) {
		if (reader_tid && procfs__task_syscall(getpid(), reader_tid, &nr, &a) == 0 &&
		    nr == SYS_read)
			break;
		usleep(1000);
	}
	assert_int_equal(a, (uint64_t)pipefd[0]);
	assert_int_equal(write(pipefd[1], "x", 1), 1);
	pthread_join(t, NULL);
	assert_int_equal(procfs__task_syscall(getpid(), reader_tid, &nr, &a), -ESRCH);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* procfs__kstack_parse: names innermost first, offsets dropped, whole names
 * only when the room ends, an empty file empty. */
static void test_kstack_parse(void **state)
{
	static const char file[] = "[<0>] hrtimer_nanosleep+0xb5/0x130\n"
				   "[<0>] common_nsleep+0x30/0x60\n"
				   "[<0>] do_syscall_64+0x71/0x290\n";
	char out[64], small[30];

	(void)state;
	procfs__kstack_parse(file, sizeof(file) - 1, out, sizeof(out));
	assert_string_equal(out, "hrtimer_nanosleep\ncommon_nsleep\ndo_syscall_64");
	procfs__kstack_parse(file, sizeof(file) - 1, small, sizeof(small));
	assert_string_equal(small, "hrtimer_nanosleep");
	procfs__kstack_parse("", 0, out, sizeof(out));
	assert_string_equal(out, "");
	procfs__kstack_parse("[<0>] \n\n[<0>] x", 15, out, sizeof(out));
	assert_string_equal(out, "x");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_live),
		cmocka_unit_test(test_kstack_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
