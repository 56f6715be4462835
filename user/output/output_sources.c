// SPDX-License-Identifier: MIT
/* output_sources.c - a recording's source files (sources.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/sources.h"

/*
 * Paths are keyed by (hash + j, length): a path whose hash another path took
 * (a target may choose its file names to collide) takes the next free j.
 * @slot gets the key's j where @path is, or the first free one.
 */
static uint32_t src_lookup(const struct out_sources *set, const char *path, uint64_t *slot)
{
	uint64_t h = out_fnv1a(path), len = strlen(path);

	for (uint64_t j = 0;; j++) {
		uint32_t id = out_map__get(&set->map, h + j, len);

		if (id == OUT_NONE || !strcmp(set->v[id].path, path)) {
			*slot = h + j;
			return id;
		}
	}
}

uint32_t out_sources__find(const struct out_sources *set, const char *path)
{
	uint64_t slot;

	return src_lookup(set, path, &slot);
}

int out_sources__add(struct out_sources *set, const struct out_source *src)
{
	struct out_source *d;
	uint64_t slot;
	int err;

	if (src_lookup(set, src->path, &slot) != OUT_NONE)
		return 0;
	err = out_grow((void **)&set->v, &set->cap, (uint64_t)set->n + 1, sizeof(*set->v));
	if (err)
		return err;
	d = &set->v[set->n];
	*d = *src;
	d->path = strdup(src->path);
	d->text = NULL;
	if (d->path && src->text) {
		d->text = malloc(src->len + 1);
		if (d->text) {
			memcpy(d->text, src->text, src->len);
			d->text[src->len] = '\0';
		}
	}
	if (!d->path || (src->text && !d->text) ||
	    out_map__put(&set->map, slot, strlen(src->path), set->n)) {
		free(d->path);
		free(d->text);
		return -ENOMEM;
	}
	set->bytes += d->text ? d->len : 0;
	set->n++;
	return 0;
}

void out_sources__clear(struct out_sources *set)
{
	for (uint32_t i = 0; i < set->n; i++) {
		free(set->v[i].path);
		free(set->v[i].text);
	}
	free(set->v);
	out_map__clear(&set->map);
	memset(set, 0, sizeof(*set));
}
