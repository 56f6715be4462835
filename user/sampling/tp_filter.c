// SPDX-License-Identifier: MIT
/* tp_filter.c - see tp_filter.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>

#include "sampling/tp_filter.h"

#define TRACEFS "/sys/kernel/tracing"
#define TRACEFS_OLD "/sys/kernel/debug/tracing"
#define MAX_FIELDS 64
#define FORMAT_MAX 16384

/* A field of the tracepoint's record, from its format file. */
struct tp_field {
	char name[64];
	uint32_t offset, size;
	bool is_signed;
	uint8_t kind;		/* PYPROF_FFIELD_* */
};

struct parser {
	const char *expr, *p;
	const struct tp_field *fields;
	int nfields;
	struct pyprof_filter *out;
	uint32_t nstrs;
	char *err;
	size_t errlen;
	int rc;			/* the first error */
};

static int fail(struct parser *ps, int rc, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->rc)
		return ps->rc;
	n = snprintf(ps->err, ps->errlen, "--filter '%s': ", ps->expr);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->errlen)
		vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	ps->rc = rc;
	return rc;
}

/* The kernel is the judge of the syntax: the filter set on a tracepoint
 * event of our own (never enabled). 0, -EINVAL when it refuses it. */
static int kernel_accepts(const struct sampler_event *ev, const char *expr)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT, .size = sizeof(attr), .config = ev->config,
		.disabled = 1, .sample_period = 1,
	};
	int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_SET_FILTER, expr))
		rc = -errno;
	close(fd);
	return rc;
}

/* One "field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;" line into @f; false
 * for another line or a type no predicate reads. */
static bool parse_field_line(const char *line, struct tp_field *f)
{
	const char *decl = strstr(line, "field:"), *semi, *name;
	char type[128];
	unsigned int off, size, sgn;
	size_t len, tl;
	const char *o = strstr(line, "offset:");

	if (!decl || !o || sscanf(o, "offset:%u;\tsize:%u;\tsigned:%u;", &off, &size, &sgn) != 3)
		return false;
	decl += 6;
	semi = strchr(decl, ';');
	if (!semi)
		return false;
	/* the name is the declaration's last word, an array's [N] after it */
	name = semi;
	while (name > decl && name[-1] != ' ')
		name--;
	len = (size_t)(semi - name);
	tl = (size_t)(name - decl);
	if (!len || tl >= sizeof(type))
		return false;
	memcpy(type, decl, tl);
	type[tl] = '\0';
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < len && i + 1 < sizeof(f->name) && name[i] != '['; i++)
		f->name[i] = name[i];
	f->offset = off;
	f->size = size;
	f->is_signed = sgn != 0;
	if (strstr(type, "__data_loc") && strstr(type, "char"))
		f->kind = PYPROF_FFIELD_LOC;
	else if (strchr(type, '*') && strstr(type, "char"))
		f->kind = size == 8 ? PYPROF_FFIELD_PTR : 0;
	else if (memchr(name, '[', len) && strstr(type, "char"))
		f->kind = PYPROF_FFIELD_STR;
	else if (!memchr(name, '[', len) && (size == 1 || size == 2 || size == 4 || size == 8))
		f->kind = PYPROF_FFIELD_NUM;
	return true;
}

/* The tracepoint's fields from its format file. Count, or -errno. */
static int read_format(const struct sampler_event *ev, struct tp_field *fields, int max)
{
	char path[320], *buf = malloc(FORMAT_MAX), *line, *save = NULL;
	ssize_t n = -1;
	int fd, count = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), TRACEFS "/events/%s/%s/format", ev->subsys, ev->tracepoint);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(path, sizeof(path), TRACEFS_OLD "/events/%s/%s/format", ev->subsys,
			 ev->tracepoint);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd >= 0) {
		n = read(fd, buf, FORMAT_MAX - 1);
		close(fd);
	}
	if (n <= 0) {
		free(buf);
		return fd < 0 ? -ENOENT : -EIO;
	}
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line && count < max;
	     line = strtok_r(NULL, "\n", &save))
		if (parse_field_line(line, &fields[count]))
			count++;
	free(buf);
	return count;
}

static void skip_space(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static int emit(struct parser *ps, struct pyprof_filter_op op)
{
	if (ps->out->nops >= PYPROF_FILTER_OPS)
		return fail(ps, -ENOTSUP, "more than %d operations (predicates and && || !)",
			    PYPROF_FILTER_OPS);
	ps->out->ops[ps->out->nops++] = op;
	return 0;
}

/* FIELD: a name of the record's. */
static const struct tp_field *parse_field(struct parser *ps)
{
	char name[64];
	size_t n = 0;

	skip_space(ps);
	while ((isalnum((unsigned char)*ps->p) || *ps->p == '_') && n + 1 < sizeof(name))
		name[n++] = *ps->p++;
	name[n] = '\0';
	if (!n) {
		fail(ps, -EINVAL, "a field name expected at '%s'", ps->p);
		return NULL;
	}
	for (int i = 0; i < ps->nfields; i++)
		if (!strcmp(ps->fields[i].name, name))
			return &ps->fields[i];
	fail(ps, -EINVAL, "no field %s in this tracepoint's record", name);
	return NULL;
}

/* OP: the comparison. */
static int parse_cmp(struct parser *ps)
{
	static const struct { const char *s; int cmp; } ops[] = {
		{ "==", PYPROF_FCMP_EQ }, { "!=", PYPROF_FCMP_NE }, { "<=", PYPROF_FCMP_LE },
		{ ">=", PYPROF_FCMP_GE }, { "<", PYPROF_FCMP_LT }, { ">", PYPROF_FCMP_GT },
		{ "~", PYPROF_FCMP_GLOB }, { "&", PYPROF_FCMP_AND },
	};

	skip_space(ps);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strncmp(ps->p, ops[i].s, strlen(ops[i].s)) &&
		    !(ops[i].cmp == PYPROF_FCMP_AND && ps->p[1] == '&')) {
			ps->p += strlen(ops[i].s);
			return ops[i].cmp;
		}
	return fail(ps, -EINVAL, "a comparison (== != < <= > >= & ~) expected at '%s'", ps->p);
}

/* VALUE: a quoted string, or a word up to a space, ')' or '&'/'|'. */
static int parse_value(struct parser *ps, char *buf, size_t len)
{
	size_t n = 0;
	char q;

	skip_space(ps);
	q = *ps->p;
	if (q == '"' || q == '\'') {
		const char *end = strchr(ps->p + 1, q);

		if (!end)
			return fail(ps, -EINVAL, "an unterminated string");
		n = (size_t)(end - ps->p - 1);
		if (n >= len)
			return fail(ps, -ENOTSUP, "a string longer than %zu bytes", len - 1);
		memcpy(buf, ps->p + 1, n);
		ps->p = end + 1;
	} else {
		while (*ps->p && !isspace((unsigned char)*ps->p) && !strchr(")&|", *ps->p)) {
			if (n + 1 >= len)
				return fail(ps, -ENOTSUP, "a value longer than %zu bytes", len - 1);
			buf[n++] = *ps->p++;
		}
		if (!n)
			return fail(ps, -EINVAL, "a value expected at '%s'", ps->p);
	}
	buf[n] = '\0';
	return 0;
}

/* A string predicate's pattern: exact, "abc*" or "*abc". */
static int string_pred(struct parser *ps, struct pyprof_filter_op *op, int cmp, char *v)
{
	size_t n = strlen(v);
	uint32_t k = ps->nstrs;

	if (cmp != PYPROF_FCMP_EQ && cmp != PYPROF_FCMP_NE && cmp != PYPROF_FCMP_GLOB)
		return fail(ps, -EINVAL, "a string compares with == != or ~");
	op->value = PYPROF_FGLOB_EXACT;
	if (n && v[n - 1] == '*') {
		v[--n] = '\0';
		op->value = PYPROF_FGLOB_PREFIX;
	}
	if (*v == '*') {
		if (op->value != PYPROF_FGLOB_EXACT)
			return fail(ps, -ENOTSUP, "'*%s*': only a prefix (abc*) or a suffix (*abc) "
				    "compiles, not a substring", v + 1);
		memmove(v, v + 1, n--);
		op->value = PYPROF_FGLOB_SUFFIX;
	}
	if (strpbrk(v, "*?[]"))
		return fail(ps, -ENOTSUP, "'%s': a '*' inside a pattern, '?' and [...] do not "
			    "compile (a prefix abc* or a suffix *abc do)", v);
	if (k >= PYPROF_FILTER_STRS)
		return fail(ps, -ENOTSUP, "more than %d strings", PYPROF_FILTER_STRS);
	memcpy(ps->out->strs[k], v, n + 1);
	ps->out->str_len[k] = (uint32_t)n;
	ps->nstrs++;
	op->str = (uint8_t)k;
	op->negate = cmp == PYPROF_FCMP_NE;
	op->cmp = PYPROF_FCMP_GLOB;
	return 0;
}

/* FIELD OP VALUE. */
static int parse_pred(struct parser *ps)
{
	const struct tp_field *f = parse_field(ps);
	struct pyprof_filter_op op = { .op = PYPROF_FOP_PRED };
	char v[PYPROF_FILTER_STR + 8], *end;
	int cmp;

	if (!f)
		return ps->rc;
	cmp = parse_cmp(ps);
	if (cmp < 0 || parse_value(ps, v, PYPROF_FILTER_STR))
		return ps->rc;
	if (!f->kind)
		return fail(ps, -ENOTSUP, "field %s: a type the filter does not compare", f->name);
	op.kind = f->kind;
	op.size = (uint8_t)(f->size > 255 ? 255 : f->size);
	op.is_signed = f->is_signed;
	op.offset = f->offset;
	if (f->kind == PYPROF_FFIELD_NUM && cmp == PYPROF_FCMP_GLOB)
		return fail(ps, -EINVAL, "field %s is a number: ~ is for strings", f->name);
	if (f->offset + (f->kind == PYPROF_FFIELD_STR ? 1 : f->size) > PYPROF_FILTER_REC)
		return fail(ps, -ENOTSUP, "field %s lies past the record's first %d bytes",
			    f->name, PYPROF_FILTER_REC);
	if (f->kind != PYPROF_FFIELD_NUM) {
		if (string_pred(ps, &op, cmp, v))
			return ps->rc;
		return emit(ps, op);
	}
	errno = 0;
	op.value = f->is_signed || *v == '-' ? (uint64_t)strtoll(v, &end, 0) :
		   strtoull(v, &end, 0);
	if (errno || *end)
		return fail(ps, -EINVAL, "field %s is a number, not '%s'", f->name, v);
	op.cmp = (uint8_t)cmp;
	return emit(ps, op);
}

static int parse_or(struct parser *ps);

/* '!' FACTOR | '(' OR ')' | PRED */
static int parse_factor(struct parser *ps)
{
	skip_space(ps);
	if (*ps->p == '!' && ps->p[1] != '=') {
		ps->p++;
		if (parse_factor(ps))
			return ps->rc;
		return emit(ps, (struct pyprof_filter_op){ .op = PYPROF_FOP_NOT });
	}
	if (*ps->p == '(') {
		ps->p++;
		if (parse_or(ps))
			return ps->rc;
		skip_space(ps);
		if (*ps->p != ')')
			return fail(ps, -EINVAL, "')' expected at '%s'", ps->p);
		ps->p++;
		return 0;
	}
	return parse_pred(ps);
}

/* SUB (SEP SUB)*, each SEP emitting @fop after its right side: AND over
 * factors with "&&", OR over those with "||". */
static int parse_chain(struct parser *ps, int (*sub)(struct parser *), const char *sep,
		       uint8_t fop)
{
	if (sub(ps))
		return ps->rc;
	for (skip_space(ps); !strncmp(ps->p, sep, 2); skip_space(ps)) {
		ps->p += 2;
		if (sub(ps) || emit(ps, (struct pyprof_filter_op){ .op = fop }))
			return ps->rc;
	}
	return 0;
}

static int parse_and(struct parser *ps)
{
	return parse_chain(ps, parse_factor, "&&", PYPROF_FOP_AND);
}

static int parse_or(struct parser *ps)
{
	return parse_chain(ps, parse_and, "||", PYPROF_FOP_OR);
}

int tp_filter__compile(const struct sampler_event *ev, const char *expr,
		       struct pyprof_filter *out, char *err, size_t errlen)
{
	struct tp_field *fields = calloc(MAX_FIELDS, sizeof(*fields));
	struct parser ps = { .expr = expr, .p = expr, .fields = fields, .out = out,
			     .err = err, .errlen = errlen };
	int rc;

	memset(out, 0, sizeof(*out));
	if (!fields)
		return -ENOMEM;
	rc = kernel_accepts(ev, expr);
	if (rc == -EINVAL)
		fail(&ps, rc, "the kernel's filter syntax refuses it for %s (its fields: "
		     TRACEFS "/events/%s/%s/format)", ev->name, ev->subsys, ev->tracepoint);
	else if (rc)
		fail(&ps, rc, "cannot try it on %s: %s", ev->name, strerror(-rc));
	if (!ps.rc) {
		ps.nfields = read_format(ev, fields, MAX_FIELDS);
		if (ps.nfields < 0)
			fail(&ps, ps.nfields, "cannot read the format of %s: %s", ev->name,
			     strerror(-ps.nfields));
	}
	if (!ps.rc && !parse_or(&ps)) {
		skip_space(&ps);
		if (*ps.p)
			fail(&ps, -EINVAL, "unexpected '%s'", ps.p);
	}
	free(fields);
	if (ps.rc)
		memset(out, 0, sizeof(*out));
	return ps.rc;
}
