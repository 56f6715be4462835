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
#include "types/out_sample.h"

struct out_source;		/* types/out_source.h */

struct output;

struct otlp_resource;

struct output_opts {
	int per_thread_roots;	/* --threads: a root frame per thread */
	int no_lines;		/* --no-lines: a frame's line is its function's first line */
	int comm_root;		/* an outermost frame naming the process */
	/* Several processes (--subprocesses, -p A,B): the process root reads
	 * "<comm> (pid <pid>)", one per process, and is always there. */
	int process_roots;
	/* The event samples were taken at (-e; perf-script's name), NULL:
	 * "cpu-clock". Another than the clocks makes weights counts of it:
	 * titles, pprof's sample type and the flame graph's unit say it. */
	const char *event;
	/* Several events at once (-e A,B: @event is "A,B"): their names, in
	 * order; each sample's out_sample.event is one of them. Each stack
	 * then starts with its event's root frame, "[A]"; pprof has a sample
	 * type per event instead, the flame graph a choice of event. */
	const char *const *events;
	unsigned int nevents;
	const char *title;	/* flamegraph/speedscope title; NULL -> derived from the comm */
	uint64_t start_time_ns;	/* wall-clock start (CLOCK_REALTIME) for pprof; 0: omit */
	uint64_t duration_ns;	/* pprof's duration; 0: first to last sample */
	/* pprof's comments (`go tool pprof -comments`): the agent's labels. */
	const char *const *comments;
	size_t ncomments;
	unsigned int top_rows;	/* rows in the top table; 0 -> 30 */
	/* --format otlp: what process @pid is, its resource attributes added
	 * to @r (otlp.h) at the end; NULL: its pid, comm and host alone. */
	void (*describe)(void *ctx, pid_t pid, struct otlp_resource *r);
	void *describe_ctx;
	/* What the samples weigh (--mode): "cpu" (or NULL), "off-cpu",
	 * "wall", "gil", "exception"; said in titles and pprof's sample type. */
	const char *mode;
};

/* A recording at several events ("cpu-clock,page-faults", as record joins
 * -e's names): their names into @names (pointers into @buf, at most
 * SAMPLE_MAX_EVENTS), for output_opts.events; 0 for one event or none. */
unsigned int output__split_events(const char *joined, char *buf, size_t len, const char **names);

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
 * A source file of the samples' frames (types/out_source.h), for the formats
 * that show sources (heatmap); the others ignore it. Copied. 0 or -ENOMEM.
 * The caller reads the files (commands/record_sources.c, or a raw recording's
 * 'C' records): a writer never reads a target's files itself.
 */
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
/*
 * What is known only once the samples are in, for pprof: the profile's
 * duration (output_opts.duration_ns) and comments (output_opts.comments):
 * the agent's window, cut short at a stop, and its labels. Call them before
 * output__finish(); @comments must live until then.
 */
void output__set_duration(struct output *o, uint64_t duration_ns);
void output__set_comments(struct output *o, const char *const *comments, size_t n);
/* Frees everything; closes the file if output__finish() was not called. Accepts NULL. */
void output__free(struct output *o);

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

/* What the writers themselves share (the model, the format table, struct
 * output's fields) is in output/internal.h, for the files of user/output/. */

#endif
