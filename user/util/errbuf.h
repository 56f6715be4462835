/* SPDX-License-Identifier: MIT */
/*
 * errbuf.h - the one-line error a function leaves its caller in an
 * (err, errlen) buffer, beside its -errno.
 */
#ifndef PYPROF_UTIL_ERRBUF_H
#define PYPROF_UTIL_ERRBUF_H

#include <stddef.h>

/* printf into @err (nothing when @err is NULL or @errlen 0). */
void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
