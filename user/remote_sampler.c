/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include "remote_sampler.h"

#define MAX_THREADS 4096

/* Per thread: what its last walk saw, to read the next one ahead. */
struct thread_cache {
	uint64_t tstate;
	struct py_walk_cache walk;
};

struct remote_sampler {
	struct pyproc *proc;
	struct sampler_opts opts;
	struct thread_cache *caches;	/* MAX_THREADS, in thread-list order */
	struct py_thread *threads;
	struct py_rawframe *frames;
	struct py_rawframe *check;	/* the second read of a stack */
	struct sampler_stats stats;
};

int remote_sampler__open(struct pyproc *p, const struct sampler_opts *o,
			 struct remote_sampler **out)
{
	struct remote_sampler *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->proc = p;
	s->opts = *o;
	s->threads = calloc(MAX_THREADS, sizeof(*s->threads));
	s->caches = calloc(MAX_THREADS, sizeof(*s->caches));
	s->frames = calloc(o->max_frames, sizeof(*s->frames));
	s->check = calloc(o->max_frames, sizeof(*s->check));
	if (!s->threads || !s->caches || !s->frames || !s->check) {
		remote_sampler__free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void remote_sampler__free(struct remote_sampler *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->caches && i < MAX_THREADS; i++)
		py_walk_cache__free(&s->caches[i].walk);
	free(s->caches);
	free(s->threads);
	free(s->frames);
	free(s->check);
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
	c->walk.n = 0;
	return &c->walk;
}

/*
 * A thread that runs while we read it can give a torn stack: a parent read
 * after its child returned, a frame read while it was being pushed. So the
 * chain is read twice (the second time in one call, predicted by the first)
 * and kept only when both agree on every frame, and on every instruction
 * but the innermost (which moves while the thread runs; a parent's does not
 * while its child runs). A few tries, then the sample is a read fault.
 */
#define WALK_TRIES 3

static int same_stack(const struct py_rawframe *a, const struct py_rawframe *b, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (a[k].frame != b[k].frame || a[k].code != b[k].code ||
		    (k && a[k].instr != b[k].instr))
			return 0;
	}
	return 1;
}

static int walk_consistent(struct remote_sampler *s, size_t i, size_t *nf, int *truncated,
			   int *torn)
{
	uint64_t tstate = s->threads[i].tstate;
	struct py_walk_cache *c = cache_for(s, i, tstate);
	size_t n2;
	int rc = 0, t2;

	for (int try = 0; try < WALK_TRIES; try++) {
		rc = pyproc__walk_cached(s->proc, tstate, c, s->frames, s->opts.max_frames, nf,
					 truncated);
		if (rc || *nf == 0)
			break;
		rc = pyproc__walk_cached(s->proc, tstate, c, s->check, s->opts.max_frames, &n2,
					 &t2);
		if (rc)
			break;
		*torn = !(n2 == *nf && same_stack(s->frames, s->check, n2));
		if (!*torn)
			break;
	}
	return rc;
}

int remote_sampler__tick(struct remote_sampler *s, sample_fn fn, void *ctx)
{
	struct timespec now;
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
	for (size_t i = 0; i < n; i++) {
		struct raw_sample r = { 0 };
		size_t nf = 0;
		int truncated = 0, torn = 0;

		/* A thread state whose thread has no id yet (starting) or is
		 * gone from /proc (ending) has nothing to attribute a sample to. */
		if (!s->threads[i].host_tid)
			continue;
		rc = walk_consistent(s, i, &nf, &truncated, &torn);
		if (rc == -ESRCH)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &now);	/* vDSO: per thread is cheap */
		r.pid = pyproc__pid(s->proc);
		r.tid = s->threads[i].host_tid;
		r.ts_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		r.status = rc || torn ? SAMPLE_READ_FAULT :
			   truncated ? SAMPLE_TRUNCATED : SAMPLE_COMPLETE;
		r.nframes = rc || torn ? 0 : (uint32_t)nf;
		r.frames = s->frames;
		s->stats.samples++;
		if (rc || torn)
			s->stats.errors++;
		else if (truncated)
			s->stats.truncated++;
		rc = fn(ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}
