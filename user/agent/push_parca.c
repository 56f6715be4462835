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
#include "output/json_writer.h"

static int add_label(void *ctx, const char *name, const char *value)
{
	FILE *f = ctx;

	fputs(",{\"name\":", f);
	json_write_string(f, name);
	fputs(",\"value\":", f);
	json_write_string(f, value);
	return fputc('}', f) == EOF ? -ENOMEM : 0;
}

static void base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		unsigned int v = (unsigned int)p[i] << 16;

		if (i + 1 < n)
			v |= (unsigned int)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		fputc(tab[(v >> 18) & 63], f);
		fputc(tab[(v >> 12) & 63], f);
		fputc(i + 1 < n ? tab[(v >> 6) & 63] : '=', f);
		fputc(i + 2 < n ? tab[v & 63] : '=', f);
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
	char mode[32] = "cpu", service[256], *body = NULL;
	size_t blen = 0;
	FILE *f;
	int rc;

	(void)h;
	memset(out, 0, sizeof(*out));
	if (spool_meta__get(meta, "service_name", service, sizeof(service)))
		return -EINVAL;
	spool_meta__get(meta, "mode", mode, sizeof(mode));
	f = open_memstream(&body, &blen);
	if (!f)
		return -ENOMEM;
	fprintf(f, "{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\",\"value\":\"%s\"}",
		metric_of(mode));
	add_label(f, "service_name", service);
	rc = push__each_label(meta, add_label, f);
	fputs("]},\"samples\":[{\"rawProfile\":\"", f);
	base64(f, profile, len);
	fputs("\"}]}],\"normalized\":true}", f);
	if (ferror(f) && !rc)
		rc = -ENOMEM;
	if (fclose(f) && !rc)
		rc = -ENOMEM;
	if (!rc && !(out->url = push__url(base, "/profiles/writeraw")))
		rc = -ENOMEM;
	if (rc) {
		free(body);
		return rc;
	}
	out->content_type = "application/json";
	out->body = body;
	out->len = blen;
	out->owned = body;
	return 0;
}

const struct push_kind push_parca = { .name = "parca", .request = request };
