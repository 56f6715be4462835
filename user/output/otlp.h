/* SPDX-License-Identifier: MIT */
/*
 * otlp.h - a pprof profile as an OpenTelemetry profiles export: the
 * ExportProfilesServiceRequest of opentelemetry-proto 1.11's
 * v1development signal, what an OTLP/HTTP receiver takes at
 * /v1development/profiles. Both messages are packed and unpacked by the
 * C that protoc-c generates from Debian's .proto files at build time.
 *
 * One pprof becomes one request: its tables become the request's shared
 * dictionary (index 0 of each the zero value, as the spec asks), its
 * samples are split by their "pid" label into one resource per process,
 * and each of its sample types but the plain sample count becomes one
 * Profile (the spec's Profile has a single sample type): "cpu"
 * nanoseconds, "off_cpu" nanoseconds, "wall" nanoseconds, an event's
 * count, "memory" bytes. The "thread_id" and "thread_name" labels become
 * each sample's thread.id and thread.name attributes.
 */
#ifndef PYPROF_OUTPUT_OTLP_H
#define PYPROF_OUTPUT_OTLP_H

#include <stddef.h>
#include <stdint.h>

#define OTLP_ATTRS_MAX 48
#define OTLP_ATTRS_TEXT 8192

/* A resource attribute: a string, or an integer when @str is NULL. */
struct otlp_attr {
	const char *key;
	const char *str;
	int64_t num;
};

/* What one process is: its resource attributes (process.pid is added),
 * their keys and strings copied into @text. */
struct otlp_resource {
	int64_t pid;
	struct otlp_attr attrs[OTLP_ATTRS_MAX];
	size_t nattrs;
	char text[OTLP_ATTRS_TEXT];
	size_t used;
};

/* Add @key = @str (copied; NULL: @num) to @r: 0, or -E2BIG when full
 * (the attribute is left out). A key already there is not added again. */
int otlp_resource__add(struct otlp_resource *r, const char *key, const char *str, int64_t num);

/*
 * The request for the pprof @pprof (@len bytes, not compressed), its
 * processes described by @res (@nres; a process of the profile not among
 * them gets process.pid alone) into *@out (malloc'd, *@outlen bytes).
 * 0, -EINVAL (not a pprof, or one whose indices do not hold) or -ENOMEM.
 */
int otlp__from_pprof(const void *pprof, size_t len, const struct otlp_resource *res,
		     size_t nres, uint8_t **out, size_t *outlen);

/* The host's resource attributes, host.name and host.arch (as the
 * semantic conventions name architectures: amd64, arm64), added to @r. */
int otlp_resource__add_host(struct otlp_resource *r);

#endif
