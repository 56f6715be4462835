/* SPDX-License-Identifier: MIT */
/*
 * thread_state.h - what each thread of a Python process is doing, for dump:
 * the kernel's view (running, asleep in which system call) beside the
 * interpreter's (holding or waiting for the GIL, collecting garbage, an
 * exception raised or being handled, the main thread).
 */
#ifndef PYPROF_THREAD_STATE_H
#define PYPROF_THREAD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pyproc;
struct py_thread;
struct py_gil_gc;

struct py_thread_state {
	char kstate;		/* /proc stat state letter; 0: unknown */
	long syscall;		/* the system call it is blocked in; -1: none or running */
	/* the flags of CPython 3.15's _remote_debugging, and ours */
	bool on_cpu;		/* kernel state R: on a CPU or runnable */
	bool has_gil;
	bool gil_requested;	/* waiting for the GIL */
	bool has_exception;	/* one raised, or one being handled (except:) */
	bool exc_chain_cut;	/* its exception stack went on past EXC_CHAIN_MAX items */
	bool main_thread;
	bool in_gc;		/* holds the GIL while the collector runs */
};

/*
 * One look at @n threads (@threads) into @out: the GIL's words and each
 * thread's state in the target are read together, and /proc before and after
 * them; a look during which the kernel states moved is taken again (a few
 * times). What cannot be read is left unknown (false, 0). Returns 0, or
 * -ESRCH when the process is gone.
 */
int thread_state__look(struct pyproc *p, const struct py_thread *threads, size_t n,
		       struct py_thread_state *out);
/*
 * The GIL-wait rule, the one home of it (dump's states and --mode gil's
 * off-CPU intervals both judge by it): a thread asleep in futex(2)
 * (@syscall_nr; -1: none) on a word (@arg0, its first argument) inside the
 * GIL's struct of @g, [gil, gil + gil_size) (its cond or mutex), waits to
 * take the GIL.
 */
bool thread_state__gil_wait(const struct py_gil_gc *g, long syscall_nr, uint64_t arg0);

/* The same of a core (dump --core, @cf): the kernel's view is what the
 * core's registers say (in a system call: 'S', else 'R'). */
struct core_file;
int thread_state__look_core(struct pyproc *p, const struct core_file *cf,
			    const struct py_thread *threads, size_t n, struct py_thread_state *out);

#endif
