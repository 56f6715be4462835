/* SPDX-License-Identifier: MIT */
/*
 * top/aggregate.c - own and total weights per function and per line, over a
 * window of buckets and since the start, per thread and for all of them.
 *
 * A key is a function (name, file) or a line of one (name, file, line),
 * interned with dense ids. Counts live in slots: for each key (the
 * all-threads figures) and for each (thread, key) cell, nb + 1 of them in a
 * row: one per bucket of the window, then the cumulative one. Rotating
 * zeroes the new bucket's slot everywhere, O(keys + cells) once a refresh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/output.h"		/* output__status_name() */
#include "output/tables.h"		/* out_map, out_strtab, out_grow */
#include "types/out_sample.h"
#include "sampling/sampler.h"		/* enum sample_status */
#include "commands/top/aggregate.h"

struct top_cnt {
	uint64_t own, total;		/* weights */
	uint64_t own_n, total_n;	/* samples */
};

struct top_key {
	uint32_t fn, file;	/* strtab ids */
	int line;		/* a line key's line; a function key's first line seen */
	int is_line;
	uint32_t stamp;		/* the last sample that counted its total */
};

struct top_cell {
	uint32_t thread, key;
};

struct top_agg {
	unsigned int nb;	/* buckets; slot nb is the cumulative one */
	unsigned int cur;	/* the bucket being filled */
	double first_s;		/* the first bucket's start */
	double *bstart;		/* each bucket's start; < 0: never used */
	struct out_strtab strs;
	struct top_key *keys;
	uint32_t nkeys, keys_cap;
	struct out_map key_map;		/* (fn << 32 | file, is_line << 32 | line) -> key */
	struct top_cnt *kcnt;		/* (nb + 1) per key: all threads */
	struct top_cell *cells;
	uint32_t ncells, cells_cap;
	struct out_map cell_map;	/* (thread, key) -> cell */
	struct top_cnt *ccnt;		/* (nb + 1) per cell */
	uint32_t kcnt_cap, ccnt_cap;	/* in keys, cells */
	struct top_thread *threads;
	uint32_t nthreads, threads_cap;
	struct out_map thread_map;	/* (pid, tid) -> thread */
	struct top_cnt *tcnt;		/* (nb + 1) per thread: .total = its weight */
	uint32_t tcnt_cap;
	struct top_cnt acnt[0x100];	/* (nb + 1) for all threads; nb < 0xff */
	struct out_map proc_map;	/* (pid, 0) -> 1 */
	uint32_t stamp;
	struct top_row *rows;
	uint32_t rows_cap;
	struct top_cnt *acc;		/* per key: a process view's sums */
	uint32_t acc_cap;
};

const char *top_sort__name(enum top_sort s)
{
	switch (s) {
	case TOP_SORT_TOTAL:
		return "total";
	case TOP_SORT_NAME:
		return "name";
	default:
		return "own";
	}
}

int top_agg__new(unsigned int buckets, struct top_agg **out)
{
	struct top_agg *a;

	*out = NULL;
	if (buckets < 1 || buckets >= 0xff)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->nb = buckets;
	a->bstart = malloc(buckets * sizeof(*a->bstart));
	if (!a->bstart) {
		free(a);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < buckets; i++)
		a->bstart[i] = -1;
	*out = a;
	return 0;
}

void top_agg__free(struct top_agg *a)
{
	if (!a)
		return;
	out_strtab__clear(&a->strs);
	out_map__clear(&a->key_map);
	out_map__clear(&a->cell_map);
	out_map__clear(&a->thread_map);
	out_map__clear(&a->proc_map);
	free(a->keys);
	free(a->kcnt);
	free(a->cells);
	free(a->ccnt);
	free(a->threads);
	free(a->tcnt);
	free(a->rows);
	free(a->acc);
	free(a->bstart);
	free(a);
}

/* Grow a slot array of (nb + 1) counts per item to hold @need items. */
static int grow_slots(struct top_agg *a, struct top_cnt **arr, uint32_t *cap, uint32_t need)
{
	uint32_t ncap = *cap;
	struct top_cnt *n;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap = ncap ? ncap * 2 : 256;
	n = realloc(*arr, (size_t)ncap * (a->nb + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + (size_t)*cap * (a->nb + 1), 0,
	       (size_t)(ncap - *cap) * (a->nb + 1) * sizeof(*n));
	*arr = n;
	*cap = ncap;
	return 0;
}

static int64_t key_of(struct top_agg *a, const char *fn, const char *file, int line,
		      int is_line)
{
	int64_t f = out_strtab__id(&a->strs, fn ? fn : "<unknown>");
	int64_t g = out_strtab__id(&a->strs, file ? file : "");
	uint64_t ka, kb;
	uint32_t k;
	int rc;

	if (f < 0 || g < 0)
		return -ENOMEM;
	ka = (uint64_t)f << 32 | (uint64_t)g;
	kb = (uint64_t)is_line << 32 | (uint32_t)(is_line ? line : 0);
	k = out_map__get(&a->key_map, ka, kb);
	if (k != OUT_NONE)
		return k;
	rc = out_grow((void **)&a->keys, &a->keys_cap, a->nkeys + 1, sizeof(*a->keys));
	if (!rc)
		rc = grow_slots(a, &a->kcnt, &a->kcnt_cap, a->nkeys + 1);
	if (!rc)
		rc = out_map__put(&a->key_map, ka, kb, a->nkeys);
	if (rc)
		return rc;
	a->keys[a->nkeys] = (struct top_key){ (uint32_t)f, (uint32_t)g, line, is_line, 0 };
	return a->nkeys++;
}

static int64_t cell_of(struct top_agg *a, uint32_t thread, uint32_t key)
{
	uint32_t c = out_map__get(&a->cell_map, thread, key);
	int rc;

	if (c != OUT_NONE)
		return c;
	rc = out_grow((void **)&a->cells, &a->cells_cap, a->ncells + 1, sizeof(*a->cells));
	if (!rc)
		rc = grow_slots(a, &a->ccnt, &a->ccnt_cap, a->ncells + 1);
	if (!rc)
		rc = out_map__put(&a->cell_map, thread, key, a->ncells);
	if (rc)
		return rc;
	a->cells[a->ncells] = (struct top_cell){ thread, key };
	return a->ncells++;
}

/* The thread's index, OUT_NONE past TOP_MAX_THREADS; -ENOMEM. */
static int64_t thread_of(struct top_agg *a, const struct out_sample *s)
{
	uint32_t t = out_map__get(&a->thread_map, (uint64_t)s->pid, (uint64_t)s->tid);
	struct top_thread *th;
	const char *comm = s->comm && *s->comm ? s->comm : "unknown";
	int rc;

	if (t == OUT_NONE) {
		if (a->nthreads >= TOP_MAX_THREADS)
			return OUT_NONE;
		rc = out_grow((void **)&a->threads, &a->threads_cap, a->nthreads + 1,
			      sizeof(*a->threads));
		if (!rc)
			rc = grow_slots(a, &a->tcnt, &a->tcnt_cap, a->nthreads + 1);
		if (!rc)
			rc = out_map__put(&a->thread_map, (uint64_t)s->pid, (uint64_t)s->tid,
					  a->nthreads);
		if (rc)
			return rc;
		t = a->nthreads++;
		memset(&a->threads[t], 0, sizeof(a->threads[t]));
		a->threads[t].pid = s->pid;
		a->threads[t].tid = s->tid;
	}
	th = &a->threads[t];
	/* The latest names: a thread may rename itself, a process exec. */
	snprintf(th->name, sizeof(th->name), "%s", s->thread_name && *s->thread_name ?
		 s->thread_name : comm);
	snprintf(th->comm, sizeof(th->comm), "%s", comm);
	return t;
}

static void count(struct top_cnt *c, uint64_t w, int own, int total)
{
	if (own) {
		c->own += w;
		c->own_n++;
	}
	if (total) {
		c->total += w;
		c->total_n++;
	}
}

/* Add to a key's all-threads slots and its thread cell's (bucket, cumulative). */
static int count_key(struct top_agg *a, int64_t thread, uint32_t key, uint64_t w, int own)
{
	int total = a->keys[key].stamp != a->stamp;
	struct top_cnt *k = &a->kcnt[(size_t)key * (a->nb + 1)];
	int64_t c;

	a->keys[key].stamp = a->stamp;
	if (!own && !total)
		return 0;
	count(&k[a->cur], w, own, total);
	count(&k[a->nb], w, own, total);
	if (thread == OUT_NONE)
		return 0;
	c = cell_of(a, (uint32_t)thread, key);
	if (c < 0)
		return (int)c;
	k = &a->ccnt[(size_t)c * (a->nb + 1)];
	count(&k[a->cur], w, own, total);
	count(&k[a->nb], w, own, total);
	return 0;
}

int top_agg__add(struct top_agg *a, const struct out_sample *s)
{
	uint64_t w = out_weight(s);
	int64_t t = thread_of(a, s);
	int rc;

	if (t < 0 && t != (int64_t)OUT_NONE)
		return (int)t;
	if (out_map__get(&a->proc_map, (uint64_t)s->pid, 0) == OUT_NONE &&
	    (rc = out_map__put(&a->proc_map, (uint64_t)s->pid, 0, 1)))
		return rc;
	a->stamp++;
	/* As the outputs show it: a status frame outermost ([truncated]), the
	 * whole stack when there is no frame ([no-python-state]). */
	if (s->status != SAMPLE_COMPLETE || !s->nframes) {
		char buf[32];
		const char *st = s->status == SAMPLE_COMPLETE ? "[no-python-frames]" :
				 output__status_name(s->status, buf, sizeof(buf));
		int64_t k = key_of(a, st, "", 0, 0);
		int64_t lk = k < 0 ? k : key_of(a, st, "", 0, 1);

		if (lk < 0)
			return (int)lk;
		rc = count_key(a, t, (uint32_t)k, w, !s->nframes && !s->nleaf);
		if (!rc)
			rc = count_key(a, t, (uint32_t)lk, w, !s->nframes && !s->nleaf);
		if (rc)
			return rc;
	}
	/* Innermost first: the leaf frames ([GIL wait], [syscall] read, kernel
	 * functions: the thread was there), then the Python and native ones. */
	for (uint32_t i = 0; i < s->nleaf + s->nframes; i++) {
		const struct out_leaf *lf = i < s->nleaf ? &s->leaf[s->nleaf - 1 - i] : NULL;
		const struct py_sym *f = lf ? NULL : &s->frames[i - s->nleaf];
		const char *fn = lf ? lf->name : f->function, *file = lf ? "" : f->file;
		int64_t fk = key_of(a, fn, file, lf ? 0 : f->firstlineno, 0);
		int64_t lk = fk < 0 ? fk : key_of(a, fn, file, lf ? 0 : f->line, 1);

		if (lk < 0)
			return (int)lk;
		rc = count_key(a, t, (uint32_t)fk, w, i == 0);
		if (!rc)
			rc = count_key(a, t, (uint32_t)lk, w, i == 0);
		if (rc)
			return rc;
	}
	count(&a->acnt[a->cur], w, 0, 1);
	count(&a->acnt[a->nb], w, 0, 1);
	if (t != (int64_t)OUT_NONE) {
		struct top_cnt *c = &a->tcnt[(size_t)t * (a->nb + 1)];

		count(&c[a->cur], w, 0, 1);
		count(&c[a->nb], w, 0, 1);
		a->threads[t].samples++;
	}
	return 0;
}

void top_agg__rotate(struct top_agg *a, double now_s)
{
	unsigned int b;

	if (a->bstart[a->cur] < 0) {	/* the first bucket starts now */
		a->bstart[a->cur] = a->first_s = now_s;
		return;
	}
	b = a->cur = (a->cur + 1) % a->nb;
	a->bstart[b] = now_s;
	for (uint32_t k = 0; k < a->nkeys; k++)
		memset(&a->kcnt[(size_t)k * (a->nb + 1) + b], 0, sizeof(struct top_cnt));
	for (uint32_t c = 0; c < a->ncells; c++)
		memset(&a->ccnt[(size_t)c * (a->nb + 1) + b], 0, sizeof(struct top_cnt));
	for (uint32_t t = 0; t < a->nthreads; t++)
		memset(&a->tcnt[(size_t)t * (a->nb + 1) + b], 0, sizeof(struct top_cnt));
	memset(&a->acnt[b], 0, sizeof(a->acnt[b]));
}

/* A view's sum of the slots @c[]: the window's buckets, or the cumulative one. */
static struct top_cnt sum(const struct top_agg *a, const struct top_cnt *c, int recent)
{
	struct top_cnt s = { 0 };

	if (!recent)
		return c[a->nb];
	for (unsigned int b = 0; b < a->nb; b++) {
		s.own += c[b].own;
		s.total += c[b].total;
		s.own_n += c[b].own_n;
		s.total_n += c[b].total_n;
	}
	return s;
}

size_t top_agg__nthreads(const struct top_agg *a)
{
	return a->nthreads;
}

const struct top_thread *top_agg__thread(const struct top_agg *a, size_t i)
{
	struct top_thread *th = &a->threads[i];

	th->recent = sum(a, &a->tcnt[i * (a->nb + 1)], 1).total_n;
	return th;
}

size_t top_agg__nprocs(const struct top_agg *a)
{
	return a->proc_map.count;
}

static int cmp_rows(const void *x, const void *y, void *arg)
{
	const struct top_row *r = x, *s = y;
	enum top_sort sort = *(const enum top_sort *)arg;
	int c;

#define CMP_DESC(f) do { if (r->f != s->f) return r->f < s->f ? 1 : -1; } while (0)
	if (sort == TOP_SORT_OWN) {
		CMP_DESC(own);
		CMP_DESC(total);
	} else if (sort == TOP_SORT_TOTAL) {
		CMP_DESC(total);
		CMP_DESC(own);
	}
#undef CMP_DESC
	c = strcmp(r->function, s->function);
	if (!c)
		c = strcmp(r->file, s->file);
	if (!c)
		c = r->line - s->line;
	return c;
}

static void add_cnt(struct top_cnt *d, const struct top_cnt *c)
{
	d->own += c->own;
	d->total += c->total;
	d->own_n += c->own_n;
	d->total_n += c->total_n;
}

/* A row of @key with @c, unless @c is empty. */
static void put_row(struct top_agg *a, uint32_t *nr, const struct top_key *key,
		    const struct top_cnt *c)
{
	if (!c->total_n && !c->own_n)
		return;
	a->rows[(*nr)++] = (struct top_row){
		.function = a->strs.strs[key->fn], .file = a->strs.strs[key->file],
		.line = key->line, .own = c->own, .total = c->total,
		.own_samples = c->own_n, .total_samples = c->total_n,
	};
}

int top_agg__rows(struct top_agg *a, const struct top_view *v, double now_s,
		  const struct top_row **rows, size_t *n, struct top_totals *tot)
{
	int per_thread = v->thread != TOP_ALL_THREADS && v->thread >= 0 &&
			 (uint32_t)v->thread < a->nthreads;
	/* One process: the sum of its threads' cells (a sample is one thread's). */
	int per_proc = !per_thread && v->pid > 0;
	uint32_t nitems = per_thread || per_proc ? a->ncells : a->nkeys, nr = 0;
	struct top_cnt all = { 0 }, c;
	double from = now_s;
	int rc;

	*rows = NULL;
	*n = 0;
	rc = out_grow((void **)&a->rows, &a->rows_cap, a->nkeys > nitems ? a->nkeys : nitems ?
		      nitems : 1, sizeof(*a->rows));
	if (!rc && per_proc)
		rc = out_grow((void **)&a->acc, &a->acc_cap, a->nkeys ? a->nkeys : 1,
			      sizeof(*a->acc));
	if (rc)
		return rc;
	if (per_proc)
		memset(a->acc, 0, (size_t)a->nkeys * sizeof(*a->acc));
	for (uint32_t i = 0; i < nitems; i++) {
		uint32_t k = per_thread || per_proc ? a->cells[i].key : i;
		const struct top_key *key = &a->keys[k];

		if (per_thread && a->cells[i].thread != (uint32_t)v->thread)
			continue;
		if (per_proc && a->threads[a->cells[i].thread].pid != v->pid)
			continue;
		if (key->is_line != !!v->lines)
			continue;
		c = sum(a, per_thread || per_proc ? &a->ccnt[(size_t)i * (a->nb + 1)] :
			&a->kcnt[(size_t)k * (a->nb + 1)], v->recent);
		if (per_proc)
			add_cnt(&a->acc[k], &c);
		else
			put_row(a, &nr, key, &c);
	}
	for (uint32_t k = 0; per_proc && k < a->nkeys; k++)
		put_row(a, &nr, &a->keys[k], &a->acc[k]);
	qsort_r(a->rows, nr, sizeof(*a->rows), cmp_rows, (void *)&v->sort);
	if (per_thread) {
		all = sum(a, &a->tcnt[(size_t)v->thread * (a->nb + 1)], v->recent);
	} else if (per_proc) {
		for (uint32_t t = 0; t < a->nthreads; t++) {
			if (a->threads[t].pid != v->pid)
				continue;
			c = sum(a, &a->tcnt[(size_t)t * (a->nb + 1)], v->recent);
			add_cnt(&all, &c);
		}
	} else {
		all = sum(a, a->acnt, v->recent);
	}
	tot->weight = all.total;
	tot->samples = all.total_n;
	/* The time covered: from the oldest bucket's start (recent), or the first's. */
	for (unsigned int b = 0; b < a->nb; b++)
		if (a->bstart[b] >= 0 && a->bstart[b] < from)
			from = a->bstart[b];
	if (!v->recent)
		from = a->first_s;
	tot->seconds = now_s - from;
	*rows = a->rows;
	*n = nr;
	return 0;
}
