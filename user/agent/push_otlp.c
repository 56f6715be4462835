/* SPDX-License-Identifier: MIT */
/*
 * push_otlp.c - OpenTelemetry's OTLP/HTTP for profiles: POST
 * /v1development/profiles with an ExportProfilesServiceRequest
 * (opentelemetry-proto 1.11), protobuf, gzip'd (Content-Encoding: gzip).
 * The spooled pprof becomes the request (output/otlp.h), its resource
 * named by the semantic conventions from the entry's meta: service.name,
 * process.pid, process.executable.name, process.runtime.name/version,
 * host.name, host.arch, container.id, the target's own
 * OTEL_RESOURCE_ATTRIBUTES and the user's --label pairs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/push.h"
#include "agent/spool.h"
#include "output/otlp.h"
#include "util/gzip.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#define OTLP_PATH "/v1development/profiles"

static int add_attr(void *ctx, const char *key, const char *value)
{
	otlp_resource__add(ctx, key, value, 0);
	return 0;		/* one that does not fit is left out, not fatal */
}

/* Meta key @mkey's value as attribute @key, when the meta has it. */
static void meta_attr(struct otlp_resource *r, const char *meta, const char *mkey,
		      const char *key)
{
	char v[512];

	if (!spool_meta__get(meta, mkey, v, sizeof(v)) && v[0])
		otlp_resource__add(r, key, v, 0);
}

/* The process's resource, from @meta. -EINVAL without a pid. */
static int resource_of(const char *meta, struct otlp_resource *r)
{
	char pid[32], ver[64];

	if (spool_meta__get(meta, "pid", pid, sizeof(pid)))
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->pid = strtoll(pid, NULL, 10);
	meta_attr(r, meta, "service_name", "service.name");
	meta_attr(r, meta, "comm", "process.executable.name");
	if (!spool_meta__get(meta, "python_version", ver, sizeof(ver)) && ver[0]) {
		otlp_resource__add(r, "process.runtime.name", "CPython", 0);
		otlp_resource__add(r, "process.runtime.version", ver, 0);
	}
	meta_attr(r, meta, "host", "host.name");
	meta_attr(r, meta, "container_id", "container.id");
	push__each_resource(meta, add_attr, r);
	push__each_user_label(meta, add_attr, r);
	return otlp_resource__add_host(r);	/* host.name is the meta's already */
}

static int request(struct http *h, const char *base, const char *meta, const void *profile,
		   size_t len, struct push_request *out)
{
	struct otlp_resource *r = malloc(sizeof(*r));
	uint8_t *pprof = NULL, *req = NULL, *body = NULL;
	size_t plen = 0, rlen = 0, blen = 0;
	int rc;

	(void)h;
	memset(out, 0, sizeof(*out));
	if (!r)
		return -ENOMEM;
	rc = resource_of(meta, r);
	if (!rc)
		rc = gzip__decompress(profile, len, SPOOL_BODY_MAX, &pprof, &plen);
	if (!rc)
		rc = otlp__from_pprof(pprof, plen, r, 1, &req, &rlen);
	if (!rc)
		rc = gzip__compress(req, rlen, &body, &blen);
	if (!rc && !(out->url = push__url(base, OTLP_PATH)))
		rc = -ENOMEM;
	free(r);
	free(pprof);
	free(req);
	if (rc) {
		free(body);
		return rc == -E2BIG ? -EINVAL : rc;
	}
	out->content_type = "application/x-protobuf";
	out->content_encoding = "gzip";
	out->body = body;
	out->len = blen;
	out->owned = body;
	return 0;
}

/* ExportProfilesServiceResponse's partial_success: rejected_profiles and
 * its message (control bytes made spaces). A body that is not one: 0. */
static long rejected(const void *answer, size_t len, char *why, size_t whylen)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *r =
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
			NULL, len, answer);
	long n = 0;

	if (!r)
		return 0;
	if (r->partial_success && r->partial_success->rejected_profiles > 0) {
		n = r->partial_success->rejected_profiles > 0x7fffffff ?
			    0x7fffffff : (long)r->partial_success->rejected_profiles;
		snprintf(why, whylen, "%s", r->partial_success->error_message ?
					    r->partial_success->error_message : "");
		for (char *c = why; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = ' ';
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
		r, NULL);
	return n;
}

const struct push_kind push_otlp = { .name = "otlp", .request = request, .rejected = rejected };
