/* SPDX-License-Identifier: MIT */
/* record.h - `pyprof-bpf [record]` and `pyprof-bpf report`. */
#ifndef PYPROF_RECORD_H
#define PYPROF_RECORD_H

#include <argp.h>
#include <stddef.h>
#include <sys/types.h>
#include "sampling/sampler.h"		/* struct sampler_stats */

struct out_sample;
struct procset;

int record__main(int argc, char **argv);
int report__main(int argc, char **argv);

/*
 * ---- A sink: the recording pipeline with another consumer (`top`) ----
 *
 * record__run() parses record's options (the sink's own argp as a child in
 * place of the output options: no -o, --format), opens the targets or starts
 * the command, samples, symbolizes, and hands every sample to the sink
 * instead of an output writer (a --raw recording is still written). The
 * sink does the waiting between polls of the sampler, so it can read keys
 * and redraw on its own clock. Its callbacks run on the recording's thread.
 */

/* What is sampled, said once sampling begins. */
struct record_info {
	pid_t pid;			/* the (first) target, or the command */
	const char *comm;
	const char *python_version;
	const char *mode;		/* "cpu", "off-cpu", "wall", "gil", "exception", "memory" */
	const char *event;		/* -e's event, NULL: the clock's */
	long freq_hz;
	const char *backend;		/* "BPF" or "remote" */
	int per_cpu;			/* BPF: per-CPU events (else per-thread) */
	int command;			/* the target is a command started */
	int multi;			/* several processes (-p A,B, --subprocesses) */
	/* The processes sampled (procset__find: a pid's Python version). */
	struct procset *procs;
};

/* How the recording goes, for wait() and end(). */
struct record_status {
	double elapsed_s;
	struct sampler_stats stats;	/* the sampler's counts, at most 0.25 s old */
};

struct record_sink {
	const char *doc;		/* argp doc: --help's text */
	const char *header;		/* its options' --help header; NULL: "Display:" */
	long default_freq;		/* -F's default; 0: record's (99 Hz) */
	int default_all;		/* no -p and no command: -a */
	int no_summary;			/* record's end-of-run summary is the sink's */
	const struct argp *argp;	/* the sink's own options; NULL: none */
	void *argp_input;		/* its input */
	void *ctx;
	/* A command started gets /dev/null as stdin, stdout and stderr (the
	 * terminal is the sink's). */
	int quiet_command;
	/* Sampling begins. 0, or -errno with one line in @err to give up. */
	int (*start)(void *ctx, const struct record_info *info, char *err, size_t errlen);
	/* One sample, as an output gets it. 0 or -errno (ends the recording). */
	int (*sample)(void *ctx, const struct out_sample *s);
	/* Until CLOCK_MONOTONIC second @until: wait (for keys, say). 0 goes
	 * on, 1 ends the recording (the user quit), -errno fails it. */
	int (*wait)(void *ctx, double until, const struct record_status *st);
	/* The sampling loop is over, on every path once start() succeeded:
	 * why it ended ("the target exited", "the command exited with status
	 * 3"), NULL when it was stopped (-d, a signal, wait() said so, an
	 * error, which record prints after this). The last samples may still
	 * come after it. */
	void (*end)(void *ctx, const char *why, const struct record_status *st);
};

/*
 * record's main with @sink in place of the outputs; @sink NULL is
 * record__main(). Returns the exit status.
 */
int record__run(int argc, char **argv, const struct record_sink *sink);

#endif
