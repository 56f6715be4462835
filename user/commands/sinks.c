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

/* One source file read, handed to the outputs that keep it. */
static int add_source(struct sinks *k, pid_t pid, const char *path)
{
	struct out_source src, seen;
	int rc;

	rc = record_sources__read(pid, path, k->sources_start,
				  OUT_SRC_MAX_ALL - k->sources_bytes, &src);
	if (rc)
		return rc;
	seen = src;
	seen.text = NULL;
	rc = out_sources__add(&k->seen, &seen);
	k->sources_bytes += src.len;
	if (!rc && k->out)
		rc = output__add_source(k->out, &src);
	if (!rc && k->raw) {
		rc = rawrec_writer__add_source(k->raw, &src);
		/* A path too long for a record (a target's choice) is left out. */
		if (rc == -E2BIG)
			rc = 0;
		if (rc)
			failed(k, rc, k->raw_path);
	}
	record_sources__release(&src);
	return rc;
}

/* The files of @s's Python frames not read yet: read before @s reaches the raw
 * recording, whose 'C' records come before the first sample naming them. The
 * outer frames the thread's previous sample had (s->unchanged) were seen then. */
static int scan_sources(struct sinks *k, const struct out_sample *s)
{
	uint32_t n = s->unchanged < s->nframes ? s->nframes - s->unchanged : 0;

	for (uint32_t i = 0; i < n; i++) {
		const char *file = s->frames[i].file;
		int rc;

		/* Only files (a "<string>" has no source), so many at most: a
		 * program may make up file names without end. */
		if ((s->kinds && s->kinds[i] != OUT_FRAME_PYTHON) || !file || file[0] != '/' ||
		    k->seen.n >= OUT_SRC_MAX_FILES || out_sources__find(&k->seen, file) != OUT_NONE)
			continue;
		rc = add_source(k, s->pid, file);
		if (rc)
			return rc;
	}
	return 0;
}

int sinks__emit(struct sinks *k, const struct out_sample *s)
{
	int rc = k->want_sources ? scan_sources(k, s) : 0;

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
	out_sources__clear(&k->seen);
	k->out = NULL;
	k->raw = NULL;
	k->summary = NULL;
}
