/* SPDX-License-Identifier: MIT */
/* readfile.h - a whole file into memory, bounded (/proc files included). */
#ifndef PYPROF_UTIL_READFILE_H
#define PYPROF_UTIL_READFILE_H

#include <stddef.h>

/*
 * Read @path to its end into *out (malloc'd, NUL-terminated, *n bytes
 * without the NUL). At most @max bytes: past them -EFBIG, or with @cut the
 * first @max bytes. Works on /proc files, whose size stat() does not know.
 * 0 or -errno.
 */
int read_file(const char *path, size_t max, int cut, char **out, size_t *n);

#endif
