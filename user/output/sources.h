/* SPDX-License-Identifier: MIT */
/*
 * sources.h - a set of source files (types/out_source.h) keyed by path
 * (output_sources.c): what a heatmap writer, a raw recording's reader and the
 * recorder's source stage keep.
 */
#ifndef PYPROF_OUTPUT_SOURCES_H
#define PYPROF_OUTPUT_SOURCES_H

#include <stdint.h>
#include "output/tables.h"
#include "types/out_source.h"

struct out_sources {
	struct out_source *v;
	uint32_t n, cap;
	struct out_map map;	/* (hash of path + j, length) -> index */
	uint64_t bytes;		/* sum of the texts' lengths */
};

/* Index of @path, or OUT_NONE. */
uint32_t out_sources__find(const struct out_sources *set, const char *path);
/* A copy of @src added (a path already there is kept as it is). 0 or -ENOMEM. */
int out_sources__add(struct out_sources *set, const struct out_source *src);
void out_sources__clear(struct out_sources *set);

#endif
