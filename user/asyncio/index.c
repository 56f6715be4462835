/* SPDX-License-Identifier: MIT */
/*
 * asyncio/index.c - a snapshot's tasks by id (the task object's address),
 * for the await tree and the task chains of samples: an open-addressing
 * table built once per snapshot (asyncio.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "asyncio/asyncio.h"

struct asyncio_index {
	uint64_t *keys;
	long *vals;
	size_t mask;
};

static size_t hash_id(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return (size_t)a;
}

int asyncio_index__new(const struct asyncio_snapshot *s, struct asyncio_index **out)
{
	struct asyncio_index *ix = calloc(1, sizeof(*ix));
	size_t cap = 16;

	*out = NULL;
	if (!ix)
		return -ENOMEM;
	while (cap < 2 * s->n)
		cap *= 2;
	ix->mask = cap - 1;
	ix->keys = calloc(cap, sizeof(*ix->keys));
	ix->vals = calloc(cap, sizeof(*ix->vals));
	if (!ix->keys || !ix->vals) {
		asyncio_index__free(ix);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n; i++) {
		size_t j = hash_id(s->tasks[i].addr) & ix->mask;

		while (ix->keys[j] && ix->keys[j] != s->tasks[i].addr)
			j = (j + 1) & ix->mask;
		if (!ix->keys[j]) {	/* the first of a listed-twice id wins */
			ix->keys[j] = s->tasks[i].addr;
			ix->vals[j] = (long)i;
		}
	}
	*out = ix;
	return 0;
}

long asyncio_index__find(const struct asyncio_index *ix, uint64_t id)
{
	size_t j;

	if (!id)
		return -1;
	for (j = hash_id(id) & ix->mask; ix->keys[j]; j = (j + 1) & ix->mask)
		if (ix->keys[j] == id)
			return ix->vals[j];
	return -1;
}

void asyncio_index__free(struct asyncio_index *ix)
{
	if (!ix)
		return;
	free(ix->keys);
	free(ix->vals);
	free(ix);
}
