/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include "target/procdir.h"
#include "target/procfs.h"
#include "target/thread_stop.h"
#include "util/clock.h"

/* Passes of the thread list: a thread started by one not stopped yet is
 * met by the next pass. */
#define LIST_PASSES 4
/* Waiting for a stop: yields first (a running thread stops within
 * microseconds), then short sleeps. */
#define WAIT_YIELDS 64
#define WAIT_SLEEP_NS 20000

int thread_stop__init(struct thread_stop *ts, pid_t pid)
{
	memset(ts, 0, sizeof(*ts));
	ts->pid = pid;
	ts->threads = calloc(THREAD_STOP_MAX, sizeof(*ts->threads));
	return ts->threads ? 0 : -ENOMEM;
}

static struct stopped_thread *find(struct thread_stop *ts, pid_t tid)
{
	for (size_t i = 0; i < ts->n; i++)
		if (ts->threads[i].tid == tid)
			return &ts->threads[i];
	return NULL;
}

const struct stopped_thread *thread_stop__find(const struct thread_stop *ts, pid_t tid)
{
	return find((struct thread_stop *)ts, tid);
}

/* The state letter of thread @tid from /proc, 0 when unreadable. */
static char kernel_state(pid_t pid, pid_t tid)
{
	int fd = procfs__task_stat_open(pid, tid);
	char st = 0;

	if (fd < 0)
		return 0;
	if (procfs__stat_fd_state(fd, &st))
		st = 0;
	close(fd);
	return st;
}

/* Seize thread @tid and ask it to stop. 0, 1 when it is gone, or -errno. */
static int seize(struct thread_stop *ts, pid_t tid)
{
	struct stopped_thread *t;
	char st;

	if (ts->n >= THREAD_STOP_MAX)
		return -E2BIG;
	st = kernel_state(ts->pid, tid);	/* its own state, before ours */
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL))
		return errno == ESRCH ? 1 : -errno;
	t = &ts->threads[ts->n++];
	*t = (struct stopped_thread){ .tid = tid, .kstate = st };
	/* ESRCH: it exited since; its exit is what waiting will see. */
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) && errno != ESRCH)
		return -errno;
	return 0;
}

/*
 * Seize every thread listed now that is not seized yet. Returns how many
 * were, or -errno.
 */
static int seize_listed(struct thread_stop *ts)
{
	struct procdir it;
	int added = 0, rc;
	pid_t tid;

	rc = procdir__open_tids(&it, ts->pid);
	if (rc)
		return rc;
	while (!rc && procdir__next(&it, &tid)) {
		if (find(ts, tid))
			continue;
		rc = seize(ts, tid);
		if (rc == 0)
			added++;
		rc = rc > 0 ? 0 : rc;
	}
	procdir__close(&it);
	return rc ? rc : added;
}

/*
 * Wait until thread @t stops (a stop of ours, or a signal's: stopped either
 * way), exits, or @deadline passes. Returns 1 when it exited.
 */
static int wait_stop(struct stopped_thread *t, uint64_t deadline)
{
	for (unsigned int spins = 0;; spins++) {
		int status = 0;
		pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 1;	/* not ours any more: gone */
		if (r == t->tid && (WIFEXITED(status) || WIFSIGNALED(status)))
			return 1;
		if (r == t->tid && WIFSTOPPED(status)) {
			/* A signal-delivery stop: the signal is the target's,
			 * passed on when it runs again. Ours (and a group stop)
			 * are PTRACE_EVENT_STOP. */
			if ((status >> 16) != PTRACE_EVENT_STOP)
				t->signal = WSTOPSIG(status);
			t->stopped = true;
			return 0;
		}
		if (mono_ns() >= deadline)
			return 0;
		if (spins < WAIT_YIELDS) {
			sched_yield();
		} else {
			struct timespec ts = { 0, WAIT_SLEEP_NS };

			nanosleep(&ts, NULL);
		}
	}
}

/* Wait for every thread seized; those gone leave the list. */
static void wait_all(struct thread_stop *ts, uint64_t deadline)
{
	size_t k = 0;

	for (size_t i = 0; i < ts->n; i++) {
		struct stopped_thread *t = &ts->threads[i];

		if (!t->stopped && wait_stop(t, deadline))
			continue;
		ts->threads[k++] = *t;
	}
	ts->n = k;
}

int thread_stop__all(struct thread_stop *ts)
{
	uint64_t deadline;
	int rc = 0;

	ts->since_ns = mono_ns();
	deadline = ts->since_ns + THREAD_STOP_WAIT_NS;
	/* Threads left seized by the last stop (not stopped in time) are
	 * still in the list: they may have stopped since. */
	for (int pass = 0; pass < LIST_PASSES; pass++) {
		rc = seize_listed(ts);
		if (rc < 0)
			break;
		wait_all(ts, deadline);
		if (rc == 0 && pass > 0)
			break;
		rc = 0;
	}
	if (rc < 0) {
		thread_stop__resume(ts);
		return rc;
	}
	return 0;
}

uint64_t thread_stop__resume(struct thread_stop *ts)
{
	uint64_t took = ts->since_ns ? mono_ns() - ts->since_ns : 0;
	size_t k = 0;

	for (size_t i = 0; i < ts->n; i++) {
		struct stopped_thread *t = &ts->threads[i];

		/* A thread not stopped yet cannot be detached (the kernel
		 * wants a stopped tracee): kept, it stops at its next return
		 * to user mode and is let go at the next stop or resume. */
		if (!t->stopped) {
			ts->threads[k++] = *t;
			continue;
		}
		ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->signal);
	}
	ts->n = k;
	ts->since_ns = 0;
	return took;
}

void thread_stop__free(struct thread_stop *ts)
{
	if (!ts->threads)
		return;
	/* Those still to stop: a last wait, then let go. Any left is let go
	 * by the kernel when pyprof-bpf exits. */
	if (ts->n) {
		wait_all(ts, mono_ns() + 10 * THREAD_STOP_WAIT_NS);
		thread_stop__resume(ts);
	}
	free(ts->threads);
	ts->threads = NULL;
}
