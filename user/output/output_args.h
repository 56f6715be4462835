/* SPDX-License-Identifier: MIT */
/*
 * output_args.h - the output options `record` and `report` share (-o,
 * --format, --threads, --no-lines, --comm-root), as one argp child.
 */
#ifndef PYPROF_OUTPUT_ARGS_H
#define PYPROF_OUTPUT_ARGS_H

#include <argp.h>
#include "output/output.h"

struct output_args {
	const char *output;	/* -o FILE; NULL: stdout */
	const char *format;	/* --format FMT; NULL: from the extension */
	struct output_opts oopts;
};

/* Its input is a struct output_args: the parent sets child_inputs[0]. */
extern const struct argp output_args_argp;

#endif
