/* SPDX-License-Identifier: MIT */
/*
 * thread_stop.h - --blocking: every thread of a process stopped for a
 * moment (ptrace PTRACE_SEIZE + PTRACE_INTERRUPT, then PTRACE_DETACH), so
 * that the stacks read meanwhile are one instant's, as py-spy does by
 * default and CPython 3.15's profiler with --blocking.
 *
 * What the target sees: each thread stops at its next return to user mode
 * (an interruptible system call is restarted afterwards, as after a
 * signal), is left alone again at thread_stop__resume(), and a signal that
 * arrived meanwhile is delivered then. It is never killed by us: should
 * pyprof-bpf die while the threads are stopped, the kernel detaches them and
 * they run on. A thread that does not stop within THREAD_STOP_WAIT_NS (in
 * an uninterruptible wait) is left running and said so (stopped = false).
 *
 * The tracer is the calling thread: stop and resume must come from the same
 * one. Another tracer (a debugger, strace, py-spy) makes PTRACE_SEIZE fail:
 * -EPERM, as when the permission is missing.
 */
#ifndef PYPROF_THREAD_STOP_H
#define PYPROF_THREAD_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define THREAD_STOP_MAX 4096
#define THREAD_STOP_WAIT_NS 50000000ull	/* 50 ms */

struct stopped_thread {
	pid_t tid;
	char kstate;		/* its /proc state letter just before it was stopped */
	bool stopped;		/* false: seized but not stopped in time */
	int signal;		/* a signal that arrived while stopped: delivered at resume */
};

struct thread_stop {
	pid_t pid;
	struct stopped_thread *threads;	/* THREAD_STOP_MAX */
	size_t n;
	uint64_t since_ns;		/* when the first thread was interrupted */
};

int thread_stop__init(struct thread_stop *ts, pid_t pid);
/* Every thread still stopped runs again (those not stopped yet: after a
 * last wait), then the memory goes. Harmless on a zeroed or freed one. */
void thread_stop__free(struct thread_stop *ts);

/*
 * Stop every thread of the process, those started while they are being
 * stopped too (the list is read again until it has no new thread, a few
 * times). Returns 0; -EPERM (no permission, or another tracer), -ESRCH (the
 * process is gone) or -errno, every thread seized so far resumed.
 */
int thread_stop__all(struct thread_stop *ts);

/* Let every thread stopped run again. Returns how long they were stopped. */
uint64_t thread_stop__resume(struct thread_stop *ts);

/* Thread @tid's entry in the last stop; NULL: not among them. */
const struct stopped_thread *thread_stop__find(const struct thread_stop *ts, pid_t tid);

#endif
