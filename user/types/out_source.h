/* SPDX-License-Identifier: MIT */
/*
 * out_source.h - a source file of a recording's Python frames, as the heatmap
 * shows it: read from the target's root at record time
 * (commands/record_sources.c), kept in the raw recording ('C' records) and
 * handed to an output with output__add_source().
 *
 * A file is known by its path as the frames name it (co_filename); the
 * first process that names a path gives its text. The text is untrusted:
 * at most OUT_SRC_MAX_FILE bytes, no NUL byte, any other bytes (the
 * heatmap writes them as escaped, UTF-8-cleaned HTML).
 */
#ifndef PYPROF_TYPES_OUT_SOURCE_H
#define PYPROF_TYPES_OUT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

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

#endif
