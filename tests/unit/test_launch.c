// SPDX-License-Identifier: MIT
/*
 * test_launch.c - starting a command: wait statuses mapped as a shell maps
 * them; exec failures (no such command 127, not executable 126) reported
 * with the exec's errno; exit statuses and deaths by signal; a child never
 * released runs nothing and is reaped; a signal sent to us with kill() is
 * passed on, once; malformed SUDO_UID/SUDO_GID are refused (as root).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "target/launch.h"

static int run(char **argv, char *err, size_t errlen, struct launch **out)
{
	int rc = launch__new(argv, out, err, errlen);

	assert_int_equal(rc, 0);
	return launch__start(*out, err, errlen);
}

/* No child of ours is left, reaped or not. */
static void assert_no_children(void)
{
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void test_status_mapping(void **state)
{
	(void)state;
	assert_int_equal(launch__status_exit_code(0), 0);
	assert_int_equal(launch__status_exit_code(3 << 8), 3);
	assert_int_equal(launch__status_exit_code(255 << 8), 255);
	assert_int_equal(launch__status_exit_code(SIGKILL), 128 + SIGKILL);
	assert_int_equal(launch__status_exit_code(SIGSEGV | 0x80), 128 + SIGSEGV);	/* core */
	assert_int_equal(launch__exec_exit_code(ENOENT), 127);
	assert_int_equal(launch__exec_exit_code(ENOTDIR), 127);
	assert_int_equal(launch__exec_exit_code(EACCES), 126);
	assert_int_equal(launch__exec_exit_code(ENOEXEC), 126);
}

static void test_exit_statuses(void **state)
{
	char *exit3[] = { "sh", "-c", "exit 3", NULL };
	char *killed[] = { "sh", "-c", "kill -9 $$", NULL };
	char err[512] = "", how[64];
	struct launch *l;

	(void)state;
	assert_int_equal(run(exit3, err, sizeof(err), &l), 0);
	assert_int_equal(launch__exit_code(l), -1);
	assert_int_equal(launch__wait(l), 0);
	assert_int_equal(launch__poll(l), 1);
	assert_int_equal(launch__exit_code(l), 3);
	launch__describe(l, how, sizeof(how));
	assert_string_equal(how, "exited with status 3");
	launch__free(l);

	assert_int_equal(run(killed, err, sizeof(err), &l), 0);
	while (launch__poll(l) == 0)
		usleep(1000);
	assert_int_equal(launch__exit_code(l), 128 + SIGKILL);
	launch__describe(l, how, sizeof(how));
	assert_non_null(strstr(how, "killed by signal 9"));
	launch__free(l);
	assert_no_children();
}

static void test_exec_failures(void **state)
{
	char path[] = "/tmp/test_launch_XXXXXX";
	char *missing[] = { "pyprof-bpf-no-such-command", NULL };
	char *noexec[] = { path, NULL };
	char err[512] = "";
	struct launch *l;
	int fd;

	(void)state;
	assert_int_equal(run(missing, err, sizeof(err), &l), -ENOENT);
	assert_int_equal(launch__exit_code(l), 127);
	assert_non_null(strstr(err, "pyprof-bpf-no-such-command"));
	assert_non_null(strstr(err, strerror(ENOENT)));
	launch__free(l);

	fd = mkstemp(path);	/* mode 0600: not executable */
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(run(noexec, err, sizeof(err), &l), -EACCES);
	assert_int_equal(launch__exit_code(l), 126);
	assert_non_null(strstr(err, strerror(EACCES)));
	launch__free(l);
	unlink(path);
	assert_no_children();
}

/* Freed before the start: the child runs nothing (the file stays absent). */
static void test_never_started(void **state)
{
	char *touch[] = { "touch", "/tmp/test_launch_never_started", NULL };
	char err[512] = "";
	struct launch *l;

	(void)state;
	unlink(touch[1]);
	assert_int_equal(launch__new(touch, &l, err, sizeof(err)), 0);
	assert_true(launch__pid(l) > 0);
	assert_int_equal(launch__poll(l), 0);
	launch__free(l);
	assert_int_equal(access(touch[1], F_OK), -1);
	assert_no_children();
}

/* Running when freed: killed and reaped, not left behind. */
static void test_free_running(void **state)
{
	char *sleeper[] = { "sleep", "30", NULL };
	char err[512] = "";
	struct launch *l;

	(void)state;
	assert_int_equal(run(sleeper, err, sizeof(err), &l), 0);
	assert_int_equal(launch__poll(l), 0);
	launch__free(l);
	assert_no_children();
}

/* kill() to us reaches the command once: it counts what it got. */
static void test_forward(void **state)
{
	char *counter[] = { "sh", "-c",
			    "n=0; trap 'n=$((n+1))' TERM; echo ready; "
			    "while [ $n -eq 0 ]; do sleep 0.01; done; sleep 0.2; exit $((40+n))",
			    NULL };
	char err[512] = "", buf[8];
	struct launch *l;
	int out[2];

	(void)state;
	assert_int_equal(pipe(out), 0);
	/* The command's stdout is the pipe for the time of the launch. */
	{
		int saved = dup(STDOUT_FILENO);

		dup2(out[1], STDOUT_FILENO);
		assert_int_equal(run(counter, err, sizeof(err), &l), 0);
		dup2(saved, STDOUT_FILENO);
		close(saved);
		close(out[1]);
	}
	assert_true(read(out[0], buf, sizeof(buf)) > 0);	/* its trap is set */
	close(out[0]);
	assert_int_equal(launch__forward_signals(l), 0);
	assert_int_equal(kill(getpid(), SIGTERM), 0);	/* SI_USER: passed on */
	assert_int_equal(launch__wait(l), 0);
	assert_int_equal(launch__exit_code(l), 41);
	/* Reaped: a late signal reaches no one (and does not end us). */
	assert_int_equal(kill(getpid(), SIGTERM), 0);
	launch__free(l);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	assert_no_children();
}

static void test_bad_sudo_ids(void **state)
{
	char *t[] = { "true", NULL };
	char err[512] = "";
	struct launch *l = NULL;

	(void)state;
	if (geteuid() != 0) {
		skip();	/* only root takes the invoking user's identity */
		return;
	}
	setenv("SUDO_UID", "12x", 1);
	setenv("SUDO_GID", "0", 1);
	assert_int_equal(launch__new(t, &l, err, sizeof(err)), -EINVAL);
	assert_null(l);
	assert_non_null(strstr(err, "SUDO_UID"));
	setenv("SUDO_UID", "0", 1);
	setenv("SUDO_GID", "4294967295", 1);
	assert_int_equal(launch__new(t, &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "SUDO_GID"));
	setenv("SUDO_GID", "0", 1);
	setenv("SUDO_USER", "root", 1);
	assert_int_equal(launch__new(t, &l, err, sizeof(err)), 0);
	assert_int_equal(launch__start(l, err, sizeof(err)), 0);
	assert_int_equal(launch__wait(l), 0);
	assert_int_equal(launch__exit_code(l), 0);
	launch__free(l);
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	unsetenv("SUDO_USER");
	assert_no_children();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_mapping),
		cmocka_unit_test(test_exit_statuses),
		cmocka_unit_test(test_exec_failures),
		cmocka_unit_test(test_never_started),
		cmocka_unit_test(test_free_running),
		cmocka_unit_test(test_forward),
		cmocka_unit_test(test_bad_sudo_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
