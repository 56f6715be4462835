/* SPDX-License-Identifier: MIT */
/*
 * output.h - writers for the profile formats: perf-script, collapsed,
 * speedscope, pprof, flamegraph (HTML or SVG), pstats, callgrind, a
 * terminal summary (top), a heatmap of source lines, JSON Lines (jsonl) and a
 * timeline (chrome-trace).
 *
 * One output writes one format to one file (or stdout). Samples go in one by
 * one with output__add(); streaming formats (perf-script) write them at once,
 * the others keep interned aggregates (frames, call-tree nodes, per-thread
 * totals) and write everything in output__finish(). Repeated stacks cost no
 * allocation. The output copies every string it keeps: the caller's sample,
 * frames and strings need only live for the output__add() call.
 *
 * Every writer sees the same stack for a sample, root first:
 *
 *   [process root]  only with opts.comm_root:   "[<comm>:<pid>]", or with
 *                   opts.process_roots:         "<comm> (pid <pid>)"
 *   [thread root]   only with opts.per_thread_roots: "[<thread name>:<tid>]"
 *   [status frame]  when the sample is not a whole Python stack:
 *                   "[truncated]", "[no-python-state]", "[read-fault]",
 *                   "[thread-start/exit]", "[thread-exit]" (no state: the
 *                   thread is starting or ending),
 *                   "[no-python-frames]" (complete but empty), "[status-N]"
 *   Python frames   outermost first
 *
 * so every format shows the same profile, and no sample is ever dropped.
 * collapsed and the flame graph put the comm under it as their root, as
 * FlameGraph's stackcollapse-perf.pl does with perf-script output.
 *
 * Weights: a sample weighs its period_ns (1 when 0). perf-script prints it as
 * the period; collapsed counts, flame graph widths, speedscope weights and
 * pprof's cpu/nanoseconds are sums of weights; pprof's samples/count and the
 * top table count samples. How frames are named in the text formats (and so
 * what FlameGraph, speedscope and the Firefox Profiler show) is documented at
 * the top of frame_name.c.
 */
#ifndef PYPROF_OUTPUT_H
#define PYPROF_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "symbols/symbolizer.h"		/* struct py_sym */

struct output;

/* One sample as the recorder hands it over. */
struct out_sample {
	const char *comm;		/* process name; NULL or "" -> "unknown" */
	pid_t pid;
	pid_t tid;
	const char *thread_name;	/* Python or OS thread name; may be NULL */
	uint32_t cpu;
	uint64_t ts_ns;			/* CLOCK_MONOTONIC */
	uint64_t period_ns;		/* weight of this sample; 0 counts as 1 */
	uint32_t status;		/* enum sample_status (sampler.h) */
	uint32_t nframes;
	const struct py_sym *frames;	/* innermost first */
	/* A hint, 0 when unknown: the outermost `unchanged` frames are those
	 * of the previous sample of the same (pid, tid) given to this output,
	 * symbol for symbol (struct stack_memo); they are not looked up again. */
	uint32_t unchanged;
	/* The perf-script event of this sample ("offcpu-time"); NULL: the
	 * output's (output_opts.event). */
	const char *event;
	/* Frames on the leaf side of the Python frames, outermost first:
	 * what the thread did beyond its Python code (<GC>, [GIL wait],
	 * [syscall] NAME, kernel functions, [runnable]). */
	const struct out_leaf *leaf;
	uint32_t nleaf;
	/* --native: the kind of each of frames[] (OUT_FRAME_PYTHON, _NATIVE:
	 * function = symbol, file = DSO path; _STATUS: a marker such as
	 * [unwind-failed]); NULL: all Python. */
	const uint8_t *kinds;
	/* --native: where each native frame of frames[] is (entries of other
	 * frames are ignored); NULL: no addresses known. */
	const struct out_addr *addrs;
};

/*
 * Where a native frame's code is: perf-script prints "pc - map_base" (the
 * file-relative address, as `perf script` does for a DSO) and
 * symbol+0x<symoff>; pprof makes a location at pc in the mapping
 * [map_start, map_end) of the frame's DSO.
 */
struct out_addr {
	uint64_t pc;		/* sampled pc or return address; 0: unknown */
	uint64_t symoff;	/* pc - its symbol's start (frames with a symbol) */
	uint64_t map_start, map_end;	/* the DSO's mappings, first to last; 0: unknown */
	uint64_t map_base;	/* where the DSO's file offset 0 is mapped */
	const unsigned char *build_id;	/* NULL: unknown */
	size_t build_id_len;
};

/* A frame that is not Python code, on a sample's leaf side. */
struct out_leaf {
	int kind;		/* OUT_FRAME_STATUS or OUT_FRAME_KERNEL */
	const char *name;	/* "[GIL wait]", "tcp_recvmsg" ... */
	/* A kernel frame's address and its offset into the function (perf
	 * script's "ffffffff81234567 read_zero+0x17"); 0: not known. */
	uint64_t addr, symoff;
};

struct output_opts {
	int per_thread_roots;	/* --threads: a root frame per thread */
	int no_lines;		/* --no-lines: a frame's line is its function's first line */
	int comm_root;		/* an outermost frame naming the process */
	/* Several processes (--subprocesses, -p A,B): the process root reads
	 * "<comm> (pid <pid>)", one per process, and is always there. */
	int process_roots;
	const char *event;	/* perf-script event name; NULL -> "cpu-clock" */
	const char *title;	/* flamegraph/speedscope title; NULL -> derived from the comm */
	uint64_t start_time_ns;	/* wall-clock start (CLOCK_REALTIME) for pprof; 0: omit */
	uint64_t duration_ns;	/* pprof's duration; 0: first to last sample */
	/* pprof's comments (`go tool pprof -comments`): the agent's labels. */
	const char *const *comments;
	size_t ncomments;
	unsigned int top_rows;	/* rows in the top table; 0 -> 30 */
	/* What the samples weigh (--mode): "cpu" (or NULL), "off-cpu",
	 * "wall", "gil"; said in titles and pprof's sample type. */
	const char *mode;
};

/*
 * Create an output. @format: a name from output__format_names() or NULL to
 * infer it from @path's extension (.txt/.perf -> perf-script, .folded/
 * .collapsed -> collapsed, .speedscope.json/.json -> speedscope, .pb.gz/
 * .pprof/.pb -> pprof, .html/.htm/.svg -> flamegraph, .pstats/.prof -> pstats,
 * .callgrind and files named callgrind.out.* -> callgrind, .heatmap.html ->
 * heatmap, .jsonl -> jsonl, .trace.json -> chrome-trace, anything else or no
 * path -> perf-script). @path NULL or "-" writes to stdout; a file is created
 * (truncated) now so that a bad path fails before recording starts. @o may be
 * NULL for the defaults. On failure returns -errno and writes one line into
 * @err: -EINVAL unknown format (the line lists the valid ones), -ENOMEM, or
 * the error of opening @path.
 */
int output__new(const char *format, const char *path, const struct output_opts *o,
		struct output **out, char *err, size_t errlen);
/* Add one sample. Returns 0, -ENOMEM, or a write error (-ENOSPC, -EIO...). */
int output__add(struct output *o, const struct out_sample *s);
/*
 * Write what is aggregated, flush and close the file (stdout is flushed, not
 * closed). Returns 0 or -errno of the first write error. Call it once; after
 * it, output__add() returns -EINVAL.
 */
int output__finish(struct output *o);
/*
 * A source file of the samples' frames (struct out_source, below), for the formats that show
 * sources (heatmap); the others ignore it. Copied. 0 or -ENOMEM.
 */
struct out_source;
int output__add_source(struct output *o, const struct out_source *src);
/*
 * A sample of the BASE recording of a differential view (report --diff): the
 * flame graph colours NEW's frames by how their share changed from BASE's,
 * top lists the functions whose share changed most. Frames are matched by
 * function and file, not line. 0 or -ENOMEM.
 */
int output__add_base(struct output *o, const struct out_sample *s);
/*
 * Push what a streaming format (jsonl) wrote so far to its file, so that a
 * reader following the file sees the samples while the recording runs; the
 * recorder calls it every 0.1 s. Other formats write at finish: nothing to do.
 * Returns 0 or the first write error.
 */
int output__flush(struct output *o);
/* Frees everything; closes the file if output__finish() was not called. Accepts NULL. */
void output__free(struct output *o);

/* How titles name the mode: "CPU", "off-CPU", "wall-clock", "GIL". */
const char *output__mode_label(const struct output_opts *opts);
/* The status frame of a sample that is not a whole Python stack (enum
 * sample_status): "[truncated]", "[no-python-state]"...; an unknown one is
 * written into @buf ("[status-N]"). */
const char *output__status_name(uint32_t status, char *buf, size_t len);
/* Name of the format @o writes ("perf-script", ...). */
const char *output__format(const struct output *o);
/* "perf-script, collapsed, ..., top", for --help. */
const char *output__format_names(void);
/* Canonical name of the format @path's extension selects, NULL when none does. */
const char *output__format_for_path(const char *path);

/*
 * ---- For the format writers only (output_*.c); not part of the API. ----
 *
 * output_model.c turns every sample into a list of interned frame ids, root
 * first (struct out_frame), interns the thread, and for aggregating formats interns
 * the stack as a node of a call tree (a trie of (parent, frame) pairs) and adds
 * the sample's count and weight to its (node, thread) aggregate. Writers read
 * these tables and keep their own maps (struct out_map, struct out_strtab);
 * nothing allocates per sample once the stacks repeat.
 */
#define OUT_NONE UINT32_MAX

/* A hash map from a pair of 64-bit keys to a 32-bit value. */
struct out_map {
	struct out_map_ent *ents;
	uint32_t cap;		/* power of two, 0 until the first insert */
	uint32_t count;
};
/* The value of (a, b), or OUT_NONE. */
uint32_t out_map__get(const struct out_map *m, uint64_t a, uint64_t b);
/* Insert (a, b) -> val; the key must not be present. 0 or -ENOMEM. */
int out_map__put(struct out_map *m, uint64_t a, uint64_t b, uint32_t val);
void out_map__clear(struct out_map *m);

/* Interned strings with dense ids and stable pointers. */
struct out_strtab {
	char **strs;		/* by id */
	uint32_t n, cap;
	uint32_t *slots;	/* id + 1, 0 = empty */
	uint32_t nslots;
};
/* Id of @s (interned on first use) or -ENOMEM. */
int64_t out_strtab__id(struct out_strtab *t, const char *s);
void out_strtab__clear(struct out_strtab *t);

/* The 64-bit FNV-1a hash of @s. */
uint64_t out_fnv1a(const char *s);

/* Length (1-4) of the valid UTF-8 sequence at @s, 0 if invalid (or NUL); sets *cp. */
int out_utf8_seq(const unsigned char *s, uint32_t *cp);
/* A copy of @s with each byte that is not valid UTF-8 replaced by U+FFFD; NULL: ENOMEM. */
char *out_utf8_clean(const char *s);

/* @s with &, <, >, " and ' escaped, for HTML and XML text and attributes. */
void out_html_escaped(FILE *f, const char *s);

/* Grow an array of @size-byte items to hold at least @need; 0 or -ENOMEM. */
int out_grow(void **arr, uint32_t *cap, uint64_t need, size_t size);

enum out_frame_kind {
	OUT_FRAME_PYTHON = 0,
	OUT_FRAME_STATUS,	/* [truncated], [no-python-state], ... */
	OUT_FRAME_PROCESS,	/* [comm:pid] */
	OUT_FRAME_THREAD,	/* [thread:tid] */
	OUT_FRAME_KERNEL,	/* a kernel function (off-CPU stacks) */
	OUT_FRAME_NATIVE,	/* a native function: name, file = its DSO */
};

/*
 * Source files: the source files of a recording's Python frames, as the
 * heatmap shows them: read from the target's root at record time
 * (commands/record_sources.c), kept in the raw recording ('C' records) and
 * handed to an output with output__add_source().
 *
 * A file is known by its path as the frames name it (co_filename); the
 * first process that names a path gives its text. The text is untrusted:
 * at most OUT_SRC_MAX_FILE bytes, no NUL byte, any other bytes (the
 * heatmap writes them as escaped, UTF-8-cleaned HTML).
 */
#define OUT_SRC_MAX_FILE (512u * 1024)		/* bytes of one file */
#define OUT_SRC_MAX_ALL (16u * 1024 * 1024)	/* bytes of all files of a recording */
#define OUT_SRC_MAX_FILES 4096u			/* files of a recording */

enum out_src_flags {
	OUT_SRC_CHANGED = 1u,		/* modified after the recording started */
	OUT_SRC_UNREADABLE = 2u,	/* no text: not found, refused, not a file */
	OUT_SRC_TOO_BIG = 4u,		/* no text: over OUT_SRC_MAX_FILE, or the budget */
	OUT_SRC_BINARY = 8u,		/* no text: it holds a NUL byte */
};

struct out_source {
	char *path;
	char *text;		/* NULL with one of the no-text flags */
	size_t len;
	uint64_t mtime_ns;	/* CLOCK_REALTIME; 0: unknown */
	uint32_t flags;		/* enum out_src_flags */
};

struct out_sources {
	struct out_source *v;
	uint32_t n, cap;
	struct out_map map;	/* (hash of path + j, length) -> index */
	uint64_t bytes;		/* sum of the texts' lengths */
};

/* Index of @path, or OUT_NONE. */
uint32_t out_sources__find(const struct out_sources *set, const char *path);
/* A copy of @src added (a path already there is kept as it is). 0 or -ENOMEM. */
int out_sources__add(struct out_sources *set, const struct out_source *src);
void out_sources__clear(struct out_sources *set);


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
extern const struct output_ops output_flamegraph_ops;
extern const struct output_ops output_top_ops;
extern const struct output_ops output_pstats_ops;
extern const struct output_ops output_callgrind_ops;
extern const struct output_ops output_heatmap_ops;
extern const struct output_ops output_jsonl_ops;
extern const struct output_ops output_chrome_trace_ops;

/* Record the first write error of o->f (from errno) and return it; 0 if none. */
int output__check_io(struct output *o);

/* Weight of a sample: its period, or 1 when the period is 0 (as FlameGraph does). */
static inline uint64_t out_weight(const struct out_sample *s)
{
	return s->period_ns ? s->period_ns : 1;
}

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
