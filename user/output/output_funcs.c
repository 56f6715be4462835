// SPDX-License-Identifier: MIT
/*
 * output_funcs.c - the functions of the model's frames, for the writers that
 * report per function (pstats, callgrind): frames are per line, a function is
 * one (kind, name, file, first line), so every line of it maps to one id.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

int out_funcs__build(const struct out_model *m, struct out_funcs *f)
{
	struct out_map map = { 0 };
	uint32_t cap = 0;
	int err = 0;

	*f = (struct out_funcs){ 0 };
	f->of = calloc(m->nframes ? m->nframes : 1, sizeof(*f->of));
	if (!f->of)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nframes; i++) {
		const struct out_frame *fr = &m->frames[i];
		uint64_t ka = (uint64_t)fr->fn_id << 32 | fr->file_id;
		uint64_t kb = (uint64_t)fr->kind << 32 | (uint32_t)fr->firstlineno;
		uint32_t id = out_map__get(&map, ka, kb);

		if (id == OUT_NONE) {
			id = f->n;
			err = out_grow((void **)&f->first, &cap, (uint64_t)id + 1, sizeof(*f->first));
			if (!err)
				err = out_map__put(&map, ka, kb, id);
			if (err)
				break;
			f->first[id] = i;
			f->n++;
		}
		f->of[i] = id;
	}
	out_map__clear(&map);
	if (err)
		out_funcs__free(f);
	return err;
}

void out_funcs__free(struct out_funcs *f)
{
	free(f->of);
	free(f->first);
	*f = (struct out_funcs){ 0 };
}

int out_funcs__each_stack(const struct out_model *m, out_stack_fn fn, void *ctx)
{
	uint32_t *path = out_model__path_buf(m);
	int err = 0;

	if (!path)
		return -ENOMEM;
	for (uint32_t k = 0; k < m->naggs && !err; k++)
		err = fn(ctx, &m->aggs[k], k, path, output__node_path(m, m->aggs[k].node, path));
	free(path);
	return err;
}

const char *out_func__name(const struct out_frame *fr, char *buf, size_t len)
{
	const char *base;

	/* An unnamed native function is named by its DSO, as
	 * stackcollapse-perf.pl does: "[libz.so.1]", not "[unknown]", so that
	 * readers do not merge all of them. */
	if (fr->kind != OUT_FRAME_NATIVE || strcmp(fr->function, "[unknown]") || !*fr->file)
		return fr->function;
	base = strrchr(fr->file, '/');
	snprintf(buf, len, "[%s]", base ? base + 1 : fr->file);
	return buf;
}
