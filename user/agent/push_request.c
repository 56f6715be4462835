/* SPDX-License-Identifier: MIT */
/*
 * push_request.c - what the store kinds (push_pyroscope.c, push_parca.c)
 * share to make a request: labels from the meta text, URLs (push.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/labels.h"
#include "agent/push.h"
#include "agent/spool.h"

void push_request__free(struct push_request *r)
{
	free(r->url);
	free(r->owned);
	memset(r, 0, sizeof(*r));
}

/* Each meta line "PREFIXNAME=VALUE" (@prefix) to @fn(NAME, VALUE); with
 * @as_label, NAME's '.' and '-' become '_', and a name stores refuse is
 * skipped. Stops at, and returns, @fn's first non-zero return. */
static int each_prefixed(const char *meta, const char *prefix, int as_label,
			 int (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
	size_t pl = strlen(prefix);

	for (const char *l = meta; l && *l;) {
		const char *nl = strchr(l, '\n'), *eq;
		size_t ll = nl ? (size_t)(nl - l) : strlen(l), kl, vl;
		char name[128], value[512];
		int rc;

		eq = memchr(l, '=', ll);
		if (ll > pl && !memcmp(l, prefix, pl) && eq && (kl = (size_t)(eq - l) - pl) &&
		    kl < sizeof(name)) {
			memcpy(name, l + pl, kl);
			name[kl] = '\0';
			for (size_t i = 0; as_label && i < kl; i++)
				if (name[i] == '.' || name[i] == '-')
					name[i] = '_';
			vl = ll - (size_t)(eq - l) - 1;
			if (vl >= sizeof(value))
				vl = sizeof(value) - 1;
			memcpy(value, eq + 1, vl);
			value[vl] = '\0';
			if (!as_label || labels__name_ok(name)) {
				rc = fn(ctx, name, value);
				if (rc)
					return rc;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

int push__each_label(const char *meta, int (*fn)(void *ctx, const char *name,
						 const char *value), void *ctx)
{
	static const char *const fixed[] = { "pid", "host", "python_version", "container_id" };
	char value[512];
	int rc;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (spool_meta__get(meta, fixed[i], value, sizeof(value)) || !value[0])
			continue;
		rc = fn(ctx, fixed[i], value);
		if (rc)
			return rc;
	}
	rc = each_prefixed(meta, "resource.", 1, fn, ctx);
	return rc ? rc : each_prefixed(meta, "label.", 0, fn, ctx);
}

int push__each_resource(const char *meta, int (*fn)(void *ctx, const char *key,
						    const char *value), void *ctx)
{
	return each_prefixed(meta, "resource.", 0, fn, ctx);
}

int push__each_user_label(const char *meta, int (*fn)(void *ctx, const char *name,
						      const char *value), void *ctx)
{
	return each_prefixed(meta, "label.", 0, fn, ctx);
}

char *push__url(const char *base, const char *path)
{
	size_t n = strlen(base);
	char *url;

	while (n && base[n - 1] == '/')
		n--;
	if (asprintf(&url, "%.*s%s", (int)n, base, path) < 0)
		return NULL;
	return url;
}
