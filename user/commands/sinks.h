/* SPDX-License-Identifier: MIT */
/*
 * sinks.h - where a resolved sample goes: the last stage of its path. The
 * same sample reaches -o's writer, a live view (`top`), the terminal's
 * end-of-run summary and the raw recording, so that `report` of the raw
 * recording gives what the writer wrote.
 */
#ifndef PYPROF_COMMANDS_SINKS_H
#define PYPROF_COMMANDS_SINKS_H

#include <stdint.h>
#include "commands/record_sources.h"

struct out_sample;
struct output;
struct rawrec_writer;
struct record_sink;

struct sinks {
	struct output *out;		/* -o's writer; NULL: none */
	const char *out_path;		/* its file ("-", NULL: stdout) */
	const struct record_sink *live;	/* `top`'s view; NULL: none */
	struct output *summary;		/* the hottest functions on stderr; NULL: none */
	struct rawrec_writer *raw;	/* the raw recording; NULL: none */
	const char *raw_path;
	/* The frames' source files (record_sources.h) for out and raw, noted
	 * the first time a sample names each and read by
	 * sinks__read_sources(): when the raw recording or the heatmap keeps
	 * them. sources.start_ns: when recording started (CLOCK_REALTIME), to
	 * tell files modified since. */
	int want_sources;
	struct record_sources sources;
	/* The first failure, and the file it is about; sampling stops then. */
	int err;
	const char *err_file;
};

/* @s to every sink: 0, or the first failure's -errno (in err, err_file). */
int sinks__emit(struct sinks *k, const struct out_sample *s);
/*
 * The source files the samples emitted since the last call named, read and
 * handed to out and raw. Not from inside a poll (the sampler's callbacks
 * never read the target's files): the recorder calls it between polls and
 * before the writers finish. 0, or the first failure's -errno (in err,
 * err_file).
 */
int sinks__read_sources(struct sinks *k);
/* What a streaming writer (jsonl) holds, to its file: 0 or its write error. */
int sinks__flush(struct sinks *k);
void sinks__free(struct sinks *k);

#endif
