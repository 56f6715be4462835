/* SPDX-License-Identifier: MIT */
/* text.h - text from a target, made safe for a terminal or a line-based file. */
#ifndef PYPROF_UTIL_TEXT_H
#define PYPROF_UTIL_TEXT_H

#include <stdio.h>

/* Print @s with control characters (C0, DEL, C1) and bad UTF-8 as '?':
 * a newline or an escape sequence from the target never reaches @f. */
void put_clean(FILE *f, const char *s);
/* The same for the @n bytes at @s (no NUL needed; a NUL is a control). */
void put_clean_n(FILE *f, const char *s, size_t n);

#endif
