/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the format writers share (output_*.c, frame_name.c): the
 * model, the format table and struct output's fields. Only files of
 * user/output/ include it; commands and the agent see output.h.
 *
 * output_model.c turns every sample into a list of interned frame ids, root
 * first (struct out_frame), interns the thread, and for aggregating formats interns
 * the stack as a node of a call tree (a trie of (parent, frame) pairs) and adds
 * the sample's count and weight to its (node, thread) aggregate. Writers read
 * these tables and keep their own maps (struct out_map, struct out_strtab);
 * nothing allocates per sample once the stacks repeat.
 */
#ifndef PYPROF_OUTPUT_INTERNAL_H
#define PYPROF_OUTPUT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "output/output.h"
#include "output/sources.h"
#include "output/tables.h"
#include "output/utf8.h"

/* @s with &, <, >, " and ' escaped, for HTML and XML text and attributes. */
void out_html_escaped(FILE *f, const char *s);

/* How titles name the mode: "CPU", "off-CPU", "wall-clock", "GIL". */
const char *output__mode_label(const struct output_opts *opts);
/* The event weights count (-e page-faults...), NULL when they are time. */
const char *output__count_event(const struct output_opts *opts);
/* True under --mode memory: the weights are bytes of pages faulted in. */
bool output__weighs_bytes(const struct output_opts *opts);

struct out_frame {
	enum out_frame_kind kind;
	uint32_t fn_id, file_id;	/* in the model's strtab */
	const char *function;	/* qualname (Python) or the whole "[...]" text */
	const char *file;	/* "" for synthetic frames and unknown files */
	int line;		/* executing line, or firstlineno with no_lines; >= 0 */
	int firstlineno;	/* >= 0; the first one seen for this frame */
	char *text;		/* perf-script symbol (frame_name.c) */
	char *dso;		/* perf-script dso field */
	/* The frame in collapsed stacks: text with only what collapsed
	 * readers need encoded, and native and kernel frames as
	 * stackcollapse-perf.pl --kernel folds them ("name_[k]", a native
	 * [unknown] as "[dso basename]"). */
	char *collapsed;
	/* The flame graph's label of a native or kernel frame folded that
	 * way, nothing encoded; NULL: the function as it is. */
	char *folded;
	uint64_t addr;		/* perf-script address: hash of text (Python, markers) */
};

struct out_node {		/* call-tree node: a stack prefix */
	uint32_t parent;	/* OUT_NONE for the roots */
	uint32_t frame;
	uint32_t depth;		/* 0 for the roots */
};

struct out_thread {
	pid_t pid;
	pid_t tid;
	uint32_t comm_id;
	const char *comm;	/* as in perf-script headers: no whitespace */
	const char *name;	/* thread name; comm when unknown (latest seen) */
	uint64_t count;		/* samples */
	uint64_t weight;	/* sum of weights */
	uint64_t first_ts, last_ts;
	/* Its previous sample, for the next one's unchanged outer frames:
	 * frame ids root first, and (aggregating formats) the node of each
	 * prefix. ids[0..nroots) are the comm/thread roots; npy Python
	 * frames follow (0: nothing to reuse); ids_name: the name the thread
	 * root was made of. */
	uint32_t *ids, *nodes;
	uint32_t nids, ids_cap, nodes_cap;
	uint32_t nroots, npy;
	const char *ids_name;
	const char *ids_event;		/* the event root they start with (several events) */
	/* This (pid, tid) has another entry, under another comm (an exec):
	 * its previous sample may be that entry's, so nothing is reused. */
	int comm_twin;
};

struct out_agg {		/* samples of one (node, thread) */
	uint32_t node;
	uint32_t thread;
	uint64_t count;
	uint64_t weight;
};

struct out_model {
	struct out_strtab strs;
	struct out_frame *frames;
	uint32_t nframes, frames_cap;
	struct out_node *nodes;
	uint32_t nnodes, nodes_cap;
	struct out_thread *threads;
	uint32_t nthreads, threads_cap;
	struct out_agg *aggs;	/* in order of first appearance */
	uint32_t naggs, aggs_cap;
	struct out_map frame_map, node_map, thread_map, agg_map;
	uint64_t total_count;
	uint64_t total_weight;
	uint64_t first_period;	/* first non-zero period seen */
	uint64_t first_ts, last_ts;
	/* The raw comm of the last sample and its string id (-1: none). */
	char last_comm[64];
	int64_t last_comm_id;
};
/* A zeroed array long enough for the deepest node's path (free() it); NULL
 * when out of memory. */
uint32_t *out_model__path_buf(const struct out_model *m);
/*
 * Intern sample @s into @m: its thread (*thread), its stack (*n frame ids,
 * root first, in m->threads[*thread].ids, as @opts roots it) and, when
 * @aggregate, its call-tree node and aggregate; then the totals. 0 or -ENOMEM.
 */
int out_model__add(struct out_model *m, const struct output_opts *opts, int aggregate,
		   const struct out_sample *s, uint32_t *thread, uint32_t *n);
void out_model__free(struct out_model *m);
/*
 * The function of each of @m's frames as a key that two models share
 * (report --diff): frames of one (function, file, kind), whatever their
 * lines, have one key; @names and @keys (start them zeroed, clear them
 * after) intern the strings and the keys, the same for both models.
 * @out gets m->nframes keys, dense from 0 (keys->count after). 0 or -ENOMEM.
 */
int out_model__fn_keys(const struct out_model *m, struct out_strtab *names,
		       struct out_map *keys, uint32_t *out);


struct output_ops {
	int aggregate;		/* build nodes and aggregates in output__add() */
	int sources;		/* keep output__add_source()'s files in o->src */
	int stream;		/* writes each sample at once: output__flush() flushes */
	/* Called for every sample after interning: @stack root first, @n ids. */
	int (*add)(struct output *o, const struct out_sample *s, uint32_t thread,
		   const uint32_t *stack, uint32_t n);
	int (*finish)(struct output *o);
	void (*free_priv)(struct output *o);
};

struct output_fmt {
	const char *name;
	const char *const *aliases;	/* NULL-terminated */
	const char *const *exts;	/* NULL-terminated, lower case, with the dot */
	const struct output_ops *ops;
	int svg;			/* flamegraph as SVG rather than HTML */
};

struct output {
	const struct output_fmt *fmt;
	struct output_opts opts;
	FILE *f;
	int close_f;		/* we opened f */
	int finished;
	int err;		/* first write error, -errno */
	int svg;		/* flamegraph: write SVG */
	struct out_model m;
	struct out_model base;	/* report --diff: the BASE recording */
	struct out_sources src;	/* ops->sources: the source files */
	void *priv;		/* the writer's own state */
};

extern const struct output_ops output_perf_ops;
extern const struct output_ops output_collapsed_ops;
extern const struct output_ops output_speedscope_ops;
extern const struct output_ops output_pprof_ops;
extern const struct output_ops output_otlp_ops;
/* The profile.proto bytes of @o's model (a pprof or otlp writer's), not
 * compressed, into *@out (malloc'd, *@len bytes). 0 or -errno. */
int output_pprof__encode(struct output *o, uint8_t **out, size_t *len);
extern const struct output_ops output_flamegraph_ops;
extern const struct output_ops output_top_ops;
extern const struct output_ops output_pstats_ops;
extern const struct output_ops output_callgrind_ops;
extern const struct output_ops output_heatmap_ops;
extern const struct output_ops output_jsonl_ops;
extern const struct output_ops output_chrome_trace_ops;

/* Record the first write error of o->f (from errno) and return it; 0 if none. */
int output__check_io(struct output *o);


/*
 * The functions of the model's frames (output_funcs.c): one per (kind, name,
 * file, first line), whatever line each frame is at. of[frame] is its
 * function's id, first[id] one frame of it (its name, file and first line).
 */
struct out_funcs {
	uint32_t *of;
	uint32_t *first;
	uint32_t n;
};
/* 0 or -ENOMEM (then @f is empty). */
int out_funcs__build(const struct out_model *m, struct out_funcs *f);
void out_funcs__free(struct out_funcs *f);
/* Call @fn for each aggregate @a (the @k-th) with its stack's @n frame ids,
 * root first; stops at the first error it returns. 0, -ENOMEM or that error. */
typedef int (*out_stack_fn)(void *ctx, const struct out_agg *a, uint32_t k,
			    const uint32_t *path, uint32_t n);
int out_funcs__each_stack(const struct out_model *m, out_stack_fn fn, void *ctx);
/* The name of @fr's function; an unnamed native one is "[<DSO basename>]",
 * written into @buf. */
const char *out_func__name(const struct out_frame *fr, char *buf, size_t len);

/* Frame ids of the stack ending at @node, root first, into @buf (depth + 1 ids). */
uint32_t output__node_path(const struct out_model *m, uint32_t node, uint32_t *buf);

/*
 * Collapsed stacks, merged and sorted as stackcollapse-perf.pl prints them:
 * "<comm>;<frame>;...;<frame>" in byte order with summed count and weight.
 * Built at finish time; free with output__free_folded().
 */
struct out_folded {
	char *text;
	uint64_t count;
	uint64_t weight;
};
int output__build_folded(struct output *o, struct out_folded **out, size_t *n);
void output__free_folded(struct out_folded *v, size_t n);

/* A frame's text in collapsed stacks and the flame graph. */
static inline const char *out_frame__folded(const struct out_frame *fr)
{
	return fr->collapsed;
}

#endif
