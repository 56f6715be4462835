/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "symbols/intern.h"
#include "symbols/linetable.h"
#include "pyprof.h"		/* pyprof_ident311() */
#include "target/remote_mem.h"
#include "symbols/symbolizer.h"
#include "symbols/unicode.h"
#include "util/bytes.h"

/* Bounds on what we read from the target for one code object. */
#define MAX_STR_CHARS (1u << 16)
#define MAX_LINETABLE (1u << 20)

/*
 * What identifies a code object beyond its address: when a code object is
 * freed and another one is allocated at the same address, at least one of
 * these differs (they are the objects it owns).
 */
struct code_key {
	uint64_t qualname, filename, linetable;
	int32_t firstlineno;
	int32_t firsttraceable;
	uint32_t version;	/* co_version (3.12+): unique per code object */
	uint32_t pad;
};

/* The location table decoded once: line of byte offsets [prev end, end). */
struct line_span {
	int64_t end;
	int line;
};

struct code_entry {
	uint64_t addr;		/* 0: empty slot */
	struct code_key key;
	const char *qualname, *filename;
	int firstlineno;
	struct line_span *spans;
	size_t nspans;
	uint64_t verified_epoch;
	/* From a snapshot the sampler took while a sample held the object: it
	 * names every frame of the same (address, version), even version 0
	 * (objects the sampler never sends twice: static ones), with no read
	 * of the target, which may have freed it or ended. */
	bool snapshot;
	/* The location table was cut: offsets past it have no line (-1). */
	bool partial_lines;
};

struct symbolizer {
	struct pyproc *proc;
	const struct py_offsets *off;
	pid_t pid;
	struct intern *strings;
	struct code_entry *codes;	/* open addressing, power-of-two size */
	size_t cap, count;
	uint64_t epoch;
	char *strbuf;			/* UTF-8 scratch for one string */
	size_t strbuf_len;
	void *rawbuf;			/* raw code points scratch */
};

static uint64_t hash_addr(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return a;
}

int symbolizer__new(struct pyproc *p, struct symbolizer **out)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->proc = p;
	s->off = pyproc__offsets(p);
	s->pid = pyproc__pid(p);
	s->cap = 1024;
	s->epoch = 1;
	s->codes = calloc(s->cap, sizeof(*s->codes));
	s->strbuf_len = (size_t)MAX_STR_CHARS * 4 + 1;
	s->strbuf = malloc(s->strbuf_len);
	s->rawbuf = malloc((size_t)MAX_STR_CHARS * 4);
	if (!s->codes || !s->strbuf || !s->rawbuf)
		goto fail;
	rc = intern__new(&s->strings);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	symbolizer__free(s);
	return rc;
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->codes && i < s->cap; i++)
		free(s->codes[i].spans);
	free(s->codes);
	free(s->strbuf);
	free(s->rawbuf);
	intern__free(s->strings);
	free(s);
}

void symbolizer__next_sample(struct symbolizer *s)
{
	s->epoch++;
}

/* What a str object's header (its first unicode_ascii_data bytes) says:
 * length, bytes per code point, ascii, and where the payload starts. */
struct str_head {
	uint64_t length;
	unsigned int kind;
	int ascii;
	uint64_t data;		/* payload offset in the object */
};

static int str_head(const struct symbolizer *s, const unsigned char *hdr, struct str_head *h)
{
	const struct py_offsets *o = s->off;
	uint32_t state;
	int compact, rc;

	memcpy(&state, hdr + o->unicode_state, 4);
	h->length = get_u64(hdr, o->unicode_length);
	rc = pyunicode__state_decode(state, &h->kind, &compact, &h->ascii);
	if (rc)
		return rc;
	if (!compact)
		return -EINVAL;
	if (h->length > MAX_STR_CHARS)
		return -EMSGSIZE;	/* a str, but longer than any name we show */
	h->data = h->ascii ? o->unicode_ascii_data : o->unicode_compact_data;
	return 0;
}

/* Intern @length code points of @kind at @payload as UTF-8. */
static int intern_str(struct symbolizer *s, const struct str_head *h, const void *payload,
		      const char **out)
{
	size_t len;
	int rc = pyunicode__to_utf8(h->kind, h->ascii, payload, h->length, s->strbuf,
				    s->strbuf_len, &len);

	if (rc)
		return rc;
	*out = intern__get(s->strings, s->strbuf, len);
	return *out ? 0 : -ENOMEM;
}

/* Read a str object and intern it as UTF-8. */
static int read_str(struct symbolizer *s, uint64_t addr, const char **out)
{
	unsigned char hdr[PY_MAX_STRUCT_COPY];
	struct str_head h;
	int rc;

	if (!addr)
		return -EFAULT;
	rc = remote_read(s->pid, addr, hdr, s->off->unicode_ascii_data);
	if (!rc)
		rc = str_head(s, hdr, &h);
	if (!rc)
		rc = remote_read(s->pid, addr + h.data, s->rawbuf, h.length * h.kind);
	return rc ? rc : intern_str(s, &h, s->rawbuf, out);
}

int symbolizer__read_str(struct symbolizer *s, uint64_t addr, const char **out)
{
	return read_str(s, addr, out);
}

static int str_from_copy(struct symbolizer *s, const uint8_t *b, size_t len, const char **out);

int symbolizer__str_from_copy(struct symbolizer *s, const void *copy, size_t len, uint64_t addr,
			      const char **out)
{
	int rc = str_from_copy(s, copy, len, out);

	return rc == -E2BIG ? read_str(s, addr, out) : rc;
}

static int read_bytes(struct symbolizer *s, uint64_t addr, uint8_t **out, size_t *outlen)
{
	const struct py_offsets *o = s->off;
	uint64_t size;
	uint8_t *buf;
	int rc;

	rc = remote_read_u64(s->pid, addr + o->bytes_size, &size);
	if (rc)
		return rc;
	if (size > MAX_LINETABLE)
		return -EINVAL;
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	rc = remote_read(s->pid, addr + o->bytes_sval, buf, size);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = size;
	return 0;
}

/* The identity of a code object from a copy of its first code_size bytes. */
static int key_from_copy(struct symbolizer *s, const unsigned char *cb, struct code_key *key)
{
	const struct py_offsets *o = s->off;
	uint64_t type = pyproc__code_type(s->proc);
	uint64_t refcnt;

	memset(key, 0, sizeof(*key));	/* compared with memcmp, padding too */
	if (type && get_u64(cb, o->ob_type) != type)
		return -EINVAL;	/* not a code object (any more) */
	/* A freed object still looks like itself until reused, but its first
	 * word is gone: pymalloc keeps its free list there (a pointer, or NULL).
	 * A live one has a 32-bit count (3.14+ keep flags in bits 48-63). */
	refcnt = get_u64(cb, 0);
	if ((refcnt & 0xffffffffull) == 0 || (refcnt & 0xffff00000000ull))
		return -ESTALE;
	key->qualname = get_u64(cb, o->code_qualname);
	key->filename = get_u64(cb, o->code_filename);
	key->linetable = get_u64(cb, o->code_linetable);
	memcpy(&key->firstlineno, cb + o->code_firstlineno, 4);
	memcpy(&key->firsttraceable, cb + o->code_firsttraceable, 4);
	if (o->code_version)
		memcpy(&key->version, cb + o->code_version, 4);
	return 0;
}

/*
 * 3.11: the sampler's identity of @code (pyprof_ident311()) from what the
 * address holds now, read as the program reads it (a read that fails is
 * zeros). 0 when the layout is not the one the program computes it on.
 */
static uint32_t ident311_now(struct symbolizer *s, uint64_t code)
{
	const struct py_offsets *o = s->off;
	__u64 q[4] = { 0 }, qs[6] = { 0 }, fs[6] = { 0 }, ls[4] = { 0 };

	if (o->code_version || o->code_linetable != o->code_filename + 24)
		return 0;
	if (remote_read(s->pid, code + o->code_filename, q, sizeof(q)))
		memset(q, 0, sizeof(q));
	if (q[2] && remote_read(s->pid, q[2] + o->unicode_length, qs, sizeof(qs)))
		memset(qs, 0, sizeof(qs));
	if (q[0] && remote_read(s->pid, q[0] + o->unicode_length, fs, sizeof(fs)))
		memset(fs, 0, sizeof(fs));
	if (q[3] && remote_read(s->pid, q[3] + o->bytes_size, ls, sizeof(ls)))
		memset(ls, 0, sizeof(ls));
	return pyprof_ident311(q, qs, fs, ls);
}

/*
 * 3.11: a key read now carries no identity. It takes the frame's @version
 * when the object there is the frame's: its identity recomputed now is the
 * same, or the sampler could send no snapshot (@unsnapped: its own reads
 * may have faulted, so a recomputed identity may differ).
 */
static void claim_311(struct symbolizer *s, uint64_t code, uint32_t version, bool unsnapped,
		      struct code_key *key)
{
	if (!s->off->code_version && version &&
	    (unsnapped || ident311_now(s, code) == version))
		key->version = version;
}

/*
 * The key of what @code holds now. 3.11 has no co_version to read: the
 * key takes @ident311, the sampler's identity the caller knows it by (0:
 * none known yet; claim_311() may give it one).
 */
static int read_key(struct symbolizer *s, uint64_t code, uint32_t ident311,
		    struct code_key *key)
{
	unsigned char cb[PY_MAX_STRUCT_COPY];
	int rc;

	rc = remote_read(s->pid, code, cb, s->off->code_size);
	if (rc)
		return rc;
	rc = key_from_copy(s, cb, key);
	if (!rc && !s->off->code_version)
		key->version = ident311;
	return rc;
}

/* Decode the whole location table into spans of equal line, so that a
 * sample's line is a binary search, not a decode. */
static int decode_spans(const uint8_t *tab, size_t len, int firstlineno,
			struct line_span **out, size_t *nout)
{
	struct linetable_range *r = NULL;
	struct line_span *sp = NULL;
	size_t count = 0, n = 0;
	int rc;

	rc = linetable__ranges(tab, len, firstlineno, NULL, 0, &count);
	if (rc && rc != -ENOSPC)
		return rc;
	r = malloc((count ? count : 1) * sizeof(*r));
	sp = malloc((count ? count : 1) * sizeof(*sp));
	if (!r || !sp) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = linetable__ranges(tab, len, firstlineno, r, count, &count);
	if (rc)
		goto fail;
	for (size_t i = 0; i < count; i++) {
		if (n && sp[n - 1].line == r[i].line)
			sp[n - 1].end = r[i].end;
		else
			sp[n++] = (struct line_span){ r[i].end, r[i].line };
	}
	free(r);
	*out = sp;
	*nout = n;
	return 0;
fail:
	free(r);
	free(sp);
	return rc;
}

/* An instruction offset past the code object's end: the frame was read torn
 * (it moved to another code object while we read it), not a line. */
#define LINE_BEYOND_CODE (-2)

static int span_line(const struct code_entry *e, int64_t offset)
{
	int line;

	size_t lo = 0, hi = e->nspans;

	if (offset < 0)
		return e->firstlineno;	/* as PyCode_Addr2Line */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->spans[mid].end <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	line = lo < e->nspans ? e->spans[lo].line : LINE_BEYOND_CODE;
	return line == LINE_BEYOND_CODE && e->partial_lines ? -1 : line;
}

/* Read the object's strings and table; @e is replaced only on success. */
static int fill_entry(struct symbolizer *s, struct code_entry *e, uint64_t code,
		      const struct code_key *key)
{
	struct code_entry n = { 0 };
	uint8_t *tab = NULL;
	size_t tablen = 0;
	int rc;

	rc = read_str(s, key->qualname, &n.qualname);
	if (!rc)
		rc = read_str(s, key->filename, &n.filename);
	if (!rc) {
		rc = read_bytes(s, key->linetable, &tab, &tablen);
		/* A table claiming more than MAX_LINETABLE (a corrupt size: no
		 * code object has such a table): the function is still named,
		 * its lines unknown (-1), as a snapshot cut short gives them. */
		if (rc == -EINVAL) {
			rc = 0;
			n.partial_lines = true;
		} else if (!rc) {
			rc = decode_spans(tab, tablen, key->firstlineno, &n.spans, &n.nspans);
			free(tab);
		}
	}
	if (!rc) {
		/* the object must not have changed while its parts were read */
		struct code_key again;

		rc = read_key(s, code, key->version, &again);
		if (!rc && memcmp(&again, key, sizeof(again)) != 0)
			rc = -ESTALE;
	}
	if (rc) {
		free(n.spans);
		return rc;
	}
	free(e->spans);
	n.addr = code;
	n.key = *key;
	n.firstlineno = key->firstlineno;
	n.verified_epoch = s->epoch;
	*e = n;
	return 0;
}

/* A str from a copy of its object (header and payload); -E2BIG when the
 * copy is shorter than the string. */
static int str_from_copy(struct symbolizer *s, const uint8_t *b, size_t len, const char **out)
{
	const struct py_offsets *o = s->off;
	struct str_head h;
	int rc;

	if (len < o->unicode_ascii_data || o->unicode_state + 4 > len ||
	    o->unicode_length + 8 > len)
		return -E2BIG;
	rc = str_head(s, b, &h);
	if (rc)
		return rc;
	if (h.data > len || h.length * h.kind > len - h.data)
		return -E2BIG;
	return intern_str(s, &h, b + h.data, out);
}

/* A string of a snapshot: the copy when whole, else the target's. */
static int snapshot_str(struct symbolizer *s, const uint8_t *b, size_t len, int cut,
			uint64_t addr, const char **out)
{
	int rc = cut ? -E2BIG : str_from_copy(s, b, len, out);

	return rc == -E2BIG ? read_str(s, addr, out) : rc;
}

static int grow(struct symbolizer *s);

/*
 * Is @tab (@len bytes, read from the target just now) the whole line table
 * of snapshot @c? Short-lived code (a module body, exec'd strings) is often
 * freed by the time its snapshot is read, and its table's memory reused in
 * part (seen: the length and the first 8 KB intact, the rest not). Only a
 * code object still there after the read vouches for its table; the copy's
 * bytes and length must agree too.
 */
static bool whole_table_of(struct symbolizer *s, const struct raw_code *c,
			   const struct code_key *key, const uint8_t *tab, size_t len)
{
	struct code_key now;

	if (len < c->linetable_len || memcmp(tab, c->linetable, c->linetable_len) ||
	    (c->linetable_size && len != c->linetable_size) ||
	    read_key(s, c->code, key->version, &now))
		return false;
	return !memcmp(&now, key, sizeof(now));
}

int symbolizer__add_code(struct symbolizer *s, const struct raw_code *c)
{
	const struct py_offsets *o = s->off;
	struct code_entry n = { 0 }, *e;
	struct code_key key;
	uint8_t *tab = NULL;
	const uint8_t *lt = c->linetable;
	size_t j, tablen = c->linetable_len;
	int rc;

	if (!c->code || c->obj_len < o->code_size)
		return -EINVAL;
	rc = key_from_copy(s, c->obj, &key);
	if (rc)
		return rc;
	/* 3.11: the sampler's identity of the object, which its frames carry. */
	if (!o->code_version)
		key.version = c->version;
	if ((s->count + 1) * 4 > s->cap * 3) {
		rc = grow(s);
		if (rc)
			return rc;
	}
	for (j = hash_addr(c->code) & (s->cap - 1); s->codes[j].addr; j = (j + 1) & (s->cap - 1))
		if (s->codes[j].addr == c->code)
			break;
	e = &s->codes[j];
	if (e->addr && memcmp(&e->key, &key, sizeof(key)) == 0) {
		e->snapshot = true;	/* the same object, already named */
		return 0;
	}

	rc = snapshot_str(s, c->qualname, c->qualname_len, c->qualname_cut, key.qualname,
			  &n.qualname);
	if (!rc)
		rc = snapshot_str(s, c->filename, c->filename_len, c->filename_cut, key.filename,
				  &n.filename);
	if (rc)
		return rc;
	/* A cut table: the target's whole one if it is still there, else the
	 * lines the copy covers. */
	if (c->linetable_cut && !read_bytes(s, key.linetable, &tab, &tablen) &&
	    whole_table_of(s, c, &key, tab, tablen)) {
		lt = tab;
	} else {
		tablen = c->linetable_len;
		n.partial_lines = c->linetable_cut;
		/* The copy ends mid-entry: the entries before it. A table
		 * claiming more than MAX_LINETABLE is corrupt: no line of it
		 * is trusted, as when the code object is read here (what the
		 * copy held past the real table depended on the heap). */
		if (n.partial_lines)
			tablen = c->linetable_size > MAX_LINETABLE ? 0 :
				 linetable__whole_prefix(lt, tablen, key.firstlineno);
	}
	rc = decode_spans(lt, tablen, key.firstlineno, &n.spans, &n.nspans);
	free(tab);
	if (rc)
		return rc;
	if (!e->addr)
		s->count++;
	free(e->spans);
	n.addr = c->code;
	n.key = key;
	n.firstlineno = key.firstlineno;
	n.verified_epoch = s->epoch;
	n.snapshot = true;
	*e = n;
	return 0;
}

static int grow(struct symbolizer *s)
{
	size_t ncap = s->cap * 2;
	struct code_entry *n = calloc(ncap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->codes[i].addr)
			continue;
		for (j = hash_addr(s->codes[i].addr) & (ncap - 1); n[j].addr; j = (j + 1) & (ncap - 1))
			;
		n[j] = s->codes[i];
	}
	free(s->codes);
	s->codes = n;
	s->cap = ncap;
	return 0;
}

/*
 * The entry of @code as the frame saw it: @version its co_version (3.12+)
 * or, on 3.11, the sampler's identity of it. @unsnapped: the sampler sent
 * no snapshot of it (it could not read it); on 3.11 what the address holds
 * now is then taken for it, as a walk without snapshots does (its identity
 * recomputed here may differ: the sampler's read may have faulted part).
 * Otherwise, on 3.11, what it holds now is the frame's when its identity
 * recomputed now is the frame's.
 */
static int lookup(struct symbolizer *s, uint64_t code, uint32_t version, bool unsnapped,
		  struct code_entry **out)
{
	struct code_key key;
	size_t j;
	int rc;

	if ((s->count + 1) * 4 > s->cap * 3) {
		rc = grow(s);
		if (rc)
			return rc;
	}
	for (j = hash_addr(code) & (s->cap - 1); s->codes[j].addr; j = (j + 1) & (s->cap - 1)) {
		struct code_entry *e = &s->codes[j];

		if (e->addr != code)
			continue;
		/* The sampler read co_version with the address: an equal
		 * version is the same object, no read needed. */
		if (e->verified_epoch == s->epoch ||
		    (version == e->key.version && (version || e->snapshot))) {
			*out = e;
			return 0;
		}
		/* Once per sample: is it still the same code object? */
		rc = read_key(s, code, 0, &key);
		if (rc)
			return rc;
		claim_311(s, code, version, unsnapped, &key);
		/* the sampled object is gone: what is there now is another */
		if (version && key.version != version)
			return -ESTALE;
		/* 3.11, a frame of a userspace walk (seeded off-CPU intervals):
		 * no sampler identity to compare; the owned objects decide, and
		 * the entry keeps the identity the sampler's frames carry. */
		if (!s->off->code_version && !version)
			key.version = e->key.version;
		if (memcmp(&key, &e->key, sizeof(key)) == 0) {
			e->verified_epoch = s->epoch;
			*out = e;
			return 0;
		}
		if (!s->off->code_version && !version)
			key.version = 0;	/* another object: no identity known */
		rc = fill_entry(s, e, code, &key);
		if (rc)
			return rc;
		*out = e;
		return 0;
	}
	rc = read_key(s, code, 0, &key);
	if (rc)
		return rc;
	/* 3.11: no snapshot of this identity came (or none could be taken):
	 * the object there now is the frame's if its identity is the same */
	claim_311(s, code, version, unsnapped, &key);
	if (version && key.version != version)
		return -ESTALE;
	rc = fill_entry(s, &s->codes[j], code, &key);
	if (rc)
		return rc;
	s->count++;
	*out = &s->codes[j];
	return 0;
}

int symbolizer__resolve(struct symbolizer *s, const struct py_rawframe *f, struct py_sym *out)
{
	const struct py_offsets *o = s->off;
	struct code_entry *e;
	int64_t offset;
	int rc, line;

	rc = lookup(s, f->code, f->code_version, f->reserved & PY_RAWFRAME_NO_SNAPSHOT, &e);
	if (rc)
		return rc;
	/* 3.11/3.12 point at the last instruction run, 3.13+ at the current
	 * one; both give the same byte offset into co_code_adaptive. */
	offset = (int64_t)(f->instr - (f->code + o->code_adaptive));
	line = span_line(e, offset);
	if (line == LINE_BEYOND_CODE)
		return -ESTALE;
	out->function = e->qualname;
	out->file = e->filename;
	/* Lines come from the target's table and co_firstlineno: one below 0
	 * is none a real code object has (module code starts at 0), so it is
	 * reported as no line, never passed on as a number. */
	out->line = line < 0 ? -1 : line;
	out->firstlineno = e->firstlineno;
	/* Pushed but not started (or the 3.13 __init__ shim): not a frame
	 * Python itself would show. */
	return offset < 2 * (int64_t)e->key.firsttraceable ? -ENOENT : 0;
}

int symbolizer__resolve_stack(struct symbolizer *s, const struct py_rawframe *raw, size_t n,
			      struct py_sym *out, size_t *nout, size_t *unresolved)
{
	size_t k = 0;

	symbolizer__next_sample(s);
	for (size_t i = 0; i < n; i++) {
		int rc = symbolizer__resolve(s, &raw[i], &out[k]);

		if (rc == -ENOENT)
			continue;
		if (rc) {
			/* keep the frame, and say it could not be read */
			out[k] = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
			(*unresolved)++;
		}
		k++;
	}
	*nout = k;
	return 0;
}

int symbolizer__location(struct symbolizer *s, const struct py_rawframe *f,
			 struct linetable_range *out)
{
	const struct py_offsets *o = s->off;
	struct code_entry *e;
	uint8_t *tab = NULL;
	size_t tablen = 0;
	int rc;

	rc = lookup(s, f->code, f->code_version, f->reserved & PY_RAWFRAME_NO_SNAPSHOT, &e);
	if (!rc)
		rc = read_bytes(s, e->key.linetable, &tab, &tablen);
	if (!rc)
		rc = linetable__range_at(tab, tablen, e->key.firstlineno,
					 (int64_t)(f->instr - (f->code + o->code_adaptive)), out);
	free(tab);
	return rc;
}
