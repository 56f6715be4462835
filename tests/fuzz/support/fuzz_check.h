/* SPDX-License-Identifier: MIT */
/* fuzz_check.h - a harness's invariant: say which one, then crash, so that
 * libFuzzer reports and keeps the input. */
#ifndef PYPROF_FUZZ_CHECK_H
#define PYPROF_FUZZ_CHECK_H

#include <stddef.h>
#include <stdio.h>

#define CHECK(c) do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
			__builtin_trap(); \
		} \
	} while (0)

/* @p is NUL-terminated, well-formed UTF-8 (what every name decoder promises). */
static inline void check_utf8(const char *p)
{
	const unsigned char *s = (const unsigned char *)p;

	while (*s) {
		size_t len = *s < 0x80 ? 1 : *s >= 0xc2 && *s <= 0xdf ? 2 :
			     *s >= 0xe0 && *s <= 0xef ? 3 : *s >= 0xf0 && *s <= 0xf4 ? 4 : 0;

		CHECK(len);
		for (size_t i = 1; i < len; i++)
			CHECK((s[i] & 0xc0) == 0x80);
		s += len;
	}
}

#endif
