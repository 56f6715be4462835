/* SPDX-License-Identifier: MIT */
/*
 * labels.h - what a profile is queried by in a store: the target's service
 * name, pid, Python version, container; the host; the user's --label ones.
 * Read from /proc: every byte of a target's environment, command line and
 * cgroup is the target's to choose, so values are bounded and reduced to
 * [A-Za-z0-9._/:-] (anything else becomes '_').
 */
#ifndef PYPROF_AGENT_LABELS_H
#define PYPROF_AGENT_LABELS_H

#include <stddef.h>
#include <sys/types.h>

#define LABEL_VALUE_MAX 128
#define LABEL_NAME_MAX 64

#define LABELS_RESOURCE_MAX 16

/* One OpenTelemetry resource attribute the target set itself. */
struct resource_label {
	char key[LABEL_NAME_MAX];	/* [A-Za-z0-9._-] */
	char value[LABEL_VALUE_MAX];
};

struct proc_labels {
	char service[LABEL_VALUE_MAX];	/* service_name */
	char container[LABEL_VALUE_MAX];	/* container_id; "" when none */
	/* OTEL_RESOURCE_ATTRIBUTES' pairs but service.name, in order. */
	struct resource_label resource[LABELS_RESOURCE_MAX];
	size_t nresource;
};

/*
 * The labels of process @pid: service_name from OTEL_SERVICE_NAME, else
 * OTEL_RESOURCE_ATTRIBUTES' service.name, else PYROSCOPE_APPLICATION_NAME, else its script's basename without .py, its
 * -m module, else @comm (else "python"); container_id from its cgroup (a
 * 64-hex-digit id, as Docker, containerd, CRI-O and Kubernetes name them).
 * Never fails: what cannot be read is left to the fallbacks.
 */
void labels__read(pid_t pid, const char *comm, struct proc_labels *out);

/* @s made a label value into @out (@len bytes, NUL included): cut, and
 * every byte outside [A-Za-z0-9._/:-] made '_'. */
void labels__clean(const char *s, size_t n, char *out, size_t len);

/* Whether @name is a label name stores accept: [A-Za-z_][A-Za-z0-9_]*,
 * at most LABEL_NAME_MAX - 1 bytes, not starting with "__". */
int labels__name_ok(const char *name);

/* The service name from a NUL-separated environment (@n bytes):
 * OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' service.name, else
 * PYROSCOPE_APPLICATION_NAME, into @out; 0, or -ENOENT when none names one. */
int labels__service_from_environ(const char *env, size_t n, char *out, size_t len);

/* The service name from a NUL-separated command line (@n bytes), into
 * @out; 0, or -ENOENT when it names no script or module. */
int labels__service_from_cmdline(const char *args, size_t n, char *out, size_t len);

/*
 * OTEL_RESOURCE_ATTRIBUTES of a NUL-separated environment (@n bytes):
 * "key=value" pairs split by ',', values percent-decoded then cleaned as
 * labels are; service.name, pairs without a key or '=', keys with other
 * bytes than [A-Za-z0-9._-] and pairs past LABELS_RESOURCE_MAX left out.
 * Into @out->resource; returns how many were left out.
 */
size_t labels__resource_from_environ(const char *env, size_t n, struct proc_labels *out);

/* The container id in /proc/PID/cgroup's text (@n bytes), into @out; 0 or
 * -ENOENT. */
int labels__container_from_cgroup(const char *text, size_t n, char *out, size_t len);

#endif
