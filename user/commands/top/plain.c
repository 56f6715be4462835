/* SPDX-License-Identifier: MIT */
/*
 * top/plain.c - `top` without a terminal: each refresh, the snapshot as
 * text (format.c's lines), ended by an empty line, flushed.
 */
#include <errno.h>
#include <stdio.h>
#include "commands/top/top.h"

int top_plain__print(FILE *f, const struct top_snapshot *s, size_t rows)
{
	char buf[4096];

	for (int i = 0; i < TOP_HEADER_LINES; i++) {
		top_fmt__header(s, i, buf, sizeof(buf), 0);
		fprintf(f, "%s\n", buf);
	}
	top_fmt__columns(s, buf, sizeof(buf), 0);
	fprintf(f, "%s\n", buf);
	for (size_t i = 0; i < s->nrows && i < rows; i++) {
		top_fmt__row(s, i, buf, sizeof(buf), 0);
		fprintf(f, "%s\n", buf);
	}
	fputc('\n', f);
	if (fflush(f) || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}
