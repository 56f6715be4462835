// SPDX-License-Identifier: MIT
/*
 * test_procfs_state.c - a thread's state letter from its stat line
 * (user/target/procfs.c): parsed after the last ')' whatever the comm holds, from a
 * buffer with no NUL, malformed lines refused; and read live through a kept
 * fd: our own thread running, a thread blocked on a pipe sleeping, a thread
 * gone said -ESRCH.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "target/procfs.h"

/* The state of a NUL-terminated @line, parsed without its NUL; '?' if refused. */
static char state_of(const char *line)
{
	size_t len = strlen(line);
	char *copy = malloc(len ? len : 1), st = '?';

	assert_non_null(copy);
	memcpy(copy, line, len);	/* no NUL: ASan sees any read past the end */
	if (procfs__stat_state(copy, len, &st))
		st = '?';
	free(copy);
	return st;
}

static void test_plain(void **state)
{
	(void)state;
	assert_int_equal(state_of("1234 (python3) R 1 1234 1234 0 -1 4194304\n"), 'R');
	assert_int_equal(state_of("1 (systemd) S 0 1 1 0 -1"), 'S');
	assert_int_equal(state_of("77 (kworker/0:1) I 2 0 0"), 'I');
	assert_int_equal(state_of("4194304 (x) D 1 2 3\n"), 'D');
	assert_int_equal(state_of("9 (z) Z 1"), 'Z');
	assert_int_equal(state_of("9 (t) t 1"), 't');
}

/* The comm is whatever the program set (prctl, pthread_setname_np). */
static void test_hostile_comm(void **state)
{
	(void)state;
	assert_int_equal(state_of("1234 (a b c) S 1 2\n"), 'S');
	assert_int_equal(state_of("1234 (a) R (b) S 1 2\n"), 'S');
	assert_int_equal(state_of("1234 ()) R 1 2\n"), 'R');
	assert_int_equal(state_of("1234 (x) ) (y) D 1\n"), 'D');
	assert_int_equal(state_of("1234 (() S 1\n"), 'S');
	assert_int_equal(state_of("1234 ( ) R 1\n"), 'R');
	assert_int_equal(state_of("1234 () S 1\n"), 'S');
	assert_int_equal(state_of("1234 ())))))))))))) R 1\n"), 'R');
}

/* A read cut short still has the state when it reached it. */
static void test_cut(void **state)
{
	(void)state;
	assert_int_equal(state_of("1234 (python3) R"), 'R');
	assert_int_equal(state_of("1234 (python3) R "), 'R');
	assert_int_equal(state_of("1234 (python3) "), '?');
	assert_int_equal(state_of("1234 (python3)"), '?');
	assert_int_equal(state_of("1234 (pyth"), '?');
}

static void test_malformed(void **state)
{
	char st = 'x';

	(void)state;
	assert_int_equal(state_of(""), '?');
	assert_int_equal(state_of(")"), '?');
	assert_int_equal(state_of(") R 1"), '?');		/* no '(' before it */
	assert_int_equal(state_of("1234 python3 R 1"), '?');
	assert_int_equal(state_of("1234 (python3)R 1"), '?');
	assert_int_equal(state_of("1234 (python3)  R 1"), '?');
	assert_int_equal(state_of("1234 (python3) 5 1"), '?');
	assert_int_equal(state_of("1234 (python3) RS 1"), '?');
	assert_int_equal(state_of("1234 (python3) ? 1"), '?');
	assert_int_equal(procfs__stat_state("1 (x) R", 0, &st), -EINVAL);
	assert_int_equal(procfs__stat_state("1 (x) R", 6, &st), -EINVAL);
	assert_int_equal(st, 'x');		/* untouched when refused */
}

/*
 * A comm holding a newline (prctl allows it; stat prints it raw): the stat
 * line is not cut there, so the process cannot fake its state or parent
 * with a comm of "x) Z 1\n".
 */
static void test_comm_newline(void **state)
{
	struct timespec ms = { 0, 1000000 };
	char comm[32] = "";
	pid_t kids[8];
	size_t n = 0;
	int p[2];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;

		prctl(PR_SET_NAME, "x) Z 1\n", 0, 0, 0);
		close(p[1]);
		if (read(p[0], &c, 1) < 0)	/* until the parent closes its end */
			_exit(1);
		_exit(0);
	}
	close(p[0]);
	for (int i = 0; i < 5000 && strcmp(comm, "x) Z 1"); i++) {
		procfs__comm(pid, 0, comm, sizeof(comm));
		if (strcmp(comm, "x) Z 1"))
			nanosleep(&ms, NULL);
	}
	assert_string_equal(comm, "x) Z 1");
	assert_int_equal(procfs__alive(pid), 1);
	assert_int_equal(procfs__descendants(getpid(), kids, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(kids[0], pid);
	close(p[1]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static void *blocked(void *arg)
{
	char c;
	int *tidp = arg;

	__atomic_store_n(tidp, (int)gettid(), __ATOMIC_RELEASE);
	/* tidp[1]: the pipe's read end; returns when the write end closes */
	while (read(tidp[1], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void test_live(void **state)
{
	int fds[2], arg[2] = { 0, 0 }, fd, self, rc = -1;
	struct timespec ms = { 0, 1000000 };
	pthread_t th;
	char st = '?';

	(void)state;
	self = procfs__task_stat_open(getpid(), gettid());
	assert_true(self >= 0);
	/* Reading our own state: we run. Again from the same fd. */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(procfs__stat_fd_state(self, &st), 0);
		assert_int_equal(st, 'R');
	}
	close(self);

	assert_int_equal(pipe(fds), 0);
	arg[1] = fds[0];
	assert_int_equal(pthread_create(&th, NULL, blocked, arg), 0);
	while (!__atomic_load_n(&arg[0], __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
	fd = procfs__task_stat_open(getpid(), arg[0]);
	assert_true(fd >= 0);
	/* Blocked in read() within moments: then asleep on every read. */
	for (int i = 0; i < 5000 && st != 'S'; i++) {
		assert_int_equal(procfs__stat_fd_state(fd, &st), 0);
		if (st != 'S')
			nanosleep(&ms, NULL);
	}
	assert_int_equal(st, 'S');
	assert_int_equal(procfs__stat_fd_state(fd, &st), 0);
	assert_int_equal(st, 'S');

	close(fds[1]);
	assert_int_equal(pthread_join(th, NULL), 0);
	/* Gone: its fd says so (not another task's state). */
	for (int i = 0; i < 1000 && rc != -ESRCH; i++) {
		rc = procfs__stat_fd_state(fd, &st);
		if (rc != -ESRCH)
			nanosleep(&ms, NULL);
	}
	assert_int_equal(rc, -ESRCH);
	close(fd);
	close(fds[0]);
	assert_int_equal(procfs__task_stat_open(getpid(), arg[0]), -ESRCH);
	assert_int_equal(procfs__task_stat_open(getpid(), -1), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_hostile_comm),
		cmocka_unit_test(test_cut),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_live),
		cmocka_unit_test(test_comm_newline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
