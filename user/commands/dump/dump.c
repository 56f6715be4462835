/* SPDX-License-Identifier: MIT */
/*
 * dump.c - `pyprof-bpf dump` run (dump.h): one process (collect.c, then
 * render.c) or several, one after the other (internal.h lists the parts).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands/dump/internal.h"
#include "target/procdir.h"
#include "target/procfs.h"

static int dump_one(const struct dump_opts *o, FILE *out, const char *before, char *err,
		    size_t errlen)
{
	struct dump_ctx c = { 0 };
	bool said = false;
	int rc;

	if (o->async)
		return dump_async__run(o, out, err, errlen);
	rc = dump_ctx__open(o, &c, err, errlen);
	if (rc)
		goto out;
	rc = dump_ctx__list_threads(o, &c);
	if (!rc && o->kernel)
		rc = dump_ctx__kernel_stacks(o, &c);
	if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (rc)
		goto fail_read;
	if (o->blocking && (rc = dump_ctx__stop_threads(o, &c, err, errlen)))
		goto out;
	rc = dump_ctx__read_stacks(o, &c, err, errlen, &said);
	if (said)
		goto out;
	if (rc)
		goto fail_read;
	/* Running again before the output, which may wait on its reader. */
	thread_stop__free(&c.stop);
	rc = dump_render__write(o, out, before, c.p, c.pid, c.th, c.n, err, errlen);
	goto out;

fail_read:
	if (c.core.cf) {
		snprintf(err, errlen, "core %s: reading its stacks failed: %s", o->core,
			 rc == -EPROTO ? "its thread list is inconsistent" : strerror(-rc));
	} else if (rc == -ESRCH || !procfs__alive(o->pid)) {
		snprintf(err, errlen, "process %d exited during the dump", (int)o->pid);
		rc = -ESRCH;
	} else {
		snprintf(err, errlen, "process %d: reading its stacks failed: %s", (int)o->pid,
			 rc == -EPROTO ? "its thread list is inconsistent" : strerror(-rc));
	}
out:
	dump_ctx__free(&c);
	return rc;
}

/* The pids of every process of /proc but ours, at most @max. */
static size_t all_pids(pid_t *out, size_t max)
{
	struct procdir it;
	size_t n = 0;
	pid_t v;

	if (procdir__open_pids(&it))
		return 0;
	while (n < max && procdir__next(&it, &v))
		if (v != getpid())
			out[n++] = v;
	procdir__close(&it);
	return n;
}

/*
 * Several processes (-p a,b or -a): each dumped as one alone would be, the
 * text one after the other, the JSON as {"processes": [...]}. A process that
 * fails is told on stderr (with -a, one that is not Python is skipped
 * quietly) and the others are still dumped.
 */
static int dump_many(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	pid_t *pids = calloc(DUMP_MAX_PROCS, sizeof(*pids));
	size_t n = o->all ? 0 : o->npids, shown = 0, failed = 0;
	int rc = 0;

	if (!pids) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (o->all)
		n = all_pids(pids, DUMP_MAX_PROCS);
	else
		memcpy(pids, o->pids, n * sizeof(*pids));
	if (o->json)
		fputs("{\"processes\": [", out);
	for (size_t i = 0; i < n; i++) {
		struct dump_opts one = *o;
		char why[PYPROF_ERRLEN] = "";

		one.pid = pids[i];
		rc = dump_one(&one, out, !shown ? "" : o->json ? ", " : "\n", why, sizeof(why));
		if (!rc) {
			shown++;
			continue;
		}
		if (o->all && (rc == -ENOEXEC || rc == -ESRCH || rc == -ENOTSUP))
			continue;	/* not a Python we read, or gone */
		failed++;
		fprintf(stderr, "pyprof-bpf: %s\n", why[0] ? why : strerror(-rc));
	}
	if (o->json)
		fputs("]}\n", out);
	free(pids);
	rc = 0;
	if (fflush(out) || ferror(out)) {
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
		rc = -EIO;
	} else if (failed) {
		snprintf(err, errlen, "%zu of %zu processes could not be dumped", failed, n);
		rc = -EIO;
	}
	return rc;
}

int dump__run(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	if (o->all || o->npids > 1)
		return dump_many(o, out, err, errlen);
	return dump_one(o, out, "", err, errlen);
}
