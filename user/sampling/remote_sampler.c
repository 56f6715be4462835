/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "target/procfs.h"
#include "target/exceptions.h"
#include "target/opcodes/opfamily.h"
#include "target/opcodes/opcode_read.h"
#include "target/remote_mem.h"
#include "target/stack_read.h"
#include "target/thread_stop.h"
#include "sampling/remote_sampler.h"
#include "sampling/frame_cache.h"
#include "util/clock.h"

#define MAX_THREADS 4096

/*
 * Per thread: what its last walk saw, to read the next one ahead; and, in
 * the modes that sample running threads only, its /proc stat file kept open
 * (a pread per tick costs a fraction of an open, read and close).
 */
struct thread_cache {
	uint64_t tstate;
	struct py_walk_cache walk;
	int stat_fd;		/* -1: none */
	pid_t stat_tid;		/* the thread stat_fd reads */
	/* 3.15 frame cache: walk whole until the cache says otherwise; the
	 * anchor and sequence the last walk met in a chain the cache holds
	 * (0: none), where the next walk may stop. */
	bool walk_whole;
	uint64_t last_anchor, last_seq;
};

/* Anchors to move at the end of a tick, at most. */
#define REANCHOR_PER_TICK 16

/*
 * Where the GIL's state and the collector's flag are in the target; 0 when
 * unknown. Read together, once per tick, in GIL mode.
 */
struct gil_addrs {
	uint64_t holder;	/* last_holder: the PyThreadState * that took it last */
	uint64_t locked;	/* int: non-zero while someone holds it */
	uint64_t collecting;	/* int: non-zero while a collection runs; 0: unknown */
	uint64_t interp;	/* the interpreter whose GIL it is; 0: every thread's */
};

/* How many ticks to keep asking where a GIL not created yet is. */
#define GIL_TRIES 1000

struct remote_sampler {
	struct pyproc *proc;
	struct sampler_opts opts;
	struct thread_cache *caches;	/* MAX_THREADS, in thread-list order */
	struct py_thread *threads;
	struct stack_read stack;	/* each thread's stack, read at one instant */
	struct sampler_stats stats;
	struct gil_addrs gil;
	int gil_rc;			/* where the GIL is: 0 known, -EAGAIN ask again */
	unsigned int gil_tries;
	size_t nstat_fds;		/* stat files kept open */
	size_t max_stat_fds;		/* beyond it: opened and closed per read */
	size_t slots_used;		/* caches below it have held a thread */
	/* --blocking: the target's threads, stopped for each tick's reads
	 * (threads NULL: not blocking). */
	struct thread_stop stop;
	/* 3.15: the frame cache (NULL: none); the threads whose anchor it
	 * asked to move this tick; anchors released. */
	struct frame_cache *fc;
	struct py_thread reanchor[REANCHOR_PER_TICK];
	size_t nreanchor;
	bool released;
};

/*
 * Where the main interpreter's GIL and collector are: 0, -EAGAIN while the
 * target has not made them yet, or why not (then GIL mode samples the
 * running threads without SAMPLE_F_GIL_KNOWN).
 */
static int gil_addrs_of(struct pyproc *p, struct gil_addrs *a)
{
	struct py_gil_gc g;
	int rc;

	memset(a, 0, sizeof(*a));
	rc = pyproc__gil_gc(p, &g);
	if (rc)
		return rc;
	a->holder = g.gil_holder;
	a->locked = g.gil_locked;
	a->collecting = g.gc_collecting_size == sizeof(int32_t) ? g.gc_collecting : 0;
	a->interp = g.interp;
	return 0;
}

/* Half the descriptors we may have: the rest stay for everything else. */
static size_t stat_fd_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return MAX_THREADS;
	return rl.rlim_cur / 2 < MAX_THREADS ? (size_t)(rl.rlim_cur / 2) : MAX_THREADS;
}

/*
 * --blocking: the threads stopped once now, so that what stands in the way
 * (another tracer, no permission) is said before sampling begins.
 */
static int open_blocking(struct remote_sampler *s)
{
	int rc = thread_stop__init(&s->stop, pyproc__pid(s->proc));

	if (!rc)
		rc = thread_stop__all(&s->stop);
	if (!rc)
		thread_stop__resume(&s->stop);
	return rc;
}

/*
 * 3.15 (the anchor with its sequence after it, and the base frame): the
 * frame cache, as the BPF backend has it, unless --no-frame-cache.
 */
static int open_frame_cache(struct remote_sampler *s)
{
	const struct py_offsets *o = pyproc__offsets(s->proc);
	int rc;

	if (s->opts.no_frame_cache || !o->tstate_base_frame || !o->tstate_last_profiled_frame ||
	    o->tstate_last_profiled_frame_seq != o->tstate_last_profiled_frame + 8)
		return 0;
	rc = frame_cache__new(pyproc__pid(s->proc), o, s->opts.max_frames, true, &s->fc);
	if (rc)
		return rc;
	frame_cache__set_reanchor(s->fc, true);
	return 0;
}

/*
 * The anchors this sampler wrote and still owns, zeroed (the sequence
 * kept), in thread states found linked by a fresh read of the lists; -v:
 * what the cache did.
 */
static void release_anchors(struct remote_sampler *s)
{
	struct frame_cache_stats st;
	size_t n = 0;

	if (!s->fc || s->released)
		return;
	s->released = true;
	frame_cache__set_reanchor(s->fc, false);
	if (s->threads && !pyproc__threads(s->proc, s->threads, MAX_THREADS, &n))
		frame_cache__release(s->fc, s->threads, n);
	if (!s->opts.verbose)
		return;
	frame_cache__stats(s->fc, &st);
	frame_cache_stats__print(&st, "walked", stderr);
}

void remote_sampler__finish(struct remote_sampler *s)
{
	release_anchors(s);
	/* (3.11/3.12 only: the others have no call-site check) */
	if (s->opts.verbose && opfamily__table(pyproc__offsets(s->proc)->version_hex))
		fprintf(stderr, "pyprof-bpf: remote backend: %lu copies torn at a caller "
			"not at a call site\n", pyproc__call_sites_refused(s->proc));
}

int remote_sampler__open(struct pyproc *p, const struct sampler_opts *o,
			 struct remote_sampler **out)
{
	struct remote_sampler *s;

	switch (o->mode) {
	case SAMPLER_MODE_CPU:
	case SAMPLER_MODE_WALL:
	case SAMPLER_MODE_GIL:
	case SAMPLER_MODE_EXCEPTION:
		break;
	case SAMPLER_MODE_OFFCPU:	/* polling cannot see why a thread waits */
		return -ENOTSUP;
	default:
		return -EINVAL;
	}
	if (o->mode == SAMPLER_MODE_EXCEPTION && !pyproc__offsets(p)->tstate_exc_info)
		return -ENOTSUP;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->proc = p;
	s->opts = *o;
	s->threads = calloc(MAX_THREADS, sizeof(*s->threads));
	s->caches = calloc(MAX_THREADS, sizeof(*s->caches));
	for (size_t i = 0; s->caches && i < MAX_THREADS; i++)
		s->caches[i].stat_fd = -1;	/* before any free: 0 is an fd */
	if (!s->threads || !s->caches || stack_read__init(&s->stack, o->max_frames)) {
		remote_sampler__free(s);
		return -ENOMEM;
	}
	if (open_frame_cache(s)) {
		remote_sampler__free(s);
		return -ENOMEM;
	}
	s->max_stat_fds = stat_fd_budget();
	s->gil_rc = -EAGAIN;	/* asked on the first tick */
	if (o->blocking) {
		int rc = open_blocking(s);

		if (rc) {
			remote_sampler__free(s);
			return rc;
		}
	}
	*out = s;
	return 0;
}

void remote_sampler__free(struct remote_sampler *s)
{
	if (!s)
		return;
	release_anchors(s);
	frame_cache__free(s->fc);
	for (size_t i = 0; s->caches && i < MAX_THREADS; i++) {
		py_walk_cache__free(&s->caches[i].walk);
		if (s->caches[i].stat_fd >= 0)
			close(s->caches[i].stat_fd);
	}
	thread_stop__free(&s->stop);
	free(s->caches);
	free(s->threads);
	stack_read__free(&s->stack);
	free(s);
}

void remote_sampler__stats(const struct remote_sampler *s, struct sampler_stats *st)
{
	*st = s->stats;
}

/* The cache of @tstate: usually at the same index as last tick. */
static struct py_walk_cache *cache_for(struct remote_sampler *s, size_t i, uint64_t tstate)
{
	struct thread_cache *c = &s->caches[i];

	if (c->tstate == tstate)
		return &c->walk;
	for (size_t k = 0; k < MAX_THREADS; k++) {
		if (s->caches[k].tstate == tstate) {
			struct thread_cache tmp = s->caches[k];

			s->caches[k] = *c;
			*c = tmp;
			return &c->walk;
		}
	}
	/* a new thread: whatever this slot predicted is of no use */
	c->tstate = tstate;
	py_walk_cache__forget(&c->walk);
	c->walk_whole = false;
	c->last_anchor = c->last_seq = 0;
	return &c->walk;
}

static void stat_close(struct remote_sampler *s, struct thread_cache *c)
{
	if (c->stat_fd < 0)
		return;
	close(c->stat_fd);
	c->stat_fd = -1;
	s->nstat_fds--;
}

/*
 * 1 when thread @tid (its cache @c) is running or runnable (state R), 0
 * when it is not or its state cannot be read. Its stat file is kept open
 * from one tick to the next while the budget allows.
 */
static int thread_running(struct remote_sampler *s, struct thread_cache *c, pid_t tid)
{
	pid_t pid = pyproc__pid(s->proc);
	char st = 0;
	int fd, rc;

	if (c->stat_fd >= 0 && c->stat_tid != tid)
		stat_close(s, c);	/* its thread state went to another thread */
	if (c->stat_fd >= 0) {
		if (procfs__stat_fd_state(c->stat_fd, &st) == 0)
			return st == 'R';
		/* gone, or its tid is another thread's now: once afresh */
		stat_close(s, c);
	}
	fd = procfs__task_stat_open(pid, tid);
	if (fd < 0)
		return 0;
	rc = procfs__stat_fd_state(fd, &st);
	if (s->nstat_fds < s->max_stat_fds) {
		c->stat_fd = fd;
		c->stat_tid = tid;
		s->nstat_fds++;
	} else {
		close(fd);
	}
	return rc == 0 && st == 'R';
}

/*
 * The GIL's holder, 0 when it is free, and whether a collection runs: one
 * read of the target for both. -ENOTSUP (or why) when where the GIL is is
 * unknown.
 */
static int gil_read(struct remote_sampler *s, uint64_t *holder, int *collecting)
{
	uint64_t h = 0;
	int32_t locked = 0, gc = 0;
	struct remote_iov iov[3] = {
		{ 0, &h, sizeof(h) },
		{ 0, &locked, sizeof(locked) },
		{ 0, &gc, sizeof(gc) },
	};
	int rc;

	*holder = 0;
	*collecting = 0;
	if (s->gil_rc == -EAGAIN && s->gil_tries < GIL_TRIES) {
		s->gil_tries++;
		s->gil_rc = gil_addrs_of(s->proc, &s->gil);
		if (s->gil_rc && (s->gil_rc != -EAGAIN || s->gil_tries == GIL_TRIES) &&
		    s->opts.verbose)
			fprintf(stderr, "pyprof-bpf: remote backend: where the GIL is is unknown "
				"(%s): samples are not marked by whether it was held\n",
				strerror(-s->gil_rc));
	}
	if (s->gil_rc)
		return s->gil_rc == -ESRCH ? -ESRCH : -ENOTSUP;
	iov[0].addr = s->gil.holder;
	iov[1].addr = s->gil.locked;
	iov[2].addr = s->gil.collecting;
	rc = remote_readv(pyproc__pid(s->proc), iov, s->gil.collecting ? 3 : 2);
	if (rc)
		return rc;
	*holder = locked ? h : 0;
	*collecting = gc != 0;
	return 0;
}

/*
 * --opcodes: SAMPLE_OP_KNOWN | the instruction byte at the innermost Python
 * frame's instruction pointer, read just after the walk (the thread runs
 * on: the instruction it executes by then, most often the same one); 0 when
 * there is none to read.
 */
static uint32_t innermost_opcode(struct remote_sampler *s, const struct py_rawframe *f, size_t n)
{
	uint8_t op;

	return n && !opcode_read(s->proc, f, &op) ? SAMPLE_OP_KNOWN | op : 0;
}

/* What a tick knows of the GIL (GIL mode). */
struct gil_view {
	int known;
	int gc_running;
	uint64_t holder;
};

/*
 * Is thread @tid (its cache @c) to be sampled this tick: every thread in
 * wall mode, else one running or runnable. Under --blocking its state is
 * the one read just before it was stopped (stopped, /proc says 't').
 * *stopped: it is stopped now.
 */
static int thread_wanted(struct remote_sampler *s, struct thread_cache *c, pid_t tid,
			 bool *stopped)
{
	const struct stopped_thread *t =
		s->stop.threads ? thread_stop__find(&s->stop, tid) : NULL;

	*stopped = t && t->stopped;
	if (s->opts.mode == SAMPLER_MODE_WALL)
		return 1;
	if (t)
		return t->kstate == 'R';
	return thread_running(s, c, tid);
}

/* 3.15: where the walk of @c may stop, and what it keeps for the cache. */
static void walk_plan(const struct remote_sampler *s, struct thread_cache *c)
{
	c->walk.keep_links = s->fc != NULL;
	c->walk.stop_at = s->fc && !c->walk_whole ? c->last_anchor : 0;
	c->walk.stop_seq = c->last_seq;
}

/*
 * 3.15: sample @r (its thread @t, cache @c) made whole by the frame cache
 * (the callers below the anchor spliced from it) and its frames cut to
 * Python's; what the cache asks done next for the thread. True when the
 * callers could not be spliced (the cache then walks the thread whole).
 */
static bool through_frame_cache(struct remote_sampler *s, struct thread_cache *c,
				const struct py_thread *t, struct raw_sample *r)
{
	const struct py_walk_cache *w = &c->walk;
	struct frame_cache_out fo;
	struct frame_cache_rec fr = {
		.tid = r->tid, .ts_ns = r->ts_ns, .tstate = t->tstate, .status = r->status,
		.nframes = r->nframes, .frames = r->frames,
	};

	if (r->nframes) {
		fr.flags = (w->anchor_read ? FC_REC_ANCHOR_READ : 0) |
			   (w->at_anchor ? FC_REC_AT_ANCHOR : 0) | (w->at_base ? FC_REC_BASE : 0);
		fr.anchor = w->anchor;
		fr.seq = w->seq;
		fr.anchor_prev = w->anchor_prev;
	}
	/* What the next walk compares with: an anchor met in a chain the
	 * cache can hold (stopped at, or whole to the base frame). */
	c->last_anchor = r->nframes && w->seen && (w->at_anchor || w->at_base) ? w->anchor : 0;
	c->last_seq = w->seq;
	/* On -ENOMEM the record is passed on as it is, marked truncated. */
	frame_cache__process(s->fc, &fr, &fo);
	r->status = fo.status;
	r->nframes = fo.nframes;
	r->frames = fo.frames;
	r->unchanged = fo.unchanged;
	if (fo.set_walk_whole)
		c->walk_whole = fo.walk_whole;
	if (fo.reanchor && s->nreanchor < REANCHOR_PER_TICK) {
		c->walk_whole = true;	/* before the write: frame_cache.h */
		s->reanchor[s->nreanchor++] = *t;
	}
	return fo.cut;
}

/*
 * The anchors the frame cache asked to move this tick: one write each, no
 * stop, in thread states found again, linked in their interpreter's list,
 * by a fresh read of the lists (a write into one freed meanwhile would land
 * in whatever the target put there).
 */
static void reanchor(struct remote_sampler *s)
{
	size_t n = 0;

	if (!s->nreanchor)
		return;
	if (pyproc__threads(s->proc, s->threads, MAX_THREADS, &n))
		n = 0;
	for (size_t i = 0; i < s->nreanchor; i++) {
		const struct py_thread *want = &s->reanchor[i];

		for (size_t k = 0; k < n; k++) {
			if (s->threads[k].tstate == want->tstate &&
			    s->threads[k].host_tid == want->host_tid) {
				frame_cache__reanchor(s->fc, want->host_tid, want->tstate);
				break;
			}
		}
	}
	s->nreanchor = 0;
}

/*
 * Thread @t's stack (its cache @c; @stopped: it is stopped) into @r, read
 * at one instant or [read-fault]. 3.15: a walk that stopped at the anchor
 * whose callers the frame cache could not splice (a copy torn in a way its
 * checks missed, or an anchor another profiler wrote) is read again whole
 * at once, rather than delivered cut at [truncated] as a deep stack is;
 * what that read cannot have is [read-fault] with the frames it has.
 * 0, or -ESRCH.
 */
static int read_stack(struct remote_sampler *s, struct thread_cache *c,
		      const struct py_thread *t, bool stopped, struct raw_sample *r)
{
	struct stack_read *sr = &s->stack;
	bool cut = false;
	int rc;

	for (int pass = 0; pass < 2; pass++) {
		walk_plan(s, c);
		rc = stack_read__thread(sr, s->proc, t->tstate, &c->walk, stopped);
		if (rc == -ESRCH)
			return rc;
		r->ts_ns = mono_ns();	/* vDSO: per thread is cheap */
		/* A chain that loops is not a deep stack (no --max-depth shows
		 * more of it): a read fault as the BPF walk says it, with the
		 * frames up to the repeat. */
		r->status = rc || sr->torn || sr->truncated == PY_WALK_LOOPED ?
			    SAMPLE_READ_FAULT : sr->truncated ? SAMPLE_TRUNCATED : SAMPLE_COMPLETE;
		r->nframes = rc || sr->torn ? 0 : (uint32_t)sr->n;
		r->frames = sr->frames;
		cut = s->fc && through_frame_cache(s, c, t, r);
		if (!cut)
			break;
	}
	if (cut)
		r->status = SAMPLE_READ_FAULT;
	s->stats.torn += sr->torn;
	return 0;
}

/* Sample thread @i of the list, when the mode wants it. 0, or -errno. */
static int sample_thread(struct remote_sampler *s, size_t i, const struct gil_view *gil,
			 sample_fn fn, void *ctx)
{
	const struct py_thread *t = &s->threads[i];
	struct raw_sample r = { 0 };
	struct thread_cache *c;
	bool stopped;

	/* Its caches follow its thread state to index i. */
	cache_for(s, i, t->tstate);
	c = &s->caches[i];
	/* A thread state whose thread has no id yet (starting) or is gone
	 * from /proc (ending) has nothing to attribute a sample to. */
	if (!t->host_tid) {
		stat_close(s, c);
		return 0;
	}
	if (!thread_wanted(s, c, t->host_tid, &stopped))
		return 0;
	/* Exception mode: only a thread with an exception, read just before
	 * its stack. */
	if (s->opts.mode == SAMPLER_MODE_EXCEPTION &&
	    (exceptions__type(s->proc, t->tstate, &r.exc_type) || !r.exc_type))
		return 0;
	r.pid = pyproc__pid(s->proc);
	r.tid = t->host_tid;
	r.kind = SAMPLE_KIND_CPU;
	if (read_stack(s, c, t, stopped, &r))
		return -ESRCH;
	if (s->opts.opcodes)
		r.opcode = innermost_opcode(s, r.frames, r.nframes);
	if (gil->known && (!s->gil.interp || t->interp == s->gil.interp)) {
		r.flags = SAMPLE_F_GIL_KNOWN;
		if (t->tstate == gil->holder)
			r.flags |= SAMPLE_F_GIL_HELD | (gil->gc_running ? SAMPLE_F_GC : 0);
	}
	sampler_stats__count(&s->stats, r.status);
	return fn(ctx, &r);
}

/* One sample of every thread the mode wants. 0, or -errno. */
static int sample_threads(struct remote_sampler *s, sample_fn fn, void *ctx)
{
	struct gil_view gil = { 0 };
	size_t n;
	int rc;

	rc = pyproc__threads(s->proc, s->threads, MAX_THREADS, &n);
	if (rc == -E2BIG)
		rc = 0;
	if (rc) {
		/* the thread list changed under us: try again next tick */
		s->stats.errors++;
		return rc == -ESRCH ? rc : 0;
	}
	/*
	 * The stat files of threads gone: a cache past the list is no listed
	 * thread's (cache_for() moves a listed thread's to its index; it
	 * swaps only with caches that held a thread before).
	 */
	for (size_t k = n; k < s->slots_used; k++)
		stat_close(s, &s->caches[k]);
	if (n > s->slots_used)
		s->slots_used = n;
	if (s->opts.mode == SAMPLER_MODE_GIL) {
		rc = gil_read(s, &gil.holder, &gil.gc_running);
		if (rc == -ESRCH)
			return rc;
		gil.known = rc == 0;
	}
	for (size_t i = 0; i < n; i++) {
		rc = sample_thread(s, i, &gil, fn, ctx);
		if (rc)
			return rc;
	}
	reanchor(s);
	return 0;
}

int remote_sampler__tick(struct remote_sampler *s, sample_fn fn, void *ctx)
{
	int rc;

	if (!s->stop.threads)
		return sample_threads(s, fn, ctx);
	rc = thread_stop__all(&s->stop);
	if (rc)
		return rc;
	rc = sample_threads(s, fn, ctx);
	s->stats.stopped_ns += thread_stop__resume(&s->stop);
	s->stats.stops++;
	return rc;
}
