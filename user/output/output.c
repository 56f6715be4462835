// SPDX-License-Identifier: MIT
/*
 * output.c - the format table, format selection, and the model every writer
 * shares: interned strings, frames, threads, call-tree nodes and aggregates.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "output/output.h"
#include "sampling/sampler.h"
#include "util/errbuf.h"

static const char *const perf_aliases[] = { "perf", "perf-script", NULL };
static const char *const perf_exts[] = { ".txt", ".perf", ".perf-script", NULL };
static const char *const collapsed_aliases[] = { "folded", NULL };
static const char *const collapsed_exts[] = { ".folded", ".collapsed", NULL };
static const char *const speedscope_exts[] = { ".speedscope.json", ".json", NULL };
static const char *const pprof_exts[] = { ".pb.gz", ".pprof", ".pb", NULL };
static const char *const html_aliases[] = { "html", NULL };
static const char *const html_exts[] = { ".html", ".htm", NULL };
static const char *const svg_aliases[] = { "svg", NULL };
static const char *const svg_exts[] = { ".svg", NULL };
static const char *const none[] = { NULL };

/* Formats are data: first match wins; names first, extensions by longest match. */
static const struct output_fmt formats[] = {
	{ "perf-script", perf_aliases, perf_exts, &output_perf_ops, 0 },
	{ "collapsed", collapsed_aliases, collapsed_exts, &output_collapsed_ops, 0 },
	{ "speedscope", none, speedscope_exts, &output_speedscope_ops, 0 },
	{ "pprof", none, pprof_exts, &output_pprof_ops, 0 },
	{ "flamegraph", html_aliases, html_exts, &output_flamegraph_ops, 0 },
	{ "flamegraph", svg_aliases, svg_exts, &output_flamegraph_ops, 1 },
	{ "top", none, none, &output_top_ops, 0 },
};

#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

const char *output__format_names(void)
{
	return "perf-script, collapsed, speedscope, pprof, flamegraph, top";
}

static const struct output_fmt *fmt_by_name(const char *name)
{
	for (size_t i = 0; i < NFORMATS; i++) {
		if (!strcasecmp(formats[i].name, name) && !formats[i].svg)
			return &formats[i];
		for (const char *const *a = formats[i].aliases; *a; a++)
			if (!strcasecmp(*a, name))
				return &formats[i];
	}
	return NULL;
}

static const struct output_fmt *fmt_by_path(const char *path)
{
	const struct output_fmt *best = NULL;
	size_t best_len = 0, plen;

	if (!path)
		return NULL;
	plen = strlen(path);
	for (size_t i = 0; i < NFORMATS; i++) {
		for (const char *const *e = formats[i].exts; *e; e++) {
			size_t elen = strlen(*e);

			if (elen > best_len && plen > elen &&
			    !strcasecmp(path + plen - elen, *e)) {
				best = &formats[i];
				best_len = elen;
			}
		}
	}
	return best;
}

const char *output__format_for_path(const char *path)
{
	const struct output_fmt *f = fmt_by_path(path);

	return f ? f->name : NULL;
}

const char *output__mode_label(const struct output_opts *opts)
{
	const char *m = opts ? opts->mode : NULL;

	if (!m || !strcmp(m, "cpu"))
		return "CPU";
	if (!strcmp(m, "off-cpu"))
		return "off-CPU";
	if (!strcmp(m, "wall"))
		return "wall-clock";
	if (!strcmp(m, "gil"))
		return "GIL";
	return m;
}

const char *output__format(const struct output *o)
{
	return o->fmt->name;
}

/* ---- small containers ---- */

uint32_t *out_model__path_buf(const struct out_model *m)
{
	uint32_t maxdepth = 0;

	for (uint32_t i = 0; i < m->nnodes; i++)
		if (m->nodes[i].depth > maxdepth)
			maxdepth = m->nodes[i].depth;
	return calloc((size_t)maxdepth + 1, sizeof(uint32_t));
}

int out_grow(void **arr, uint32_t *cap, uint64_t need, size_t size)
{
	uint32_t ncap;
	void *n;

	if (need <= *cap)
		return 0;
	if (need > UINT32_MAX / 2)
		return -ENOMEM;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	n = reallocarray(*arr, ncap, size);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct out_map_ent {
	uint64_t a, b;
	uint32_t val;		/* OUT_NONE: empty */
};

static uint32_t map_slot(uint64_t a, uint64_t b, uint32_t cap)
{
	return (uint32_t)mix64(a * 0x9e3779b97f4a7c15ull ^ mix64(b)) & (cap - 1);
}

uint32_t out_map__get(const struct out_map *m, uint64_t a, uint64_t b)
{
	uint32_t i;

	if (!m->cap)
		return OUT_NONE;
	for (i = map_slot(a, b, m->cap);; i = (i + 1) & (m->cap - 1)) {
		const struct out_map_ent *e = &m->ents[i];

		if (e->val == OUT_NONE)
			return OUT_NONE;
		if (e->a == a && e->b == b)
			return e->val;
	}
}

static void map_insert(struct out_map_ent *ents, uint32_t cap, uint64_t a, uint64_t b,
		       uint32_t val)
{
	uint32_t i;

	for (i = map_slot(a, b, cap); ents[i].val != OUT_NONE; i = (i + 1) & (cap - 1))
		;
	ents[i].a = a;
	ents[i].b = b;
	ents[i].val = val;
}

int out_map__put(struct out_map *m, uint64_t a, uint64_t b, uint32_t val)
{
	if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3) {
		uint32_t ncap = m->cap ? m->cap * 2 : 64;
		struct out_map_ent *n;

		if (ncap < m->cap)
			return -ENOMEM;
		n = malloc((size_t)ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (uint32_t i = 0; i < ncap; i++)
			n[i].val = OUT_NONE;
		for (uint32_t i = 0; i < m->cap; i++)
			if (m->ents[i].val != OUT_NONE)
				map_insert(n, ncap, m->ents[i].a, m->ents[i].b, m->ents[i].val);
		free(m->ents);
		m->ents = n;
		m->cap = ncap;
	}
	map_insert(m->ents, m->cap, a, b, val);
	m->count++;
	return 0;
}

void out_map__clear(struct out_map *m)
{
	free(m->ents);
	m->ents = NULL;
	m->cap = m->count = 0;
}

int64_t out_strtab__id(struct out_strtab *t, const char *s)
{
	uint64_t h = hash_str(s);
	uint32_t i, id;
	char *copy;
	int err;

	if (t->nslots) {
		for (i = h & (t->nslots - 1); t->slots[i]; i = (i + 1) & (t->nslots - 1))
			if (!strcmp(t->strs[t->slots[i] - 1], s))
				return t->slots[i] - 1;
	}
	if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
		uint32_t nn = t->nslots ? t->nslots * 2 : 256;
		uint32_t *ns = calloc(nn, sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (uint32_t k = 0; k < t->n; k++) {
			for (i = hash_str(t->strs[k]) & (nn - 1); ns[i]; i = (i + 1) & (nn - 1))
				;
			ns[i] = k + 1;
		}
		free(t->slots);
		t->slots = ns;
		t->nslots = nn;
	}
	err = out_grow((void **)&t->strs, &t->cap, t->n + 1, sizeof(*t->strs));
	if (err)
		return err;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	id = t->n++;
	t->strs[id] = copy;
	for (i = h & (t->nslots - 1); t->slots[i]; i = (i + 1) & (t->nslots - 1))
		;
	t->slots[i] = id + 1;
	return id;
}

void out_strtab__clear(struct out_strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

int out_utf8_seq(const unsigned char *s, uint32_t *cp)
{
	uint32_t c = s[0], min;
	int len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		c &= 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;	/* also stops at the NUL */
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

char *out_utf8_clean(const char *s)
{
	const unsigned char *p;
	size_t n = 0;
	uint32_t cp;
	char *r, *w;
	int len;

	for (p = (const unsigned char *)s; *p;) {
		len = out_utf8_seq(p, &cp);
		n += len ? (size_t)len : 3;
		p += len ? len : 1;
	}
	r = malloc(n + 1);
	if (!r)
		return NULL;
	w = r;
	for (p = (const unsigned char *)s; *p;) {
		len = out_utf8_seq(p, &cp);
		if (len) {
			memcpy(w, p, (size_t)len);
			w += len;
			p += len;
		} else {
			memcpy(w, "\xef\xbf\xbd", 3);	/* U+FFFD */
			w += 3;
			p++;
		}
	}
	*w = '\0';
	return r;
}

/* ---- the model ---- */

static int model_frame(struct out_model *m, enum out_frame_kind kind, const char *function,
		       const char *file, int line, int firstlineno, uint32_t *out)
{
	struct out_frame *fr;
	int64_t fn_id, file_id;
	uint32_t id;
	int err;

	fn_id = out_strtab__id(&m->strs, function);
	if (fn_id < 0)
		return (int)fn_id;
	file_id = out_strtab__id(&m->strs, file);
	if (file_id < 0)
		return (int)file_id;
	if (line < 0)
		line = 0;
	if (firstlineno < 0)
		firstlineno = 0;
	id = out_map__get(&m->frame_map, (uint64_t)fn_id << 32 | (uint64_t)file_id,
			  (uint64_t)kind << 32 | (uint32_t)line);
	if (id != OUT_NONE) {
		*out = id;
		return 0;
	}
	err = out_grow((void **)&m->frames, &m->frames_cap, m->nframes + 1, sizeof(*m->frames));
	if (err)
		return err;
	id = m->nframes;
	fr = &m->frames[id];
	memset(fr, 0, sizeof(*fr));
	fr->kind = kind;
	fr->fn_id = (uint32_t)fn_id;
	fr->file_id = (uint32_t)file_id;
	fr->function = m->strs.strs[fn_id];
	fr->file = m->strs.strs[file_id];
	fr->line = line;
	fr->firstlineno = firstlineno;
	err = output_perf__name_frame(fr);
	if (err)
		return err;
	err = out_map__put(&m->frame_map, (uint64_t)fn_id << 32 | (uint64_t)file_id,
			   (uint64_t)kind << 32 | (uint32_t)line, id);
	if (err) {
		free(fr->text);
		free(fr->dso);
		free(fr->folded);
		return err;
	}
	/* Pointers into m->strs stay valid: strings are never moved. */
	m->nframes++;
	*out = id;
	return 0;
}

/*
 * The comm as perf-script headers carry it: every byte outside printable
 * ASCII, and ';', becomes '_' (FlameGraph would turn spaces into '_' anyway;
 * the others would break its line or header parsing). Empty -> "unknown".
 */
static void clean_comm(const char *comm, char *buf, size_t len)
{
	size_t i;

	if (!comm || !*comm)
		comm = "unknown";
	for (i = 0; comm[i] && i + 1 < len; i++) {
		unsigned char c = (unsigned char)comm[i];

		buf[i] = (c <= 0x20 || c >= 0x7f || c == ';') ? '_' : (char)c;
	}
	buf[i] = '\0';
}

/* thread_map's key for the first entry of a (pid, tid), whatever its comm. */
#define OUT_FIRST_COMM UINT64_MAX

static int model_thread(struct out_model *m, const struct out_sample *s, uint32_t *out)
{
	uint64_t key = (uint64_t)(uint32_t)s->pid << 32 | (uint32_t)s->tid;
	char comm[64];
	struct out_thread *t;
	int64_t comm_id, name_id;
	uint32_t id, first;
	int err;

	/* The comm rarely changes: its id is kept for the raw string. */
	if (s->comm && m->last_comm_id >= 0 && strcmp(s->comm, m->last_comm) == 0) {
		comm_id = m->last_comm_id;
	} else {
		clean_comm(s->comm, comm, sizeof(comm));
		comm_id = out_strtab__id(&m->strs, comm);
		if (comm_id < 0)
			return (int)comm_id;
		m->last_comm_id = -1;
		if (s->comm && strlen(s->comm) < sizeof(m->last_comm)) {
			strcpy(m->last_comm, s->comm);
			m->last_comm_id = comm_id;
		}
	}
	id = out_map__get(&m->thread_map, key, (uint64_t)comm_id);
	if (id == OUT_NONE) {
		err = out_grow((void **)&m->threads, &m->threads_cap, m->nthreads + 1,
			       sizeof(*m->threads));
		if (err)
			return err;
		id = m->nthreads;
		/* Before the entry's own key: out of memory between the
		 * two, entries may lose their reuse, never gain a wrong one. */
		first = out_map__get(&m->thread_map, key, OUT_FIRST_COMM);
		if (first == OUT_NONE)
			err = out_map__put(&m->thread_map, key, OUT_FIRST_COMM, id);
		if (!err)
			err = out_map__put(&m->thread_map, key, (uint64_t)comm_id, id);
		if (err)
			return err;
		t = &m->threads[id];
		memset(t, 0, sizeof(*t));
		if (first != OUT_NONE)
			t->comm_twin = m->threads[first].comm_twin = 1;
		t->pid = s->pid;
		t->tid = s->tid;
		t->comm_id = (uint32_t)comm_id;
		t->comm = m->strs.strs[comm_id];
		t->name = t->comm;
		t->first_ts = s->ts_ns;
		m->nthreads++;
	}
	t = &m->threads[id];
	/* The latest name wins; strcmp first so a steady name costs no lookup. */
	if (s->thread_name && *s->thread_name && strcmp(t->name, s->thread_name)) {
		name_id = out_strtab__id(&m->strs, s->thread_name);
		if (name_id < 0)
			return (int)name_id;
		t->name = m->strs.strs[name_id];
	}
	t->count++;
	t->weight += out_weight(s);
	t->last_ts = s->ts_ns;
	*out = id;
	return 0;
}

const char *output__status_name(uint32_t status, char *buf, size_t len)
{
	switch (status) {
	case SAMPLE_TRUNCATED:
		return "[truncated]";
	case SAMPLE_NO_PYSTATE:
		return "[no-python-state]";
	case SAMPLE_READ_FAULT:
		return "[read-fault]";
	case SAMPLE_THREAD_YOUNG:
		return "[thread-start/exit]";
	case SAMPLE_THREAD_EXIT:
		return "[thread-exit]";
	case SAMPLE_EVAL_ENTRY:
		return "[eval-entry]";
	default:
		snprintf(buf, len, "[status-%u]", status);
		return buf;
	}
}

/*
 * Fill the thread's ids with the sample's frame ids, root first. The first
 * *keep of them are those of the thread's previous sample, untouched (its
 * roots and the s->unchanged outermost Python frames).
 */
static int sample_stack(struct output *o, const struct out_sample *s, uint32_t thread,
			uint32_t *np, uint32_t *keep)
{
	struct out_model *m = &o->m;
	struct out_thread *t = &m->threads[thread];
	uint32_t n = 0, id, py_from;
	char buf[128];
	int err;

	err = out_grow((void **)&t->ids, &t->ids_cap, 3 + (uint64_t)s->nframes + s->nleaf,
		       sizeof(*t->ids));
	if (err)
		return err;
	*keep = 0;
	if (s->unchanged && !s->kinds && s->status == SAMPLE_COMPLETE && t->npy && !t->comm_twin &&
	    s->unchanged <= s->nframes && s->unchanged <= t->npy && t->ids_name == t->name) {
		*keep = t->nroots + s->unchanged;
		n = *keep;
		py_from = s->nframes - s->unchanged;
		goto python;
	}
	if (o->opts.comm_root || o->opts.process_roots) {
		snprintf(buf, sizeof(buf), o->opts.process_roots ? "%s (pid %d)" : "[%s:%d]",
			 t->comm, (int)s->pid);
		err = model_frame(m, OUT_FRAME_PROCESS, buf, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[n++] = id;
	}
	if (o->opts.per_thread_roots) {
		char tb[192];

		snprintf(tb, sizeof(tb), "[%.160s:%d]", t->name, (int)s->tid);
		err = model_frame(m, OUT_FRAME_THREAD, tb, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[n++] = id;
	}
	t->nroots = n;
	t->ids_name = t->name;
	if (s->status != SAMPLE_COMPLETE || !s->nframes) {
		const char *st = s->status == SAMPLE_COMPLETE ? "[no-python-frames]" :
				 output__status_name(s->status, buf, sizeof(buf));

		err = model_frame(m, OUT_FRAME_STATUS, st, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[n++] = id;
	}
	py_from = s->nframes;
python:
	for (uint32_t i = py_from; i-- > 0;) {
		const struct py_sym *ps = &s->frames[i];
		int kind = s->kinds ? s->kinds[i] : OUT_FRAME_PYTHON;
		int line = kind != OUT_FRAME_PYTHON ? 0 : o->opts.no_lines ? ps->firstlineno : ps->line;

		if (kind != OUT_FRAME_NATIVE && kind != OUT_FRAME_STATUS)
			kind = OUT_FRAME_PYTHON;
		err = model_frame(m, kind, ps->function ? ps->function : "",
				  ps->file && kind != OUT_FRAME_STATUS ? ps->file : "", line,
				  kind == OUT_FRAME_PYTHON ? ps->firstlineno : 0, &id);
		if (err)
			return err;
		t->ids[n++] = id;
	}
	for (uint32_t i = 0; i < s->nleaf; i++) {
		const struct out_leaf *lf = &s->leaf[i];

		err = model_frame(m, lf->kind == OUT_FRAME_KERNEL ? OUT_FRAME_KERNEL :
				  OUT_FRAME_STATUS, lf->name ? lf->name : "", "", 0, 0, &id);
		if (err)
			return err;
		t->ids[n++] = id;
	}
	t->nids = n;
	t->npy = s->status == SAMPLE_COMPLETE && !s->kinds ? s->nframes : 0;
	*np = n;
	return 0;
}

static int model_node(struct out_model *m, uint32_t parent, uint32_t frame, uint32_t *out)
{
	uint32_t id = out_map__get(&m->node_map, parent, frame);
	int err;

	if (id == OUT_NONE) {
		err = out_grow((void **)&m->nodes, &m->nodes_cap, m->nnodes + 1, sizeof(*m->nodes));
		if (err)
			return err;
		id = m->nnodes;
		err = out_map__put(&m->node_map, parent, frame, id);
		if (err)
			return err;
		m->nodes[id].parent = parent;
		m->nodes[id].frame = frame;
		m->nodes[id].depth = parent == OUT_NONE ? 0 : m->nodes[parent].depth + 1;
		m->nnodes++;
	}
	*out = id;
	return 0;
}

/* Count the sample at its stack's node; nodes[0..keep) are still those of
 * the thread's previous sample. */
static int model_agg(struct out_model *m, const struct out_sample *s, uint32_t thread,
		     uint32_t n, uint32_t keep)
{
	struct out_thread *t = &m->threads[thread];
	uint32_t node, id;
	struct out_agg *a;
	int err;

	if (!n)
		return 0;	/* cannot happen: every stack has a frame */
	err = out_grow((void **)&t->nodes, &t->nodes_cap, n, sizeof(*t->nodes));
	if (err)
		return err;
	node = keep ? t->nodes[keep - 1] : OUT_NONE;
	for (uint32_t i = keep; i < n; i++) {
		err = model_node(m, node, t->ids[i], &node);
		if (err)
			return err;
		t->nodes[i] = node;
	}
	id = out_map__get(&m->agg_map, node, thread);
	if (id == OUT_NONE) {
		err = out_grow((void **)&m->aggs, &m->aggs_cap, m->naggs + 1, sizeof(*m->aggs));
		if (err)
			return err;
		id = m->naggs;
		err = out_map__put(&m->agg_map, node, thread, id);
		if (err)
			return err;
		m->aggs[id] = (struct out_agg){ .node = node, .thread = thread };
		m->naggs++;
	}
	a = &m->aggs[id];
	a->count++;
	a->weight += out_weight(s);
	return 0;
}

uint32_t output__node_path(const struct out_model *m, uint32_t node, uint32_t *buf)
{
	uint32_t depth = m->nodes[node].depth;

	for (uint32_t i = depth + 1; i-- > 0; node = m->nodes[node].parent)
		buf[i] = m->nodes[node].frame;
	return depth + 1;
}

static void model_free(struct out_model *m)
{
	for (uint32_t i = 0; i < m->nframes; i++) {
		free(m->frames[i].text);
		free(m->frames[i].dso);
		free(m->frames[i].folded);
	}
	free(m->frames);
	free(m->nodes);
	for (uint32_t i = 0; i < m->nthreads; i++) {
		free(m->threads[i].ids);
		free(m->threads[i].nodes);
	}
	free(m->threads);
	free(m->aggs);
	out_map__clear(&m->frame_map);
	out_map__clear(&m->node_map);
	out_map__clear(&m->thread_map);
	out_map__clear(&m->agg_map);
	out_strtab__clear(&m->strs);
}

/* ---- collapsed stacks, shared by collapsed and the flame graph ---- */

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

/* ---- the API ---- */

int output__check_io(struct output *o)
{
	if (!o->err && ferror(o->f))
		o->err = errno ? -errno : -EIO;
	return o->err;
}

int output__new(const char *format, const char *path, const struct output_opts *opts,
		struct output **out, char *err, size_t errlen)
{
	const struct output_fmt *fmt;
	struct output *o;
	int ret;

	*out = NULL;
	if (format) {
		fmt = fmt_by_name(format);
		if (!fmt) {
			seterr(err, errlen, "unknown output format \"%s\"; valid formats: %s",
			       format, output__format_names());
			return -EINVAL;
		}
		/* "flamegraph" writes SVG when the file says so. */
		if (fmt->ops == &output_flamegraph_ops && fmt_by_path(path) &&
		    fmt_by_path(path)->ops == &output_flamegraph_ops)
			fmt = fmt_by_path(path);
	} else {
		fmt = fmt_by_path(path);
		if (!fmt)
			fmt = &formats[0];
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	o->fmt = fmt;
	o->svg = fmt->svg;
	o->m.last_comm_id = -1;
	if (opts)
		o->opts = *opts;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
	} else {
		o->f = fopen(path, "we");
		if (!o->f) {
			ret = -errno;
			seterr(err, errlen, "cannot create %s: %s", path, strerror(errno));
			free(o);
			return ret;
		}
		o->close_f = 1;
		/* perf-script streams ~2 KB a sample (--native): fewer writes (each
		 * also updates the file's times) */
		setvbuf(o->f, NULL, _IOFBF, 1 << 16);
	}
	*out = o;
	return 0;
}

int output__add(struct output *o, const struct out_sample *s)
{
	struct out_model *m = &o->m;
	uint32_t thread = 0, n = 0, keep = 0;
	int err;

	if (o->finished)
		return -EINVAL;
	if (o->err)
		return o->err;
	if (s->nframes && !s->frames)
		return -EINVAL;
	err = model_thread(m, s, &thread);
	if (err)
		return err;
	err = sample_stack(o, s, thread, &n, &keep);
	if (!err && o->fmt->ops->aggregate)
		err = model_agg(m, s, thread, n, keep);
	if (err) {
		m->threads[thread].npy = 0;	/* half-built: nothing to reuse */
		return err;
	}
	if (!m->total_count)
		m->first_ts = s->ts_ns;
	m->last_ts = s->ts_ns;
	m->total_count++;
	m->total_weight += out_weight(s);
	if (!m->first_period && s->period_ns)
		m->first_period = s->period_ns;
	if (o->fmt->ops->add)
		return o->fmt->ops->add(o, s, thread, m->threads[thread].ids, n);
	return 0;
}

int output__finish(struct output *o)
{
	int err = 0;

	if (o->finished)
		return -EINVAL;
	o->finished = 1;
	if (!o->err && o->fmt->ops->finish)
		err = o->fmt->ops->finish(o);
	if (!err)
		err = output__check_io(o);
	if (o->close_f) {
		o->close_f = 0;
		if (fclose(o->f) && !err)
			err = -errno;
		o->f = NULL;
	} else if (fflush(o->f) && !err) {
		err = -errno;
	}
	if (!err && o->err)
		err = o->err;
	return err;
}

void output__free(struct output *o)
{
	if (!o)
		return;
	if (o->fmt->ops->free_priv)
		o->fmt->ops->free_priv(o);
	if (o->close_f)
		fclose(o->f);
	model_free(&o->m);
	free(o);
}
