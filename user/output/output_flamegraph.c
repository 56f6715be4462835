// SPDX-License-Identifier: MIT
/*
 * output_flamegraph.c - a self-contained interactive flame graph, as HTML
 * (default) or as a standalone SVG (an .svg path, or format "svg").
 *
 * The file holds the call tree (collapsed by frame text, with the comm under
 * an "all" root: the same stacks as the collapsed output) as JSON, and a small
 * script that lays it out and draws it as SVG: widths are CPU time (summed
 * periods), roots at the bottom, siblings in alphabetical order. Click a
 * frame to zoom into it ("Reset zoom" goes back); type a regular expression
 * in the search box (SVG: click "Search") to paint matching frames magenta and
 * see the share they cover; hover for a tooltip with the qualname, file:line,
 * samples and percentages. No network access, no external file. The script
 * also sets window.flamegraph (search, zoom, reset) for automation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/json_writer.h"
#include "output/internal.h"

/* Frame kinds in the JSON: enum out_frame_kind, and "all" and the comm frames. */
#define FG_KIND_ROOT 16

static const char fg_css_html[] =
	"body{margin:0;padding:8px;font:12px sans-serif;background:#fff;color:#000}\n"
	"header{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:6px}\n"
	"h1{font-size:16px;margin:0}\n"
	"#fg{display:block}\n"
	"#fg text{font:12px monospace;fill:#000;pointer-events:none}\n"
	"#fg g.f{cursor:pointer}\n"
	"#fg g.f:hover rect{stroke:#000;stroke-width:0.7}\n"
	"#fg g.dim rect{opacity:0.55}\n"
	"#fg-tip{position:absolute;display:none;white-space:pre-wrap;background:#ffffe8;"
	"border:1px solid #888;padding:4px 6px;font:12px monospace;pointer-events:none;"
	"max-width:70em;overflow-wrap:anywhere;box-shadow:2px 2px 4px #aaa}\n"
	"#fg-details{font:12px monospace;min-height:1.4em;white-space:pre;overflow:hidden}\n"
	"#fg-matched{font-weight:bold}\n";

static const char fg_css_svg[] =
	"text{font:12px monospace;fill:#000}\n"
	"g.f text{pointer-events:none}\n"
	"g.f:hover rect{stroke:#000;stroke-width:0.7}\n"
	"g.dim rect{opacity:0.55}\n"
	"#fg-title{font:bold 16px sans-serif}\n"
	"#fg-reset,#fg-search{cursor:pointer;fill:#1144aa;text-decoration:underline}\n";

/* The script that lays the tree out and draws it (assets/flamegraph.js). */
extern const char output_flamegraph_js[];

struct fnode {
	uint32_t frame;		/* index into the JSON frames */
	uint32_t parent;	/* OUT_NONE for the root */
	uint64_t key;		/* under its parent (fg_keys) */
	uint64_t weight;	/* inclusive, after the sums */
	uint64_t count;
};

struct fg_tree {
	struct fnode *v;
	uint32_t n, cap;
	struct out_map map;
	uint32_t *comm_frame;	/* by comm string id: JSON frame index, or OUT_NONE */
	uint32_t *comm_str;	/* by comm frame (after "all"): the comm's string id */
	uint32_t ncomm;
	uint32_t maxdepth;
	/* A differential view: each node's weight in the BASE tree (0: not
	 * there) and the BASE total; NULL: not a diff. */
	uint64_t *base;
	uint64_t base_total;
};

static int fg_child(struct fg_tree *t, uint32_t parent, uint64_t key, uint32_t frame,
		    uint32_t *out)
{
	uint32_t id = out_map__get(&t->map, parent, key);
	int err;

	if (id == OUT_NONE) {
		err = out_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v));
		if (err)
			return err;
		id = t->n;
		err = out_map__put(&t->map, parent, key, id);
		if (err)
			return err;
		t->v[id] = (struct fnode){ .frame = frame, .parent = parent, .key = key };
		t->n++;
	}
	*out = id;
	return 0;
}

/*
 * How fg_build() keys a tree's nodes under their parents: by frame id and
 * comm string id (NULL arrays), or for a differential view by keys that a
 * NEW and a BASE model share (out_model__fn_keys(), and the comm's id in the
 * shared names).
 */
struct fg_keys {
	const uint32_t *frame;	/* by frame id */
	const uint32_t *comm;	/* by the model's string id */
};

/* The tree of folded stacks: all -> comm -> frames, inclusive totals. */
static int fg_build(const struct out_model *m, struct fg_tree *t, uint32_t *path,
		    const struct fg_keys *k)
{
	uint32_t root, id;
	int err;

	t->comm_frame = malloc(((size_t)m->strs.n + 1) * sizeof(*t->comm_frame));
	t->comm_str = malloc(((size_t)m->strs.n + 1) * sizeof(*t->comm_str));
	if (!t->comm_frame || !t->comm_str)
		return -ENOMEM;
	for (uint32_t i = 0; i <= m->strs.n; i++)
		t->comm_frame[i] = OUT_NONE;
	err = fg_child(t, OUT_NONE, 0, m->nframes, &root);
	if (err)
		return err;
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t comm = m->threads[a->thread].comm_id, n, d = 1;

		if (t->comm_frame[comm] == OUT_NONE) {
			t->comm_str[t->ncomm] = comm;
			t->comm_frame[comm] = m->nframes + 1 + t->ncomm++;
		}
		err = fg_child(t, root, (uint64_t)1 << 40 | (k->comm ? k->comm[comm] : comm),
			       t->comm_frame[comm], &id);
		if (err)
			return err;
		n = output__node_path(m, a->node, path);
		for (uint32_t j = 0; j < n; j++, d++) {
			err = fg_child(t, id, k->frame ? k->frame[path[j]] : path[j], path[j], &id);
			if (err)
				return err;
		}
		if (d > t->maxdepth)
			t->maxdepth = d;
		t->v[id].weight += a->weight;
		t->v[id].count += a->count;
	}
	/* Children come after their parents: one backward pass sums subtrees. */
	for (uint32_t i = t->n; i-- > 1;) {
		t->v[t->v[i].parent].weight += t->v[i].weight;
		t->v[t->v[i].parent].count += t->v[i].count;
	}
	return 0;
}

static void fg_tree_free(struct fg_tree *t)
{
	free(t->v);
	free(t->comm_frame);
	free(t->comm_str);
	free(t->base);
	out_map__clear(&t->map);
}

/* The model's one comm string id, or OUT_NONE when its threads have several. */
static uint32_t single_comm(const struct out_model *m)
{
	for (uint32_t i = 1; i < m->nthreads; i++)
		if (m->threads[i].comm_id != m->threads[0].comm_id)
			return OUT_NONE;
	return m->nthreads ? m->threads[0].comm_id : OUT_NONE;
}

/*
 * The comm strings' ids in the shared names, by the model's string id; all
 * 0 when both recordings have one comm each, so that "python3" and
 * "python3.12" running the same program still match.
 */
static uint32_t *comm_keys(const struct out_model *m, const struct out_model *other,
			   struct out_strtab *names)
{
	uint32_t *k = calloc((size_t)m->strs.n + 1, sizeof(*k));
	int one = single_comm(m) != OUT_NONE && single_comm(other) != OUT_NONE;

	for (uint32_t i = 0; k && !one && i < m->nthreads; i++) {
		int64_t id = out_strtab__id(names, m->threads[i].comm);

		if (id < 0) {
			free(k);
			return NULL;
		}
		k[m->threads[i].comm_id] = (uint32_t)id;
	}
	return k;
}

/*
 * NEW's tree (o->m) with frames merged by function and file, and each node's
 * weight in BASE's tree (o->base) built the same way: the node reached from
 * the matching parent by the same key.
 */
static int fg_diff(struct output *o, struct fg_tree *t, uint32_t *path)
{
	struct out_strtab names = { 0 };
	struct out_map keys = { 0 };
	struct fg_tree bt = { 0 };
	uint32_t *fk = malloc(((size_t)o->m.nframes + 1) * sizeof(*fk));
	uint32_t *bk = malloc(((size_t)o->base.nframes + 1) * sizeof(*bk));
	uint32_t *ck = comm_keys(&o->m, &o->base, &names);
	uint32_t *bck = comm_keys(&o->base, &o->m, &names);
	uint32_t *bpath = out_model__path_buf(&o->base), *bnode = NULL;
	int err = !fk || !bk || !ck || !bck || !bpath ? -ENOMEM : 0;

	if (!err)
		err = out_model__fn_keys(&o->m, &names, &keys, fk);
	if (!err)
		err = out_model__fn_keys(&o->base, &names, &keys, bk);
	if (!err)
		err = fg_build(&o->m, t, path, &(struct fg_keys){ fk, ck });
	if (!err)
		err = fg_build(&o->base, &bt, bpath, &(struct fg_keys){ bk, bck });
	if (!err) {
		t->base = calloc(t->n, sizeof(*t->base));
		bnode = malloc(t->n * sizeof(*bnode));
		err = t->base && bnode ? 0 : -ENOMEM;
	}
	/* Parents come first: a node's BASE twin is its parent's twin's child. */
	for (uint32_t i = 0; !err && i < t->n; i++) {
		uint32_t p = t->v[i].parent;

		bnode[i] = p == OUT_NONE ? 0 : bnode[p] == OUT_NONE ? OUT_NONE :
			   out_map__get(&bt.map, bnode[p], t->v[i].key);
		t->base[i] = bnode[i] == OUT_NONE ? 0 : bt.v[bnode[i]].weight;
	}
	t->base_total = bt.n ? bt.v[0].weight : 0;
	free(bnode);
	fg_tree_free(&bt);
	out_strtab__clear(&names);
	out_map__clear(&keys);
	free(fk);
	free(bk);
	free(ck);
	free(bck);
	free(bpath);
	return err;
}

static void fg_json(struct output *o, const struct fg_tree *t, const char *title)
{
	const struct out_model *m = &o->m;
	FILE *f = o->f;

	fputs("{\"title\":", f);
	json_write_string_html(f, title);
	fputs(",\"unit\":", f);
	json_write_string_html(f, output__weighs_bytes(&o->opts) ? "bytes" :
			       output__count_event(&o->opts) ? output__count_event(&o->opts) :
			       m->first_period ? "ns" : "samples");
	if (o->opts.nevents > 1) {	/* each tree its event's: the page shows one */
		fputs(",\"events\":[", f);
		for (uint32_t k = 0; k < o->opts.nevents; k++) {
			if (k)
				fputc(',', f);
			json_write_string_html(f, o->opts.events[k]);
		}
		fputc(']', f);
	}
	fputs(",\"frames\":[\n", f);
	for (uint32_t i = 0; i < m->nframes; i++) {
		const struct out_frame *fr = &m->frames[i];

		fputc('[', f);
		/* Kernel frames as FlameGraph's --kernel marks them (name_[k]),
		 * a native [unknown] as [its DSO]. */
		json_write_string_html(f, fr->folded ? fr->folded : fr->function);
		fputc(',', f);
		json_write_string_html(f, fr->file);
		fprintf(f, ",%d,%d],\n", fr->line, (int)fr->kind);
	}
	fprintf(f, "[\"all\",\"\",0,%d]", FG_KIND_ROOT);
	/* The comm frames, in the order fg_build() numbered them. */
	for (uint32_t k = 0; k < t->ncomm; k++) {
		fputs(",\n[", f);
		json_write_string_html(f, m->strs.strs[t->comm_str[k]]);
		fprintf(f, ",\"\",0,%d]", FG_KIND_ROOT);
	}
	fputs("],\n\"nodes\":[", f);
	for (uint32_t i = 0; i < t->n; i++)
		fprintf(f, "%s%u,%d,%" PRIu64 ",%" PRIu64, i ? (i % 8 ? "," : ",\n") : "",
			t->v[i].frame, t->v[i].parent == OUT_NONE ? -1 : (int)t->v[i].parent,
			t->v[i].weight, t->v[i].count);
	if (t->base) {
		fprintf(f, "],\n\"baseTotal\":%" PRIu64 ",\"base\":[", t->base_total);
		for (uint32_t i = 0; i < t->n; i++)
			fprintf(f, "%s%" PRIu64, i ? (i % 16 ? "," : ",\n") : "", t->base[i]);
	}
	fputs("]}", f);
}

static void fg_html(struct output *o, const struct fg_tree *t, const char *title)
{
	FILE *f = o->f;

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
	out_html_escaped(f, title);
	fputs("</title>\n<style>\n", f);
	fputs(fg_css_html, f);
	fputs("</style></head>\n<body>\n<header><h1>", f);
	out_html_escaped(f, title);
	fputs("</h1><span id=\"fg-info\"></span>\n"
	      "<input id=\"fg-search\" type=\"search\" size=\"30\" "
	      "placeholder=\"Search (regular expression)\">\n"
	      "<button id=\"fg-reset\" type=\"button\">Reset zoom</button>\n", f);
	if (o->opts.nevents > 1)
		fputs("<label>Event <select id=\"fg-event\"></select></label>\n", f);
	fputs("<span id=\"fg-matched\"></span></header>\n"
	      "<div><svg id=\"fg\" xmlns=\"http://www.w3.org/2000/svg\"></svg></div>\n"
	      "<div id=\"fg-details\"></div>\n<div id=\"fg-tip\"></div>\n"
	      "<script type=\"application/json\" id=\"fg-data\">", f);
	fg_json(o, t, title);
	fputs("</script>\n<script>\n", f);
	fputs(output_flamegraph_js, f);
	fputs("</script>\n</body></html>\n", f);
}

static void fg_svg(struct output *o, const struct fg_tree *t, const char *title)
{
	FILE *f = o->f;
	unsigned int h = (t->maxdepth + 1) * 17 + 44 + 30;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"1200\" height=\"%u\" viewBox=\"0 0 1200 %u\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n<style type=\"text/css\">\n", h, h);
	fputs(fg_css_svg, f);
	fputs("</style>\n<title>", f);
	out_html_escaped(f, title);
	fputs("</title>\n<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
	      "<text id=\"fg-title\" x=\"600\" y=\"20\" text-anchor=\"middle\">", f);
	out_html_escaped(f, title);
	fprintf(f, "</text>\n<text id=\"fg-reset\" x=\"10\" y=\"36\">Reset zoom</text>\n"
		"<text id=\"fg-search\" x=\"1090\" y=\"36\">Search</text>\n"
		"<text id=\"fg-matched\" x=\"1090\" y=\"%u\"></text>\n"
		"<text id=\"fg-info\" x=\"120\" y=\"36\"></text>\n"
		"<text id=\"fg-details\" x=\"10\" y=\"%u\"></text>\n"
		"<g id=\"fg-frames\"></g>\n"
		"<script type=\"application/json\" id=\"fg-data\">", h - 10, h - 10);
	/* The JSON has no '<' or '&' (escaped as \u003c, \u0026): valid XML text. */
	fg_json(o, t, title);
	fputs("</script>\n<script type=\"text/ecmascript\"><![CDATA[\n", f);
	fputs(output_flamegraph_js, f);
	fputs("]]></script>\n</svg>\n", f);
}

static int flamegraph_finish(struct output *o)
{
	const struct out_model *m = &o->m;
	static const struct fg_keys no_keys;
	struct fg_tree t = { 0 };
	uint32_t *path = NULL;
	char title[256];
	int err;

	path = out_model__path_buf(m);
	if (!path) {
		err = -ENOMEM;
		goto out;
	}
	err = o->base.total_count ? fg_diff(o, &t, path) : fg_build(m, &t, path, &no_keys);
	if (err)
		goto out;
	if (o->opts.title)
		snprintf(title, sizeof(title), "%s", o->opts.title);
	else if (m->nthreads)
		snprintf(title, sizeof(title), "%s (pid %d): %s %sflame graph", m->threads[0].comm,
			 (int)m->threads[0].pid, output__mode_label(&o->opts),
			 t.base ? "differential " : "");
	else
		snprintf(title, sizeof(title), "CPU flame graph (no samples)");
	if (o->svg)
		fg_svg(o, &t, title);
	else
		fg_html(o, &t, title);
	err = output__check_io(o);
out:
	free(path);
	fg_tree_free(&t);
	return err;
}

const struct output_ops output_flamegraph_ops = {
	.aggregate = 1,
	.finish = flamegraph_finish,
};
