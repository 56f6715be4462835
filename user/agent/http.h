/* SPDX-License-Identifier: MIT */
/*
 * http.h - one HTTP POST, through libcurl (TLS, proxies from the
 * environment, timeouts). libcurl is opened at run time (libcurl.so.4), so
 * that a binary built here runs on a host without it for everything but
 * pushing to a store.
 */
#ifndef PYPROF_AGENT_HTTP_H
#define PYPROF_AGENT_HTTP_H

#include <stddef.h>

/* Load libcurl and initialize it; call once, before any thread starts.
 * 0, or -ENOENT with one line in @err naming the package to install. */
int http__init(char *err, size_t errlen);

#define HTTP_MAX_HEADERS 8
#define HTTP_HEADER_MAX 1024

/* Credentials for a store, from --auth-file; headers from --push-header
 * and the auth file's header= lines. */
struct http_auth {
	char tenant[256];	/* X-Scope-OrgID; "" for none */
	char user[256], password[256];	/* basic auth when user is set */
	char bearer[4096];	/* bearer token; "" for none */
	char headers[HTTP_MAX_HEADERS][HTTP_HEADER_MAX];	/* "Name: value" */
	size_t nheaders;
};

/* Whether @h is a header line a request may carry: "Name: value", the
 * name of token characters, no control bytes. */
int http__header_ok(const char *h);

struct http_post {
	const char *url;
	const char *content_type;
	const char *content_encoding;	/* NULL: none */
	const void *body;
	size_t len;
	const struct http_auth *auth;	/* NULL: none */
	long timeout_ms;
};

struct http;			/* one connection's state; one per thread */

int http__new(struct http **out);
void http__free(struct http *h);

/*
 * POST @p. 0 with *status the HTTP status, or -errno (the connection or
 * the transfer failed: refused, timed out, TLS) with one line in @err;
 * with a status past 299 the start of the answer is in @err too.
 */
int http__post(struct http *h, const struct http_post *p, long *status, char *err,
	       size_t errlen);

/* The start of the last answer's body (ANSWER_KEEP bytes at most; after
 * a status past 299, only what the error line kept): *@len bytes. */
const void *http__answer(const struct http *h, size_t *len);

/* @s escaped for a URL's query into a malloc'd string; NULL: ENOMEM. */
char *http__escape(struct http *h, const char *s);

#endif
