// SPDX-License-Identifier: MIT
/*
 * output_writer.c - what every writer asks of its output: the first write
 * error of its file, and how titles name the recording's mode.
 */
#include <errno.h>
#include <string.h>
#include "output/output.h"

int output__check_io(struct output *o)
{
	if (!o->err && ferror(o->f))
		o->err = errno ? -errno : -EIO;
	return o->err;
}

const char *output__mode_label(const struct output_opts *opts)
{
	const char *m = opts ? opts->mode : NULL;

	if (!m || !strcmp(m, "cpu"))
		return "CPU";
	if (!strcmp(m, "off-cpu"))
		return "off-CPU";
	if (!strcmp(m, "wall"))
		return "wall-clock";
	if (!strcmp(m, "gil"))
		return "GIL";
	return m;
}
