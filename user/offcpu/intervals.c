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
		free(v->ivs[k]->tasks);
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

int offcpu_iv__set_tasks(struct offcpu_iv *iv, const struct sample_task *t, uint32_t n,
			 uint32_t flags)
{
	size_t nfr = 0, names = 0;
	struct py_rawframe *fr;
	uint8_t *nm;

	free(iv->tasks);
	iv->tasks = NULL;
	iv->ntasks = iv->tasks_flags = 0;
	if (!n)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		nfr += t[i].nframes;
		names += t[i].name_len;
	}
	/* Tasks, then frames (8-byte aligned after them), then names. */
	iv->tasks = malloc(n * sizeof(*t) + nfr * sizeof(*fr) + names);
	if (!iv->tasks)
		return -ENOMEM;
	fr = (struct py_rawframe *)(iv->tasks + n);
	nm = (uint8_t *)(fr + nfr);
	for (uint32_t i = 0; i < n; i++) {
		iv->tasks[i] = t[i];
		if (t[i].nframes)
			memcpy(fr, t[i].frames, t[i].nframes * sizeof(*fr));
		iv->tasks[i].frames = fr;
		fr += t[i].nframes;
		if (t[i].name_len)
			memcpy(nm, t[i].name, t[i].name_len);
		iv->tasks[i].name = nm;
		nm += t[i].name_len;
	}
	iv->ntasks = n;
	iv->tasks_flags = flags;
	return 0;
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
	free(v->ivs[k]->tasks);
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
