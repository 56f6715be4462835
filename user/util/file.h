/* SPDX-License-Identifier: MIT */
/* file.h - a whole file read into memory (bounded, /proc files too), or written. */
#ifndef PYPROF_UTIL_FILE_H
#define PYPROF_UTIL_FILE_H

#include <stddef.h>

/*
 * Read @path to its end into *out (malloc'd, NUL-terminated, *n bytes
 * without the NUL). At most @max bytes: past them -EFBIG, or with @cut the
 * first @max bytes. Works on /proc files, whose size stat() does not know.
 * 0 or -errno.
 */
int read_file(const char *path, size_t max, int cut, char **out, size_t *n);

/* Write @len bytes of @data as @path (mode @mode), whole or not at all:
 * through "<path>.new", renamed over it. 0 or -errno. */
int write_file(const char *path, const void *data, size_t len, unsigned int mode);

#endif
