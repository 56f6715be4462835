// SPDX-License-Identifier: MIT
/*
 * record_resource.c - what each recorded process is, for --format otlp's
 * resources (output_opts.describe): the agent's labels (service name,
 * container, the target's own OTEL_RESOURCE_ATTRIBUTES) and its Python.
 * Asked at the end of the recording: a process gone by then is named by
 * its comm, but the command pyprof-bpf started, whose environment is
 * pyprof-bpf's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent/labels.h"
#include "commands/recording.h"
#include "output/otlp.h"
#include "target/procset.h"
#include "util/file.h"

/* The command's labels from pyprof-bpf's own environment. */
static void own_environ_labels(struct proc_labels *l)
{
	char *env = NULL;
	size_t n = 0;

	if (read_file("/proc/self/environ", 256 * 1024, 1, &env, &n))
		return;
	labels__resource_from_environ(env, n, l);
	labels__service_from_environ(env, n, l->service, sizeof(l->service));
	free(env);
}

void recording__describe(void *ctx, pid_t pid, struct otlp_resource *r)
{
	struct recording *rec = ctx;
	struct proc_entry *e = rec->procs ? procset__find(rec->procs, pid) : NULL;
	struct proc_labels *l = calloc(1, sizeof(*l));
	char path[64];

	if (!l)
		return;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	labels__read(pid, e ? e->comm : NULL, l);
	if (access(path, F_OK) && rec->cmd && rec->main_proc && rec->main_proc == e)
		own_environ_labels(l);
	otlp_resource__add(r, "service.name", l->service, 0);
	if (e && e->version[0]) {
		otlp_resource__add(r, "process.runtime.name", "CPython", 0);
		otlp_resource__add(r, "process.runtime.version", e->version, 0);
	}
	if (l->container[0])
		otlp_resource__add(r, "container.id", l->container, 0);
	for (size_t i = 0; i < l->nresource; i++)
		otlp_resource__add(r, l->resource[i].key, l->resource[i].value, 0);
	free(l);
}
