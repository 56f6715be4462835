/* SPDX-License-Identifier: MIT */
/* parse.c - see parse.h. */
#include <errno.h>
#include <stdlib.h>
#include "util/parse.h"

int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}
