// SPDX-License-Identifier: MIT
/*
 * output_chrome_trace.c - a timeline in the Trace Event Format's JSON Object
 * form ({"traceEvents": [...], "displayTimeUnit": "ms"}), as Perfetto,
 * chrome://tracing and speedscope read it.
 *
 * A track per thread: "process_name" and "thread_name" metadata events ("M")
 * name them; every other event is a complete slice ("X", ts and dur in
 * whole microseconds of CLOCK_MONOTONIC, perf-script's clock; a slice under
 * a microsecond is left out). A slice is a frame of the stack every writer sees (roots left
 * out: the track says the process and thread), named as the recorder gave it
 * (not escaped), its "cat" the frame's kind (python, native, kernel,
 * marker), its args the file and the function's first line (its def: one
 * frame per function in the viewers that key frames by args).
 *
 * A sample stands for the interval before its time: [ts - weight, ts] (an
 * off-CPU interval's blocked part ends where its runnable part begins).
 * Each thread's samples are taken in the order of their times (a tick's
 * time is exact, its start is not: the thread may have begun to run after
 * it), and consecutive samples
 * continue each other's slices for the frames their stacks share,
 * outermost first (a frame is its function: the line may change within a
 * slice), so a call sampled 30 times is one slice. Two samples are
 * consecutive when the gap between them is no longer than a CPU sample's
 * period on either side (ticks jitter, and a thread runs unsampled for up to
 * a period before it blocks); off-CPU intervals are exact, so between two
 * of them any gap splits the slices, and each interval keeps its real length.
 * The gap goes to the tick's slices (after one, it ran until it blocked);
 * a sample that begins before the previous one ended starts at that end.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/json_writer.h"
#include "output/internal.h"

struct ct_rec {			/* one sample */
	uint64_t start, end;	/* ns, CLOCK_MONOTONIC */
	uint32_t node;		/* its stack's call-tree node */
	uint32_t thread;
	uint32_t seq;		/* arrival order: ties stay in it */
	int offcpu;
};

struct ct_slice {
	uint32_t frame;
	uint64_t start, end;
};

struct ct_state {
	struct ct_rec *recs;
	uint32_t nrecs, cap;
	uint32_t *last;		/* by thread: index + 1 of its last sample, 0: none */
	uint32_t nlast, last_cap;
	/* finish's work for one thread: its slices, the open ones' indices */
	struct ct_slice *slices;
	uint32_t nslices, slices_cap;
	uint32_t *open;
	uint32_t nopen;
};

static struct ct_state *ct_state(struct output *o)
{
	if (!o->priv)
		o->priv = calloc(1, sizeof(struct ct_state));
	return o->priv;
}

/* An off-CPU interval comes as its blocked part, then its runnable part,
 * both at the interval's end: the blocked part ends where the other begins. */
static void ct_split_interval(struct ct_state *st, uint32_t thread, uint64_t ts, uint64_t w)
{
	struct ct_rec *prev;

	if (thread >= st->nlast || !st->last[thread])
		return;
	prev = &st->recs[st->last[thread] - 1];
	if (prev->offcpu && prev->end == ts && prev->start >= w) {
		prev->start -= w;
		prev->end -= w;
	}
}

static int ct_add(struct output *o, const struct out_sample *s, uint32_t thread,
		  const uint32_t *stack, uint32_t n)
{
	struct ct_state *st = ct_state(o);
	uint64_t w = out_weight(s);
	struct ct_rec *r;
	uint32_t old;
	int err;

	(void)stack;
	if (!st)
		return -ENOMEM;
	if (!n)
		return 0;	/* cannot happen: every stack has a frame */
	if (thread >= st->nlast) {
		old = st->nlast;
		err = out_grow((void **)&st->last, &st->last_cap, (uint64_t)thread + 1,
			       sizeof(*st->last));
		if (err)
			return err;
		memset(st->last + old, 0, (st->last_cap - old) * sizeof(*st->last));
		st->nlast = st->last_cap;
	}
	err = out_grow((void **)&st->recs, &st->cap, (uint64_t)st->nrecs + 1, sizeof(*st->recs));
	if (err)
		return err;
	r = &st->recs[st->nrecs];
	r->offcpu = s->event && !strcmp(s->event, "offcpu-time");
	if (r->offcpu)
		ct_split_interval(st, thread, s->ts_ns, w);
	r->end = s->ts_ns;
	r->start = s->ts_ns > w ? s->ts_ns - w : 0;
	r->node = o->m.threads[thread].nodes[n - 1];
	r->thread = thread;
	r->seq = st->nrecs++;
	st->last[thread] = st->nrecs;
	return 0;
}

static int rec_cmp(const void *pa, const void *pb)
{
	const struct ct_rec *a = pa, *b = pb;

	if (a->thread != b->thread)
		return a->thread < b->thread ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The same function: a slice goes on when only the line changed. */
static int same_function(const struct out_model *m, uint32_t a, uint32_t b)
{
	const struct out_frame *fa = &m->frames[a], *fb = &m->frames[b];

	return a == b || (fa->kind == fb->kind && fa->fn_id == fb->fn_id &&
			  fa->file_id == fb->file_id);
}

static void close_slices(struct ct_state *st, uint32_t keep, uint64_t at)
{
	while (st->nopen > keep)
		st->slices[st->open[--st->nopen]].end = at;
}

/* Continue or open the slices of one sample's stack @path (@n frames, roots
 * left out) from @at to @end. 0 or -ENOMEM. */
static int ct_sample(struct ct_state *st, const struct out_model *m, const uint32_t *path,
		     uint32_t n, uint64_t at)
{
	uint32_t k = 0;
	int err;

	while (k < st->nopen && k < n && same_function(m, st->slices[st->open[k]].frame, path[k]))
		k++;
	close_slices(st, k, at);
	err = out_grow((void **)&st->slices, &st->slices_cap, (uint64_t)st->nslices + n - k,
		       sizeof(*st->slices));
	if (err)
		return err;
	for (; k < n; k++) {
		st->slices[st->nslices] = (struct ct_slice){ .frame = path[k], .start = at };
		st->open[st->nopen++] = st->nslices++;
	}
	return 0;
}

/* The slices of the thread's samples recs[from..to) (in order of their
 * ends), in order of their starts. */
static int ct_thread_slices(struct ct_state *st, const struct out_model *m, uint32_t from,
			    uint32_t to, uint32_t *path)
{
	uint64_t cur_end = 0, prev_tol = 0;
	int err;

	st->nslices = 0;
	st->nopen = 0;
	for (uint32_t i = from; i < to; i++) {
		const struct ct_rec *r = &st->recs[i];
		uint64_t tol = r->offcpu ? 0 : r->end - r->start, at = r->start;
		uint32_t n = output__node_path(m, r->node, path), kept = 0;

		if (prev_tol > tol)
			tol = prev_tol;
		if (st->nopen && r->start > cur_end + tol)
			close_slices(st, 0, cur_end);
		if (st->nopen) {
			if (r->end <= cur_end)
				continue;	/* within the previous sample's time */
			/* An interval's start is exact: the gap before it, the
			 * previous slices'. A tick's is not: it takes the gap. */
			at = r->offcpu && r->start > cur_end ? r->start : cur_end;
		}
		for (uint32_t j = 0; j < n; j++)
			if (m->frames[path[j]].kind != OUT_FRAME_PROCESS &&
			    m->frames[path[j]].kind != OUT_FRAME_THREAD)
				path[kept++] = path[j];
		err = ct_sample(st, m, path, kept, at);
		if (err)
			return err;
		cur_end = r->end;
		prev_tol = r->offcpu ? 0 : r->end - r->start;
	}
	close_slices(st, 0, cur_end);
	return 0;
}

static const char *const kind_names[] = {
	[OUT_FRAME_PYTHON] = "python", [OUT_FRAME_STATUS] = "marker",
	[OUT_FRAME_PROCESS] = "marker", [OUT_FRAME_THREAD] = "marker",
	[OUT_FRAME_KERNEL] = "kernel", [OUT_FRAME_NATIVE] = "native",
};

/* Nanoseconds to the nearest microsecond. Whole microseconds: readers add
 * ts and dur in floating point, and a child must end exactly where its
 * parent does (speedscope pairs the ends by their times). */
static uint64_t to_us(uint64_t ns)
{
	return ns / 1000 + (ns % 1000 >= 500);
}

static void write_slices(FILE *f, const struct ct_state *st, const struct out_model *m,
			 const struct out_thread *th)
{
	for (uint32_t i = 0; i < st->nslices; i++) {
		const struct ct_slice *sl = &st->slices[i];
		const struct out_frame *fr = &m->frames[sl->frame];
		uint64_t ts = to_us(sl->start), end = to_us(sl->end);

		if (end == ts)
			continue;	/* under a microsecond, and so are its children */
		fputs(",\n{\"ph\":\"X\",\"name\":", f);
		json_write_string(f, fr->function);
		fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%" PRIu64 ",\"dur\":%"
			PRIu64, kind_names[fr->kind], (int)th->pid, (int)th->tid, ts, end - ts);
		if (*fr->file) {
			fputs(",\"args\":{\"file\":", f);
			json_write_string(f, fr->file);
			fprintf(f, ",\"line\":%d}", fr->firstlineno ? fr->firstlineno : fr->line);
		}
		fputc('}', f);
	}
}

/* The metadata naming thread @t's track, and its process's the first time. */
static void write_track(FILE *f, const struct out_model *m, uint32_t t)
{
	const struct out_thread *th = &m->threads[t];
	uint32_t p = 0;

	while (p < t && m->threads[p].pid != th->pid)
		p++;
	if (p == t) {
		/* Thread 0's process is the first event: no comma before it. */
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,"
			"\"args\":{\"name\":", t ? ",\n" : "\n", (int)th->pid, (int)th->tid);
		json_write_string(f, th->comm);
		fputs("}}", f);
	}
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
		"\"args\":{\"name\":", (int)th->pid, (int)th->tid);
	json_write_string(f, th->name);
	fputs("}}", f);
}

static int ct_finish(struct output *o)
{
	struct ct_state *st = ct_state(o);
	const struct out_model *m = &o->m;
	uint32_t *path = NULL, from = 0;
	int err = 0;

	if (!st)
		return -ENOMEM;
	path = out_model__path_buf(m);
	st->open = out_model__path_buf(m);
	if (!path || !st->open) {
		err = -ENOMEM;
		goto out;
	}
	if (st->nrecs)
		qsort(st->recs, st->nrecs, sizeof(*st->recs), rec_cmp);
	fputs("{\"traceEvents\":[", o->f);
	for (uint32_t t = 0; t < m->nthreads && !ferror(o->f); t++) {
		uint32_t to = from;

		while (to < st->nrecs && st->recs[to].thread == t)
			to++;
		write_track(o->f, m, t);
		err = ct_thread_slices(st, m, from, to, path);
		if (err)
			goto out;
		write_slices(o->f, st, m, &m->threads[t]);
		from = to;
	}
	fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"pyprof-bpf\","
	      "\"mode\":", o->f);
	json_write_string(o->f, output__mode_label(&o->opts));
	fputs("}}\n", o->f);
	err = output__check_io(o);
out:
	free(path);
	return err;
}

static void ct_free(struct output *o)
{
	struct ct_state *st = o->priv;

	if (st) {
		free(st->recs);
		free(st->last);
		free(st->slices);
		free(st->open);
		free(st);
	}
	o->priv = NULL;
}

const struct output_ops output_chrome_trace_ops = {
	.aggregate = 1,
	.add = ct_add,
	.finish = ct_finish,
	.free_priv = ct_free,
};
