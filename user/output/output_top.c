// SPDX-License-Identifier: MIT
/*
 * output_top.c - a terminal summary: the hottest functions by own samples
 * (the function was running) and total samples (it was on the stack; a
 * recursive function counts once per sample), as an aligned table.
 *
 * A recording whose samples weigh different times (off-CPU intervals, the
 * wall and off-cpu modes) is ranked and shown by time instead: own and
 * total milliseconds and their share of all the time recorded.
 *
 * Functions are (qualname, file, first line); lines are not split. Status
 * frames ([no-python-state], [truncated], ...) are listed like functions so
 * that the own column adds up to every sample. Control characters in names
 * are shown as '?', so a name cannot drive the terminal.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"
#include "util/text.h"

struct top_fn {
	uint32_t frame;		/* a frame of this function, for its names */
	uint64_t own, total;
	uint32_t stamp;		/* last aggregate that counted it in total */
};

static int cmp_fn(const void *a, const void *b)
{
	const struct top_fn *x = a, *y = b;

	if (x->own != y->own)
		return x->own < y->own ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->frame < y->frame ? -1 : x->frame > y->frame;
}

static int digits(uint64_t v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* The functions of the recording's frames, as they are ranked. */
struct top_table {
	struct top_fn *fns;
	uint32_t nfn, fcap;
	uint32_t *fn_of;	/* by frame id: its function, OUT_NONE for the roots */
	struct out_map fmap;	/* (fn_id, file_id), (kind, first line) -> function */
};

/* One function per (name, file, kind, first line) of the frames; roots are none. */
static int top_functions(const struct out_model *m, struct top_table *tt)
{
	int err;

	for (uint32_t i = 0; i < m->nframes; i++) {
		const struct out_frame *fr = &m->frames[i];
		uint64_t ka = (uint64_t)fr->fn_id << 32 | fr->file_id;
		uint64_t kb = (uint64_t)fr->kind << 32 | (uint32_t)fr->firstlineno;
		uint32_t id;

		if (fr->kind == OUT_FRAME_PROCESS || fr->kind == OUT_FRAME_THREAD) {
			tt->fn_of[i] = OUT_NONE;
			continue;
		}
		id = out_map__get(&tt->fmap, ka, kb);
		if (id == OUT_NONE) {
			err = out_grow((void **)&tt->fns, &tt->fcap, tt->nfn + 1, sizeof(*tt->fns));
			if (!err)
				err = out_map__put(&tt->fmap, ka, kb, tt->nfn);
			if (err)
				return err;
			id = tt->nfn++;
			tt->fns[id] = (struct top_fn){ .frame = i, .stamp = OUT_NONE };
		}
		tt->fn_of[i] = id;
	}
	return 0;
}

/* Each function's own and total samples (or time, @by_time). */
static void top_count(const struct out_model *m, struct top_table *tt, uint32_t *path,
		      bool by_time)
{
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t n = output__node_path(m, a->node, path);
		uint64_t v = by_time ? a->weight : a->count;

		if (tt->fn_of[path[n - 1]] != OUT_NONE)
			tt->fns[tt->fn_of[path[n - 1]]].own += v;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t id = tt->fn_of[path[j]];

			if (id == OUT_NONE || tt->fns[id].stamp == i)
				continue;
			tt->fns[id].stamp = i;
			tt->fns[id].total += v;
		}
	}
}

/* The ranked table: a summary line, a header, the top rows. */
static void top_print(struct output *o, const struct top_table *tt, bool by_time)
{
	const struct out_model *m = &o->m;
	uint64_t total = by_time ? m->total_weight : m->total_count;
	const struct top_fn *fns = tt->fns;
	uint32_t rows;
	FILE *f = o->f;
	int w;

	if (output__weighs_bytes(&o->opts))
		fprintf(f, "%" PRIu64 " samples in %u thread%s, %.1f MiB of new pages\n",
			m->total_count, m->nthreads, m->nthreads == 1 ? "" : "s",
			(double)m->total_weight / (1 << 20));
	else if (output__count_event(&o->opts))
		fprintf(f, "%" PRIu64 " samples in %u thread%s, %" PRIu64 " %s events\n",
			m->total_count, m->nthreads, m->nthreads == 1 ? "" : "s", m->total_weight,
			output__count_event(&o->opts));
	else
		fprintf(f, "%" PRIu64 " samples in %u thread%s, %.3f s of %s\n", m->total_count,
			m->nthreads, m->nthreads == 1 ? "" : "s", (double)m->total_weight / 1e9,
			by_time ? "time on and off the CPU" : "CPU");
	if (!tt->nfn) {
		fputs("(no samples)\n", f);
		return;
	}
	w = by_time ? digits(total / 1000000) + 2 : digits(total);
	if (w < (by_time ? 8 : 5))
		w = by_time ? 8 : 5;
	fprintf(f, "%*s %7s %*s %7s  %s\n", w, by_time ? "OWN ms" : "OWN", "OWN%", w,
		by_time ? "TOTAL ms" : "TOTAL", "TOTAL%", "FUNCTION (FILE:LINE)");
	rows = o->opts.top_rows ? o->opts.top_rows : 30;
	for (uint32_t i = 0; i < tt->nfn && i < rows; i++) {
		const struct out_frame *fr = &m->frames[fns[i].frame];
		double own = total ? 100.0 * (double)fns[i].own / (double)total : 0.0;
		double tot = total ? 100.0 * (double)fns[i].total / (double)total : 0.0;

		if (by_time)
			fprintf(f, "%*.1f %6.2f%% %*.1f %6.2f%%  ", w, (double)fns[i].own / 1e6, own,
				w, (double)fns[i].total / 1e6, tot);
		else
			fprintf(f, "%*" PRIu64 " %6.2f%% %*" PRIu64 " %6.2f%%  ", w, fns[i].own,
				own, w, fns[i].total, tot);
		put_clean(f, fr->function);
		if (fr->kind == OUT_FRAME_PYTHON) {
			fputs(" (", f);
			put_clean(f, *fr->file ? fr->file : "?");
			fprintf(f, ":%d)", fr->firstlineno);
		}
		fputc('\n', f);
	}
	if (tt->nfn > rows)
		fprintf(f, "(%u more functions)\n", tt->nfn - rows);
}

/* ---- report --diff: the functions whose share changed most ---- */

struct diff_fn {
	uint32_t frame;		/* a frame of it, in NEW or (new_side 0) BASE */
	int new_side;
	uint32_t stamp[2];	/* last aggregate counted in total, per side */
	uint64_t own[2], total[2];	/* BASE, NEW weights */
};

/* Own and total weight of each function key of @m into side @side of @fns. */
static void diff_count(const struct out_model *m, const uint32_t *keys, uint32_t *path,
		       struct diff_fn *fns, int side)
{
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t n = output__node_path(m, a->node, path);

		for (uint32_t j = 0; j < n; j++) {
			struct diff_fn *d = &fns[keys[path[j]]];

			if (!d->total[0] && !d->total[1] && !d->own[0] && !d->own[1]) {
				d->frame = path[j];
				d->new_side = side;
			}
			if (j == n - 1)
				d->own[side] += a->weight;
			if (d->stamp[side] != i + 1) {
				d->stamp[side] = i + 1;
				d->total[side] += a->weight;
			}
		}
	}
}

static double share(uint64_t v, uint64_t all)
{
	return all ? 100.0 * (double)v / (double)all : 0.0;
}

static uint64_t diff_all[2];

static double diff_change(const struct diff_fn *d)
{
	double t = share(d->total[1], diff_all[1]) - share(d->total[0], diff_all[0]);
	double s = share(d->own[1], diff_all[1]) - share(d->own[0], diff_all[0]);

	return fabs(t) > fabs(s) ? fabs(t) : fabs(s);
}

static int cmp_diff(const void *a, const void *b)
{
	double x = diff_change(a), y = diff_change(b);

	if (x != y)
		return x < y ? 1 : -1;
	return ((const struct diff_fn *)a)->frame < ((const struct diff_fn *)b)->frame ? -1 : 1;
}

static void diff_print(struct output *o, struct diff_fn *fns, uint32_t nfn)
{
	uint32_t rows = o->opts.top_rows ? o->opts.top_rows : 30;
	FILE *f = o->f;

	fprintf(f, "BASE %" PRIu64 " samples, NEW %" PRIu64 " samples: shares of each "
		"recording's time; functions matched by name and file (not line)\n",
		o->base.total_count, o->m.total_count);
	fprintf(f, "%8s %8s %8s %8s %8s %8s  %s\n", "dTOTAL", "dOWN", "BASE TOT", "NEW TOT",
		"BASE OWN", "NEW OWN", "FUNCTION (FILE)");
	for (uint32_t i = 0; i < nfn && i < rows; i++) {
		const struct diff_fn *d = &fns[i];
		const struct out_model *m = d->new_side ? &o->m : &o->base;
		const struct out_frame *fr = &m->frames[d->frame];

		if (diff_change(d) == 0.0)
			break;
		fprintf(f, "%+8.2f %+8.2f %7.2f%% %7.2f%% %7.2f%% %7.2f%%  ",
			share(d->total[1], diff_all[1]) - share(d->total[0], diff_all[0]),
			share(d->own[1], diff_all[1]) - share(d->own[0], diff_all[0]),
			share(d->total[0], diff_all[0]), share(d->total[1], diff_all[1]),
			share(d->own[0], diff_all[0]), share(d->own[1], diff_all[1]));
		put_clean(f, fr->function);
		if (fr->kind == OUT_FRAME_PYTHON) {
			fputs(" (", f);
			put_clean(f, *fr->file ? fr->file : "?");
			fputc(')', f);
		}
		fputc('\n', f);
	}
}

/* The diff table: functions of both recordings by how much their share changed. */
static int top_diff(struct output *o)
{
	struct out_strtab names = { 0 };
	struct out_map keys = { 0 };
	uint32_t *nk = calloc((size_t)o->m.nframes + 1, sizeof(*nk));
	uint32_t *bk = calloc((size_t)o->base.nframes + 1, sizeof(*bk));
	uint32_t *path = out_model__path_buf(&o->m), *bpath = out_model__path_buf(&o->base);
	struct diff_fn *fns = NULL;
	int err = !nk || !bk || !path || !bpath ? -ENOMEM : 0;

	if (!err)
		err = out_model__fn_keys(&o->m, &names, &keys, nk);
	if (!err)
		err = out_model__fn_keys(&o->base, &names, &keys, bk);
	if (!err) {
		fns = calloc((size_t)keys.count + 1, sizeof(*fns));
		err = fns ? 0 : -ENOMEM;
	}
	if (!err) {
		diff_count(&o->base, bk, bpath, fns, 0);
		diff_count(&o->m, nk, path, fns, 1);
		diff_all[0] = o->base.total_weight;
		diff_all[1] = o->m.total_weight;
		qsort(fns, keys.count, sizeof(*fns), cmp_diff);
		diff_print(o, fns, keys.count);
		err = output__check_io(o);
	}
	free(fns);
	free(nk);
	free(bk);
	free(path);
	free(bpath);
	out_strtab__clear(&names);
	out_map__clear(&keys);
	return err;
}

static int top_finish(struct output *o)
{
	const struct out_model *m = &o->m;
	struct top_table tt = { 0 };
	uint32_t *path = NULL;
	/* Time when the samples weigh different times; counts otherwise. */
	bool by_time = m->total_weight != m->total_count * (m->first_period ? m->first_period : 1);
	int err;

	if (o->base.total_count)
		return top_diff(o);
	tt.fn_of = calloc(m->nframes ? m->nframes : 1, sizeof(*tt.fn_of));
	path = out_model__path_buf(m);
	err = !tt.fn_of || !path ? -ENOMEM : top_functions(m, &tt);
	if (!err) {
		top_count(m, &tt, path, by_time);
		if (tt.nfn)
			qsort(tt.fns, tt.nfn, sizeof(*tt.fns), cmp_fn);
		top_print(o, &tt, by_time);
		err = output__check_io(o);
	}
	free(tt.fns);
	free(tt.fn_of);
	free(path);
	out_map__clear(&tt.fmap);
	return err;
}

const struct output_ops output_top_ops = {
	.aggregate = 1,
	.finish = top_finish,
};
