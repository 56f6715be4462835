/* SPDX-License-Identifier: MIT */
/*
 * memfile.h - the fuzzer's bytes as a file, for code that reads a path or a
 * descriptor (/proc files, ELF files, recordings): one memfd per process,
 * rewritten for each input.
 */
#ifndef PYPROF_FUZZ_MEMFILE_H
#define PYPROF_FUZZ_MEMFILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Make the file hold exactly @data (@size bytes), its offset 0. Returns its
 * descriptor (owned here: do not close it) and, when @path is not NULL, a
 * path that opens it afresh ("/proc/self/fd/N"); aborts on failure (no input
 * can make that happen).
 */
int memfile_set(const uint8_t *data, size_t size, const char **path);

#endif
