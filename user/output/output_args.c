/* SPDX-License-Identifier: MIT */
#include "output/output_args.h"

enum {
	OPT_FORMAT = 2000,
	OPT_THREADS,
	OPT_NO_LINES,
	OPT_COMM_ROOT,
};

static const struct argp_option options[] = {
	{ "output", 'o', "FILE", 0, "Write here instead of stdout", 0 },
	{ "format", OPT_FORMAT, "FMT", 0, "Output format (see below)", 0 },
	{ "threads", OPT_THREADS, NULL, 0, "Root every stack at its thread", 0 },
	{ "no-lines", OPT_NO_LINES, NULL, 0, "Aggregate by function, without line numbers", 0 },
	{ "comm-root", OPT_COMM_ROOT, NULL, 0, "Root every stack at a [comm:pid] frame", 0 },
	{ 0 },
};

static error_t parse(int key, char *arg, struct argp_state *state)
{
	struct output_args *a = state->input;

	switch (key) {
	case 'o':
		a->output = arg;
		break;
	case OPT_FORMAT:
		a->format = arg;
		break;
	case OPT_THREADS:
		a->oopts.per_thread_roots = 1;
		break;
	case OPT_NO_LINES:
		a->oopts.no_lines = 1;
		break;
	case OPT_COMM_ROOT:
		a->oopts.comm_root = 1;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp output_args_argp = { .options = options, .parser = parse };
