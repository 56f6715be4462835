/* SPDX-License-Identifier: MIT */
/*
 * record_sources.h - the source files of the samples' Python frames, read
 * from each target's root while recording, for the heatmap and the raw
 * recording (output.h: struct out_source).
 */
#ifndef PYPROF_COMMANDS_RECORD_SOURCES_H
#define PYPROF_COMMANDS_RECORD_SOURCES_H

#include <stdint.h>
#include <sys/types.h>
#include "output/output.h"

/*
 * Read @path as @pid sees it (target/rootfs.c: resolved inside its root, a
 * regular file of at most OUT_SRC_MAX_FILE bytes, never through a plain
 * open; owned by @pid's user or readable by anyone) into @out: path copied, text malloc'd, or no text with a flag
 * saying why (a relative or pseudo path like "<string>" is not read; more
 * than @budget bytes is OUT_SRC_TOO_BIG). OUT_SRC_CHANGED when its mtime is
 * after @start_ns (CLOCK_REALTIME). Returns 0 or -ENOMEM; free the fields
 * with record_sources__release().
 */
int record_sources__read(pid_t pid, const char *path, uint64_t start_ns, uint64_t budget,
			 struct out_source *out);
void record_sources__release(struct out_source *src);

#endif
