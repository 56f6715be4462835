// SPDX-License-Identifier: MIT
/*
 * output_pstats.c - the file Python's pstats.Stats(path) and snakeviz read:
 * a marshal-serialised dict
 *
 *   {(file, firstlineno, funcname): (cc, nc, tt, ct, {caller: (cc, nc, tt, ct)})}
 *
 * with the columns filled as CPython 3.15's sampling profiler
 * (profiling.sampling, pstats output) fills them:
 *   cc  samples in which the function was executing (the leaf): "primitive
 *       calls" shows direct samples
 *   nc  samples in which the function was on the stack, once per sample
 *       however deep it recursed
 *   tt  the time of the cc samples, seconds (the sum of their weights)
 *   ct  the time of the nc samples, seconds: recursion never counts twice
 * Each caller's tuple is the same four for the samples in which that caller
 * called the function directly (an edge counts once per sample; cc, tt: the
 * function was the leaf). CPython writes a bare sample count there; pstats
 * reads both, and the tuple is what cProfile writes and snakeviz draws.
 *
 * Differences from CPython's file, on purpose: a function is keyed by its
 * first line (cProfile's key, so one row per function), where CPython keys
 * each executing line; and no ("__sampled__",) marker, which 3.15's pstats
 * takes for "show samples" but 3.11-3.14's pstats cannot load.
 *
 * Frames that are not Python code are keyed as cProfile keys built-ins,
 * ("~", 0, name), which pstats prints as the bare name: "[GIL wait]",
 * "<GC>", kernel functions, status markers, thread roots. A native function
 * is (DSO path, 0, symbol).
 *
 * marshal wire types used (documented in CPython's marshal format): '{' dict
 * ended by '0', ')' small tuple (1-byte count), 'i' int32, 'l' long (count of
 * 15-bit digits, then the digits, little end first), 'g' binary float, 'u'
 * str (int32 length, UTF-8); all little-endian. Read by marshal since 3.4.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

/* ---- marshal ---- */

static void m_u32(FILE *f, uint32_t v)
{
	unsigned char b[4] = { v & 0xff, v >> 8 & 0xff, v >> 16 & 0xff, v >> 24 };

	fwrite(b, 1, sizeof(b), f);
}

static void m_int(FILE *f, uint64_t v)
{
	uint32_t ndig = 0;

	if (v <= INT32_MAX) {
		fputc('i', f);
		m_u32(f, (uint32_t)v);
		return;
	}
	for (uint64_t x = v; x; x >>= 15)
		ndig++;
	fputc('l', f);
	m_u32(f, ndig);
	for (; v; v >>= 15) {
		fputc((int)(v & 0xff), f);
		fputc((int)(v >> 8 & 0x7f), f);
	}
}

static void m_float(FILE *f, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	fputc('g', f);
	for (int i = 0; i < 8; i++)
		fputc((int)(bits >> (8 * i) & 0xff), f);
}

/* A str: marshal decodes UTF-8, so bytes that are not become U+FFFD. */
static int m_str(FILE *f, const char *s)
{
	char *clean = out_utf8_clean(s);
	size_t len;

	if (!clean)
		return -ENOMEM;
	len = strlen(clean);
	fputc('u', f);
	m_u32(f, (uint32_t)len);
	fwrite(clean, 1, len, f);
	free(clean);
	return 0;
}

static void m_tuple(FILE *f, unsigned int n)
{
	fputc(')', f);
	fputc((int)n, f);
}

/* ---- the statistics ---- */

struct ps_cols {		/* cc, nc and their weights */
	uint64_t dcount, dweight, count, weight;
	uint32_t stamp;		/* last aggregate counted in (index + 1) */
};

struct ps_edge {
	uint32_t caller;
	uint32_t next;		/* next edge into the same callee; OUT_NONE ends */
	struct ps_cols c;
};

struct ps_state {
	struct out_funcs fx;
	struct ps_cols *fn;	/* by function */
	uint32_t *edges_in;	/* by function: its first incoming edge */
	struct ps_edge *edges;
	uint32_t nedges, edges_cap;
	struct out_map edge_map;	/* (caller, callee) -> edge */
};

static void ps_count(struct ps_cols *c, const struct out_agg *a, uint32_t stamp, int leaf)
{
	if (leaf) {
		c->dcount += a->count;
		c->dweight += a->weight;
	}
	if (c->stamp != stamp) {
		c->stamp = stamp;
		c->count += a->count;
		c->weight += a->weight;
	}
}

static int ps_edge(struct ps_state *st, uint32_t caller, uint32_t callee, uint32_t *out)
{
	uint32_t id = out_map__get(&st->edge_map, caller, callee);
	int err;

	if (id == OUT_NONE) {
		err = out_grow((void **)&st->edges, &st->edges_cap, (uint64_t)st->nedges + 1,
			       sizeof(*st->edges));
		if (!err)
			err = out_map__put(&st->edge_map, caller, callee, st->nedges);
		if (err)
			return err;
		id = st->nedges++;
		st->edges[id] = (struct ps_edge){ .caller = caller, .next = st->edges_in[callee] };
		st->edges_in[callee] = id;
	}
	*out = id;
	return 0;
}

/* Count one aggregate (a distinct stack) into its functions and edges. */
static int ps_stack(void *ctx, const struct out_agg *a, uint32_t k, const uint32_t *path,
		    uint32_t n)
{
	struct ps_state *st = ctx;
	uint32_t e;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t fn = st->fx.of[path[i]];

		ps_count(&st->fn[fn], a, k + 1, i == n - 1);
		if (!i)
			continue;
		err = ps_edge(st, st->fx.of[path[i - 1]], fn, &e);
		if (err)
			return err;
		ps_count(&st->edges[e].c, a, k + 1, i == n - 1);
	}
	return 0;
}

static int ps_key(FILE *f, const struct out_frame *fr)
{
	char buf[256];

	int py = fr->kind == OUT_FRAME_PYTHON;

	m_tuple(f, 3);
	if (m_str(f, py || fr->kind == OUT_FRAME_NATIVE ? fr->file : "~"))
		return -ENOMEM;
	m_int(f, py ? (uint64_t)fr->firstlineno : 0);
	return m_str(f, out_func__name(fr, buf, sizeof(buf)));
}

static void ps_cols(FILE *f, const struct ps_cols *c)
{
	m_int(f, c->dcount);
	m_int(f, c->count);
	m_float(f, (double)c->dweight / 1e9);
	m_float(f, (double)c->weight / 1e9);
}

static int ps_write(struct output *o, const struct ps_state *st)
{
	const struct out_model *m = &o->m;
	int err = 0;

	fputc('{', o->f);
	for (uint32_t fn = 0; fn < st->fx.n && !err; fn++) {
		if (!st->fn[fn].count)
			continue;	/* a frame of a stack no sample ended in */
		err = ps_key(o->f, &m->frames[st->fx.first[fn]]);
		m_tuple(o->f, 5);
		ps_cols(o->f, &st->fn[fn]);
		fputc('{', o->f);
		for (uint32_t e = st->edges_in[fn]; e != OUT_NONE && !err; e = st->edges[e].next) {
			err = ps_key(o->f, &m->frames[st->fx.first[st->edges[e].caller]]);
			m_tuple(o->f, 4);
			ps_cols(o->f, &st->edges[e].c);
		}
		fputc('0', o->f);
	}
	fputc('0', o->f);
	return err;
}

static int pstats_finish(struct output *o)
{
	struct ps_state st = { 0 };
	int err;

	err = out_funcs__build(&o->m, &st.fx);
	if (err)
		return err;
	st.fn = calloc(st.fx.n ? st.fx.n : 1, sizeof(*st.fn));
	st.edges_in = malloc((st.fx.n ? st.fx.n : 1) * sizeof(*st.edges_in));
	if (!st.fn || !st.edges_in) {
		err = -ENOMEM;
		goto out;
	}
	memset(st.edges_in, 0xff, (st.fx.n ? st.fx.n : 1) * sizeof(*st.edges_in));
	err = out_funcs__each_stack(&o->m, ps_stack, &st);
	if (!err)
		err = ps_write(o, &st);
	if (!err)
		err = output__check_io(o);
out:
	out_funcs__free(&st.fx);
	free(st.fn);
	free(st.edges_in);
	free(st.edges);
	out_map__clear(&st.edge_map);
	return err;
}

const struct output_ops output_pstats_ops = {
	.aggregate = 1,
	.finish = pstats_finish,
};
