/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - one interface over the two backends (sampler.h): what the
 * recording loop needs of either, so that it never asks which it has.
 */
#include <errno.h>
#include <stdlib.h>
#include "sampling/bpf_sampler.h"
#include "sampling/remote_sampler.h"
#include "sampling/sampler.h"
#include "util/clock.h"

struct sampler_ops {
	const char *name;
	int (*poll)(struct sampler *s, sample_fn fn, void *ctx);
	double (*next_poll)(struct sampler *s, double started);
	void (*refresh)(struct sampler *s, double now);
	void (*stats)(const struct sampler *s, struct sampler_stats *st);
	int (*finish)(struct sampler *s, uint64_t end_ns, sample_fn fn, void *ctx);
	void (*close)(struct sampler *s);
};

struct sampler {
	const struct sampler_ops *ops;
	struct bpf_sampler *bs;
	struct remote_sampler *rs;
	unsigned int freq_hz;
	double poll_s;		/* BPF: the ring's reading period */
	double next_scan, scan_s;	/* BPF: the thread scan's schedule */
	double next_tick;	/* remote: the next tick's time */
};

/* ---- BPF: a ring buffer read on a timer ---- */

static int bpf_poll(struct sampler *s, sample_fn fn, void *ctx)
{
	int rc = bpf_sampler__poll(s->bs, fn, ctx);

	return rc < 0 ? rc : 0;
}

static double bpf_next_poll(struct sampler *s, double started)
{
	return started + s->poll_s;
}

/* The thread scan backs off while it finds nothing new (to 0.8 s): the
 * program finds new threads' states itself. A thread it could not name
 * brings it sooner. */
static void bpf_refresh(struct sampler *s, double now)
{
	if (!s->next_scan)
		s->next_scan = now + s->scan_s;
	if (now < s->next_scan &&
	    !(bpf_sampler__unknown_tid(s->bs) && now >= s->next_scan - s->scan_s + 0.02))
		return;
	bpf_sampler__refresh(s->bs);
	s->scan_s = bpf_sampler__settled(s->bs) ? (s->scan_s * 2 < 0.8 ? s->scan_s * 2 : 0.8) : 0.1;
	s->next_scan = now + s->scan_s;
}

static void bpf_stats(const struct sampler *s, struct sampler_stats *st)
{
	bpf_sampler__stats(s->bs, st);
}

static int bpf_finish(struct sampler *s, uint64_t end_ns, sample_fn fn, void *ctx)
{
	int rc;

	bpf_sampler__stop(s->bs);
	/* what the ring buffer still holds */
	rc = bpf_sampler__poll(s->bs, fn, ctx);
	if (rc < 0)
		return rc;
	/* threads off the CPU now: up to the end */
	rc = bpf_sampler__finish_intervals(s->bs, end_ns, fn, ctx);
	return rc < 0 ? rc : 0;
}

static void bpf_close(struct sampler *s)
{
	/* Stopped on every path: the anchors written into the target (3.15's
	 * frame cache) are released there (again is harmless). */
	bpf_sampler__stop(s->bs);
	bpf_sampler__free(s->bs);
}

static const struct sampler_ops bpf_ops = {
	"BPF", bpf_poll, bpf_next_poll, bpf_refresh, bpf_stats, bpf_finish, bpf_close,
};

/* ---- remote: one read of every thread per tick ---- */

static int remote_poll(struct sampler *s, sample_fn fn, void *ctx)
{
	return remote_sampler__tick(s->rs, fn, ctx);
}

/*
 * Behind (a slow or preempted tick): no burst to catch up. The next tick
 * starts at least a quarter of a period (up to 2 ms) after this one ended,
 * so that ticks stay apart in time (readers group samples by tick); from
 * the tick's start it could follow its end by ~0.5 ms.
 */
static double remote_next_poll(struct sampler *s, double started)
{
	double gap = 0.25 / s->freq_hz < 0.002 ? 0.25 / s->freq_hz : 0.002;
	double done = mono_s();

	if (!s->next_tick)
		s->next_tick = started;
	s->next_tick += 1.0 / s->freq_hz;
	if (s->next_tick < done + gap)
		s->next_tick = done + gap;
	return s->next_tick;
}

static void remote_refresh(struct sampler *s, double now)
{
	(void)s;
	(void)now;	/* each tick lists the threads itself */
}

static void remote_stats(const struct sampler *s, struct sampler_stats *st)
{
	remote_sampler__stats(s->rs, st);
}

static int remote_finish(struct sampler *s, uint64_t end_ns, sample_fn fn, void *ctx)
{
	(void)end_ns;
	(void)fn;
	(void)ctx;	/* nothing is held back between ticks */
	remote_sampler__finish(s->rs);
	return 0;
}

static void remote_close(struct sampler *s)
{
	remote_sampler__free(s->rs);
}

static const struct sampler_ops remote_ops = {
	"remote", remote_poll, remote_next_poll, remote_refresh, remote_stats, remote_finish,
	remote_close,
};

void sampler_stats__count(struct sampler_stats *st, uint32_t status)
{
	st->samples++;
	if (status == SAMPLE_TRUNCATED)
		st->truncated++;
	else if (status != SAMPLE_COMPLETE && status != SAMPLE_THREAD_YOUNG &&
		 status != SAMPLE_THREAD_EXIT && status != SAMPLE_EVAL_ENTRY)
		st->errors++;
}

/* ---- the interface ---- */

int sampler__from_bpf(struct bpf_sampler *bs, const struct sampler_opts *o, struct sampler **out)
{
	struct sampler *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->ops = &bpf_ops;
	s->bs = bs;
	s->freq_hz = o->freq_hz ? o->freq_hz : 1;
	/*
	 * The ring is read every 10 ms; below 1 kHz in cpu mode every 10
	 * samples' time, up to 100 ms: a wake-up (and what the loop does
	 * then) costs ~30-70 us here, more than a sample's worth at 99 Hz.
	 * The ring holds 200 ms at the rate (ring_size). Off-CPU records come
	 * at the target's switch rate, whatever the rate.
	 */
	s->poll_s = o->mode == SAMPLER_MODE_CPU && s->freq_hz < 1000 ?
		    (10.0 / s->freq_hz < 0.1 ? 10.0 / s->freq_hz : 0.1) : 0.01;
	s->scan_s = 0.1;
	*out = s;
	return 0;
}

int sampler__from_remote(struct remote_sampler *rs, const struct sampler_opts *o,
			 struct sampler **out)
{
	struct sampler *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->ops = &remote_ops;
	s->rs = rs;
	s->freq_hz = o->freq_hz ? o->freq_hz : 1;
	*out = s;
	return 0;
}

const char *sampler__name(const struct sampler *s)
{
	return s->ops->name;
}

struct bpf_sampler *sampler__bpf(struct sampler *s)
{
	return s ? s->bs : NULL;
}

int sampler__poll(struct sampler *s, sample_fn fn, void *ctx)
{
	return s->ops->poll(s, fn, ctx);
}

double sampler__next_poll(struct sampler *s, double started)
{
	return s->ops->next_poll(s, started);
}

void sampler__refresh(struct sampler *s, double now)
{
	s->ops->refresh(s, now);
}

void sampler__stats(const struct sampler *s, struct sampler_stats *st)
{
	s->ops->stats(s, st);
}

int sampler__finish(struct sampler *s, uint64_t end_ns, sample_fn fn, void *ctx)
{
	return s->ops->finish(s, end_ns, fn, ctx);
}

void sampler__close(struct sampler *s)
{
	if (!s)
		return;
	s->ops->close(s);
	free(s);
}
