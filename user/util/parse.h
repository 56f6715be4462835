/* SPDX-License-Identifier: MIT */
/* parse.h - numbers from the command line and the environment. */
#ifndef PYPROF_UTIL_PARSE_H
#define PYPROF_UTIL_PARSE_H

/* A whole decimal @s in [min, max] into *out: 0, or -EINVAL (out untouched). */
int parse_long(const char *s, long min, long max, long *out);

#endif
