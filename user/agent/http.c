/* SPDX-License-Identifier: MIT */
/* http.c - one HTTP POST through libcurl, opened at run time (http.h). */
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http.h"
#include "util/errbuf.h"

/* Bytes of an answer kept: an error's start for the log, or a 2xx's body
 * for its store kind to read (an OTLP partial success). */
#define ANSWER_KEEP 4096

/* The libcurl calls we make, by the names of their symbols. */
static struct {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *c);
	CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
	void (*easy_reset)(CURL *c);
	void (*easy_cleanup)(CURL *c);
	const char *(*easy_strerror)(CURLcode rc);
	char *(*easy_escape)(CURL *c, const char *s, int len);
	void (*free)(void *p);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
} curl;

static int loaded;

int http__init(char *err, size_t errlen)
{
	static const char *const names[] = {
		"curl_global_init", "curl_easy_init", "curl_easy_setopt", "curl_easy_perform",
		"curl_easy_getinfo", "curl_easy_reset", "curl_easy_cleanup",
		"curl_easy_strerror", "curl_easy_escape", "curl_free", "curl_slist_append",
		"curl_slist_free_all",
	};
	void **slots = (void **)&curl;
	void *lib;

	if (loaded)
		return 0;
	lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		seterr(err, errlen, "--push needs libcurl, which is not installed (Debian: "
		       "apt install libcurl4): %s", dlerror());
		return -ENOENT;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		slots[i] = dlsym(lib, names[i]);
		if (!slots[i]) {
			seterr(err, errlen, "libcurl.so.4 has no %s: too old a libcurl", names[i]);
			dlclose(lib);
			return -ENOENT;
		}
	}
	if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		seterr(err, errlen, "libcurl failed to initialize");
		return -EIO;
	}
	loaded = 1;
	return 0;
}

struct http {
	CURL *c;
	char answer[ANSWER_KEEP + 1];
	size_t alen;
	char errbuf[CURL_ERROR_SIZE];
};

int http__new(struct http **out)
{
	struct http *h;

	if (!loaded)
		return -ENOENT;
	h = calloc(1, sizeof(*h));
	if (!h || !(h->c = curl.easy_init())) {
		free(h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

void http__free(struct http *h)
{
	if (!h)
		return;
	curl.easy_cleanup(h->c);
	free(h);
}

/* The answer's body: its start is kept for an error line. */
static size_t on_answer(char *data, size_t size, size_t n, void *ctx)
{
	struct http *h = ctx;
	size_t len = size * n, take = ANSWER_KEEP - h->alen;

	if (take > len)
		take = len;
	memcpy(h->answer + h->alen, data, take);
	h->alen += take;
	h->answer[h->alen] = '\0';
	return len;
}

/* The request's headers: its content type and the tenant's. */
static struct curl_slist *headers_of(const struct http_post *p)
{
	struct curl_slist *l = NULL, *n;
	char line[400];

	snprintf(line, sizeof(line), "Content-Type: %s", p->content_type);
	if (!(n = curl.slist_append(l, line)))
		return NULL;
	l = n;
	/* No "Expect: 100-continue" round trip before a body. */
	if (!(n = curl.slist_append(l, "Expect:")))
		goto fail;
	l = n;
	if (p->content_encoding) {
		snprintf(line, sizeof(line), "Content-Encoding: %s", p->content_encoding);
		if (!(n = curl.slist_append(l, line)))
			goto fail;
		l = n;
	}
	if (p->auth && p->auth->tenant[0]) {
		snprintf(line, sizeof(line), "X-Scope-OrgID: %s", p->auth->tenant);
		if (!(n = curl.slist_append(l, line)))
			goto fail;
		l = n;
	}
	for (size_t i = 0; p->auth && i < p->auth->nheaders; i++) {
		if (!(n = curl.slist_append(l, p->auth->headers[i])))
			goto fail;
		l = n;
	}
	return l;
fail:
	curl.slist_free_all(l);
	return NULL;
}

int http__header_ok(const char *h)
{
	const char *colon = strchr(h, ':');

	if (!colon || colon == h || strlen(h) >= HTTP_HEADER_MAX)
		return 0;
	for (const char *c = h; c < colon; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("!#$%&'*+-.^_`|~", *c)))
			return 0;
	for (const char *c = colon + 1; *c; c++)
		if ((unsigned char)*c < 0x20 && *c != '\t')
			return 0;
	return 1;
}

static void set_auth(CURL *c, const struct http_auth *a)
{
	if (!a)
		return;
	if (a->bearer[0]) {
		curl.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl.easy_setopt(c, CURLOPT_XOAUTH2_BEARER, a->bearer);
	} else if (a->user[0]) {
		curl.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl.easy_setopt(c, CURLOPT_USERNAME, a->user);
		curl.easy_setopt(c, CURLOPT_PASSWORD, a->password);
	}
}

/* Printable: an answer's control bytes become spaces. */
static void clean_answer(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			*s = ' ';
}

int http__post(struct http *h, const struct http_post *p, long *status, char *err,
	       size_t errlen)
{
	struct curl_slist *hdrs = headers_of(p);
	CURLcode rc;
	CURL *c = h->c;

	if (!hdrs)
		return -ENOMEM;
	curl.easy_reset(c);
	h->alen = 0;
	h->answer[0] = '\0';
	h->errbuf[0] = '\0';
	curl.easy_setopt(c, CURLOPT_URL, p->url);
	curl.easy_setopt(c, CURLOPT_POST, 1L);
	curl.easy_setopt(c, CURLOPT_POSTFIELDS, p->body);
	curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->len);
	curl.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, p->timeout_ms);
	curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, p->timeout_ms);
	curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_answer);
	curl.easy_setopt(c, CURLOPT_WRITEDATA, h);
	curl.easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
	curl.easy_setopt(c, CURLOPT_USERAGENT, "pyprof-bpf-agent");
	/* Only http and https, also after a redirect. */
	curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	set_auth(c, p->auth);
	rc = curl.easy_perform(c);
	curl.slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		seterr(err, errlen, "%s", h->errbuf[0] ? h->errbuf : curl.easy_strerror(rc));
		return rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT :
		       rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED :
		       rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (*status > 299) {
		h->answer[h->alen > 200 ? 200 : h->alen] = '\0';	/* a line's worth */
		clean_answer(h->answer);
		seterr(err, errlen, "HTTP %ld%s%s", *status, h->answer[0] ? ": " : "",
		       h->answer);
	}
	return 0;
}

const void *http__answer(const struct http *h, size_t *len)
{
	*len = h->alen;
	return h->answer;
}

char *http__escape(struct http *h, const char *s)
{
	char *e = curl.easy_escape(h->c, s, (int)strlen(s));
	char *copy = e ? strdup(e) : NULL;

	if (e)
		curl.free(e);
	return copy;
}
