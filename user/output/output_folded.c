// SPDX-License-Identifier: MIT
/*
 * output_folded.c - collapsed stacks, merged and sorted as
 * stackcollapse-perf.pl prints them: shared by collapsed and the flame graph.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

static int cmp_folded(const void *a, const void *b)
{
	const struct out_folded *x = a, *y = b;

	return strcmp(x->text, y->text);
}

void output__free_folded(struct out_folded *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v);
}

int output__build_folded(struct output *o, struct out_folded **out, size_t *nout)
{
	const struct out_model *m = &o->m;
	struct out_folded *v = NULL;
	uint32_t *path = NULL;
	size_t n = 0, w;
	int err = 0;

	*out = NULL;
	*nout = 0;
	path = out_model__path_buf(m);
	v = calloc(m->naggs ? m->naggs : 1, sizeof(*v));
	if (!path || !v) {
		err = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t k = output__node_path(m, a->node, path);
		size_t len = strlen(m->threads[a->thread].comm) + 1, pos;
		char *s;

		for (uint32_t j = 0; j < k; j++)
			len += strlen(out_frame__folded(&m->frames[path[j]])) + 1;
		s = malloc(len);
		if (!s) {
			err = -ENOMEM;
			goto out_free;
		}
		pos = strlen(m->threads[a->thread].comm);
		memcpy(s, m->threads[a->thread].comm, pos);
		for (uint32_t j = 0; j < k; j++) {
			const char *ft = out_frame__folded(&m->frames[path[j]]);
			size_t l = strlen(ft);

			s[pos++] = ';';
			memcpy(s + pos, ft, l);
			pos += l;
		}
		s[pos] = '\0';
		v[n].text = s;
		v[n].count = a->count;
		v[n].weight = a->weight;
		n++;
	}
	qsort(v, n, sizeof(*v), cmp_folded);
	/* Merge equal texts (the same stack seen in several threads). */
	for (size_t r = w = 0; r < n; r++) {
		if (w && !strcmp(v[w - 1].text, v[r].text)) {
			v[w - 1].count += v[r].count;
			v[w - 1].weight += v[r].weight;
			free(v[r].text);
			continue;
		}
		v[w++] = v[r];
	}
	n = n ? w : 0;
	free(path);
	*out = v;
	*nout = n;
	return 0;
out_free:
	free(path);
	output__free_folded(v, n);
	return err;
}
