// SPDX-License-Identifier: MIT
/*
 * frame_locals.c - names from the code object (co_localsplusnames, their
 * kinds in co_localspluskinds), values from the frame's localsplus array.
 *
 * Kinds (3.11 to 3.15): 0x10 hidden (not shown), 0x40 a cell, 0x80 a free
 * variable: both hold a cell object whose ob_ref (at 16) is the value. 3.14
 * made the slots _PyStackRef: the low two bits are tags, and 3.15 keeps
 * small ints in them directly (tag 3, the value shifted by 2).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/frame_locals.h"
#include "symbols/symbolizer.h"
#include "target/pyobject.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"

#define KIND_HIDDEN 0x10
#define KIND_CELL 0x40
#define KIND_FREE 0x80
/* PyTupleObject.ob_item: 3.14 put a cached hash before it */
#define TUPLE_ITEMS 24
#define TUPLE_ITEMS_314 32
#define CELL_REF 16
#define FLOAT_VAL 16
#define TYPE_NAME 24
#define LONG_SIZE 16
#define LONG_DIGITS 24
#define BIG_INT_DIGITS 40	/* 30-bit digits: up to 1200 bits written out */

static unsigned int minor(const struct py_offsets *o)
{
	return (o->version_hex >> 16) & 0xff;
}

/* The type name of @obj (its tp_name, up to 63 bytes, read 16 at a time:
 * a short name may end just before unmapped memory). */
static int type_name(pid_t pid, const struct py_offsets *o, uint64_t obj, char *buf, size_t len)
{
	uint64_t type, name;
	int rc = remote_read_u64(pid, obj + o->ob_type, &type);

	if (!rc)
		rc = remote_read_u64(pid, type + TYPE_NAME, &name);
	for (size_t at = 0; !rc && at + 16 < len; at += 16) {
		rc = remote_read(pid, name + at, buf + at, 16);
		if (!rc && memchr(buf + at, '\0', 16))
			break;
		if (!rc && at + 32 >= len)
			rc = -EINVAL;	/* longer than any name we know */
	}
	if (rc)
		return rc;
	for (size_t i = 0; buf[i]; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
			return -EINVAL;
	return 0;
}

/* An int of any size up to BIG_INT_DIGITS digits in decimal. */
static int long_repr(pid_t pid, const struct py_offsets *o, uint64_t addr, char *out, size_t len)
{
	uint32_t d[BIG_INT_DIGITS], chunks[BIG_INT_DIGITS * 2];
	uint64_t tag, nd;
	size_t nc = 0;
	int neg, rc, w;

	rc = remote_read_u64(pid, addr + LONG_SIZE, &tag);
	if (rc)
		return rc;
	if (minor(o) == 11) {
		neg = (int64_t)tag < 0;
		nd = neg ? -tag : tag;
	} else {
		if ((tag & 3) == 3)
			return -EPROTO;
		neg = (tag & 3) == 2;
		nd = tag >> 3;
	}
	if (nd > BIG_INT_DIGITS)
		return -ERANGE;
	if (nd && (rc = remote_read(pid, addr + LONG_DIGITS, d, nd * 4)))
		return rc;
	/* base 2^30 to base 10^9: divide the whole number by 10^9 repeatedly */
	while (nd) {
		uint64_t rem = 0;

		for (size_t i = nd; i-- > 0;) {
			uint64_t cur = rem << 30 | (d[i] & 0x3fffffffu);

			d[i] = (uint32_t)(cur / 1000000000u);
			rem = cur % 1000000000u;
		}
		chunks[nc++] = (uint32_t)rem;
		while (nd && !d[nd - 1])
			nd--;
	}
	w = snprintf(out, len, "%s%" PRIu32, neg ? "-" : "", nc ? chunks[nc - 1] : 0);
	for (size_t i = nc - (nc ? 1 : 0); i-- > 0 && w > 0 && (size_t)w < len;)
		w += snprintf(out + w, len - (size_t)w, "%09" PRIu32, chunks[i]);
	return 0;
}

/* repr() of a float: the shortest %g that reads back the same. */
static void float_repr(double v, char *out, size_t len)
{
	if (isnan(v) || isinf(v)) {
		snprintf(out, len, "%s", isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, len, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
	if (!strpbrk(out, ".e"))
		strncat(out, ".0", len - strlen(out) - 1);
}

/* Append one byte of a str or bytes repr, escaped as repr() escapes it. */
static size_t put_escaped(char *out, size_t w, unsigned char c, char quote, int is_bytes)
{
	if (c == '\\' || c == (unsigned char)quote)
		return w + (size_t)sprintf(out + w, "\\%c", c);
	if (c == '\n' || c == '\r' || c == '\t')
		return w + (size_t)sprintf(out + w, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
	if (c < 0x20 || c == 0x7f || (is_bytes && c >= 0x80))
		return w + (size_t)sprintf(out + w, "\\x%02x", c);
	out[w] = (char)c;
	return w + 1;
}

/* 'text' or b'text', cut at LOCALS_MAX_REPR bytes (then "..." ends it). */
static void quoted(const char *s, size_t n, int is_bytes, char *out)
{
	char quote = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
	size_t w = 0;

	if (is_bytes)
		out[w++] = 'b';
	out[w++] = quote;
	for (size_t i = 0; i < n; i++) {
		if (w > LOCALS_MAX_REPR - 6) {
			strcpy(out + w, "...");
			return;
		}
		w = put_escaped(out, w, (unsigned char)s[i], quote, is_bytes);
	}
	out[w++] = quote;
	out[w] = '\0';
}

static void value_repr(struct pyproc *p, struct symbolizer *sym, uint64_t v, char *out)
{
	const struct py_offsets *o = pyproc__offsets(p);
	pid_t pid = pyproc__pid(p);
	char tn[64], buf[LOCALS_MAX_REPR];
	uint64_t size;
	const char *s;
	double d;

	if (type_name(pid, o, v, tn, sizeof(tn))) {
		snprintf(out, LOCALS_MAX_REPR, "<unreadable at 0x%" PRIx64 ">", v);
		return;
	}
	if (!strcmp(tn, "NoneType")) {
		strcpy(out, "None");
	} else if (!strcmp(tn, "bool") && !long_repr(pid, o, v, buf, sizeof(buf))) {
		strcpy(out, strcmp(buf, "0") ? "True" : "False");
	} else if (!strcmp(tn, "int") && !long_repr(pid, o, v, out, LOCALS_MAX_REPR)) {
		if (strlen(out) >= LOCALS_MAX_REPR - 1)
			strcpy(out + LOCALS_MAX_REPR - 4, "...");
	} else if (!strcmp(tn, "float") && !remote_read(pid, v + FLOAT_VAL, &d, 8)) {
		float_repr(d, out, LOCALS_MAX_REPR);
	} else if (!strcmp(tn, "str") && !symbolizer__read_str(sym, v, &s)) {
		quoted(s, strlen(s), 0, out);
	} else if (!strcmp(tn, "bytes") && !remote_read_u64(pid, v + o->bytes_size, &size) &&
		   !remote_read(pid, v + o->bytes_sval, buf, size < 64 ? size : 64)) {
		quoted(buf, size < 64 ? size : 64, 1, out);
		if (size > 64 && !strstr(out, "..."))
			strcpy(out + strlen(out) - 1, "...");
	} else {
		snprintf(out, LOCALS_MAX_REPR, "<%s at 0x%" PRIx64 ">", tn, v);
	}
}

/* The value in slot @v of kind @kind: 0 when unbound; a small int of 3.15
 * written straight into @out (returns 1). */
static int slot_value(struct pyproc *p, uint64_t v, uint8_t kind, uint64_t *obj, char *out)
{
	const struct py_offsets *o = pyproc__offsets(p);
	char tn[64];

	if (minor(o) >= 15 && (v & 3) == 3) {
		snprintf(out, LOCALS_MAX_REPR, "%" PRId64, (int64_t)v >> 2);
		return 1;
	}
	if (minor(o) >= 14)
		v &= ~(uint64_t)3;
	if (v && (kind & (KIND_CELL | KIND_FREE)) &&
	    !type_name(pyproc__pid(p), o, v, tn, sizeof(tn)) && !strcmp(tn, "cell") &&
	    remote_read_u64(pyproc__pid(p), v + CELL_REF, &v))
		v = 0;
	*obj = v;
	return 0;
}

int frame_locals__read(struct pyproc *p, struct symbolizer *sym, const struct py_rawframe *f,
		       struct frame_local *out, size_t max, size_t *n)
{
	const struct py_offsets *o = pyproc__offsets(p);
	pid_t pid = pyproc__pid(p);
	uint64_t names, kinds, items[LOCALS_MAX_PER_FRAME], slots[LOCALS_MAX_PER_FRAME];
	uint8_t kb[LOCALS_MAX_PER_FRAME];
	int32_t count;
	size_t k = 0;
	int rc;

	*n = 0;
	if (!o->frame_localsplus || !o->code_localsplusnames)
		return -ENOTSUP;
	rc = remote_read_u64(pid, f->code + o->code_localsplusnames, &names);
	if (!rc)
		rc = remote_read_u64(pid, f->code + o->code_localsplusnames + 8, &kinds);
	if (!rc)
		rc = remote_read(pid, f->code + o->code_nlocalsplus, &count, 4);
	if (rc)
		return rc;
	if (count < 0)
		return -EPROTO;
	if ((size_t)count > LOCALS_MAX_PER_FRAME)
		count = LOCALS_MAX_PER_FRAME;
	if (!count)
		return 0;
	rc = remote_read(pid, names + (minor(o) >= 14 ? TUPLE_ITEMS_314 : TUPLE_ITEMS), items,
			 (size_t)count * 8);
	if (!rc)
		rc = remote_read(pid, kinds + o->bytes_sval, kb, (size_t)count);
	if (!rc)
		rc = remote_read(pid, f->frame + o->frame_localsplus, slots, (size_t)count * 8);
	if (rc)
		return rc;
	for (int i = 0; i < count && k < max; i++) {
		uint64_t v = 0;

		if ((kb[i] & KIND_HIDDEN) || symbolizer__read_str(sym, items[i], &out[k].name))
			continue;
		if (!slot_value(p, slots[i], kb[i], &v, out[k].repr)) {
			if (!v)
				continue;	/* unbound */
			value_repr(p, sym, v, out[k].repr);
		}
		k++;
	}
	*n = k;
	return 0;
}
