// SPDX-License-Identifier: MIT
/* output_sources.c - a recording's source files (output.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/output.h"

uint32_t out_sources__find(const struct out_sources *set, const char *path)
{
	uint32_t id = out_map__get(&set->map, out_fnv1a(path), strlen(path));

	/* Two paths of one hash and length: the later is never added (below). */
	if (id != OUT_NONE && strcmp(set->v[id].path, path))
		return OUT_NONE;
	return id;
}

int out_sources__add(struct out_sources *set, const struct out_source *src)
{
	uint64_t h = out_fnv1a(src->path);
	struct out_source *d;
	int err;

	if (out_map__get(&set->map, h, strlen(src->path)) != OUT_NONE)
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
	    out_map__put(&set->map, h, strlen(src->path), set->n)) {
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
