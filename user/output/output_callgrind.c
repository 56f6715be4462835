// SPDX-License-Identifier: MIT
/*
 * output_callgrind.c - the callgrind profile format (version 1) that
 * KCachegrind and callgrind_annotate read.
 *
 * Two events: the mode's time in nanoseconds ("cpu_ns", "wall_ns",
 * "offcpu_ns", "gil_ns": sums of sample weights) and "samples". Positions
 * are source lines. A function is fl= its file and fn= its qualified name;
 * its self cost is on the lines it was executing when sampled (the leaf), a
 * call is "cfl= cfn= calls=<samples> <callee's first line>" followed by the
 * call site's line (the line the caller was executing) and the inclusive cost
 * of the call. Names are compressed ("fn=(3) name" once, then "fn=(3)").
 *
 * Recursion: a sample counts one call into each function on its stack, the
 * one into its outermost occurrence, so the costs of the calls into a
 * function sum to its inclusive cost (callgrind_annotate --inclusive=yes,
 * KCachegrind), however it recursed. The function at the stack's root has no
 * call into it.
 *
 * Frames that are not Python code: a native function is fl= its DSO, fn= its
 * symbol; markers ([GIL wait], <GC>, [truncated]...), kernel functions and
 * thread roots are fl=??? (valgrind's unknown file), fn= their text; all at
 * line 0. Newlines in a name become '?': the format is line based.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

struct cg_cost {
	uint32_t fn, line;	/* the caller's, for a call */
	uint32_t callee;	/* OUT_NONE: self cost */
	uint32_t next;		/* next cost of the same function; OUT_NONE ends */
	uint64_t count, weight;
};

struct cg_state {
	struct out_funcs fx;
	const struct out_frame *frames;	/* the model's */
	uint32_t *stamp;	/* by function: last aggregate seen in (index + 1) */
	uint32_t *costs_of;	/* by function: its first cost */
	struct cg_cost *costs;
	uint32_t ncosts, costs_cap;
	struct out_map cost_map;	/* (fn << 32 | line, callee) -> cost */
	uint8_t *named_fl, *named_fn;	/* compressed name given (by function) */
};

static int cg_add(struct cg_state *st, uint32_t fn, uint32_t line, uint32_t callee,
		  const struct out_agg *a)
{
	uint32_t id = out_map__get(&st->cost_map, (uint64_t)fn << 32 | line, callee);
	int err;

	if (id == OUT_NONE) {
		err = out_grow((void **)&st->costs, &st->costs_cap, (uint64_t)st->ncosts + 1,
			       sizeof(*st->costs));
		if (!err)
			err = out_map__put(&st->cost_map, (uint64_t)fn << 32 | line, callee,
					   st->ncosts);
		if (err)
			return err;
		id = st->ncosts++;
		st->costs[id] = (struct cg_cost){ fn, line, callee, st->costs_of[fn], 0, 0 };
		st->costs_of[fn] = id;
	}
	st->costs[id].count += a->count;
	st->costs[id].weight += a->weight;
	return 0;
}

/* One aggregate: self cost at the leaf's line; a call into each function's
 * outermost occurrence. */
static int cg_stack(void *ctx, const struct out_agg *a, uint32_t k, const uint32_t *path,
		    uint32_t n)
{
	struct cg_state *st = ctx;
	const struct out_frame *frames = st->frames;
	uint32_t leaf = path[n - 1];
	int err;

	err = cg_add(st, st->fx.of[leaf], (uint32_t)frames[leaf].line, OUT_NONE, a);
	for (uint32_t i = 0; i < n && !err; i++) {
		uint32_t fn = st->fx.of[path[i]];

		if (st->stamp[fn] == k + 1)
			continue;
		st->stamp[fn] = k + 1;
		if (i)
			err = cg_add(st, st->fx.of[path[i - 1]], (uint32_t)frames[path[i - 1]].line,
				     fn, a);
	}
	return err;
}

static void cg_text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\n' || *s == '\r' ? '?' : *s, f);
}

/* "fn=(id) name" the first time, "fn=(id)" after; @id counts from 0. */
static void cg_name(FILE *f, const char *key, uint8_t *named, uint32_t id, const char *name)
{
	fprintf(f, "%s=(%" PRIu32 ")", key, id + 1);
	if (!named[id]) {
		named[id] = 1;
		fputc(' ', f);
		cg_text(f, name);
	}
	fputc('\n', f);
}

/* A frame's file and its compressed id: its string's, or the model's
 * string count for "???" (no string has that id). */
static const char *cg_file(const struct out_model *m, const struct out_frame *fr, uint32_t *id)
{
	if ((fr->kind == OUT_FRAME_PYTHON || fr->kind == OUT_FRAME_NATIVE) && *fr->file) {
		*id = fr->file_id;
		return fr->file;
	}
	*id = m->strs.n;
	return "???";
}

static void cg_function(struct output *o, struct cg_state *st, uint32_t fn)
{
	const struct out_model *m = &o->m;
	const struct out_frame *fr = &m->frames[st->fx.first[fn]];
	const char *file;
	char buf[256];
	uint32_t fl;

	file = cg_file(m, fr, &fl);
	cg_name(o->f, "fl", st->named_fl, fl, file);
	cg_name(o->f, "fn", st->named_fn, fn, out_func__name(fr, buf, sizeof(buf)));
	for (uint32_t c = st->costs_of[fn]; c != OUT_NONE; c = st->costs[c].next) {
		const struct cg_cost *cc = &st->costs[c];

		if (cc->callee != OUT_NONE) {
			const struct out_frame *cf = &m->frames[st->fx.first[cc->callee]];

			file = cg_file(m, cf, &fl);
			cg_name(o->f, "cfl", st->named_fl, fl, file);
			cg_name(o->f, "cfn", st->named_fn, cc->callee,
				out_func__name(cf, buf, sizeof(buf)));
			fprintf(o->f, "calls=%" PRIu64 " %d\n", cc->count,
				cf->kind == OUT_FRAME_PYTHON ? cf->firstlineno : 0);
		}
		fprintf(o->f, "%" PRIu32 " %" PRIu64 " %" PRIu64 "\n", cc->line, cc->weight,
			cc->count);
	}
	fputc('\n', o->f);
}

static const char *cg_event(const struct output_opts *opts)
{
	const char *m = opts->mode;

	if (output__weighs_bytes(opts))
		return "bytes";
	if (output__count_event(opts))
		return output__count_event(opts);
	if (m && !strcmp(m, "wall"))
		return "wall_ns";
	if (m && !strcmp(m, "off-cpu"))
		return "offcpu_ns";
	if (m && !strcmp(m, "gil"))
		return "gil_ns";
	return "cpu_ns";
}

static void cg_header(struct output *o)
{
	const struct out_model *m = &o->m;

	fprintf(o->f, "# callgrind format\nversion: 1\ncreator: pyprof-bpf\n");
	if (m->nthreads) {
		fprintf(o->f, "pid: %d\ncmd: ", (int)m->threads[0].pid);
		cg_text(o->f, m->threads[0].comm);
		fputc('\n', o->f);
	}
	fprintf(o->f, "positions: line\nevent: %s : %s time (ns)\nevent: samples : Samples\n",
		cg_event(&o->opts), output__mode_label(&o->opts));
	fprintf(o->f, "events: %s samples\nsummary: %" PRIu64 " %" PRIu64 "\n\n",
		cg_event(&o->opts), m->total_weight, m->total_count);
}

static int callgrind_finish(struct output *o)
{
	struct cg_state st = { 0 };
	size_t n;
	int err;

	err = out_funcs__build(&o->m, &st.fx);
	if (err)
		return err;
	n = st.fx.n ? st.fx.n : 1;
	st.stamp = calloc(n, sizeof(*st.stamp));
	st.costs_of = malloc(n * sizeof(*st.costs_of));
	st.named_fl = calloc((size_t)o->m.strs.n + 1, 1);
	st.named_fn = calloc(n, 1);
	if (!st.stamp || !st.costs_of || !st.named_fl || !st.named_fn) {
		err = -ENOMEM;
		goto out;
	}
	memset(st.costs_of, 0xff, n * sizeof(*st.costs_of));
	st.frames = o->m.frames;
	err = out_funcs__each_stack(&o->m, cg_stack, &st);
	if (err)
		goto out;
	cg_header(o);
	for (uint32_t fn = 0; fn < st.fx.n; fn++)
		if (st.costs_of[fn] != OUT_NONE)
			cg_function(o, &st, fn);
	fprintf(o->f, "totals: %" PRIu64 " %" PRIu64 "\n", o->m.total_weight, o->m.total_count);
	err = output__check_io(o);
out:
	out_funcs__free(&st.fx);
	free(st.stamp);
	free(st.costs_of);
	free(st.named_fl);
	free(st.named_fn);
	free(st.costs);
	out_map__clear(&st.cost_map);
	return err;
}

const struct output_ops output_callgrind_ops = {
	.aggregate = 1,
	.finish = callgrind_finish,
};
