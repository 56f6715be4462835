/* SPDX-License-Identifier: MIT */
/*
 * source.h - each frame's whole location and its line of source, for
 * dump: read from the target's root only (rootfs__open), marked like a
 * traceback, and not trusted from a file changed since the process started.
 */
#ifndef PYPROF_DUMP_SOURCE_H
#define PYPROF_DUMP_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct py_rawframe;
struct symbolizer;

struct dump_loc {
	int line, end_line, col, end_col;	/* -1: unknown; columns in UTF-8 bytes */
	char *source;		/* the line as the file has it; NULL: not read */
	bool changed;		/* the file is newer than the process: not read */
	size_t raw;		/* the frame's index in the walk */
	struct frame_local *locals;	/* --locals: NULL when not read */
	size_t nlocals;
};
struct frame_local;

/*
 * The location of each frame @symbolizer__resolve_stack() kept of @raw
 * (@nraw frames) into @locs (@nlocs of them, in the same order).
 */
void dump_source__locate(struct symbolizer *sym, const struct py_rawframe *raw, size_t nraw,
			 struct dump_loc *locs, size_t nlocs);
/*
 * Read @file's line @l->line from @pid's root (@rootfd >= 0: from that
 * root, a core's) into @l->source, unless the file changed after @start_ns
 * (then @l->changed; 0: unknown); only a file @owner (the target's user)
 * owns or everyone may read. Quiet on failure.
 */
void dump_source__read(pid_t pid, int rootfd, uid_t owner, int64_t start_ns, const char *file,
		       struct dump_loc *l);
/* The line, stripped as a traceback shows it, and under it the executing
 * expression marked ^^^ (when it is not the whole line), at @indent. */
void dump_source__print(FILE *out, const struct dump_loc *l, const char *indent);
void dump_loc__free(struct dump_loc *l);

#endif
