// SPDX-License-Identifier: MIT
/*
 * output_collapsed.c - FlameGraph folded stacks: "comm;root;...;leaf weight".
 *
 * Exactly what stackcollapse-perf.pl (default options) prints for our
 * perf-script output: the comm as the first frame, the frame texts of
 * frame_name.c, the summed periods as the count (nanoseconds of CPU for
 * cpu-clock; a sample without a period counts 1), lines sorted in byte order.
 * Feed it to flamegraph.pl, speedscope or anything that reads folded stacks.
 */
#include <errno.h>
#include <inttypes.h>
#include "output/internal.h"

static int collapsed_finish(struct output *o)
{
	struct out_folded *v;
	size_t n;
	int err;

	err = output__build_folded(o, &v, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		fprintf(o->f, "%s %" PRIu64 "\n", v[i].text, v[i].weight);
	output__free_folded(v, n);
	return output__check_io(o);
}

const struct output_ops output_collapsed_ops = {
	.aggregate = 1,
	.finish = collapsed_finish,
};
