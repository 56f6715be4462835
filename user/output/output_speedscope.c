// SPDX-License-Identifier: MIT
/*
 * output_speedscope.c - speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json).
 *
 * shared.frames holds every frame once: name (the qualname, or the bracketed
 * text of a synthetic frame), file and line for Python frames. There is one
 * "sampled" profile per thread, named "<comm> pid <pid> tid <tid> (<thread
 * name>)", whose samples are the thread's distinct stacks (root first) and
 * whose weights are their summed periods in nanoseconds. The heaviest thread
 * is the one shown first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/json_writer.h"
#include "output/internal.h"

static void write_frame(FILE *f, const struct out_frame *fr)
{
	fputs("{\"name\":", f);
	json_write_string(f, fr->function);
	if (fr->kind == OUT_FRAME_PYTHON) {
		if (*fr->file) {
			fputs(",\"file\":", f);
			json_write_string(f, fr->file);
		}
		fprintf(f, ",\"line\":%d", fr->line);
	} else if ((fr->kind == OUT_FRAME_NATIVE && *fr->file) || fr->kind == OUT_FRAME_KERNEL) {
		/* The DSO, as speedscope's own perf import names it. */
		fputs(",\"file\":", f);
		json_write_string(f, fr->kind == OUT_FRAME_KERNEL ? "[kernel.kallsyms]" : fr->file);
	}
	fputc('}', f);
}

/*
 * The aggregates grouped by thread, each group in order of first appearance:
 * order[start[t]..start[t + 1]) are thread t's.
 */
static void group_by_thread(const struct out_model *m, uint32_t *start, uint32_t *order)
{
	for (uint32_t i = 0; i < m->naggs; i++)
		start[m->aggs[i].thread + 1]++;
	for (uint32_t t = 0; t < m->nthreads; t++)
		start[t + 1] += start[t];
	for (uint32_t i = 0, *fill = start; i < m->naggs; i++)
		order[fill[m->aggs[i].thread]++] = i;
	/* fill[] advanced start[t] to the end of group t: shift back. */
	for (uint32_t t = m->nthreads; t > 0; t--)
		start[t] = start[t - 1];
	start[0] = 0;
}

static void profile_title(const struct output *o, char *title, size_t len)
{
	const struct out_model *m = &o->m;

	if (o->opts.title)
		snprintf(title, len, "%s", o->opts.title);
	else if (m->nthreads)
		snprintf(title, len, "%s (pid %d)%s%s", m->threads[0].comm,
			 (int)m->threads[0].pid, o->opts.mode && strcmp(o->opts.mode, "cpu") ? ", " : "",
			 o->opts.mode && strcmp(o->opts.mode, "cpu") ? output__mode_label(&o->opts) : "");
	else
		snprintf(title, len, "empty profile");
}

/* Thread @t's sampled profile: its stacks and their weights (in @unit). */
static void write_profile(FILE *f, const struct out_model *m, uint32_t t, const uint32_t *start,
			  const uint32_t *order, uint32_t *path, const char *unit)
{
	const struct out_thread *th = &m->threads[t];
	char name[256];

	snprintf(name, sizeof(name), "%s pid %d tid %d (%s)", th->comm, (int)th->pid,
		 (int)th->tid, th->name);
	fputs(t ? ",\n{" : "\n{", f);
	fputs("\"type\":\"sampled\",\"name\":", f);
	json_write_string(f, name);
	fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64
		",\n\"samples\":[", unit, th->weight);
	for (uint32_t k = start[t]; k < start[t + 1]; k++) {
		uint32_t n = output__node_path(m, m->aggs[order[k]].node, path);

		fputs(k > start[t] ? ",[" : "[", f);
		for (uint32_t j = 0; j < n; j++)
			fprintf(f, j ? ",%u" : "%u", path[j]);
		fputc(']', f);
	}
	fputs("],\n\"weights\":[", f);
	for (uint32_t k = start[t]; k < start[t + 1]; k++)
		fprintf(f, "%s%" PRIu64, k > start[t] ? "," : "", m->aggs[order[k]].weight);
	fputs("]}", f);
}

static int speedscope_finish(struct output *o)
{
	const struct out_model *m = &o->m;
	uint32_t *start = NULL, *order = NULL, *path = NULL, active = 0;
	FILE *f = o->f;
	char title[128];
	int err = 0;

	start = calloc((size_t)m->nthreads + 1, sizeof(*start));
	order = calloc(m->naggs ? m->naggs : 1, sizeof(*order));
	path = out_model__path_buf(m);
	if (!start || !order || !path) {
		err = -ENOMEM;
		goto out;
	}
	group_by_thread(m, start, order);
	for (uint32_t t = 1; t < m->nthreads; t++)
		if (m->threads[t].weight > m->threads[active].weight)
			active = t;
	profile_title(o, title, sizeof(title));

	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", f);
	fputs("\"exporter\":\"pyprof-bpf\",\"name\":", f);
	json_write_string(f, title);
	fprintf(f, ",\"activeProfileIndex\":%u,\n\"shared\":{\"frames\":[\n", active);
	for (uint32_t i = 0; i < m->nframes; i++) {
		if (i)
			fputs(",\n", f);
		write_frame(f, &m->frames[i]);
	}
	fputs("]},\n\"profiles\":[", f);
	for (uint32_t t = 0; t < m->nthreads && !ferror(f); t++)
		/* speedscope knows time and bytes units; a count of events is "none" */
		write_profile(f, m, t, start, order, path,
			      output__weighs_bytes(&o->opts) ? "bytes" :
			      output__count_event(&o->opts) ? "none" : "nanoseconds");
	fputs("]}\n", f);
	err = output__check_io(o);
out:
	free(start);
	free(order);
	free(path);
	return err;
}

const struct output_ops output_speedscope_ops = {
	.aggregate = 1,
	.finish = speedscope_finish,
};
