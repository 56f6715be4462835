// SPDX-License-Identifier: MIT
/*
 * intervals.c - off-CPU intervals in progress: a dense array of intervals
 * and an open-addressing index from tid to slot (a thread has at most one).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "offcpu/intervals.h"

#define EMPTY UINT32_MAX

struct offcpu_ivs {
	struct offcpu_iv **ivs;		/* dense, n of cap */
	size_t n, cap;
	uint32_t *index;		/* slot + 0: EMPTY; nindex a power of two */
	size_t nindex;
};

static size_t hash_tid(pid_t tid, size_t mask)
{
	return ((uint32_t)tid * 2654435761u) & mask;
}

/* Where @tid is, or the empty slot it would take. */
static size_t probe(const struct offcpu_ivs *v, pid_t tid)
{
	size_t mask = v->nindex - 1, i = hash_tid(tid, mask);

	while (v->index[i] != EMPTY && v->ivs[v->index[i]]->tid != tid)
		i = (i + 1) & mask;
	return i;
}

static int reindex(struct offcpu_ivs *v, size_t nindex)
{
	uint32_t *index = malloc(nindex * sizeof(*index));

	if (!index)
		return -ENOMEM;
	free(v->index);
	v->index = index;
	v->nindex = nindex;
	memset(index, 0xff, nindex * sizeof(*index));
	for (size_t k = 0; k < v->n; k++)
		v->index[probe(v, v->ivs[k]->tid)] = (uint32_t)k;
	return 0;
}

int offcpu_ivs__new(struct offcpu_ivs **out)
{
	struct offcpu_ivs *v = calloc(1, sizeof(*v));

	if (!v || reindex(v, 64)) {
		free(v);
		return -ENOMEM;
	}
	*out = v;
	return 0;
}

void offcpu_ivs__free(struct offcpu_ivs *v)
{
	if (!v)
		return;
	for (size_t k = 0; k < v->n; k++) {
		free(v->ivs[k]->frames);
		free(v->ivs[k]);
	}
	free(v->ivs);
	free(v->index);
	free(v);
}

struct offcpu_iv *offcpu_ivs__get(struct offcpu_ivs *v, pid_t tid, bool create)
{
	size_t i = probe(v, tid);
	struct offcpu_iv *iv;

	if (v->index[i] != EMPTY)
		return v->ivs[v->index[i]];
	if (!create)
		return NULL;
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 32;
		struct offcpu_iv **ivs = realloc(v->ivs, cap * sizeof(*ivs));

		if (!ivs)
			return NULL;
		v->ivs = ivs;
		v->cap = cap;
	}
	/* At most half full: probes stay short. */
	if (2 * (v->n + 1) > v->nindex) {
		if (reindex(v, 2 * v->nindex))
			return NULL;
		i = probe(v, tid);
	}
	iv = calloc(1, sizeof(*iv));
	if (!iv)
		return NULL;
	iv->tid = tid;
	iv->syscall_nr = -1;
	v->ivs[v->n] = iv;
	v->index[i] = (uint32_t)v->n++;
	return iv;
}

int offcpu_iv__set_frames(struct offcpu_iv *iv, const struct py_rawframe *f, uint32_t n)
{
	if (n > iv->cap) {
		struct py_rawframe *fr = realloc(iv->frames, n * sizeof(*fr));

		if (!fr) {
			iv->nframes = 0;
			return -ENOMEM;
		}
		iv->frames = fr;
		iv->cap = n;
	}
	if (n)
		memcpy(iv->frames, f, n * sizeof(*f));
	iv->nframes = n;
	return 0;
}

void offcpu_ivs__remove(struct offcpu_ivs *v, pid_t tid)
{
	size_t i = probe(v, tid), k, mask = v->nindex - 1;

	if (v->index[i] == EMPTY)
		return;
	k = v->index[i];
	free(v->ivs[k]->frames);
	free(v->ivs[k]);
	/* The last interval takes the freed slot of the array. */
	v->ivs[k] = v->ivs[--v->n];
	/* Backward-shift deletion keeps every probe sequence unbroken. */
	v->index[i] = EMPTY;
	for (size_t j = (i + 1) & mask; v->index[j] != EMPTY; j = (j + 1) & mask) {
		uint32_t slot = v->index[j];

		v->index[j] = EMPTY;
		v->index[probe(v, v->ivs[slot]->tid)] = slot;
	}
	if (k < v->n)
		v->index[probe(v, v->ivs[k]->tid)] = (uint32_t)k;
}

size_t offcpu_ivs__count(const struct offcpu_ivs *v)
{
	return v->n;
}

struct offcpu_iv *offcpu_ivs__at(struct offcpu_ivs *v, size_t i)
{
	return i < v->n ? v->ivs[i] : NULL;
}
