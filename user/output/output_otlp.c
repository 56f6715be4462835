// SPDX-License-Identifier: MIT
/*
 * output_otlp.c - --format otlp: the recording as one OTLP profiles export
 * request (otlp.h), the bytes an OTLP/HTTP receiver takes at
 * /v1development/profiles (`curl --data-binary @FILE -H 'Content-Type:
 * application/x-protobuf'`, or `protoc --decode` against
 * opentelemetry-proto). The model is kept as pprof's writer keeps it; at
 * the end its pprof becomes the request, a resource per process.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"
#include "output/otlp.h"

static int otlp_add(struct output *o, const struct out_sample *s, uint32_t thread,
		    const uint32_t *stack, uint32_t n)
{
	return output_pprof_ops.add(o, s, thread, stack, n);
}

static void otlp_free(struct output *o)
{
	output_pprof_ops.free_priv(o);
}

/* One resource per process of the model, described by opts.describe. */
static int resources_of(struct output *o, struct otlp_resource **out, size_t *n)
{
	const struct out_model *m = &o->m;
	struct otlp_resource *r = calloc(m->nthreads ? m->nthreads : 1, sizeof(*r));
	size_t k = 0;

	if (!r)
		return -ENOMEM;
	for (uint32_t t = 0; t < m->nthreads; t++) {
		const struct out_thread *th = &m->threads[t];
		size_t i;

		for (i = 0; i < k && r[i].pid != th->pid; i++)
			;
		if (i < k)
			continue;
		r[k].pid = th->pid;
		if (o->opts.describe)
			o->opts.describe(o->opts.describe_ctx, th->pid, &r[k]);
		otlp_resource__add(&r[k], "process.executable.name", th->comm, 0);
		otlp_resource__add_host(&r[k]);
		k++;
	}
	*out = r;
	*n = k;
	return 0;
}

static int otlp_finish(struct output *o)
{
	uint8_t *pprof = NULL, *req = NULL;
	size_t plen = 0, rlen = 0, nres = 0;
	struct otlp_resource *res = NULL;
	int err = output_pprof__encode(o, &pprof, &plen);

	if (!err)
		err = resources_of(o, &res, &nres);
	if (!err)
		err = otlp__from_pprof(pprof, plen, res, nres, &req, &rlen);
	if (!err && fwrite(req, 1, rlen, o->f) != rlen)
		err = output__check_io(o) ?: -EIO;
	free(pprof);
	free(req);
	free(res);
	return err;
}

const struct output_ops output_otlp_ops = {
	.aggregate = 1,
	.add = otlp_add,
	.finish = otlp_finish,
	.free_priv = otlp_free,
};
