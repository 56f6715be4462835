/* SPDX-License-Identifier: MIT */
/* labels.c - a target's labels, read from /proc (labels.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/labels.h"
#include "util/file.h"

/* Enough for any environment a service name is found in; the rest is cut. */
#define PROC_TEXT_MAX (256 * 1024)

static int label_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '/' || c == ':' || c == '-';
}

void labels__clean(const char *s, size_t n, char *out, size_t len)
{
	size_t i;

	if (!len)
		return;
	for (i = 0; i < n && i + 1 < len && s[i]; i++)
		out[i] = label_char_ok((unsigned char)s[i]) ? s[i] : '_';
	out[i] = '\0';
}

static int name_char_ok(unsigned char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

int labels__name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= LABEL_NAME_MAX || (name[0] == '_' && name[1] == '_'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!name_char_ok((unsigned char)name[i], i == 0))
			return 0;
	return 1;
}

/* /proc/PID/@what, up to PROC_TEXT_MAX bytes (a malloc'd, NUL-terminated
 * buffer, *n bytes), or NULL. */
static char *read_proc(pid_t pid, const char *what, size_t *n)
{
	char path[64], *buf;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	return read_file(path, PROC_TEXT_MAX, 1, &buf, n) ? NULL : buf;
}

/* The value of @name in a NUL-separated environment (@n bytes, no NUL
 * needed after them) and its length into *@vl, or NULL. */
static const char *env_value(const char *env, size_t n, const char *name, size_t *vl)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < n;) {
		const char *e = env + i;
		size_t el = strnlen(e, n - i);

		if (el > nl + 1 && !memcmp(e, name, nl) && e[nl] == '=') {
			*vl = el - nl - 1;
			return e + nl + 1;
		}
		i += el + 1;
	}
	return NULL;
}

static int hexval(unsigned char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* @s (@n bytes) percent-decoded and trimmed of spaces, cleaned into @out. */
static void decoded(const char *s, size_t n, char *out, size_t len)
{
	char buf[LABEL_VALUE_MAX * 3];
	size_t k = 0;

	while (n && *s == ' ')
		s++, n--;
	while (n && s[n - 1] == ' ')
		n--;
	for (size_t i = 0; i < n && k < sizeof(buf); i++) {
		int hi = i + 2 < n && s[i] == '%' ? hexval((unsigned char)s[i + 1]) : -1;
		int lo = hi >= 0 ? hexval((unsigned char)s[i + 2]) : -1;

		if (lo >= 0) {
			buf[k++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			buf[k++] = s[i];
		}
	}
	labels__clean(buf, k, out, len);
}

static int key_ok(const char *k)
{
	if (!k[0])
		return 0;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || *k == '.' || *k == '_' || *k == '-'))
			return 0;
	return 1;
}

/* Each pair of OTEL_RESOURCE_ATTRIBUTES' value @v (@vl bytes) to @fn,
 * the key trimmed of spaces ("" when too long), the value decoded. */
static void each_resource_pair(const char *v, size_t vl,
			       void (*fn)(void *ctx, const char *key, const char *value),
			       void *ctx)
{
	for (size_t i = 0; i < vl;) {
		const char *p = v + i, *comma = memchr(p, ',', vl - i), *eq;
		size_t pl = comma ? (size_t)(comma - p) : vl - i, kl;
		char key[LABEL_NAME_MAX], value[LABEL_VALUE_MAX];

		i += pl + 1;
		eq = memchr(p, '=', pl);
		if (!eq)
			continue;
		kl = (size_t)(eq - p);
		while (kl && *p == ' ')
			p++, kl--;
		while (kl && p[kl - 1] == ' ')
			kl--;
		if (kl >= sizeof(key))
			kl = 0;
		memcpy(key, p, kl);
		key[kl] = '\0';
		decoded(eq + 1, (size_t)(v + i - 1 - (eq + 1)), value, sizeof(value));
		fn(ctx, key, value);
	}
}

static void take_service(void *ctx, const char *key, const char *value)
{
	char *out = ctx;

	if (!strcmp(key, "service.name") && !out[0])
		snprintf(out, LABEL_VALUE_MAX, "%s", value);
}

int labels__service_from_environ(const char *env, size_t n, char *out, size_t len)
{
	char from_res[LABEL_VALUE_MAX] = "";
	const char *v;
	size_t vl;

	if ((v = env_value(env, n, "OTEL_SERVICE_NAME", &vl))) {
		labels__clean(v, vl, out, len);
		if (out[0])
			return 0;
	}
	if ((v = env_value(env, n, "OTEL_RESOURCE_ATTRIBUTES", &vl))) {
		each_resource_pair(v, vl, take_service, from_res);
		if (from_res[0]) {
			snprintf(out, len, "%s", from_res);
			return 0;
		}
	}
	if (!(v = env_value(env, n, "PYROSCOPE_APPLICATION_NAME", &vl)))
		return -ENOENT;
	labels__clean(v, vl, out, len);
	return out[0] ? 0 : -ENOENT;
}

struct resource_take {
	struct proc_labels *out;
	size_t left_out;
};

static void take_resource(void *ctx, const char *key, const char *value)
{
	struct resource_take *t = ctx;
	struct resource_label *r;

	if (!strcmp(key, "service.name"))
		return;
	if (!key_ok(key) || !value[0] || t->out->nresource == LABELS_RESOURCE_MAX) {
		t->left_out++;
		return;
	}
	r = &t->out->resource[t->out->nresource++];
	snprintf(r->key, sizeof(r->key), "%s", key);
	snprintf(r->value, sizeof(r->value), "%s", value);
}

size_t labels__resource_from_environ(const char *env, size_t n, struct proc_labels *out)
{
	struct resource_take t = { .out = out };
	const char *v;
	size_t vl;

	out->nresource = 0;
	if ((v = env_value(env, n, "OTEL_RESOURCE_ATTRIBUTES", &vl)))
		each_resource_pair(v, vl, take_resource, &t);
	return t.left_out;
}

/* @path (@n bytes) made a service name: its last component without a
 * ".py"; "" when nothing is left. */
static void script_name(const char *path, size_t n, char *out, size_t len)
{
	const char *base = path;

	for (size_t i = 0; i < n; i++)
		if (path[i] == '/')
			base = path + i + 1;
	n -= (size_t)(base - path);
	if (n > 3 && !memcmp(base + n - 3, ".py", 3))
		n -= 3;
	labels__clean(base, n, out, len);
}

/* The argument after the one at @i, (its start, its length), or NULL. */
static const char *next_arg(const char *args, size_t n, size_t *i, size_t *len)
{
	const char *a;

	if (*i >= n)
		return NULL;
	a = args + *i;
	*len = strnlen(a, n - *i);
	*i += *len + 1;
	return a;
}

/*
 * One interpreter option argument @a (@al bytes) as CPython reads it:
 * single letters, possibly joined ("-Ic", "-Wignore", "-mpkg"). 1: the
 * module or script is settled (@out set, or -ENOENT in *rc); 0: go on.
 */
static int short_options(const char *a, size_t al, const char *args, size_t n, size_t *i,
			 char *out, size_t len, int *rc)
{
	for (size_t k = 1; k < al; k++) {
		const char *v = a + k + 1;
		size_t vl = al - k - 1;

		switch (a[k]) {
		case 'c':		/* a program on the command line */
			*rc = -ENOENT;
			return 1;
		case 'm':
			if (!vl && !(v = next_arg(args, n, i, &vl)))
				vl = 0;
			labels__clean(v ? v : "", vl, out, len);
			*rc = out[0] ? 0 : -ENOENT;
			return 1;
		case 'X':
		case 'W':		/* their value: the rest, or the next argument */
			if (!vl)
				next_arg(args, n, i, &vl);
			return 0;
		default:
			break;
		}
	}
	return 0;
}

int labels__service_from_cmdline(const char *args, size_t n, char *out, size_t len)
{
	size_t i = 0, al;
	const char *a;
	int rc = -ENOENT;

	if (!next_arg(args, n, &i, &al))	/* the interpreter */
		return -ENOENT;
	while ((a = next_arg(args, n, &i, &al))) {
		if (al == 23 && !memcmp(a, "--check-hash-based-pycs", 23)) {
			next_arg(args, n, &i, &al);
			continue;
		}
		if (al == 1 && a[0] == '-')
			return -ENOENT;	/* the program is read from stdin */
		if (al >= 2 && a[0] == '-' && a[1] == '-')
			continue;	/* --help-xoptions, --version...: no value */
		if (al >= 1 && a[0] == '-') {
			if (short_options(a, al, args, n, &i, out, len, &rc))
				return rc;
			continue;
		}
		script_name(a, al, out, len);
		return out[0] ? 0 : -ENOENT;
	}
	return -ENOENT;
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int labels__container_from_cgroup(const char *text, size_t n, char *out, size_t len)
{
	const char *found = NULL;
	size_t run = 0;

	/* The last run of exactly 64 hex digits is the container's id. */
	for (size_t i = 0; i <= n; i++) {
		if (i < n && is_hex(text[i])) {
			run++;
			continue;
		}
		if (run == 64)
			found = text + i - 64;
		run = 0;
	}
	if (!found)
		return -ENOENT;
	labels__clean(found, 64, out, len);
	return 0;
}

static void read_service(pid_t pid, const char *comm, struct proc_labels *out)
{
	size_t n = 0;
	char *env = read_proc(pid, "environ", &n);

	out->service[0] = '\0';
	out->nresource = 0;
	if (env)
		labels__resource_from_environ(env, n, out);
	if (env && !labels__service_from_environ(env, n, out->service, sizeof(out->service))) {
		free(env);
		return;
	}
	free(env);
	env = read_proc(pid, "cmdline", &n);
	if (env && !labels__service_from_cmdline(env, n, out->service, sizeof(out->service))) {
		free(env);
		return;
	}
	free(env);
	labels__clean(comm && comm[0] ? comm : "python", LABEL_VALUE_MAX, out->service,
		      sizeof(out->service));
}

void labels__read(pid_t pid, const char *comm, struct proc_labels *out)
{
	size_t n = 0;
	char *cg;

	read_service(pid, comm, out);
	out->container[0] = '\0';
	cg = read_proc(pid, "cgroup", &n);
	if (cg)
		labels__container_from_cgroup(cg, n, out->container, sizeof(out->container));
	free(cg);
}
