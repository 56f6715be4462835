/* SPDX-License-Identifier: MIT */
/*
 * gzip.h - whole buffers in and out of gzip, through zlib: a spooled pprof
 * read back, an OTLP request body compressed.
 */
#ifndef PYPROF_UTIL_GZIP_H
#define PYPROF_UTIL_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* @in (@n bytes) gzip'd into *@out (malloc'd, *@outlen bytes); 0 or -ENOMEM. */
int gzip__compress(const void *in, size_t n, uint8_t **out, size_t *outlen);

/* The gzip stream @in (@n bytes) inflated into *@out (malloc'd, *@outlen
 * bytes), at most @max bytes: 0, -EINVAL (not gzip, cut short), -E2BIG
 * (past @max) or -ENOMEM. */
int gzip__decompress(const void *in, size_t n, size_t max, uint8_t **out, size_t *outlen);

#endif
