// SPDX-License-Identifier: MIT
/*
 * output_heatmap.c - source lines coloured by time: one self-contained HTML
 * page (no script, no external file), a section per source file that has
 * samples, ranked by own time, then total.
 *
 * A line's own time is the weight of the samples whose innermost Python
 * frame was executing it; its total time the weight of the samples with a
 * frame on it anywhere in the stack (once per sample, however deep the
 * recursion). A file's own and total are the same per file. Each sampled
 * line's row carries data-own, data-total (weights), data-own-n and
 * data-total-n (samples), its shares of the whole recording, and a
 * background from white (0) to red (the hottest line's own time; the total
 * column: to orange, the highest total). Lines no sample was on are plain.
 * With --opcodes, the "op" column names the instruction most of a line's
 * own samples were executing (the "[op] NAME" leaf after the innermost
 * Python frame), with its share of the line's own time, and the others
 * counted in its title; without, it stays empty.
 *
 * A file whose source is not kept (unreadable, too big, binary) lists its
 * sampled lines without text; one modified after the recording started, or
 * whose samples name lines beyond its end, carries a warning ("stale"): its
 * text may not be the code that ran.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

#define HM_OPS 4			/* instructions counted per line */

struct hm_line {
	uint32_t file;		/* index into hm->files */
	int line;
	uint64_t own, total, own_n, total_n;
	uint32_t stamp;		/* last aggregate counted in total */
	uint32_t op[HM_OPS];	/* "[op] NAME" frames of its own samples */
	uint64_t op_w[HM_OPS];	/* their weights; 0: free slot */
};

struct hm_file {
	uint32_t file_id;	/* the model's string id */
	uint64_t own, total, own_n, total_n;
	uint32_t stamp;
	int max_line;
	uint32_t first, nlines;	/* its lines in hm->order */
};

struct heatmap {
	struct hm_line *lines;
	uint32_t nlines, lines_cap;
	struct hm_file *files;
	uint32_t nfiles, files_cap;
	struct out_map line_map;	/* (file_id, line) -> line */
	struct out_map file_map;	/* (file_id, 0) -> file */
	uint32_t *order;		/* lines by file, then line number */
	uint64_t max_own, max_total;
};

static int hm_file_of(struct heatmap *hm, uint32_t file_id, uint32_t *out)
{
	uint32_t id = out_map__get(&hm->file_map, file_id, 0);
	int err;

	if (id == OUT_NONE) {
		err = out_grow((void **)&hm->files, &hm->files_cap, (uint64_t)hm->nfiles + 1,
			       sizeof(*hm->files));
		if (!err)
			err = out_map__put(&hm->file_map, file_id, 0, hm->nfiles);
		if (err)
			return err;
		id = hm->nfiles++;
		hm->files[id] = (struct hm_file){ .file_id = file_id, .stamp = OUT_NONE };
	}
	*out = id;
	return 0;
}

static int hm_line_of(struct heatmap *hm, const struct out_frame *fr, struct hm_line **out)
{
	uint32_t id = out_map__get(&hm->line_map, fr->file_id, (uint32_t)fr->line), file;
	int err;

	if (id == OUT_NONE) {
		err = hm_file_of(hm, fr->file_id, &file);
		if (!err)
			err = out_grow((void **)&hm->lines, &hm->lines_cap,
				       (uint64_t)hm->nlines + 1, sizeof(*hm->lines));
		if (!err)
			err = out_map__put(&hm->line_map, fr->file_id, (uint32_t)fr->line,
					   hm->nlines);
		if (err)
			return err;
		id = hm->nlines++;
		hm->lines[id] = (struct hm_line){ .file = file, .line = fr->line,
						  .stamp = OUT_NONE };
		if (fr->line > hm->files[file].max_line)
			hm->files[file].max_line = fr->line;
	}
	*out = &hm->lines[id];
	return 0;
}

/* @w more of instruction frame @op on line @l (the lightest slot gives way). */
static void hm_count_op(struct hm_line *l, uint32_t op, uint64_t w)
{
	size_t min = 0;

	for (size_t k = 0; k < HM_OPS; k++) {
		if (l->op_w[k] && l->op[k] == op) {
			l->op_w[k] += w;
			return;
		}
		if (l->op_w[k] < l->op_w[min])
			min = k;
	}
	if (l->op_w[min] < w) {
		l->op[min] = op;
		l->op_w[min] = w;
	}
}

static int is_op(const struct out_frame *fr)
{
	return fr->kind != OUT_FRAME_PYTHON && !strncmp(fr->function, "[op] ", 5);
}

/* Own and total of every sampled line and file. */
static int hm_count(const struct out_model *m, struct heatmap *hm, uint32_t *path)
{
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t n = output__node_path(m, a->node, path), op = OUT_NONE;
		int leaf = 1;

		/* Leaf first: the innermost Python frame has the own time. */
		for (uint32_t j = n; j-- > 0;) {
			const struct out_frame *fr = &m->frames[path[j]];
			struct hm_line *l;
			struct hm_file *f;
			int err;

			if (leaf && is_op(fr))
				op = path[j];
			if (fr->kind != OUT_FRAME_PYTHON || !*fr->file)
				continue;
			err = hm_line_of(hm, fr, &l);
			if (err)
				return err;
			f = &hm->files[l->file];
			if (leaf) {
				if (op != OUT_NONE)
					hm_count_op(l, op, a->weight);
				l->own += a->weight;
				l->own_n += a->count;
				f->own += a->weight;
				f->own_n += a->count;
				leaf = 0;
			}
			if (l->stamp != i) {
				l->stamp = i;
				l->total += a->weight;
				l->total_n += a->count;
			}
			if (f->stamp != i) {
				f->stamp = i;
				f->total += a->weight;
				f->total_n += a->count;
			}
		}
	}
	return 0;
}

static const struct heatmap *sort_hm;

static int cmp_file(const void *a, const void *b)
{
	const struct hm_file *x = a, *y = b;

	if (x->own != y->own)
		return x->own < y->own ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->file_id < y->file_id ? -1 : x->file_id > y->file_id;
}

static int cmp_line(const void *a, const void *b)
{
	const struct hm_line *x = &sort_hm->lines[*(const uint32_t *)a];
	const struct hm_line *y = &sort_hm->lines[*(const uint32_t *)b];

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Files ranked, each file's lines in hm->order[first, first + nlines). */
static int hm_rank(struct heatmap *hm)
{
	uint32_t *rank = calloc(hm->nfiles ? hm->nfiles : 1, sizeof(*rank));
	struct hm_file *files = hm->files;

	hm->order = calloc(hm->nlines ? hm->nlines : 1, sizeof(*hm->order));
	if (!rank || !hm->order) {
		free(rank);
		return -ENOMEM;
	}
	/* Sort the files, then renumber the lines' files by their rank. */
	for (uint32_t i = 0; i < hm->nfiles; i++)
		files[i].stamp = i;
	if (hm->nfiles)
		qsort(files, hm->nfiles, sizeof(*files), cmp_file);
	for (uint32_t i = 0; i < hm->nfiles; i++)
		rank[files[i].stamp] = i;
	for (uint32_t i = 0; i < hm->nlines; i++) {
		hm->lines[i].file = rank[hm->lines[i].file];
		hm->order[i] = i;
		if (hm->lines[i].own > hm->max_own)
			hm->max_own = hm->lines[i].own;
		if (hm->lines[i].total > hm->max_total)
			hm->max_total = hm->lines[i].total;
	}
	free(rank);
	sort_hm = hm;
	if (hm->nlines)
		qsort(hm->order, hm->nlines, sizeof(*hm->order), cmp_line);
	for (uint32_t i = hm->nlines; i-- > 0;) {
		files[hm->lines[hm->order[i]].file].first = i;
		files[hm->lines[hm->order[i]].file].nlines++;
	}
	return 0;
}

static const char hm_css[] =
	"body{margin:0;padding:8px;font:13px sans-serif;background:#fff;color:#000}\n"
	"h1{font-size:16px;margin:0 0 6px}\n"
	"nav ol{margin:4px 0 10px;padding-left:2em}\n"
	"section{margin:14px 0}\n"
	"h2{font:bold 13px monospace;margin:4px 0;padding:3px 6px;background:#eee}\n"
	"p.stale{background:#fff3c4;border:1px solid #d9a400;padding:3px 6px;margin:2px 0}\n"
	"p.nosrc{color:#555;margin:2px 0}\n"
	"table{border-collapse:collapse;font:12px monospace}\n"
	"td{padding:0 6px;white-space:pre;vertical-align:top}\n"
	"td.ln,td.own,td.tot,td.op{text-align:right;color:#333}\n"
	"td.ln{color:#888}\n"
	"th{font:bold 11px sans-serif;text-align:right;padding:0 6px}\n"
	"th.src{text-align:left}\n";

/* White to red (own) or to orange (total) as @v goes from 0 to @max. */
static void hm_colour(FILE *f, uint64_t v, uint64_t max, int total)
{
	double x = max ? (double)v / (double)max : 0.0;
	int g = (int)(255.0 - (total ? 110.0 : 215.0) * x + 0.5);
	int b = (int)(255.0 - 215.0 * x + 0.5);

	fprintf(f, " style=\"background:rgb(255,%d,%d)\"", g, b);
}

static void hm_figure(FILE *f, const char *cls, uint64_t v, uint64_t all, uint64_t max,
		      int total)
{
	fprintf(f, "<td class=\"%s\"", cls);
	hm_colour(f, v, max, total);
	fprintf(f, ">%.2f%%</td>", all ? 100.0 * (double)v / (double)all : 0.0);
}

/* The op cell: the line's commonest instruction and its share of the line's
 * own time; every instruction counted, in its title. */
static void hm_op_cell(struct output *o, const struct hm_line *l)
{
	FILE *f = o->f;
	size_t best = 0;

	for (size_t k = 1; l && k < HM_OPS; k++)
		if (l->op_w[k] > l->op_w[best])
			best = k;
	if (!l || !l->op_w[best] || !l->own) {
		fputs("<td class=\"op\"></td>", f);
		return;
	}
	fputs("<td class=\"op\" title=\"", f);
	for (size_t k = 0; k < HM_OPS; k++) {
		if (!l->op_w[k])
			continue;
		out_html_escaped(f, o->m.frames[l->op[k]].function + 5);
		fprintf(f, " %.1f%%&#10;", 100.0 * (double)l->op_w[k] / (double)l->own);
	}
	fputs("\" data-op=\"", f);
	out_html_escaped(f, o->m.frames[l->op[best]].function + 5);
	fputs("\">", f);
	out_html_escaped(f, o->m.frames[l->op[best]].function + 5);
	fprintf(f, " %.0f%%</td>", 100.0 * (double)l->op_w[best] / (double)l->own);
}

/* One row: a line's number, figures (when sampled), op column, text. */
static void hm_row(struct output *o, const struct heatmap *hm, const struct hm_line *l,
		   int lineno, const char *text, size_t len)
{
	uint64_t all = o->m.total_weight;
	FILE *f = o->f;
	char *clean;

	if (l)
		fprintf(f, "<tr class=\"l hot\" id=\"f%u-l%d\" data-line=\"%d\" "
			"data-own=\"%" PRIu64 "\" data-total=\"%" PRIu64 "\" data-own-n=\"%"
			PRIu64 "\" data-total-n=\"%" PRIu64 "\"><td class=\"ln\">%d</td>",
			l->file, lineno, lineno, l->own, l->total, l->own_n, l->total_n, lineno);
	else
		fprintf(f, "<tr class=\"l\" data-line=\"%d\"><td class=\"ln\">%d</td>"
			"<td class=\"own\"></td><td class=\"tot\"></td>", lineno, lineno);
	if (l) {
		hm_figure(f, "own", l->own, all, hm->max_own, 0);
		hm_figure(f, "tot", l->total, all, hm->max_total, 1);
	}
	hm_op_cell(o, l);
	fputs("<td class=\"src\"", f);
	if (l && l->own)
		hm_colour(f, l->own, hm->max_own, 0);
	fputc('>', f);
	clean = text ? strndup(text, len) : NULL;
	if (clean) {
		char *u = out_utf8_clean(clean);

		out_html_escaped(f, u ? u : "");
		free(u);
	}
	free(clean);
	fputs("</td></tr>\n", f);
}

/* The warnings of a file whose text may not be what ran. */
static void hm_file_notes(FILE *f, const struct out_source *src, const struct hm_file *hf,
			  int nlines)
{
	if (!src || !src->text) {
		fprintf(f, "<p class=\"nosrc\">Source not kept: %s.</p>\n",
			!src ? "none recorded (not a file path, or over the limits)" :
			src->flags & OUT_SRC_TOO_BIG ? "too large" :
			src->flags & OUT_SRC_BINARY ? "not text" :
			"could not be read in the target's root, or not the target's to read");
		return;
	}
	if (src->flags & OUT_SRC_CHANGED)
		fputs("<p class=\"stale\" data-why=\"changed\">This file was modified after the "
		      "recording started: its lines may not be the code that ran.</p>\n", f);
	if (hf->max_line > nlines)
		fprintf(f, "<p class=\"stale\" data-why=\"range\">Samples name line %d, beyond "
			"this file's %d lines: it is not the code that ran.</p>\n", hf->max_line,
			nlines);
}

static int count_lines(const char *t, size_t len)
{
	int n = 0;

	for (size_t i = 0; i < len; i++)
		n += t[i] == '\n';
	return n + (len && t[len - 1] != '\n');
}

static void hm_file(struct output *o, const struct heatmap *hm, uint32_t k)
{
	const struct hm_file *hf = &hm->files[k];
	const char *path = o->m.strs.strs[hf->file_id];
	uint32_t si = out_sources__find(&o->src, path), li = hf->first;
	const struct out_source *src = si == OUT_NONE ? NULL : &o->src.v[si];
	uint64_t all = o->m.total_weight ? o->m.total_weight : 1;
	const char *t = src ? src->text : NULL, *end = t ? t + src->len : NULL;
	int nlines = t ? count_lines(t, src->len) : 0;
	FILE *f = o->f;

	fprintf(f, "<section class=\"file\" id=\"f%u\" data-rank=\"%u\" data-own=\"%" PRIu64
		"\" data-total=\"%" PRIu64 "\" data-path=\"", k, k + 1, hf->own, hf->total);
	out_html_escaped(f, path);
	fputs("\"><h2>", f);
	out_html_escaped(f, path);
	fprintf(f, " &mdash; own %.2f%%, total %.2f%%</h2>\n", 100.0 * (double)hf->own / (double)all,
		100.0 * (double)hf->total / (double)all);
	hm_file_notes(f, src, hf, nlines);
	fputs("<table><tr><th>line</th><th>own</th><th>total</th><th>op</th>"
	      "<th class=\"src\">source</th></tr>\n", f);
	/* Every line of the text; then sampled lines beyond it (or without text). */
	for (int ln = 1; t && t < end; ln++) {
		const char *nl = memchr(t, '\n', (size_t)(end - t));
		size_t len = nl ? (size_t)(nl - t) : (size_t)(end - t);
		const struct hm_line *l = NULL;

		while (li < hf->first + hf->nlines && hm->lines[hm->order[li]].line < ln)
			li++;
		if (li < hf->first + hf->nlines && hm->lines[hm->order[li]].line == ln)
			l = &hm->lines[hm->order[li]];
		if (len && t[len - 1] == '\r')
			len--;
		hm_row(o, hm, l, ln, t, len);
		t = nl ? nl + 1 : end;
	}
	for (; li < hf->first + hf->nlines; li++) {
		const struct hm_line *l = &hm->lines[hm->order[li]];

		if (l->line > nlines || !nlines)
			hm_row(o, hm, l, l->line, NULL, 0);
	}
	fputs("</table></section>\n", f);
}

static void hm_page(struct output *o, const struct heatmap *hm)
{
	const struct out_model *m = &o->m;
	char title[256];
	FILE *f = o->f;

	if (o->opts.title)
		snprintf(title, sizeof(title), "%s", o->opts.title);
	else if (m->nthreads)
		snprintf(title, sizeof(title), "%s (pid %d): %s heatmap", m->threads[0].comm,
			 (int)m->threads[0].pid, output__mode_label(&o->opts));
	else
		snprintf(title, sizeof(title), "heatmap (no samples)");
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
	out_html_escaped(f, title);
	fprintf(f, "</title>\n<style>\n%s</style></head>\n<body>\n<h1>", hm_css);
	out_html_escaped(f, title);
	fprintf(f, "</h1>\n<p id=\"hm-info\">%" PRIu64 " samples, %.3f s; %u source files. "
		"A line's own time: samples executing it; total: samples with it on the "
		"stack.</p>\n<nav><ol>\n", m->total_count, (double)m->total_weight / 1e9,
		hm->nfiles);
	for (uint32_t k = 0; k < hm->nfiles; k++) {
		fprintf(f, "<li><a href=\"#f%u\">", k);
		out_html_escaped(f, m->strs.strs[hm->files[k].file_id]);
		fprintf(f, "</a> %.2f%%</li>\n", m->total_weight ? 100.0 *
			(double)hm->files[k].own / (double)m->total_weight : 0.0);
	}
	fputs("</ol></nav>\n", f);
	for (uint32_t k = 0; k < hm->nfiles; k++)
		hm_file(o, hm, k);
	fputs("</body></html>\n", f);
}

static int heatmap_finish(struct output *o)
{
	struct heatmap hm = { 0 };
	uint32_t *path = out_model__path_buf(&o->m);
	int err = path ? hm_count(&o->m, &hm, path) : -ENOMEM;

	if (!err)
		err = hm_rank(&hm);
	if (!err) {
		hm_page(o, &hm);
		err = output__check_io(o);
	}
	free(path);
	free(hm.lines);
	free(hm.files);
	free(hm.order);
	out_map__clear(&hm.line_map);
	out_map__clear(&hm.file_map);
	return err;
}

const struct output_ops output_heatmap_ops = {
	.aggregate = 1,
	.sources = 1,
	.finish = heatmap_finish,
};
