/* SPDX-License-Identifier: MIT */
/*
 * bpf_backend.c - the BPF backend's operations (backend.h): its ring
 * buffer read on a timer, its thread scan on a backing-off schedule, and
 * the calls only it has, handed to bpf_sampler.h.
 */
#include <errno.h>
#include <stdlib.h>
#include "sampling/backend.h"
#include "sampling/bpf_sampler.h"

struct bpf_backend {
	struct bpf_sampler *bs;
	double poll_s;			/* the ring's reading period */
	double next_scan, scan_s;	/* the thread scan's schedule */
};

static int bpf_open(struct pyproc *p, const struct sampler_opts *o, void **out, char *err,
		    size_t errlen)
{
	struct bpf_backend *k = calloc(1, sizeof(*k));
	unsigned int freq_hz = o->freq_hz ? o->freq_hz : 1;
	int rc;

	*out = NULL;
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = p ? bpf_sampler__open(p, o, &k->bs, err, errlen) :
		 bpf_sampler__load(o, &k->bs, err, errlen);
	if (rc) {
		free(k);
		return rc;
	}
	/*
	 * The ring is read every 10 ms; below 1 kHz in cpu mode every 10
	 * samples' time, up to 100 ms: a wake-up (and what the loop does
	 * then) costs ~30-70 us here, more than a sample's worth at 99 Hz.
	 * The ring holds 200 ms at the rate (ring_size). Off-CPU records come
	 * at the target's switch rate, whatever the rate.
	 */
	k->poll_s = o->mode == SAMPLER_MODE_CPU && freq_hz < 1000 ?
		    (10.0 / freq_hz < 0.1 ? 10.0 / freq_hz : 0.1) : 0.01;
	k->scan_s = 0.1;
	*out = k;
	return 0;
}

static int bpf_set_target(void *b, struct pyproc *p, char *err, size_t errlen)
{
	return bpf_sampler__set_target(((struct bpf_backend *)b)->bs, p, err, errlen);
}

static int bpf_add_process(void *b, struct pyproc *p, char *err, size_t errlen)
{
	return bpf_sampler__add_process(((struct bpf_backend *)b)->bs, p, err, errlen);
}

static int bpf_track_process(void *b, pid_t pid)
{
	return bpf_sampler__track_process(((struct bpf_backend *)b)->bs, pid);
}

static void bpf_forget_process(void *b, pid_t pid)
{
	bpf_sampler__forget_process(((struct bpf_backend *)b)->bs, pid);
}

static int bpf_set_async(void *b, pid_t pid, const struct sampler_async *a)
{
	return bpf_sampler__set_async(((struct bpf_backend *)b)->bs, pid, a);
}

static int bpf_set_stack_end(void *b, pid_t tid, uint64_t end)
{
	return bpf_sampler__set_stack_end(((struct bpf_backend *)b)->bs, tid, end);
}

/* The tool's code and process callbacks are the ones a poll hands on to. */
static void set_tool(struct bpf_sampler *bs, const struct sampler_tool *t)
{
	bpf_sampler__set_code_fn(bs, t->code, t->ctx);
	bpf_sampler__set_proc_fn(bs, t->proc, t->ctx);
}

static int bpf_poll(void *b, const struct sampler_tool *t)
{
	struct bpf_backend *k = b;
	int rc;

	set_tool(k->bs, t);
	rc = bpf_sampler__poll(k->bs, t->sample, t->ctx);
	return rc < 0 ? rc : 0;
}

static double bpf_next_poll(void *b, double started)
{
	return started + ((struct bpf_backend *)b)->poll_s;
}

/* The thread scan backs off while it finds nothing new (to 0.8 s): the
 * program finds new threads' states itself. A thread it could not name
 * brings it sooner. */
static void bpf_refresh(void *b, double now)
{
	struct bpf_backend *k = b;

	if (!k->next_scan)
		k->next_scan = now + k->scan_s;
	if (now < k->next_scan &&
	    !(bpf_sampler__unknown_tid(k->bs) && now >= k->next_scan - k->scan_s + 0.02))
		return;
	bpf_sampler__refresh(k->bs);
	k->scan_s = bpf_sampler__settled(k->bs) ? (k->scan_s * 2 < 0.8 ? k->scan_s * 2 : 0.8) :
		    0.1;
	k->next_scan = now + k->scan_s;
}

static void bpf_stats(const void *b, struct sampler_stats *st)
{
	bpf_sampler__stats(((const struct bpf_backend *)b)->bs, st);
}

static void bpf_detail(const void *b, struct sampler_detail *d)
{
	const struct bpf_sampler *bs = ((const struct bpf_backend *)b)->bs;
	struct bpf_sampler_detail bd;

	bpf_sampler__detail(bs, &bd);
	d->per_cpu = bpf_sampler__per_cpu(bs);
	d->frame_cache = bd.frame_cache;
	d->cache = bd.cache;
	d->offcpu = bd.offcpu;
	d->reused = bd.reused;
	d->inferred = bd.inferred;
	d->lost_intervals = bpf_sampler__lost_intervals(bs);
	d->nested = bd.nested;
	d->program = bpf_sampler__program(bs);
}

static bool bpf_execed(const void *b)
{
	return bpf_sampler__execed(((const struct bpf_backend *)b)->bs);
}

static int bpf_finish(void *b, uint64_t end_ns, const struct sampler_tool *t)
{
	struct bpf_backend *k = b;
	int rc;

	bpf_sampler__stop(k->bs);
	/* what the ring buffer still holds */
	set_tool(k->bs, t);
	rc = bpf_sampler__poll(k->bs, t->sample, t->ctx);
	if (rc < 0)
		return rc;
	/* threads off the CPU now: up to the end */
	rc = bpf_sampler__finish_intervals(k->bs, end_ns, t->sample, t->ctx);
	return rc < 0 ? rc : 0;
}

static void bpf_close(void *b)
{
	struct bpf_backend *k = b;

	/* Stopped on every path: the anchors written into the target (3.15's
	 * frame cache) are released there (again is harmless). */
	bpf_sampler__stop(k->bs);
	bpf_sampler__free(k->bs);
	free(k);
}

const struct sampler_ops bpf_sampler_ops = {
	.id = "bpf",
	.name = "BPF",
	.caps = SAMPLER_CAP_PROCESSES | SAMPLER_CAP_ASYNC | SAMPLER_CAP_STACK_END |
		SAMPLER_CAP_OFFCPU | SAMPLER_CAP_PERF_EVENTS,
	.available = bpf_sampler__available,
	.open = bpf_open,
	.set_target = bpf_set_target,
	.add_process = bpf_add_process,
	.track_process = bpf_track_process,
	.forget_process = bpf_forget_process,
	.set_async = bpf_set_async,
	.set_stack_end = bpf_set_stack_end,
	.poll = bpf_poll,
	.next_poll = bpf_next_poll,
	.refresh = bpf_refresh,
	.stats = bpf_stats,
	.detail = bpf_detail,
	.execed = bpf_execed,
	.finish = bpf_finish,
	.close = bpf_close,
};
