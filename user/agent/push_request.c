/* SPDX-License-Identifier: MIT */
/*
 * push_request.c - what the store kinds (push_pyroscope.c, push_parca.c)
 * share to make a request: labels from the meta text, URLs (push.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/push.h"
#include "agent/spool.h"

void push_request__free(struct push_request *r)
{
	free(r->url);
	free(r->owned);
	memset(r, 0, sizeof(*r));
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
	for (const char *l = meta; l && *l;) {
		const char *nl = strchr(l, '\n'), *eq;
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		char name[128];

		eq = memchr(l, '=', ll);
		if (ll > 6 && !memcmp(l, "label.", 6) && eq && (size_t)(eq - l - 6) < sizeof(name)) {
			size_t vl = ll - (size_t)(eq - l) - 1;

			memcpy(name, l + 6, (size_t)(eq - l - 6));
			name[eq - l - 6] = '\0';
			if (vl >= sizeof(value))
				vl = sizeof(value) - 1;
			memcpy(value, eq + 1, vl);
			value[vl] = '\0';
			rc = fn(ctx, name, value);
			if (rc)
				return rc;
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
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
