// SPDX-License-Identifier: MIT
/*
 * thread_state.c - one look at what each thread is doing.
 *
 * The GIL: 3.14+ keep an int per thread that says it holds it (and 3.15 one
 * that says it asks for it), as CPython's own _remote_debugging reads them;
 * before that the GIL's last holder while it is locked holds it. A thread
 * waits for the GIL when it asks for it (3.15), or when it sleeps in a futex
 * inside the GIL's struct (its cond or mutex), as --mode gil tells it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "target/core_file.h"
#include "target/exc_offsets.h"
#include "target/exceptions.h"
#include "target/procfs.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "target/thread_state.h"

#define LOOK_TRIES 5

/* A core's view of @t (its registers): in a system call (asleep, as far
 * as a core can tell; on futex, the word's address), else running. */
static void core_look(const struct core_file *cf, const struct py_thread *t,
		      struct py_thread_state *out, uint64_t *futex)
{
	size_t n;
	const struct core_thread *ct = core_file__threads(cf, &n);

	for (size_t k = 0; k < n; k++) {
		if (ct[k].tid != t->host_tid)
			continue;
		out->kstate = ct[k].syscall >= 0 ? 'S' : 'R';
		out->syscall = ct[k].syscall >= 0 ? (long)ct[k].syscall : -1;
		*futex = out->syscall == SYS_futex ? ct[k].arg0 : 0;
		return;
	}
}

/* The kernel's view of every thread: its state letter and system call
 * (@cf: as the core kept it). */
static void kernel_look(pid_t pid, const struct core_file *cf, const struct py_thread *th,
			size_t n, struct py_thread_state *out, uint64_t *futex)
{
	for (size_t i = 0; i < n; i++) {
		if (cf) {
			out[i].kstate = 0;
			out[i].syscall = -1;
			futex[i] = 0;
			core_look(cf, &th[i], &out[i], &futex[i]);
			continue;
		}
		int fd = procfs__task_stat_open(pid, th[i].host_tid);

		out[i].kstate = 0;
		out[i].syscall = -1;
		futex[i] = 0;
		if (fd < 0)
			continue;
		if (procfs__stat_fd_state(fd, &out[i].kstate))
			out[i].kstate = 0;
		close(fd);
		if (procfs__task_syscall(pid, th[i].host_tid, &out[i].syscall, &futex[i]))
			out[i].syscall = -1;
	}
}

/* The interpreter's view of thread @t: its GIL ints and exceptions. */
static void python_look(struct pyproc *p, const struct py_thread *t, struct py_thread_state *s)
{
	const struct py_offsets *o = pyproc__offsets(p);
	pid_t pid = pyproc__pid(p);
	int32_t holds = 0, requested = 0;
	uint64_t raised = 0, type = 0;

	if (o->tstate_holds_gil && remote_read(pid, t->tstate + o->tstate_holds_gil, &holds, 4) == 0)
		s->has_gil = holds != 0;
	if (o->tstate_gil_requested &&
	    remote_read(pid, t->tstate + o->tstate_gil_requested, &requested, 4) == 0)
		s->gil_requested = requested != 0;
	if (o->tstate_exception && remote_read_u64(pid, t->tstate + o->tstate_exception, &raised))
		raised = 0;
	/* Handled: the whole exception stack, as sys.exception() walks it (a
	 * generator run inside a handler pushes an empty item of its own). */
	if (exceptions__type_steady(p, t->tstate, &type))
		type = 0;
	s->has_exception = raised || type;
	s->exc_chain_cut = type == EXC_TYPE_CHAIN_CUT;
}

/* The GIL's holder, whether it is locked, and whether the collector runs. */
struct gil_words {
	uint64_t holder;
	int32_t locked, collecting;
};

static int gil_look(struct pyproc *p, const struct py_gil_gc *g, struct gil_words *w)
{
	struct remote_iov iov[] = {
		{ g->gil_holder, &w->holder, 8 },
		{ g->gil_locked, &w->locked, 4 },
		{ g->gc_collecting, &w->collecting, 4 },
	};

	memset(w, 0, sizeof(*w));
	return remote_readv(pyproc__pid(p), iov, g->gc_collecting_size == 4 ? 3 : 2);
}

/* 1 when a thread's kernel state or system call differs between two looks. */
static int kernel_moved(const struct py_thread_state *a, const struct py_thread_state *b,
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].kstate != b[i].kstate || a[i].syscall != b[i].syscall)
			return 1;
	return 0;
}

/* Its interpreter's main thread (each subinterpreter has one), as CPython's
 * _remote_debugging says; where the offsets do not tell, the process's. */
static bool is_main(struct pyproc *p, pid_t pid, const struct py_thread *t)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t main_ts;

	if (o->interp_threads_main && t->interp &&
	    !remote_read_u64(pyproc__pid(p), t->interp + o->interp_threads_main, &main_ts))
		return main_ts == t->tstate;
	return t->host_tid == pid;
}

static void judge(struct pyproc *p, pid_t pid, const struct py_thread *t,
		  const struct py_gil_gc *g, int gil_known, const struct gil_words *w,
		  uint64_t futex, struct py_thread_state *s)
{
	const struct py_offsets *o = pyproc__offsets(p);
	int same_interp = gil_known && (!g->interp || t->interp == g->interp);

	s->on_cpu = s->kstate == 'R';
	s->main_thread = is_main(p, pid, t);
	/* The GIL's words are read once for all threads, each thread's int
	 * apart: where both are known both must say so, or a hand-over
	 * between two reads shows two holders. */
	if (same_interp)
		s->has_gil = (s->has_gil || !o->tstate_holds_gil) && w->locked &&
			     w->holder == t->tstate;
	/* 3.15 says it: its flag alone, as CPython's own reader takes it */
	if (!o->tstate_gil_requested && same_interp && !s->has_gil &&
	    thread_state__gil_wait(g, s->syscall, futex))
		s->gil_requested = true;
	s->in_gc = same_interp && s->has_gil && w->collecting;
}

/* SYS_futex: the build's own architecture's number (202 on x86-64), as
 * the kernel reports the system call of a thread of that architecture. */
bool thread_state__gil_wait(const struct py_gil_gc *g, long syscall_nr, uint64_t arg0)
{
	return syscall_nr == SYS_futex && arg0 >= g->gil && arg0 - g->gil < g->gil_size;
}

int thread_state__look(struct pyproc *p, const struct py_thread *threads, size_t n,
		       struct py_thread_state *out)
{
	return thread_state__look_core(p, NULL, threads, n, out);
}

int thread_state__look_core(struct pyproc *p, const struct core_file *cf,
			    const struct py_thread *threads, size_t n, struct py_thread_state *out)
{
	uint64_t futex[256], futex2[256];
	struct py_thread_state again[256];
	struct gil_words w;
	struct py_gil_gc g;
	int gil_known;

	for (size_t base = 0; base < n; base += 256) {
		size_t k = n - base < 256 ? n - base : 256;

		for (int attempt = 0; attempt < LOOK_TRIES; attempt++) {
			memset(out + base, 0, k * sizeof(*out));
			kernel_look(pyproc__pid(p), cf, threads + base, k, out + base, futex);
			gil_known = pyproc__gil_gc(p, &g) == 0 && gil_look(p, &g, &w) == 0;
			for (size_t i = 0; i < k; i++)
				python_look(p, &threads[base + i], &out[base + i]);
			if (cf)
				break;	/* a core holds still: one look is the look */
			kernel_look(pyproc__pid(p), cf, threads + base, k, again, futex2);
			if (!procfs__alive(pyproc__pid(p)))
				return -ESRCH;
			if (memcmp(futex, futex2, k * sizeof(*futex)) == 0 &&
			    !kernel_moved(out + base, again, k))
				break;
		}
		for (size_t i = 0; i < k; i++)
			judge(p, cf ? core_file__pid(cf) : pyproc__pid(p), &threads[base + i], &g,
			      gil_known, &w, futex[i], &out[base + i]);
	}
	return 0;
}
