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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "output/output.h"
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

static int top_finish(struct output *o)
{
	const struct out_model *m = &o->m;
	struct top_table tt = { 0 };
	uint32_t *path = NULL;
	/* Time when the samples weigh different times; counts otherwise. */
	bool by_time = m->total_weight != m->total_count * (m->first_period ? m->first_period : 1);
	int err;

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
