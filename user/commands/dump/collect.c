/* SPDX-License-Identifier: MIT */
/*
 * collect.c - one process's threads read for dump: the list and each
 * thread's state in one look, then each stack, walked until it holds still,
 * named, located in its source, with its locals; a thread that ends
 * meanwhile is dropped (internal.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands/dump/internal.h"
#include "symbols/frame_locals.h"
#include "symbols/symbolizer.h"
#include "symbols/threading_names.h"
#include "target/core_file.h"
#include "target/opcodes/opcode_read.h"
#include "target/opcodes/opnames.h"
#include "target/procfs.h"
#include "target/remote_mem.h"
#include "target/rootfs.h"
#include "target/thread_names.h"

/* --opcodes: the instruction @t's innermost frame (@raw[0], its walk's) is
 * at, read now: it runs on, so the one it has reached by then. */
static void thread_opcode(struct pyproc *p, struct dump_thread *t, const struct py_rawframe *raw)
{
	uint8_t op;

	if (t->nframes && !opcode_read(p, &raw[0], &op))
		opnames__leaf(pyproc__offsets(p)->version_hex, op, t->op, sizeof(t->op));
}

/* A core (dump --core) is never gone. */
static bool target_alive(const struct pyproc *p)
{
	return pyproc__pid(p) == REMOTE_MEM_CORE || procfs__alive(pyproc__pid(p));
}

static bool thread_alive(const struct pyproc *p, pid_t tid)
{
	return pyproc__pid(p) == REMOTE_MEM_CORE || procfs__thread_alive(pyproc__pid(p), tid);
}

/*
 * Read @t's stack (@sr: the reader, @stopped: its thread stopped) at one
 * instant, as the remote backend does: two walks that agree, from a copy of
 * its stack chunks. 0 or -errno; *@nf frames in sr->frames.
 */
static int walk_thread(struct pyproc *p, struct dump_thread *t, struct stack_read *sr,
		       bool stopped, size_t *nf)
{
	struct py_walk_cache wc = { 0 };
	int rc = stack_read__thread(sr, p, t->t.tstate, &wc, stopped);

	py_walk_cache__free(&wc);
	*nf = sr->n;
	t->truncated = sr->truncated;
	t->torn = sr->torn;
	return rc;
}

static int dump_thread(struct pyproc *p, struct symbolizer *sym, struct dump_thread *t,
		       struct stack_read *sr, bool stopped, int opcodes)
{
	struct py_rawframe *raw = sr->frames;
	size_t nf = 0, bad = 0;
	uint64_t h, last = 0;
	int rc = 0, stable = 0;

	for (int attempt = 0; attempt < DUMP_ATTEMPTS; attempt++) {
		rc = walk_thread(p, t, sr, stopped, &nf);
		if (rc == -ESRCH)
			return rc;
		if (rc || (t->torn && attempt + 1 < DUMP_ATTEMPTS)) {
			if (!target_alive(p))
				return -ESRCH;
			continue;
		}
		free(t->syms);
		t->syms = calloc(nf ? nf : 1, sizeof(*t->syms));
		if (!t->syms)
			return -ENOMEM;
		bad = 0;
		symbolizer__resolve_stack(sym, raw, nf, t->syms, &t->nframes, &bad);
		if (!bad)
			break;
		/* The same frames and code pointers twice: the stack is not
		 * moving, its code objects are unreadable (not code, unmapped:
		 * a corrupt target). Shown as they are, "<unknown>", rather
		 * than reported as a stack that kept changing. */
		h = 1469598103934665603ull ^ nf;
		for (size_t k = 0; k < nf; k++)
			h = (h ^ raw[k].frame ^ (raw[k].code << 1)) * 1099511628211ull;
		if (attempt && h == last) {
			stable = 1;
			break;
		}
		last = h;
		if (!target_alive(p))
			return -ESRCH;
	}
	if (rc == -EFAULT && nf && thread_alive(p, t->t.host_tid)) {
		/* Every walk of a live thread faulted at the same kind of place
		 * after nf frames: a link into unmapped memory (a corrupt
		 * chain). Its frames up to there, marked, rather than no dump
		 * of any thread. */
		free(t->syms);
		t->syms = calloc(nf, sizeof(*t->syms));
		if (!t->syms)
			return -ENOMEM;
		symbolizer__resolve_stack(sym, raw, nf, t->syms, &t->nframes, &bad);
		t->nraw = nf;
		t->truncated = DUMP_CUT_FAULT;
		return 0;
	}
	if (rc)
		return rc;
	if (bad && !stable)
		return -EAGAIN;
	t->nraw = nf;
	/* not one frame readable: a thread state being torn down as it ends
	 * also reads so; the caller tells that from a corrupt one */
	if (bad && bad == nf)
		return -ESTALE;
	if (opcodes)
		thread_opcode(p, t, raw);
	return 0;
}

/* 1 while @tstate is still among the process's threads (or the list
 * cannot be read again: then it is shown as read). */
static int still_listed(struct pyproc *p, uint64_t tstate)
{
	struct py_thread *now = calloc(DUMP_MAX_THREADS, sizeof(*now));
	size_t n = 0;
	int found = 1;

	if (now && pyproc__threads(p, now, DUMP_MAX_THREADS, &n) == 0) {
		found = 0;
		for (size_t i = 0; i < n && !found; i++)
			found = now[i].tstate == tstate;
	}
	free(now);
	return found;
}

/* The one line of a thread's dump that failed for want of memory or of a
 * stack that held still. */
static void thread_error(pid_t pid, const struct dump_thread *t, int rc, char *err,
			 size_t errlen)
{
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else
		snprintf(err, errlen, "process %d: thread %d's stack kept changing while it was "
			 "read (%d tries); try again", (int)pid, (int)t->t.host_tid,
			 DUMP_ATTEMPTS);
}

/* Each shown frame's whole location and, unless --no-source, its line of
 * source, for the walk in @raw that gave t->syms. */
static int locate_frames(const struct dump_opts *o, const struct dump_core *core,
			 struct pyproc *p, struct symbolizer *sym, struct dump_thread *t,
			 const struct py_rawframe *raw, size_t *locals_left)
{
	int rootfd = core->cf ? core_file__root(core->cf) : -1;
	int64_t start_ns = core->mtime_ns;
	uid_t owner = core->cf ? core_file__uid(core->cf) : (uid_t)-1;

	t->locs = calloc(t->nframes ? t->nframes : 1, sizeof(*t->locs));
	if (!t->locs)
		return -ENOMEM;
	dump_source__locate(sym, raw, t->nraw, t->locs, t->nframes);
	if (!core->cf && procfs__start_ns(o->pid, &start_ns))
		start_ns = 0;	/* unknown: no file can be told newer */
	if (!core->cf && rootfs__owner(o->pid, &owner))
		owner = (uid_t)-1;	/* unknown: world-readable files only */
	for (size_t k = 0; k < t->nframes; k++) {
		struct dump_loc *l = &t->locs[k];

		if (l->line != t->syms[k].line)	/* the code moved on meanwhile */
			*l = (struct dump_loc){ t->syms[k].line, -1, -1, -1, NULL, false, l->raw };
		if (!o->no_source)
			dump_source__read(o->pid, rootfd, owner, start_ns, t->syms[k].file, l);
		if (!o->locals || !*locals_left)
			continue;
		l->locals = calloc(LOCALS_MAX_PER_FRAME, sizeof(*l->locals));
		if (!l->locals)
			return -ENOMEM;
		/* an unreadable frame shows no locals; the dump goes on */
		if (frame_locals__read(p, sym, &raw[l->raw], l->locals,
				       *locals_left < LOCALS_MAX_PER_FRAME ? *locals_left :
				       LOCALS_MAX_PER_FRAME, &l->nlocals))
			l->nlocals = 0;
		*locals_left -= l->nlocals;
	}
	return 0;
}

/*
 * Each thread's state, in one look, into @st; with --only-active only the
 * thread holding the GIL stays in @threads (none while no thread holds it).
 */
static int look_at_threads(const struct dump_opts *o, const struct dump_core *core,
			   struct pyproc *p, struct py_thread *threads, struct py_thread_state *st,
			   size_t *n)
{
	size_t k = 0;
	int rc = thread_state__look_core(p, core->cf, threads, *n, st);

	if (rc || !o->only_active)
		return rc;
	for (size_t i = 0; i < *n; i++) {
		if (!st[i].has_gil)
			continue;
		threads[k] = threads[i];
		st[k++] = st[i];
	}
	*n = k;
	return 0;
}

int dump_ctx__list_threads(const struct dump_opts *o, struct dump_ctx *c)
{
	struct py_thread *threads = c->threads;
	struct pyproc *p = c->p;
	size_t *n = &c->n;
	int rc = 0;

	/* Threads that start or end while we walk the list make a read fail:
	 * take the list again. */
	for (int attempt = 0; attempt < DUMP_ATTEMPTS; attempt++) {
		rc = pyproc__threads(p, threads, DUMP_MAX_THREADS, n);
		if (rc != -EFAULT && rc != -EPROTO && rc != -ELOOP)
			break;
	}
	if (rc == -E2BIG) {
		fprintf(stderr, "pyprof-bpf: more than %d threads: showing the first %d\n",
			DUMP_MAX_THREADS, DUMP_MAX_THREADS);
		rc = 0;
	}
	if (!rc)
		rc = look_at_threads(o, &c->core, p, threads, c->st, n);
	/* threading's own names: a record that does not read names no thread */
	if (!rc && threading_names__read(p, c->sym, threads, *n, c->names) == -ENOMEM)
		rc = -ENOMEM;
	return rc;
}

/* DUMP_KSTACK_LEN bytes a thread; a thread whose stack cannot be read has none. */
int dump_ctx__kernel_stacks(const struct dump_opts *o, struct dump_ctx *c)
{
	const struct py_thread_state *st = c->st;
	size_t n = c->n;
	char *ks = calloc(n ? n : 1, DUMP_KSTACK_LEN);

	if (!ks)
		return -ENOMEM;
	/* A running thread's is whatever interrupt met it there: none. */
	for (size_t i = 0; i < n; i++)
		if (st[i].kstate != 'R')
			procfs__task_kstack(o->pid, c->threads[i].host_tid,
					    ks + i * DUMP_KSTACK_LEN, DUMP_KSTACK_LEN);
	c->kst = ks;
	return 0;
}

int dump_ctx__stop_threads(const struct dump_opts *o, struct dump_ctx *c, char *err,
			   size_t errlen)
{
	struct thread_stop *ts = &c->stop;
	int rc = thread_stop__init(ts, o->pid);

	if (!rc)
		rc = thread_stop__all(ts);
	if (rc == -EPERM)
		snprintf(err, errlen, "--blocking: cannot stop the threads of process %d (ptrace: "
			 "%s): another tracer holds them (a debugger, strace, py-spy), or "
			 "CAP_SYS_PTRACE is missing", (int)o->pid, strerror(-rc));
	else if (rc == -ESRCH)
		snprintf(err, errlen, "process %d exited during the dump", (int)o->pid);
	else if (rc)
		snprintf(err, errlen, "--blocking: cannot stop the threads of process %d: %s",
			 (int)o->pid, strerror(-rc));
	return rc;
}

/*
 * dump --core: an outermost frame that is all zeros is no frame but memory
 * the core did not get (gcore writes zeros where it cannot read): the
 * stack is cut there, and said so.
 */
static void cut_at_core_hole(struct dump_thread *t, const struct py_rawframe *raw)
{
	if (!t->nraw || !t->nframes || raw[t->nraw - 1].code ||
	    strcmp(t->syms[t->nframes - 1].function, "<unknown>") != 0)
		return;
	t->nraw--;
	t->nframes--;
	t->truncated = DUMP_CUT_CORE;
}

/* Thread @i left the list: it ended while we read it (not part of "now"). */
static void drop_thread(struct dump_ctx *c, size_t i)
{
	size_t after = c->n - i - 1;

	memmove(&c->threads[i], &c->threads[i + 1], after * sizeof(*c->threads));
	memmove(&c->st[i], &c->st[i + 1], after * sizeof(*c->st));
	if (c->kst)
		memmove(c->kst + i * DUMP_KSTACK_LEN, c->kst + (i + 1) * DUMP_KSTACK_LEN,
			after * DUMP_KSTACK_LEN);
	free(c->th[i].syms);
	c->th[i].syms = NULL;
	c->n--;
}

int dump_ctx__read_stacks(const struct dump_opts *o, struct dump_ctx *c, char *err,
			  size_t errlen, bool *said)
{
	int rc;

	for (size_t i = 0; i < c->n; i++) {
		struct dump_thread *t = &c->th[i];

		t->t = c->threads[i];
		if (i && t->t.interp == c->th[i - 1].t.interp)
			t->interp_id = c->th[i - 1].interp_id;	/* listed by interpreter */
		else
			pyproc__interp_id(c->p, t->t.interp, &t->interp_id);
		if (!c->core.cf)
			procfs__comm(o->pid, t->t.host_tid, t->name, sizeof(t->name));
		else if (t->t.host_tid == c->pid)	/* a core names the process only */
			snprintf(t->name, sizeof(t->name), "%s", core_file__comm(c->core.cf));
		t->pyname = thread_names__python(c->names, t->t.host_tid);
		t->st = c->st[i];
		t->kstack = c->kst ? c->kst + i * DUMP_KSTACK_LEN : NULL;
		rc = dump_thread(c->p, c->sym, t, &c->sr, c->stop.threads || c->core.cf, o->opcodes);
		if (rc == -ESTALE)
			rc = still_listed(c->p, t->t.tstate) ? 0 : -ENOENT;
		if (rc && rc != -ESRCH && (rc == -ENOENT || !thread_alive(c->p, t->t.host_tid))) {
			drop_thread(c, i--);
			continue;
		}
		if (!rc && c->core.cf)
			cut_at_core_hole(t, c->sr.frames);
		if (!rc)
			rc = locate_frames(o, &c->core, c->p, c->sym, t, c->sr.frames, &c->locals_left);
		if (rc == -ENOMEM || rc == -EAGAIN) {
			thread_error(c->pid, t, rc, err, errlen);
			*said = true;
		}
		if (rc)
			return rc;
	}
	return 0;
}

int dump_ctx__open(const struct dump_opts *o, struct dump_ctx *c, char *err, size_t errlen)
{
	int rc = o->core ? dump_core__open(o, &c->core, &c->p, err, errlen) :
			   pyproc__open(o->pid, &c->p, err, errlen);

	if (rc)
		return rc;
	c->pid = c->core.cf ? core_file__pid(c->core.cf) : o->pid;
	c->locals_left = DUMP_MAX_LOCALS;
	c->threads = calloc(DUMP_MAX_THREADS, sizeof(*c->threads));
	c->th = calloc(DUMP_MAX_THREADS, sizeof(*c->th));
	c->st = calloc(DUMP_MAX_THREADS, sizeof(*c->st));
	rc = !c->threads || !c->th || !c->st ? -ENOMEM : stack_read__init(&c->sr, DUMP_MAX_FRAMES);
	if (!rc)
		rc = symbolizer__new(c->p, &c->sym);
	if (!rc)
		rc = thread_names__new(DUMP_MAX_THREADS, &c->names);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

void dump_ctx__free(struct dump_ctx *c)
{
	thread_stop__free(&c->stop);
	for (size_t i = 0; c->th && i < c->n; i++) {
		free(c->th[i].syms);
		for (size_t k = 0; c->th[i].locs && k < c->th[i].nframes; k++)
			dump_loc__free(&c->th[i].locs[k]);
		free(c->th[i].locs);
	}
	free(c->th);
	free(c->st);
	free(c->threads);
	stack_read__free(&c->sr);
	free(c->kst);
	thread_names__free(c->names);
	symbolizer__free(c->sym);
	pyproc__free(c->p);
	dump_core__close(&c->core);
}
