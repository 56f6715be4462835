/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - UTF-8 as the writers need it (output_utf8.c): one sequence decoded
 * and checked, a copy with the invalid bytes replaced. top's terminal view
 * measures its columns with the same decoder.
 */
#ifndef PYPROF_OUTPUT_UTF8_H
#define PYPROF_OUTPUT_UTF8_H

#include <stdint.h>

/* Length (1-4) of the valid UTF-8 sequence at @s, 0 if invalid (or NUL); sets *cp. */
int out_utf8_seq(const unsigned char *s, uint32_t *cp);
/* A copy of @s with each byte that is not valid UTF-8 replaced by U+FFFD; NULL: ENOMEM. */
char *out_utf8_clean(const char *s);

#endif
