/* SPDX-License-Identifier: MIT */
/*
 * tables.h - the containers the writers' model is built on (output_tables.c):
 * growable arrays, a hash map of 64-bit key pairs, interned strings, a string
 * hash. Not tied to a format: top's aggregate, the agent and the raw
 * recording's reader use them too, so they have a header of their own
 * rather than the writers' internal.h.
 */
#ifndef PYPROF_OUTPUT_TABLES_H
#define PYPROF_OUTPUT_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define OUT_NONE UINT32_MAX

/* A hash map from a pair of 64-bit keys to a 32-bit value. */
struct out_map {
	struct out_map_ent *ents;
	uint32_t cap;		/* power of two, 0 until the first insert */
	uint32_t count;
};
/* The value of (a, b), or OUT_NONE. */
uint32_t out_map__get(const struct out_map *m, uint64_t a, uint64_t b);
/* Insert (a, b) -> val; the key must not be present. 0 or -ENOMEM. */
int out_map__put(struct out_map *m, uint64_t a, uint64_t b, uint32_t val);
void out_map__clear(struct out_map *m);

/* Interned strings with dense ids and stable pointers. */
struct out_strtab {
	char **strs;		/* by id */
	uint32_t n, cap;
	uint32_t *slots;	/* id + 1, 0 = empty */
	uint32_t nslots;
};
/* Id of @s (interned on first use) or -ENOMEM. */
int64_t out_strtab__id(struct out_strtab *t, const char *s);
void out_strtab__clear(struct out_strtab *t);

/* The 64-bit FNV-1a hash of @s. */
uint64_t out_fnv1a(const char *s);

/* Grow an array of @size-byte items to hold at least @need; 0 or -ENOMEM. */
int out_grow(void **arr, uint32_t *cap, uint64_t need, size_t size);

#endif
