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

int labels__service_from_environ(const char *env, size_t n, char *out, size_t len)
{
	const char *v;
	size_t vl;

	if (!(v = env_value(env, n, "OTEL_SERVICE_NAME", &vl)))
		v = env_value(env, n, "PYROSCOPE_APPLICATION_NAME", &vl);
	if (!v)
		return -ENOENT;
	labels__clean(v, vl, out, len);
	return out[0] ? 0 : -ENOENT;
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
