// SPDX-License-Identifier: MIT
/*
 * output_model.c - the model every writer reads: each sample interned as its
 * thread, its frames (named by frame_name.c) root first and, for the
 * aggregating formats, its call-tree node and (node, thread) aggregate.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/frame_name.h"
#include "output/internal.h"
#include "types/raw_sample.h"

uint32_t *out_model__path_buf(const struct out_model *m)
{
	uint32_t maxdepth = 0;

	for (uint32_t i = 0; i < m->nnodes; i++)
		if (m->nodes[i].depth > maxdepth)
			maxdepth = m->nodes[i].depth;
	return calloc((size_t)maxdepth + 1, sizeof(uint32_t));
}

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
	err = out_frame__name(fr);
	if (err)
		return err;
	err = out_map__put(&m->frame_map, (uint64_t)fn_id << 32 | (uint64_t)file_id,
			   (uint64_t)kind << 32 | (uint32_t)line, id);
	if (err) {
		free(fr->text);
		free(fr->dso);
		free(fr->folded);
		free(fr->collapsed);
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

/* The process and thread roots of the thread's sample, then its status
 * frame when it is not a whole Python stack: at t->ids[*n...]. */
static int stack_roots(struct out_model *m, const struct output_opts *opts,
		       const struct out_sample *s, struct out_thread *t, uint32_t *n)
{
	char buf[128];
	uint32_t id;
	int err;

	t->ids_event = s->event;
	if (opts->nevents > 1) {	/* "[page-faults]": the event's own tree */
		snprintf(buf, sizeof(buf), "[%.120s]", s->event ? s->event : "?");
		err = model_frame(m, OUT_FRAME_PROCESS, buf, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	if (opts->comm_root || opts->process_roots) {
		snprintf(buf, sizeof(buf), opts->process_roots ? "%s (pid %d)" : "[%s:%d]",
			 t->comm, (int)s->pid);
		err = model_frame(m, OUT_FRAME_PROCESS, buf, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	if (opts->per_thread_roots) {
		char tb[192];

		snprintf(tb, sizeof(tb), "[%.160s:%d]", t->name, (int)s->tid);
		err = model_frame(m, OUT_FRAME_THREAD, tb, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	t->nroots = *n;
	t->ids_name = t->name;
	if (s->status != SAMPLE_COMPLETE || !s->nframes) {
		const char *st = s->status == SAMPLE_COMPLETE ? "[no-python-frames]" :
				 output__status_name(s->status, buf, sizeof(buf));

		err = model_frame(m, OUT_FRAME_STATUS, st, "", 0, 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	return 0;
}

/* The sample's frames[0..py_from) outermost first, then its leaf frames: at
 * t->ids[*n...]. */
static int stack_frames(struct out_model *m, const struct output_opts *opts,
			const struct out_sample *s, struct out_thread *t, uint32_t py_from,
			uint32_t *n)
{
	uint32_t id;
	int err;

	for (uint32_t i = py_from; i-- > 0;) {
		const struct py_sym *ps = &s->frames[i];
		int kind = s->kinds ? s->kinds[i] : OUT_FRAME_PYTHON;
		int line = kind != OUT_FRAME_PYTHON ? 0 : opts->no_lines ? ps->firstlineno : ps->line;

		if (kind != OUT_FRAME_NATIVE && kind != OUT_FRAME_STATUS)
			kind = OUT_FRAME_PYTHON;
		err = model_frame(m, kind, ps->function ? ps->function : "",
				  ps->file && kind != OUT_FRAME_STATUS ? ps->file : "", line,
				  kind == OUT_FRAME_PYTHON ? ps->firstlineno : 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	for (uint32_t i = 0; i < s->nleaf; i++) {
		const struct out_leaf *lf = &s->leaf[i];

		err = model_frame(m, lf->kind == OUT_FRAME_KERNEL ? OUT_FRAME_KERNEL :
				  OUT_FRAME_STATUS, lf->name ? lf->name : "", "", 0, 0, &id);
		if (err)
			return err;
		t->ids[(*n)++] = id;
	}
	return 0;
}

/*
 * Fill the thread's ids with the sample's frame ids, root first. The first
 * *keep of them are those of the thread's previous sample, untouched (its
 * roots and the s->unchanged outermost Python frames).
 */
static int sample_stack(struct out_model *m, const struct output_opts *opts,
			const struct out_sample *s, uint32_t thread, uint32_t *np, uint32_t *keep)
{
	struct out_thread *t = &m->threads[thread];
	uint32_t n = 0, py_from;
	int err;

	err = out_grow((void **)&t->ids, &t->ids_cap, 4 + (uint64_t)s->nframes + s->nleaf,
		       sizeof(*t->ids));
	if (err)
		return err;
	*keep = 0;
	if (s->unchanged && !s->kinds && s->status == SAMPLE_COMPLETE && t->npy && !t->comm_twin &&
	    s->unchanged <= s->nframes && s->unchanged <= t->npy && t->ids_name == t->name &&
	    t->ids_event == s->event) {
		*keep = t->nroots + s->unchanged;
		n = *keep;
		py_from = s->nframes - s->unchanged;
	} else {
		err = stack_roots(m, opts, s, t, &n);
		if (err)
			return err;
		py_from = s->nframes;
	}
	err = stack_frames(m, opts, s, t, py_from, &n);
	if (err)
		return err;
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

void out_model__free(struct out_model *m)
{
	for (uint32_t i = 0; i < m->nframes; i++) {
		free(m->frames[i].text);
		free(m->frames[i].dso);
		free(m->frames[i].folded);
		free(m->frames[i].collapsed);
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

int out_model__add(struct out_model *m, const struct output_opts *opts, int aggregate,
		   const struct out_sample *s, uint32_t *thread, uint32_t *n)
{
	uint32_t keep = 0;
	int err;

	err = model_thread(m, s, thread);
	if (err)
		return err;
	err = sample_stack(m, opts, s, *thread, n, &keep);
	if (!err && aggregate)
		err = model_agg(m, s, *thread, *n, keep);
	if (err) {
		m->threads[*thread].npy = 0;	/* half-built: nothing to reuse */
		return err;
	}
	if (!m->total_count)
		m->first_ts = s->ts_ns;
	m->last_ts = s->ts_ns;
	m->total_count++;
	m->total_weight += out_weight(s);
	if (!m->first_period && s->period_ns)
		m->first_period = s->period_ns;
	return 0;
}

int out_model__fn_keys(const struct out_model *m, struct out_strtab *names,
		       struct out_map *keys, uint32_t *out)
{
	for (uint32_t i = 0; i < m->nframes; i++) {
		const struct out_frame *fr = &m->frames[i];
		int64_t fn = out_strtab__id(names, fr->function);
		int64_t file = fn < 0 ? fn : out_strtab__id(names, fr->file);
		uint64_t a, b;
		int err;

		if (file < 0)
			return (int)file;
		a = (uint64_t)fn << 32 | (uint64_t)file;
		b = (uint64_t)fr->kind;
		out[i] = out_map__get(keys, a, b);
		if (out[i] == OUT_NONE) {
			out[i] = keys->count;
			err = out_map__put(keys, a, b, out[i]);
			if (err)
				return err;
		}
	}
	return 0;
}
