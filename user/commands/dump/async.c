/* SPDX-License-Identifier: MIT */
/* async.c - dump --async: a process's asyncio tasks, as a tree or as JSON. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "commands/dump/internal.h"
#include "output/json_writer.h"
#include "symbols/symbolizer.h"

/* A frame object of the JSON outputs: {"function", "file", "line"}. */
static void json_frame(FILE *out, const struct py_sym *s, int first)
{
	fprintf(out, "%s{\"function\": ", first ? "" : ", ");
	json_write_string(out, s->function);
	fputs(", \"file\": ", out);
	json_write_string(out, s->file);
	if (s->line >= 0)
		fprintf(out, ", \"line\": %d}", s->line);
	else
		fputs(", \"line\": null}", out);
}

static const char *const task_states[] = {
	[ASYNCIO_TASK_PENDING] = "pending", [ASYNCIO_TASK_RUNNING] = "running",
	[ASYNCIO_TASK_CREATED] = "created", [ASYNCIO_TASK_DONE] = "done",
};

static void print_async_json(FILE *out, struct pyproc *p, const struct asyncio_snapshot *s)
{
	fprintf(out, "{\"pid\": %d, \"python\": ", (int)pyproc__pid(p));
	json_write_string(out, pyproc__version(p));
	fprintf(out, ", \"torn\": %zu, \"finished_during_dump\": %zu, \"lists_truncated\": %zu, "
		"\"lists_torn\": %zu, \"tasks\": [", s->torn, s->finished, s->lists_cut,
		s->lists_torn);
	for (size_t i = 0; i < s->n; i++) {
		const struct asyncio_task *t = &s->tasks[i];

		fprintf(out, "%s{\"id\": %llu, \"name\": ", i ? ", " : "",
			(unsigned long long)t->addr);
		json_write_string(out, t->name);
		if (t->tid)
			fprintf(out, ", \"tid\": %d", (int)t->tid);
		else
			fputs(", \"tid\": null", out);
		fprintf(out, ", \"running\": %s, \"state\": \"%s\"",
			t->state == ASYNCIO_TASK_RUNNING ? "true" : "false", task_states[t->state]);
		if (t->torn)
			fputs(", \"torn\": true", out);
		if (t->chain_cut)
			fputs(", \"frames_truncated\": true", out);
		if (t->awaiters_cut)
			fputs(", \"awaited_by_truncated\": true", out);
		fputs(", \"frames\": [", out);
		for (size_t k = 0; k < t->nframes; k++)
			json_frame(out, &t->frames[k], k == 0);
		fputs("], \"awaited_by\": [", out);
		for (size_t k = 0; k < t->nawaited; k++)
			fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)t->awaited_by[k]);
		fputs("]}", out);
	}
	fputs("]}\n", out);
}

static void print_async_notes(FILE *f, const struct asyncio_snapshot *s)
{
	if (s->torn)
		fprintf(f, "[torn]: %zu task%s kept changing while read (%d tries); their frames "
			"end in [torn]\n", s->torn, s->torn == 1 ? "" : "s", ASYNCIO_ATTEMPTS);
	if (s->finished)
		fprintf(f, "%zu task%s ended while read and %s not shown\n", s->finished,
			s->finished == 1 ? "" : "s", s->finished == 1 ? "is" : "are");
	if (s->lists_cut)
		fprintf(f, "%zu task list%s longer than %d: the rest is not shown\n", s->lists_cut,
			s->lists_cut == 1 ? " is" : "s are", ASYNCIO_MAX_LIST);
	if (s->lists_torn)
		fprintf(f, "%zu task list%s kept changing: read as far as %s held\n",
			s->lists_torn, s->lists_torn == 1 ? "" : "s",
			s->lists_torn == 1 ? "it" : "they");
}

int dump_async__run(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	struct asyncio_snapshot snap = { 0 };
	struct asyncio_offsets ao;
	struct symbolizer *sym = NULL;
	struct pyproc *p = NULL;
	int rc;

	rc = pyproc__open(o->pid, &p, err, errlen);
	if (rc)
		return rc;
	rc = asyncio_offsets__load(p, &ao, err, errlen);
	if (rc)
		goto out;
	rc = symbolizer__new(p, &sym);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = asyncio_snapshot__take(p, sym, &ao, &snap, err, errlen);
	if (rc)
		goto out;
	if (o->json) {
		print_async_json(out, p, &snap);
		print_async_notes(stderr, &snap);
	} else {
		fprintf(out, "Process %d: Python %s, %zu asyncio task%s\n", (int)o->pid,
			pyproc__version(p), snap.n, snap.n == 1 ? "" : "s");
		print_async_notes(out, &snap);
		fputc('\n', out);
		rc = asyncio_tree__print(out, &snap);
		if (rc) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if (fflush(out) || ferror(out)) {
		rc = -EIO;
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
	}
out:
	asyncio_snapshot__free(&snap);
	symbolizer__free(sym);
	pyproc__free(p);
	return rc;
}
