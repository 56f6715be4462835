/* SPDX-License-Identifier: MIT */
/* sinks.c - where a resolved sample goes (sinks.h). */
#include <errno.h>
#include "commands/record.h"
#include "commands/record_sources.h"
#include "commands/sinks.h"
#include "output/output.h"
#include "output/rawrec.h"

static int failed(struct sinks *k, int rc, const char *file)
{
	k->err = rc;
	k->err_file = file;
	return rc;
}

/* One source file read, handed to the writers that keep it. */
static int add_source(void *ctx, const struct out_source *src)
{
	struct sinks *k = ctx;
	int rc = k->out ? output__add_source(k->out, src) : 0;

	if (!rc && k->raw) {
		rc = rawrec_writer__add_source(k->raw, src);
		/* A path too long for a record (a target's choice) is left out. */
		if (rc == -E2BIG)
			rc = 0;
		if (rc)
			failed(k, rc, k->raw_path);
	}
	return rc;
}

int sinks__read_sources(struct sinks *k)
{
	int rc = k->want_sources ? record_sources__read_noted(&k->sources, add_source, k) : 0;

	return rc && !k->err ? failed(k, rc, "the source files") : rc;
}

int sinks__emit(struct sinks *k, const struct out_sample *s)
{
	int rc = k->want_sources ? record_sources__note(&k->sources, s) : 0;

	if (rc)
		return k->err ? rc : failed(k, rc, "the source files");
	rc = k->out ? output__add(k->out, s) : 0;
	if (rc)
		return failed(k, rc, k->out_path);
	if (k->live) {
		rc = k->live->sample(k->live->ctx, s);
		if (rc)
			return failed(k, rc, "the live view");
	}
	if (k->summary && output__add(k->summary, s)) {
		output__free(k->summary);	/* a nicety: never fail the recording */
		k->summary = NULL;
	}
	rc = k->raw ? rawrec_writer__add(k->raw, s) : 0;
	if (rc)
		return failed(k, rc, k->raw_path);
	return 0;
}

int sinks__flush(struct sinks *k)
{
	int rc = k->out ? output__flush(k->out) : 0;

	return rc ? failed(k, rc, k->out_path) : 0;
}

void sinks__free(struct sinks *k)
{
	output__free(k->out);
	rawrec_writer__free(k->raw);
	output__free(k->summary);
	record_sources__free(&k->sources);
	k->out = NULL;
	k->raw = NULL;
	k->summary = NULL;
}
