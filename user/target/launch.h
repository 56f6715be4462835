/* SPDX-License-Identifier: MIT */
/*
 * launch.h - a command that pyprof-bpf starts and samples
 * (`pyprof-bpf -o FILE -- CMD ARGS...`).
 *
 * launch__new() forks a child that waits, before exec, until
 * launch__start() releases it: whatever must be ready before the command
 * runs (the BPF sampler, attached before exec, tracking the child's pid) is
 * set up in between. Run under sudo as root, the child takes
 * the invoking user's identity first (SUDO_UID, SUDO_GID and SUDO_USER's
 * groups), so the command runs as it would without pyprof-bpf; the
 * environment is left as sudo made it. The child stays in our process group,
 * so the terminal's signals and job control reach it directly, and it
 * inherits standard input, output and error.
 *
 * Ownership: the struct launch owns the child until it is reaped. A child
 * never released exits without running anything when the launch is freed;
 * a running one is killed (SIGKILL) and reaped there, so no process is left
 * behind by an error path. Not thread-safe; one launch at a time (the
 * signal forwarding of launch__forward_signals() is process-wide).
 */
#ifndef PYPROF_LAUNCH_H
#define PYPROF_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

struct launch;

/*
 * Fork the child for @argv (argv[0] is looked up in PATH, as execvp() does)
 * and leave it waiting. The child inherits the signal dispositions of this
 * moment, so call it before changing any (a command started from a shell
 * expects SIGPIPE at its default). Returns 0, or -errno with one line in
 * @err: -EINVAL (SUDO_UID/SUDO_GID are not ids), -ENOMEM, or fork's error.
 */
int launch__new(char *const argv[], struct launch **out, char *err, size_t errlen);

/*
 * Release the child and wait until it has exec'd the command. Returns 0 once
 * it runs; otherwise the child has exited, is reaped, and the return value
 * is -errno with one line in @err: the exec's errno (-ENOENT: no such
 * command; -EACCES: not executable; ...), or the errno of taking the
 * invoking user's identity. launch__exit_code() then says 127 or 126, as a
 * shell would.
 */
int launch__start(struct launch *l, char *err, size_t errlen);

/*
 * Before launch__start(): the command gets /dev/null as its standard input,
 * output and error instead of ours (a live view owns the terminal).
 */
void launch__quiet(struct launch *l);

pid_t launch__pid(const struct launch *l);

/*
 * Has the command exited? 1 (it is reaped: launch__exit_code() is its
 * status), 0 (still running, or stopped), or -errno. Never blocks.
 */
int launch__poll(struct launch *l);
/* Block until the command exits and reap it. 0 or -errno. */
int launch__wait(struct launch *l);
/* SIGKILL the command if it still runs, and reap it. 0 or -errno. */
int launch__kill(struct launch *l);

/* The exit status a shell would give for the reaped command (-1 before). */
int launch__exit_code(const struct launch *l);
/* "exited with status 3", "was killed by signal 9 (Killed)" */
void launch__describe(const struct launch *l, char *buf, size_t len);

/*
 * From now on SIGINT, SIGTERM, SIGHUP and SIGQUIT do not end pyprof-bpf;
 * each one that another process sent it (kill(), sigqueue(), tgkill(): a
 * siginfo si_code <= 0) is passed on to the command, which decides. One
 * that the kernel generated (the terminal's Ctrl-C, Ctrl-\ or hangup:
 * SI_KERNEL) is not: it went to the whole foreground process group, the
 * command included. Nor is one sent from our own process group (the
 * command, or a process it started, signalling its group): the command got
 * it already. A signal sent to the process group from outside (kill -INT
 * -PGID) thus reaches the command twice: once directly, once passed on.
 * Returns 0 or -errno (sigaction).
 */
int launch__forward_signals(struct launch *l);

/* Kill and reap the command if it runs; accepts NULL. */
void launch__free(struct launch *l);

/* What a shell gives for a wait status: the exit code, or 128 + signal. */
int launch__status_exit_code(int wstatus);
/* What a shell gives when exec fails with @err: 127 not found, 126 other. */
int launch__exec_exit_code(int err);

#endif
