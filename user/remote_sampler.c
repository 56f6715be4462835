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
	if (!s->threads || !s->caches || !s->frames) {
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
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (size_t i = 0; i < n; i++) {
		struct raw_sample r = { 0 };
		size_t nf = 0;
		int truncated = 0;

		rc = pyproc__walk_cached(s->proc, s->threads[i].tstate,
					 cache_for(s, i, s->threads[i].tstate), s->frames,
					 s->opts.max_frames, &nf, &truncated);
		if (rc == -ESRCH)
			return rc;
		r.tid = s->threads[i].host_tid;
		r.ts_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		r.status = rc ? SAMPLE_READ_FAULT : truncated ? SAMPLE_TRUNCATED : SAMPLE_COMPLETE;
		r.nframes = rc ? 0 : (uint32_t)nf;
		r.frames = s->frames;
		s->stats.samples++;
		if (rc)
			s->stats.errors++;
		else if (truncated)
			s->stats.truncated++;
		rc = fn(ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}
