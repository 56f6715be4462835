/* SPDX-License-Identifier: MIT */
/*
 * record_sources.h - the stage that reads the source files of the samples'
 * Python frames from each target's root while recording, for the heatmap and
 * the raw recording (types/out_source.h), beside the writers rather than from
 * inside them.
 *
 * A sample's new files are noted as it reaches the sinks (inside the
 * sampler's poll: memory only, no file is opened there); between polls, and
 * once more before the writers finish, the recorder has the noted files read
 * in the order they were noted and handed to the writers that keep them.
 */
#ifndef PYPROF_COMMANDS_RECORD_SOURCES_H
#define PYPROF_COMMANDS_RECORD_SOURCES_H

#include <stdint.h>
#include <sys/types.h>
#include "output/sources.h"
#include "types/out_sample.h"

struct record_sources {
	uint64_t start_ns;		/* recording's start (CLOCK_REALTIME): OUT_SRC_CHANGED */
	struct out_sources seen;	/* every file noted (texts not kept here) */
	/* Noted, not read yet: who named the file first, and its entry in seen. */
	struct record_source_todo {
		pid_t pid;
		uint32_t seen;
	} *todo;
	uint32_t ntodo, todo_cap;
	uint64_t bytes;			/* the texts read so far (OUT_SRC_MAX_ALL) */
};

/*
 * Note the files of @s's Python frames not noted yet (no I/O). The outer
 * frames the thread's previous sample had (s->unchanged) were seen then;
 * only absolute paths (a "<string>" has no source), and OUT_SRC_MAX_FILES
 * at most: a program may make up file names without end. 0 or -ENOMEM.
 */
int record_sources__note(struct record_sources *rs, const struct out_sample *s);

/*
 * Read each file noted since the last call, as the process that named it
 * sees it (target/rootfs.c: resolved inside its root, a regular file of at
 * most OUT_SRC_MAX_FILE bytes, never through a plain open; owned by that
 * process's user or readable by anyone), and hand it to @fn: path, text (or
 * no text with a flag saying why: more than the OUT_SRC_MAX_ALL budget left
 * is OUT_SRC_TOO_BIG), OUT_SRC_CHANGED when modified after start_ns. @src
 * lives for the call. Returns 0, -ENOMEM, or the first error of @fn (the
 * files after it are dropped: the recording fails then).
 */
typedef int (*record_source_fn)(void *ctx, const struct out_source *src);
int record_sources__read_noted(struct record_sources *rs, record_source_fn fn, void *ctx);

void record_sources__free(struct record_sources *rs);

#endif
