/* SPDX-License-Identifier: MIT */
/*
 * remote_backend.c - the remote backend's operations (backend.h): one read
 * of every thread per tick (remote_sampler.h), the ticks kept a period
 * apart. It samples one process and has no calls for others.
 */
#include <errno.h>
#include <stdlib.h>
#include "sampling/backend.h"
#include "sampling/remote_sampler.h"
#include "util/clock.h"

struct remote_backend {
	struct remote_sampler *remote;
	unsigned int freq_hz;
	double next_tick;	/* the next tick's time */
};

/* @err is left empty: the caller says what failed from the -errno. */
static int remote_open(struct pyproc *p, const struct sampler_opts *o, void **out, char *err,
		       size_t errlen)
{
	struct remote_backend *k = calloc(1, sizeof(*k));
	int rc;

	(void)err;
	(void)errlen;
	*out = NULL;
	if (!k)
		return -ENOMEM;
	rc = remote_sampler__open(p, o, &k->remote);
	if (rc) {
		free(k);
		return rc;
	}
	k->freq_hz = o->freq_hz ? o->freq_hz : 1;
	*out = k;
	return 0;
}

static int remote_poll(void *b, const struct sampler_tool *t)
{
	return remote_sampler__tick(((struct remote_backend *)b)->remote, t->sample, t->ctx);
}

/*
 * Behind (a slow or preempted tick): no burst to catch up. The next tick
 * starts at least a quarter of a period (up to 2 ms) after this one ended,
 * so that ticks stay apart in time (readers group samples by tick); from
 * the tick's start it could follow its end by ~0.5 ms.
 */
static double remote_next_poll(void *b, double started)
{
	struct remote_backend *k = b;
	double gap = 0.25 / k->freq_hz < 0.002 ? 0.25 / k->freq_hz : 0.002;
	double done = mono_s();

	if (!k->next_tick)
		k->next_tick = started;
	k->next_tick += 1.0 / k->freq_hz;
	if (k->next_tick < done + gap)
		k->next_tick = done + gap;
	return k->next_tick;
}

static void remote_stats(const void *b, struct sampler_stats *st)
{
	remote_sampler__stats(((const struct remote_backend *)b)->remote, st);
}

/* Nothing is held back between ticks: only the anchors released. */
static int remote_finish(void *b, uint64_t end_ns, const struct sampler_tool *t)
{
	(void)end_ns;
	(void)t;
	remote_sampler__finish(((struct remote_backend *)b)->remote);
	return 0;
}

static void remote_close(void *b)
{
	struct remote_backend *k = b;

	remote_sampler__free(k->remote);
	free(k);
}

/* No refresh: each tick lists the threads itself. */
const struct sampler_ops remote_sampler_ops = {
	.id = "remote",
	.name = "remote",
	.caps = 0,
	.open = remote_open,
	.poll = remote_poll,
	.next_poll = remote_next_poll,
	.stats = remote_stats,
	.finish = remote_finish,
	.close = remote_close,
};
