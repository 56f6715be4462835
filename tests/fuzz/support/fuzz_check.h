/* SPDX-License-Identifier: MIT */
/* fuzz_check.h - a harness's invariant: say which one, then crash, so that
 * libFuzzer reports and keeps the input. */
#ifndef PYPROF_FUZZ_CHECK_H
#define PYPROF_FUZZ_CHECK_H

#include <stdio.h>

#define CHECK(c) do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
			__builtin_trap(); \
		} \
	} while (0)

#endif
