/* SPDX-License-Identifier: MIT */
/*
 * top/aggregate.h - the counts behind `pyprof-bpf top`: per function (and
 * per line of a function), the weight of the samples it is the innermost
 * frame of (own) and of those it is anywhere in (total, once per sample
 * however often it recurses), since the start and over a window of the last
 * few seconds, for all threads together and for each thread.
 *
 * The window is a ring of buckets; top_agg__rotate() starts the next one
 * (the oldest falls out), once per refresh. Rows are made on demand, sorted,
 * for a view (recent or cumulative, functions or lines, one thread, one
 * process or all).
 * Memory grows with the distinct frames and (frame, thread) pairs seen;
 * threads beyond TOP_MAX_THREADS are counted in the all-threads figures
 * only.
 */
#ifndef PYPROF_TOP_AGGREGATE_H
#define PYPROF_TOP_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct out_sample;
struct top_agg;

#define TOP_MAX_THREADS 512
#define TOP_ALL_THREADS (-1)

enum top_sort {
	TOP_SORT_OWN = 0,	/* own weight, then total */
	TOP_SORT_TOTAL,		/* total weight, then own */
	TOP_SORT_NAME,		/* function name, file, line */
	TOP_SORT__COUNT,
};

struct top_view {
	int recent;		/* the window (else since the start) */
	int lines;		/* a row per line (else per function) */
	int thread;		/* a thread's index (top_agg__thread), or TOP_ALL_THREADS */
	pid_t pid;		/* with all threads: one process's (its threads up to
				 * TOP_MAX_THREADS); 0: every process */
	enum top_sort sort;
};

struct top_row {
	const char *function;	/* the aggregate's copies: valid until it is freed */
	const char *file;
	int line;		/* lines view: the line; functions view: the first line seen */
	uint64_t own, total;	/* weights (ns of the samples' periods) */
	uint64_t own_samples, total_samples;
};

struct top_thread {
	pid_t pid, tid;
	char name[32];		/* the thread's name (latest seen) */
	char comm[32];		/* its process's */
	uint64_t samples;	/* since the start */
	uint64_t recent;	/* in the window */
};

/* What a view adds up to: the denominators of its shares. */
struct top_totals {
	uint64_t weight;
	uint64_t samples;
	double seconds;		/* the time it covers */
};

/* @buckets: the window's length in refreshes (>= 1). 0 or -ENOMEM. */
int top_agg__new(unsigned int buckets, struct top_agg **out);
void top_agg__free(struct top_agg *a);	/* accepts NULL */

/* Count one sample as the outputs show it: its leaf frames innermost ([GIL
 * wait], [syscall] NAME, kernel functions), its Python and native frames,
 * and for a sample that is not a whole stack its status frame outermost
 * ("[truncated]", "[no-python-state]": output__status_name()). 0 or -ENOMEM. */
int top_agg__add(struct top_agg *a, const struct out_sample *s);

/* Start the next bucket of the window, @now_s (any clock) being its start. */
void top_agg__rotate(struct top_agg *a, double now_s);

size_t top_agg__nthreads(const struct top_agg *a);
const struct top_thread *top_agg__thread(const struct top_agg *a, size_t i);
/* Distinct processes seen. */
size_t top_agg__nprocs(const struct top_agg *a);

/*
 * The rows of @v, sorted, into *rows (an array the aggregate owns and
 * reuses: valid until the next call) and *n; @tot gets the denominators.
 * 0 or -ENOMEM.
 */
int top_agg__rows(struct top_agg *a, const struct top_view *v, double now_s,
		  const struct top_row **rows, size_t *n, struct top_totals *tot);

/* "own", "total", "name" */
const char *top_sort__name(enum top_sort s);

#endif
