/* SPDX-License-Identifier: MIT */
/*
 * push_parca.c - Parca's WriteRaw in its HTTP form: POST
 * /profiles/writeraw with {"series": [{"labels": {"labels": [{name,
 * value}...]}, "samples": [{"rawProfile": base64 of the gzip'd pprof}]}],
 * "normalized": true}. __name__ says what the profile weighs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/push.h"
#include "agent/spool.h"

struct json_buf {
	char *s;
	size_t n, cap;
	int err;
};

static void put(struct json_buf *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->s, cap);

		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

static void puts_(struct json_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* Label names and values are [A-Za-z0-9._/:-] (labels.c): nothing to escape. */
static int add_label(void *ctx, const char *name, const char *value)
{
	struct json_buf *b = ctx;

	puts_(b, ",{\"name\":\"");
	puts_(b, name);
	puts_(b, "\",\"value\":\"");
	puts_(b, value);
	puts_(b, "\"}");
	return b->err;
}

static void base64(struct json_buf *b, const unsigned char *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char q[4];

	for (size_t i = 0; i < n && !b->err; i += 3) {
		unsigned int v = (unsigned int)p[i] << 16;

		if (i + 1 < n)
			v |= (unsigned int)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		q[0] = tab[(v >> 18) & 63];
		q[1] = tab[(v >> 12) & 63];
		q[2] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		q[3] = i + 2 < n ? tab[v & 63] : '=';
		put(b, q, 4);
	}
}

/* The profile's name in Parca: what it weighs. */
static const char *metric_of(const char *mode)
{
	if (!strcmp(mode, "wall"))
		return "wall";
	if (!strcmp(mode, "off-cpu"))
		return "off_cpu";
	return "process_cpu";
}

static int request(struct http *h, const char *base, const char *meta, const void *profile,
		   size_t len, struct push_request *out)
{
	struct json_buf b = { 0 };
	char mode[32] = "cpu", service[256];
	int rc;

	(void)h;
	memset(out, 0, sizeof(*out));
	if (spool_meta__get(meta, "service_name", service, sizeof(service)))
		return -EINVAL;
	spool_meta__get(meta, "mode", mode, sizeof(mode));
	puts_(&b, "{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\",\"value\":\"");
	puts_(&b, metric_of(mode));
	puts_(&b, "\"}");
	add_label(&b, "service_name", service);
	rc = push__each_label(meta, add_label, &b);
	puts_(&b, "]},\"samples\":[{\"rawProfile\":\"");
	base64(&b, profile, len);
	puts_(&b, "\"}]}],\"normalized\":true}");
	if (rc || b.err || !(out->url = push__url(base, "/profiles/writeraw"))) {
		free(b.s);
		return rc ? rc : b.err ? b.err : -ENOMEM;
	}
	out->content_type = "application/json";
	out->body = b.s;
	out->len = b.n;
	out->owned = b.s;
	return 0;
}

const struct push_kind push_parca = { .name = "parca", .request = request };
