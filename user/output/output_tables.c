// SPDX-License-Identifier: MIT
/*
 * output_tables.c - the containers the model and the writers build on: growable
 * arrays, a hash map of 64-bit key pairs, and a table of interned strings.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/tables.h"

int out_grow(void **arr, uint32_t *cap, uint64_t need, size_t size)
{
	uint32_t ncap;
	void *n;

	if (need <= *cap)
		return 0;
	if (need > UINT32_MAX / 2)
		return -ENOMEM;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	n = reallocarray(*arr, ncap, size);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

uint64_t out_fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct out_map_ent {
	uint64_t a, b;
	uint32_t val;		/* OUT_NONE: empty */
};

static uint32_t map_slot(uint64_t a, uint64_t b, uint32_t cap)
{
	return (uint32_t)mix64(a * 0x9e3779b97f4a7c15ull ^ mix64(b)) & (cap - 1);
}

uint32_t out_map__get(const struct out_map *m, uint64_t a, uint64_t b)
{
	uint32_t i;

	if (!m->cap)
		return OUT_NONE;
	for (i = map_slot(a, b, m->cap);; i = (i + 1) & (m->cap - 1)) {
		const struct out_map_ent *e = &m->ents[i];

		if (e->val == OUT_NONE)
			return OUT_NONE;
		if (e->a == a && e->b == b)
			return e->val;
	}
}

static void map_insert(struct out_map_ent *ents, uint32_t cap, uint64_t a, uint64_t b,
		       uint32_t val)
{
	uint32_t i;

	for (i = map_slot(a, b, cap); ents[i].val != OUT_NONE; i = (i + 1) & (cap - 1))
		;
	ents[i].a = a;
	ents[i].b = b;
	ents[i].val = val;
}

int out_map__put(struct out_map *m, uint64_t a, uint64_t b, uint32_t val)
{
	if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3) {
		uint32_t ncap = m->cap ? m->cap * 2 : 64;
		struct out_map_ent *n;

		if (ncap < m->cap)
			return -ENOMEM;
		n = malloc((size_t)ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (uint32_t i = 0; i < ncap; i++)
			n[i].val = OUT_NONE;
		for (uint32_t i = 0; i < m->cap; i++)
			if (m->ents[i].val != OUT_NONE)
				map_insert(n, ncap, m->ents[i].a, m->ents[i].b, m->ents[i].val);
		free(m->ents);
		m->ents = n;
		m->cap = ncap;
	}
	map_insert(m->ents, m->cap, a, b, val);
	m->count++;
	return 0;
}

void out_map__clear(struct out_map *m)
{
	free(m->ents);
	m->ents = NULL;
	m->cap = m->count = 0;
}

int64_t out_strtab__id(struct out_strtab *t, const char *s)
{
	uint64_t h = out_fnv1a(s);
	uint32_t i, id;
	char *copy;
	int err;

	if (t->nslots) {
		for (i = h & (t->nslots - 1); t->slots[i]; i = (i + 1) & (t->nslots - 1))
			if (!strcmp(t->strs[t->slots[i] - 1], s))
				return t->slots[i] - 1;
	}
	if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
		uint32_t nn = t->nslots ? t->nslots * 2 : 256;
		uint32_t *ns = calloc(nn, sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (uint32_t k = 0; k < t->n; k++) {
			for (i = out_fnv1a(t->strs[k]) & (nn - 1); ns[i]; i = (i + 1) & (nn - 1))
				;
			ns[i] = k + 1;
		}
		free(t->slots);
		t->slots = ns;
		t->nslots = nn;
	}
	err = out_grow((void **)&t->strs, &t->cap, t->n + 1, sizeof(*t->strs));
	if (err)
		return err;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	id = t->n++;
	t->strs[id] = copy;
	for (i = h & (t->nslots - 1); t->slots[i]; i = (i + 1) & (t->nslots - 1))
		;
	t->slots[i] = id + 1;
	return id;
}

void out_strtab__clear(struct out_strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
