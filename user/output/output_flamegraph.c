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
#include "output/output.h"

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

static const char fg_js[] =
	"(function () {\n"
	"'use strict';\n"
	"var NS = 'http://www.w3.org/2000/svg';\n"
	"var doc = document;\n"
	"var D = JSON.parse(doc.getElementById('fg-data').textContent);\n"
	"var html = !!doc.body;\n"
	"var ROW = 17, PAD = html ? 4 : 44, FOOT = html ? 4 : 30, CH = 7.3;\n"
	"var F = D.frames, V = D.nodes, n = V.length / 4;\n"
	"var frame = [], parent = [], weight = [], count = [], kids = [], depth = [], x = [];\n"
	"var i, maxd = 0;\n"
	"for (i = 0; i < n; i++) {\n"
	"	frame[i] = V[4 * i];\n"
	"	parent[i] = V[4 * i + 1];\n"
	"	weight[i] = V[4 * i + 2];\n"
	"	count[i] = V[4 * i + 3];\n"
	"	kids[i] = [];\n"
	"	if (parent[i] >= 0)\n"
	"		kids[parent[i]].push(i);\n"
	"}\n"
	"function label(k) {\n"
	"	var f = F[frame[k]];\n"
	"	if (f[3] !== 0)\n"
	"		return f[0];\n"
	"	return f[0] + ' (' + f[1].replace(/^.*\\//, '') + ':' + f[2] + ')';\n"
	"}\n"
	"function full(k) {\n"
	"	var f = F[frame[k]];\n"
	"	return f[3] === 0 ? f[0] + ' ' + f[1] + ':' + f[2] : f[1] ? f[0] + ' ' + f[1] : f[0];\n"
	"}\n"
	"for (i = 0; i < n; i++)\n"
	"	kids[i].sort(function (a, b) {\n"
	"		var la = label(a), lb = label(b);\n"
	"		return la < lb ? -1 : la > lb ? 1 : 0;\n"
	"	});\n"
	"(function layout() {\n"
	"	var st = [0], k, c, off;\n"
	"	depth[0] = 0;\n"
	"	x[0] = 0;\n"
	"	while (st.length) {\n"
	"		k = st.pop();\n"
	"		off = x[k];\n"
	"		for (c = 0; c < kids[k].length; c++) {\n"
	"			var j = kids[k][c];\n"
	"			x[j] = off;\n"
	"			off += weight[j];\n"
	"			depth[j] = depth[k] + 1;\n"
	"			if (depth[j] > maxd)\n"
	"				maxd = depth[j];\n"
	"			st.push(j);\n"
	"		}\n"
	"	}\n"
	"})();\n"
	"var root = doc.getElementById(html ? 'fg' : 'fg-frames');\n"
	"var svg = html ? root : doc.documentElement;\n"
	"var tip = doc.getElementById('fg-tip');\n"
	"var details = doc.getElementById('fg-details');\n"
	"var matchedEl = doc.getElementById('fg-matched');\n"
	"var zoomed = 0, matched = null, term = '';\n"
	"var total = weight[0] || 1, totalCount = count[0] || 1;\n"
	"\n"
	"function hash(s) {\n"
	"	var h = 2166136261, k;\n"
	"	for (k = 0; k < s.length; k++) {\n"
	"		h ^= s.charCodeAt(k);\n"
	"		h = Math.imul(h, 16777619) >>> 0;\n"
	"	}\n"
	"	return h;\n"
	"}\n"
	"function color(k) {\n"
	"	var f = F[frame[k]];\n"
	"	if (matched && matched[k])\n"
	"		return 'rgb(230,0,230)';\n"
	"	if (f[3] === 16)\n"
	"		return 'rgb(215,215,215)';\n"
	"	var h = hash(f[0]), a = (h & 255) / 255, b = ((h >>> 8) & 255) / 255;\n"
	"	var c = ((h >>> 16) & 255) / 255;\n"
	"	if (f[3] === 4)\n"
	"		return 'rgb(' + (200 + Math.round(30 * c)) + ',' + (110 + Math.round(60 * a)) +\n"
	"			',' + Math.round(40 * b) + ')';\n"
	"	if (f[3] === 5)\n"
	"		return 'rgb(' + (185 + Math.round(50 * c)) + ',' + (185 + Math.round(50 * a)) +\n"
	"			',' + (40 + Math.round(40 * b)) + ')';\n"
	"	if (f[3] !== 0)\n"
	"		return 'rgb(190,190,205)';\n"
	"	return 'rgb(' + (205 + Math.round(50 * c)) + ',' + Math.round(230 * a) + ',' +\n"
	"		Math.round(55 * b) + ')';\n"
	"}\n"
	"function pct(v, of) {\n"
	"	return (100 * v / of).toFixed(2) + '%';\n"
	"}\n"
	"function fmtTime(ns) {\n"
	"	if (D.unit !== 'ns')\n"
	"		return ns + ' ' + D.unit;\n"
	"	if (ns >= 1e9)\n"
	"		return (ns / 1e9).toFixed(3) + ' s';\n"
	"	if (ns >= 1e6)\n"
	"		return (ns / 1e6).toFixed(2) + ' ms';\n"
	"	return (ns / 1e3).toFixed(1) + ' us';\n"
	"}\n"
	"function info(k) {\n"
	"	var s = count[k] + (count[k] === 1 ? ' sample' : ' samples') + ' (' +\n"
	"		pct(weight[k], total) + ' of all';\n"
	"	if (zoomed)\n"
	"		s += ', ' + pct(weight[k], weight[zoomed]) + ' of zoomed';\n"
	"	return s + '), ' + fmtTime(weight[k]) + ' CPU';\n"
	"}\n"
	"function width() {\n"
	"	if (html)\n"
	"		return Math.max(200, root.parentNode.clientWidth - 16);\n"
	"	return +svg.getAttribute('width');\n"
	"}\n"
	"function el(name, attrs, parentEl) {\n"
	"	var e = doc.createElementNS(NS, name), a;\n"
	"	for (a in attrs)\n"
	"		e.setAttribute(a, attrs[a]);\n"
	"	parentEl.appendChild(e);\n"
	"	return e;\n"
	"}\n"
	"function draw(k, px, pw, H, dim) {\n"
	"	var y = H - FOOT - (depth[k] + 1) * ROW;\n"
	"	var cls = 'f' + (dim ? ' dim' : '') + (matched && matched[k] ? ' match' : '');\n"
	"	var g = el('g', { 'class': cls, 'data-n': k }, root);\n"
	"	el('rect', { x: px.toFixed(2), y: y, width: Math.max(pw - 0.5, 0.1).toFixed(2),\n"
	"		height: ROW - 1, rx: 2, fill: color(k) }, g);\n"
	"	var t = el('title', {}, g);\n"
	"	t.textContent = full(k) + '\\n' + info(k);\n"
	"	var chars = Math.floor((pw - 6) / CH);\n"
	"	if (chars >= 3) {\n"
	"		var s = label(k);\n"
	"		if (s.length > chars)\n"
	"			s = s.slice(0, chars - 2) + '..';\n"
	"		el('text', { x: (px + 3).toFixed(2), y: y + 12 }, g).textContent = s;\n"
	"	}\n"
	"}\n"
	"function render() {\n"
	"	var W = width(), H = PAD + (maxd + 1) * ROW + FOOT, scale, x0, st, k, c;\n"
	"	while (root.firstChild)\n"
	"		root.removeChild(root.firstChild);\n"
	"	if (html) {\n"
	"		svg.setAttribute('width', W);\n"
	"		svg.setAttribute('height', H);\n"
	"		H = H - PAD;\n"
	"	} else {\n"
	"		H = +svg.getAttribute('height');\n"
	"	}\n"
	"	x0 = x[zoomed];\n"
	"	scale = W / (weight[zoomed] || 1);\n"
	"	for (k = parent[zoomed]; k >= 0; k = parent[k])\n"
	"		draw(k, 0, W, H, true);\n"
	"	st = [zoomed];\n"
	"	while (st.length) {\n"
	"		k = st.pop();\n"
	"		var pw = weight[k] * scale;\n"
	"		if (pw < 0.3)\n"
	"			continue;\n"
	"		draw(k, (x[k] - x0) * scale, pw, H, false);\n"
	"		for (c = 0; c < kids[k].length; c++)\n"
	"			st.push(kids[k][c]);\n"
	"	}\n"
	"	showMatched();\n"
	"}\n"
	"function showMatched() {\n"
	"	if (!matchedEl)\n"
	"		return;\n"
	"	if (!matched) {\n"
	"		matchedEl.textContent = '';\n"
	"		return;\n"
	"	}\n"
	"	var sum = 0, st = [zoomed], k, c;\n"
	"	while (st.length) {\n"
	"		k = st.pop();\n"
	"		if (matched[k]) {\n"
	"			sum += weight[k];\n"
	"			continue;\n"
	"		}\n"
	"		for (c = 0; c < kids[k].length; c++)\n"
	"			st.push(kids[k][c]);\n"
	"	}\n"
	"	matchedEl.textContent = 'Matched: ' + pct(sum, weight[zoomed] || 1);\n"
	"}\n"
	"function search(s) {\n"
	"	var re, k, any = false;\n"
	"	term = s || '';\n"
	"	if (!term) {\n"
	"		matched = null;\n"
	"		render();\n"
	"		return 0;\n"
	"	}\n"
	"	try {\n"
	"		re = new RegExp(term, 'i');\n"
	"	} catch (e) {\n"
	"		re = new RegExp(term.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&'), 'i');\n"
	"	}\n"
	"	matched = [];\n"
	"	for (k = 0; k < n; k++)\n"
	"		if (re.test(full(k)) || re.test(label(k))) {\n"
	"			matched[k] = true;\n"
	"			any = true;\n"
	"		}\n"
	"	if (!any)\n"
	"		matched = [];\n"
	"	render();\n"
	"	return matched.filter(Boolean).length;\n"
	"}\n"
	"function zoom(k) {\n"
	"	zoomed = k;\n"
	"	render();\n"
	"}\n"
	"function nodeOf(e) {\n"
	"	var t = e.target;\n"
	"	while (t && t !== root && !(t.hasAttribute && t.hasAttribute('data-n')))\n"
	"		t = t.parentNode;\n"
	"	return t && t !== root ? +t.getAttribute('data-n') : -1;\n"
	"}\n"
	"root.addEventListener('click', function (e) {\n"
	"	var k = nodeOf(e);\n"
	"	if (k >= 0)\n"
	"		zoom(k);\n"
	"});\n"
	"root.addEventListener('mousemove', function (e) {\n"
	"	var k = nodeOf(e);\n"
	"	if (k < 0) {\n"
	"		if (tip)\n"
	"			tip.style.display = 'none';\n"
	"		return;\n"
	"	}\n"
	"	if (details)\n"
	"		details.textContent = full(k) + ' - ' + info(k);\n"
	"	if (tip) {\n"
	"		var fr = F[frame[k]], b = doc.createElement('b');\n"
	"		tip.textContent = '';\n"
	"		b.textContent = fr[0];\n"
	"		tip.appendChild(b);\n"
	"		if (fr[3] === 0)\n"
	"			tip.appendChild(doc.createTextNode('\\n' + fr[1] + ':' + fr[2]));\n"
	"		tip.appendChild(doc.createTextNode('\\n' + info(k)));\n"
	"		tip.style.display = 'block';\n"
	"		var tx = e.pageX + 12, ty = e.pageY + 12;\n"
	"		if (tx + tip.offsetWidth > window.innerWidth + window.scrollX)\n"
	"			tx = Math.max(0, e.pageX - tip.offsetWidth - 12);\n"
	"		tip.style.left = tx + 'px';\n"
	"		tip.style.top = ty + 'px';\n"
	"	}\n"
	"});\n"
	"root.addEventListener('mouseleave', function () {\n"
	"	if (tip)\n"
	"		tip.style.display = 'none';\n"
	"});\n"
	"var reset = doc.getElementById('fg-reset');\n"
	"if (reset)\n"
	"	reset.addEventListener('click', function () {\n"
	"		zoom(0);\n"
	"	});\n"
	"var box = doc.getElementById('fg-search');\n"
	"if (box && html) {\n"
	"	box.addEventListener('input', function () {\n"
	"		search(box.value);\n"
	"	});\n"
	"} else if (box) {\n"
	"	box.addEventListener('click', function () {\n"
	"		var s = window.prompt('Search (regular expression)', term);\n"
	"		if (s !== null)\n"
	"			search(s);\n"
	"	});\n"
	"}\n"
	"var info0 = doc.getElementById('fg-info');\n"
	"if (info0)\n"
	"	info0.textContent = totalCount + ' samples, ' + fmtTime(total) + ' CPU';\n"
	"if (html)\n"
	"	window.addEventListener('resize', render);\n"
	"window.flamegraph = {\n"
	"	search: search, zoom: zoom, reset: function () { zoom(0); },\n"
	"	label: label, full: full, frames: F,\n"
	"	weight: weight, count: count, frame: frame, parent: parent\n"
	"};\n"
	"render();\n"
	"})();\n";

/* @s with &, <, >, " and ' escaped, for HTML and XML text and attributes. */
static void put_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

struct fnode {
	uint32_t frame;		/* index into the JSON frames */
	uint32_t parent;	/* OUT_NONE for the root */
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
		t->v[id] = (struct fnode){ .frame = frame, .parent = parent };
		t->n++;
	}
	*out = id;
	return 0;
}

/* The tree of folded stacks: all -> comm -> frames, inclusive totals. */
static int fg_build(struct output *o, struct fg_tree *t, uint32_t *path)
{
	const struct out_model *m = &o->m;
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
		err = fg_child(t, root, (uint64_t)1 << 40 | comm, t->comm_frame[comm], &id);
		if (err)
			return err;
		n = output__node_path(m, a->node, path);
		for (uint32_t j = 0; j < n; j++, d++) {
			err = fg_child(t, id, path[j], path[j], &id);
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

static void fg_json(struct output *o, const struct fg_tree *t, const char *title)
{
	const struct out_model *m = &o->m;
	FILE *f = o->f;

	fputs("{\"title\":", f);
	json_write_string_html(f, title);
	fprintf(f, ",\"unit\":\"%s\",\"frames\":[\n", m->first_period ? "ns" : "samples");
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
	fputs("]}", f);
}

static void fg_html(struct output *o, const struct fg_tree *t, const char *title)
{
	FILE *f = o->f;

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
	put_escaped(f, title);
	fputs("</title>\n<style>\n", f);
	fputs(fg_css_html, f);
	fputs("</style></head>\n<body>\n<header><h1>", f);
	put_escaped(f, title);
	fputs("</h1><span id=\"fg-info\"></span>\n"
	      "<input id=\"fg-search\" type=\"search\" size=\"30\" "
	      "placeholder=\"Search (regular expression)\">\n"
	      "<button id=\"fg-reset\" type=\"button\">Reset zoom</button>\n"
	      "<span id=\"fg-matched\"></span></header>\n"
	      "<div><svg id=\"fg\" xmlns=\"http://www.w3.org/2000/svg\"></svg></div>\n"
	      "<div id=\"fg-details\"></div>\n<div id=\"fg-tip\"></div>\n"
	      "<script type=\"application/json\" id=\"fg-data\">", f);
	fg_json(o, t, title);
	fputs("</script>\n<script>\n", f);
	fputs(fg_js, f);
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
	put_escaped(f, title);
	fputs("</title>\n<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
	      "<text id=\"fg-title\" x=\"600\" y=\"20\" text-anchor=\"middle\">", f);
	put_escaped(f, title);
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
	fputs(fg_js, f);
	fputs("]]></script>\n</svg>\n", f);
}

static int flamegraph_finish(struct output *o)
{
	const struct out_model *m = &o->m;
	struct fg_tree t = { 0 };
	uint32_t *path = NULL;
	char title[256];
	int err;

	path = out_model__path_buf(m);
	if (!path) {
		err = -ENOMEM;
		goto out;
	}
	err = fg_build(o, &t, path);
	if (err)
		goto out;
	if (o->opts.title)
		snprintf(title, sizeof(title), "%s", o->opts.title);
	else if (m->nthreads)
		snprintf(title, sizeof(title), "%s (pid %d): %s flame graph", m->threads[0].comm,
			 (int)m->threads[0].pid, output__mode_label(&o->opts));
	else
		snprintf(title, sizeof(title), "CPU flame graph (no samples)");
	if (o->svg)
		fg_svg(o, &t, title);
	else
		fg_html(o, &t, title);
	err = output__check_io(o);
out:
	free(path);
	free(t.v);
	free(t.comm_frame);
	free(t.comm_str);
	out_map__clear(&t.map);
	return err;
}

const struct output_ops output_flamegraph_ops = {
	.aggregate = 1,
	.finish = flamegraph_finish,
};
