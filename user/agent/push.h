/* SPDX-License-Identifier: MIT */
/*
 * push.h - a spooled profile as a store's request. Each store kind
 * (push_pyroscope.c, push_parca.c) makes the URL, the content type and
 * the body of its documented ingest call from an entry's meta text and
 * its gzip'd pprof.
 */
#ifndef PYPROF_AGENT_PUSH_H
#define PYPROF_AGENT_PUSH_H

#include <stddef.h>

struct http;

struct push_request {
	char *url;
	const char *content_type;
	const void *body;
	size_t len;
	void *owned;		/* a body of the request's own, freed with it */
	const char *content_encoding;	/* "gzip", or NULL */
};

struct push_kind {
	const char *name;	/* "pyroscope", "parca" */
	/* The request for the profile (@profile, @len bytes) described by
	 * @meta, to the store at @base. 0, -EINVAL (the meta lacks what the
	 * request needs) or -ENOMEM. */
	int (*request)(struct http *h, const char *base, const char *meta,
		       const void *profile, size_t len, struct push_request *out);
	/* A 2xx answer's body (@len bytes, maybe cut): how many profiles the
	 * store says it rejected all the same, the why in @why. NULL: none. */
	long (*rejected)(const void *answer, size_t len, char *why, size_t whylen);
};

extern const struct push_kind push_pyroscope;
extern const struct push_kind push_parca;
extern const struct push_kind push_otlp;

/* The kind named @name, or NULL. */
const struct push_kind *push__kind(const char *name);

void push_request__free(struct push_request *r);

/*
 * The labels of @meta, but service_name: pid, host, python_version,
 * container_id (when set), the target's OpenTelemetry resource attributes
 * (meta keys "resource.KEY", the key's '.' and '-' made '_'), then the
 * user's (meta keys "label.NAME"), each to @fn. Stops at, and returns,
 * @fn's first non-zero return.
 */
int push__each_label(const char *meta, int (*fn)(void *ctx, const char *name,
						 const char *value), void *ctx);
/* The target's OpenTelemetry resource attributes of @meta, as it named them. */
int push__each_resource(const char *meta, int (*fn)(void *ctx, const char *key,
						    const char *value), void *ctx);
/* The user's --label pairs of @meta. */
int push__each_user_label(const char *meta, int (*fn)(void *ctx, const char *name,
						      const char *value), void *ctx);

/* "<base>/<path>" without a doubled '/': malloc'd, NULL on ENOMEM. */
char *push__url(const char *base, const char *path);

#endif
