/* SPDX-License-Identifier: MIT */
/*
 * push_pyroscope.c - Grafana Pyroscope's HTTP ingest: POST
 * /ingest?name=SERVICE{k=v,...}&from=S&until=S&format=pprof, the gzip'd
 * pprof as the body. The profile's own sample type names what it weighs
 * (cpu, wall); from and until are UNIX seconds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http.h"
#include "agent/push.h"
#include "agent/spool.h"

struct name_buf {
	char s[4096];
	size_t n;
	int first;
};

static int add_label(void *ctx, const char *name, const char *value)
{
	struct name_buf *b = ctx;
	int w = snprintf(b->s + b->n, sizeof(b->s) - b->n, "%s%s=%s", b->first ? "" : ",",
			 name, value);

	if (w < 0 || (size_t)w >= sizeof(b->s) - b->n)
		return -E2BIG;
	b->n += (size_t)w;
	b->first = 0;
	return 0;
}

static int request(struct http *h, const char *base, const char *meta, const void *profile,
		   size_t len, struct push_request *out)
{
	struct name_buf b = { .first = 1 };
	char from_ms[32], until_ms[32];
	char *name, *path = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (spool_meta__get(meta, "service_name", b.s, sizeof(b.s) - 2) ||
	    spool_meta__get(meta, "from_ms", from_ms, sizeof(from_ms)) ||
	    spool_meta__get(meta, "until_ms", until_ms, sizeof(until_ms)))
		return -EINVAL;
	b.n = strlen(b.s);
	b.s[b.n++] = '{';
	rc = push__each_label(meta, add_label, &b);
	if (rc || b.n + 2 > sizeof(b.s))
		return rc ? rc : -E2BIG;
	b.s[b.n++] = '}';
	b.s[b.n] = '\0';
	name = http__escape(h, b.s);
	if (!name || asprintf(&path, "/ingest?name=%s&from=%llu&until=%llu&format=pprof", name,
			      strtoull(from_ms, NULL, 10) / 1000,
			      strtoull(until_ms, NULL, 10) / 1000) < 0)
		path = NULL;
	free(name);
	out->url = path ? push__url(base, path) : NULL;
	free(path);
	if (!out->url)
		return -ENOMEM;
	out->content_type = "application/octet-stream";
	out->body = profile;
	out->len = len;
	return 0;
}

const struct push_kind push_pyroscope = { .name = "pyroscope", .request = request };
