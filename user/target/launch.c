/* SPDX-License-Identifier: MIT */
/*
 * launch.c - start a command for pyprof-bpf to sample: a child held before
 * exec, the invoking user's identity under sudo, exec errors reported back,
 * the exit status as a shell gives it, signals passed on.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "target/launch.h"

/* What the child tells us through the report pipe when it cannot exec. */
enum child_stage { CHILD_CREDS = 1, CHILD_EXEC = 2, CHILD_STDIO = 3 };

struct child_report {
	int stage;	/* enum child_stage */
	int err;	/* its errno */
};

/* The identity the command runs with (the invoking user's, under sudo). */
struct creds {
	int drop;	/* 0: keep ours */
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	int ngroups;
};

struct launch {
	pid_t pid;
	const char *cmd;	/* argv[0], for messages */
	int go_fd;		/* write end of the release pipe; -1 once released */
	int report_fd;		/* read end of the child's CLOEXEC report pipe */
	struct creds creds;
	int quiet;		/* launch__quiet(): stdio from/to /dev/null */
	int reaped;
	int wstatus;
};

/*
 * The command's pid for the signal handler, 0 when there is none to signal:
 * it is cleared before the child is reaped, so that a signal arriving later
 * can never reach another process that reuses the pid.
 */
static volatile sig_atomic_t forward_pid;

int launch__status_exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

int launch__exec_exit_code(int err)
{
	/* As shells do: not found 127, found but cannot be run 126. */
	return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

/* A decimal uid or gid; (uid_t)-1 is not one (it means "unchanged"). */
static int parse_id(const char *s, unsigned int *out)
{
	unsigned long long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned int)(*s - '0');
		if (v >= 0xffffffffull)
			return -EINVAL;
	}
	*out = (unsigned int)v;
	return 0;
}

/*
 * Under sudo, as root: the invoking user's uid, gid and groups. The group
 * list is what initgroups(SUDO_USER, gid) would set, read here with
 * getgrouplist() (initgroups' own lookup) so that the child only makes
 * system calls between fork and exec, and a failed lookup is reported here.
 */
static int creds__from_sudo(struct creds *c, char *err, size_t errlen)
{
	const char *suid = getenv("SUDO_UID"), *sgid = getenv("SUDO_GID");
	const char *user = getenv("SUDO_USER");
	unsigned int uid, gid;
	int n = 32;

	if (!suid || geteuid() != 0)
		return 0;
	if (parse_id(suid, &uid)) {
		snprintf(err, errlen, "SUDO_UID is not a user id: '%s'", suid);
		return -EINVAL;
	}
	if (sgid && parse_id(sgid, &gid)) {
		snprintf(err, errlen, "SUDO_GID is not a group id: '%s'", sgid);
		return -EINVAL;
	}
	if (!sgid) {
		struct passwd *pw = getpwuid((uid_t)uid);

		if (!pw) {
			snprintf(err, errlen, "SUDO_GID is not set and SUDO_UID %u has no "
				 "passwd entry", uid);
			return -EINVAL;
		}
		gid = (unsigned int)pw->pw_gid;
	}
	for (;;) {
		int want = n;
		gid_t *g = realloc(c->groups, (size_t)n * sizeof(*g));

		if (!g) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		c->groups = g;
		if (!user || !*user) {	/* no name to look up: the gid alone */
			g[0] = (gid_t)gid;
			n = 1;
			break;
		}
		if (getgrouplist(user, (gid_t)gid, g, &n) >= 0)
			break;
		if (n <= want)	/* not a "too small" answer: keep the gid alone */
			n = want * 2;
		if (n > 65536) {
			snprintf(err, errlen, "SUDO_USER %s: too many groups", user);
			return -E2BIG;
		}
	}
	c->drop = 1;
	c->uid = (uid_t)uid;
	c->gid = (gid_t)gid;
	c->ngroups = n;
	return 0;
}

static void child_report(int fd, int stage, int e)
{
	struct child_report r = { .stage = stage, .err = e };
	ssize_t n;

	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

/* The child, between fork and exec: system calls only. */
static void __attribute__((noreturn))
child_run(char *const argv[], const struct creds *c, int go_rd, int report_wr)
{
	ssize_t n;
	char go;

	do
		n = read(go_rd, &go, 1);
	while (n < 0 && errno == EINTR);
	/* End of file: pyprof-bpf gave up (or died) before the start. */
	if (n != 1)
		_exit(1);
	/* 'q': launch__quiet() */
	if (go == 'q') {
		int fd = open("/dev/null", O_RDWR);

		if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
			child_report(report_wr, CHILD_STDIO, errno);
			_exit(126);
		}
		if (fd > 2)
			close(fd);
	}
	if (c->drop && (setgroups((size_t)c->ngroups, c->groups) ||
			setresgid(c->gid, c->gid, c->gid) || setresuid(c->uid, c->uid, c->uid))) {
		child_report(report_wr, CHILD_CREDS, errno);
		_exit(126);
	}
	execvp(argv[0], argv);
	child_report(report_wr, CHILD_EXEC, errno);
	_exit(launch__exec_exit_code(errno));
}

int launch__new(char *const argv[], struct launch **out, char *err, size_t errlen)
{
	int go[2] = { -1, -1 }, report[2] = { -1, -1 };
	struct launch *l;
	int rc;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->cmd = argv[0];
	l->go_fd = l->report_fd = -1;
	rc = creds__from_sudo(&l->creds, err, errlen);
	if (rc)
		goto err_free;
	/* Both CLOEXEC: the command inherits neither, and the report pipe's
	 * end of file is how we learn that the exec succeeded. */
	if (pipe2(go, O_CLOEXEC) || pipe2(report, O_CLOEXEC)) {
		rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto err_close;
	}
	l->pid = fork();
	if (l->pid < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot start %s: fork: %s", argv[0], strerror(errno));
		goto err_close;
	}
	if (l->pid == 0) {
		/* Our copies of the parent's ends, or neither pipe would ever
		 * see its end of file. */
		close(go[1]);
		close(report[0]);
		child_run(argv, &l->creds, go[0], report[1]);
	}
	close(go[0]);
	close(report[1]);
	l->go_fd = go[1];
	l->report_fd = report[0];
	*out = l;
	return 0;

err_close:
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (report[i] >= 0)
			close(report[i]);
	}
err_free:
	free(l->creds.groups);
	free(l);
	return rc;
}

/* Reap the child, which has exited (or is about to). */
static int launch__reap(struct launch *l)
{
	pid_t r;

	forward_pid = 0;	/* before the pid can be reused */
	do
		r = waitpid(l->pid, &l->wstatus, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	l->reaped = 1;
	return 0;
}

int launch__start(struct launch *l, char *err, size_t errlen)
{
	struct child_report r;
	ssize_t n;
	int rc;

	do
		n = write(l->go_fd, l->quiet ? "q" : "g", 1);
	while (n < 0 && errno == EINTR);
	close(l->go_fd);
	l->go_fd = -1;
	/* A failed write (EPIPE) means the child is gone: the read says so. */
	do
		n = read(l->report_fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(l->report_fd);
	l->report_fd = -1;
	if (n == 0)
		return 0;	/* closed by the exec */
	rc = launch__reap(l);
	if (rc) {
		snprintf(err, errlen, "cannot run %s: waitpid: %s", l->cmd, strerror(-rc));
		return rc;
	}
	if (n != (ssize_t)sizeof(r) || r.err <= 0) {
		snprintf(err, errlen, "cannot run %s: the child process ended before exec", l->cmd);
		return -EIO;
	}
	if (r.stage == CHILD_STDIO)
		snprintf(err, errlen, "cannot run %s: /dev/null: %s", l->cmd, strerror(r.err));
	else if (r.stage == CHILD_CREDS)
		snprintf(err, errlen, "cannot run %s as the invoking user (uid %u, gid %u, from "
			 "SUDO_UID and SUDO_GID): %s", l->cmd, (unsigned int)l->creds.uid,
			 (unsigned int)l->creds.gid, strerror(r.err));
	else
		snprintf(err, errlen, "cannot run %s: %s", l->cmd, strerror(r.err));
	return -r.err;
}

void launch__quiet(struct launch *l)
{
	l->quiet = 1;
}

pid_t launch__pid(const struct launch *l)
{
	return l->pid;
}

int launch__poll(struct launch *l)
{
	siginfo_t si;
	int rc;

	if (l->reaped)
		return 1;
	/* WNOWAIT: look without reaping, so that forward_pid is cleared first. */
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)l->pid, &si, WEXITED | WNOHANG | WNOWAIT))
		return errno == EINTR ? 0 : -errno;
	if (si.si_pid == 0)
		return 0;
	rc = launch__reap(l);
	return rc ? rc : 1;
}

int launch__wait(struct launch *l)
{
	siginfo_t si;
	int r;

	if (l->reaped)
		return 0;
	do
		r = waitid(P_PID, (id_t)l->pid, &si, WEXITED | WNOWAIT);
	while (r && errno == EINTR);
	if (r)
		return -errno;
	return launch__reap(l);
}

int launch__kill(struct launch *l)
{
	if (l->reaped)
		return 0;
	if (l->go_fd >= 0) {	/* never released: it exits by itself */
		close(l->go_fd);
		l->go_fd = -1;
	} else if (kill(l->pid, SIGKILL)) {
		return -errno;
	}
	return launch__reap(l);
}

int launch__exit_code(const struct launch *l)
{
	return l->reaped ? launch__status_exit_code(l->wstatus) : -1;
}

void launch__describe(const struct launch *l, char *buf, size_t len)
{
	if (!l->reaped)
		snprintf(buf, len, "is still running");
	else if (WIFEXITED(l->wstatus))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(l->wstatus));
	else if (WIFSIGNALED(l->wstatus))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(l->wstatus),
			 strsignal(WTERMSIG(l->wstatus)));
	else
		snprintf(buf, len, "ended with wait status %#x", (unsigned int)l->wstatus);
}

static void on_forwarded(int sig, siginfo_t *info, void *uctx)
{
	pid_t pid = forward_pid;
	int saved = errno;

	(void)uctx;
	/* si_code <= 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL); the
	 * kernel's (SI_KERNEL: the terminal) reached the whole foreground
	 * process group, the command too. The command's own is not echoed. */
	if (pid > 0 && info->si_code <= 0 && info->si_pid != pid)
		kill(pid, sig);
	errno = saved;
}

int launch__forward_signals(struct launch *l)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa = { .sa_sigaction = on_forwarded };

	/* SA_RESTART: a blocking waitpid() need not see EINTR, since the
	 * handler itself does the forwarding. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	forward_pid = l->reaped ? 0 : l->pid;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return -errno;
	return 0;
}

void launch__free(struct launch *l)
{
	if (!l)
		return;
	launch__kill(l);
	if (l->report_fd >= 0)
		close(l->report_fd);
	free(l->creds.groups);
	free(l);
}
