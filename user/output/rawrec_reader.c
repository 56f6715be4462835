// SPDX-License-Identifier: MIT
/*
 * rawrec_reader.c - reading raw recordings (the format is described in
 * rawrec.h): the reader checks every length, id and range against what it
 * has read before it trusts it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>
#include "output/rawrec.h"
#include "output/rawrec_format.h"
#include "util/errbuf.h"

#define IN_BUFFER (64u * 1024)

struct rawrec_reader {
	gzFile gz;
	char *name;		/* the path, for messages */
	unsigned char *in;	/* decompressed bytes read ahead */
	size_t in_len, in_pos;
	uint64_t in_off;	/* offset of in[0] in the decompressed data */
	int eof;		/* gzread() has nothing more */
	int cut;		/* ... because the compressed stream stopped short */
	unsigned char *rec;	/* the payload of the current record */
	uint32_t rec_len, rec_cap;
	uint64_t rec_off;	/* its record's offset, for messages */
	struct rawrec_info info;
	char **strs;		/* by string id - 1 */
	uint32_t nstrs, strs_cap;
	struct py_sym *frames;	/* by frame id */
	uint32_t nframes, frames_cap;
	uint8_t *frame_kinds;	/* by frame id: OUT_FRAME_* */
	uint32_t frame_kinds_cap;
	uint8_t *sample_kinds;	/* the kinds of the sample last returned */
	uint32_t sample_kinds_cap;
	struct py_sym *sample;	/* the frames of the sample last returned */
	uint32_t sample_cap;
	uint64_t prev_ts;
	uint64_t nsamples;
	/* The 'X' record for the next sample: its event and leaf frames. */
	int x_pending;
	const char *x_event;
	struct out_leaf x_leaf[LEAF_RECORD_MAX];
	uint32_t x_nleaf;
	/* 'M' records (by id - 1), and the 'A' record for the next sample:
	 * its native frames' addresses in order, its leaf frames'. */
	struct rmapping {
		uint64_t start, end, base;
		unsigned char *build_id;
		size_t build_id_len;
	} *maps;
	uint32_t nmaps, maps_cap;
	int a_pending;
	struct out_addr *a_nat;
	uint32_t a_nnat, a_nat_cap;
	uint64_t a_leaf[LEAF_RECORD_MAX][2];
	uint32_t a_nleaf;
	struct out_addr *sample_addrs;	/* the addresses of the sample last returned */
	uint32_t sample_addrs_cap;
	struct out_sources sources;	/* 'C' records */
	unsigned int version;
	struct rawrec_end end;
	int have_end;
	int done;		/* next() returned 0 */
	int truncated;
	int failed;		/* next() failed with this; it stays failed */
};

/* Read more decompressed data. 1: some; 0: no more (r->cut: stopped short); -errno. */
static int fill(struct rawrec_reader *r, char *err, size_t errlen)
{
	const char *msg;
	int n, zerr, e;

	if (r->eof)
		return 0;
	if (r->in_pos) {
		memmove(r->in, r->in + r->in_pos, r->in_len - r->in_pos);
		r->in_off += r->in_pos;
		r->in_len -= r->in_pos;
		r->in_pos = 0;
	}
	errno = 0;
	n = gzread(r->gz, r->in + r->in_len, (unsigned int)(IN_BUFFER - r->in_len));
	if (n > 0) {
		r->in_len += (size_t)n;
		return 1;
	}
	e = errno;
	msg = gzerror(r->gz, &zerr);
	r->eof = 1;
	switch (zerr) {
	case Z_OK:
		return 0;
	case Z_BUF_ERROR:	/* zlib's "unexpected end of file" */
		r->cut = 1;
		return 0;
	case Z_ERRNO:
		seterr(err, errlen, "reading %s: %s", r->name, strerror(e ? e : EIO));
		return e ? -e : -EIO;
	case Z_MEM_ERROR:
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	default:
		seterr(err, errlen, "%s is corrupt: its compressed data is damaged (zlib: %s)",
		       r->name, msg ? msg : "error");
		return -EBADMSG;
	}
}

/* Copy up to @n bytes into @dst; *got says how many came (fewer: the data ended). */
static int take(struct rawrec_reader *r, unsigned char *dst, size_t n, size_t *got,
		char *err, size_t errlen)
{
	size_t k;
	int rc;

	*got = 0;
	while (*got < n) {
		if (r->in_pos == r->in_len) {
			rc = fill(r, err, errlen);
			if (rc <= 0)
				return rc;
		}
		k = r->in_len - r->in_pos;
		if (k > n - *got)
			k = n - *got;
		memcpy(dst + *got, r->in + r->in_pos, k);
		r->in_pos += k;
		*got += k;
	}
	return 0;
}

static int corrupt(struct rawrec_reader *r, const char *what, char *err, size_t errlen)
{
	seterr(err, errlen, "%s is corrupt: %s (record at byte %llu of its data)", r->name, what,
	       (unsigned long long)r->rec_off);
	return -EBADMSG;
}

/*
 * Read one record into r->rec. 1: a record of type *type; 0: the data ended,
 * *boundary says whether between records; -errno.
 */
static int read_record(struct rawrec_reader *r, int *type, int *boundary, char *err,
		       size_t errlen)
{
	unsigned char b;
	uint64_t len = 0;
	size_t got;
	int rc;

	*boundary = 0;
	r->rec_off = r->in_off + r->in_pos;
	rc = take(r, &b, 1, &got, err, errlen);
	if (rc || !got) {
		*boundary = 1;
		return rc;
	}
	*type = b;
	for (int shift = 0;; shift += 7) {
		rc = take(r, &b, 1, &got, err, errlen);
		if (rc || !got)
			return rc;
		if (shift == 63 && b > 1)
			return corrupt(r, "a record length does not fit 64 bits", err, errlen);
		len |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	if (len > RAWREC_MAX_RECORD)
		return corrupt(r, "a record longer than the format allows", err, errlen);
	if (len > r->rec_cap) {
		unsigned char *n = realloc(r->rec, len);

		if (!n) {
			seterr(err, errlen, "out of memory");
			return -ENOMEM;
		}
		r->rec = n;
		r->rec_cap = (uint32_t)len;
	}
	rc = take(r, r->rec, len, &got, err, errlen);
	if (rc || got < len)
		return rc;
	r->rec_len = (uint32_t)len;
	return 1;
}

/* A bounded cursor over a payload: reading past its end sets bad. */
struct cur {
	const unsigned char *p, *end;
	int bad;
};

static uint64_t cur_u(struct cur *c)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		unsigned char b;

		if (c->p == c->end)
			break;
		b = *c->p++;
		if (shift == 63 && b > 1)
			break;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

static int64_t cur_s(struct cur *c)
{
	return unzigzag(cur_u(c));
}

/* A string field as a new C string; NULL with c->bad set when it does not fit or holds a NUL. */
static char *cur_str(struct cur *c, int *nomem)
{
	uint64_t len = cur_u(c);
	char *s;

	if (c->bad || len > (uint64_t)(c->end - c->p) || memchr(c->p, 0, len)) {
		c->bad = 1;
		return NULL;
	}
	s = strndup((const char *)c->p, len);
	if (!s)
		*nomem = 1;
	c->p += len;
	return s;
}

static struct cur rec_cur(const struct rawrec_reader *r)
{
	return (struct cur){ r->rec, r->rec + r->rec_len, 0 };
}

static int parse_header(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	struct rawrec_info *in = &r->info;
	uint64_t pid, freq, depth;
	int nomem = 0;

	pid = cur_u(&c);
	in->comm = cur_str(&c, &nomem);
	in->python_version = cur_str(&c, &nomem);
	in->backend = cur_str(&c, &nomem);
	freq = cur_u(&c);
	in->period_ns = cur_u(&c);
	depth = cur_u(&c);
	in->start_time_ns = cur_u(&c);
	in->start_mono_ns = cur_u(&c);
	/* Appended later: a file of an older writer ends before it. */
	in->mode = c.p < c.end ? cur_str(&c, &nomem) : NULL;
	if (nomem) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (c.bad)
		return corrupt(r, "its header ends early", err, errlen);
	if (pid > UINT32_MAX || freq > UINT32_MAX || depth > UINT32_MAX)
		return corrupt(r, "its header holds a value out of range", err, errlen);
	in->pid = (pid_t)(uint32_t)pid;
	in->freq_hz = (uint32_t)freq;
	in->max_frames = (uint32_t)depth;
	/* Bytes after the known fields are fields of a later writer: skipped. */
	return 0;
}

static int parse_string(struct rawrec_reader *r, char *err, size_t errlen)
{
	char *s;
	int rc;

	if (memchr(r->rec, 0, r->rec_len))
		return corrupt(r, "a string holds a NUL byte", err, errlen);
	rc = out_grow((void **)&r->strs, &r->strs_cap, (uint64_t)r->nstrs + 1, sizeof(*r->strs));
	s = rc ? NULL : strndup((const char *)r->rec, r->rec_len);
	if (!s) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->strs[r->nstrs++] = s;
	return 0;
}

static int add_frame(struct rawrec_reader *r, uint64_t fn, uint64_t file, int line, int first,
		     int kind, char *err, size_t errlen)
{
	struct py_sym *f;

	if (out_grow((void **)&r->frames, &r->frames_cap, (uint64_t)r->nframes + 1,
		     sizeof(*r->frames)) ||
	    out_grow((void **)&r->frame_kinds, &r->frame_kinds_cap, (uint64_t)r->nframes + 1,
		     sizeof(*r->frame_kinds))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->frame_kinds[r->nframes] = (uint8_t)kind;
	f = &r->frames[r->nframes++];
	f->function = fn ? r->strs[fn - 1] : NULL;
	f->file = file ? r->strs[file - 1] : NULL;
	f->line = line;
	f->firstlineno = first;
	return 0;
}

static int parse_frame(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t fn, file;
	int64_t line, first;

	fn = cur_u(&c);
	file = cur_u(&c);
	line = cur_s(&c);
	first = cur_s(&c);
	if (c.bad || c.p != c.end)
		return corrupt(r, "a frame record of the wrong size", err, errlen);
	if (fn > r->nstrs || file > r->nstrs)
		return corrupt(r, "a frame names a string not defined before it", err, errlen);
	if (line < INT_MIN || line > INT_MAX || first < INT_MIN || first > INT_MAX)
		return corrupt(r, "a frame's line is out of range", err, errlen);
	return add_frame(r, fn, file, (int)line, (int)first, OUT_FRAME_PYTHON, err, errlen);
}

/* An 'N' record: a native function (symbol, DSO) or a marker between frames. */
static int parse_native(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t kind, fn, file;

	kind = cur_u(&c);
	fn = cur_u(&c);
	file = cur_u(&c);
	if (c.bad || c.p != c.end)
		return corrupt(r, "a native frame record of the wrong size", err, errlen);
	if (kind != OUT_FRAME_NATIVE && kind != OUT_FRAME_STATUS)
		return corrupt(r, "a native frame record of an unknown kind", err, errlen);
	if (fn > r->nstrs || file > r->nstrs)
		return corrupt(r, "a frame names a string not defined before it", err, errlen);
	return add_frame(r, fn, file, 0, 0, (int)kind, err, errlen);
}

/* An 'M' record: a DSO's mapping, for the 'A' records after it. */
static int parse_mapping(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	struct rmapping *m;
	uint64_t start, end, base, len;

	start = cur_u(&c);
	end = cur_u(&c);
	base = cur_u(&c);
	len = cur_u(&c);
	if (c.bad || len > BUILD_ID_MAX || len != (uint64_t)(c.end - c.p) || end <= start)
		return corrupt(r, "a malformed mapping record", err, errlen);
	if (out_grow((void **)&r->maps, &r->maps_cap, (uint64_t)r->nmaps + 1, sizeof(*r->maps))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m = &r->maps[r->nmaps];
	*m = (struct rmapping){ start, end, base, NULL, (size_t)len };
	if (len) {
		m->build_id = malloc(len);
		if (!m->build_id) {
			seterr(err, errlen, "out of memory");
			return -ENOMEM;
		}
		memcpy(m->build_id, c.p, len);
	}
	r->nmaps++;
	return 0;
}

/* An 'A' record: the addresses of the next sample's native and kernel frames. */
static int parse_addrs(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t n, k;

	if (r->a_pending)
		return corrupt(r, "two address records for one sample", err, errlen);
	n = cur_u(&c);
	if (c.bad || n > (uint64_t)(c.end - c.p))
		return corrupt(r, "a malformed address record", err, errlen);
	if (out_grow((void **)&r->a_nat, &r->a_nat_cap, n, sizeof(*r->a_nat))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t pc = cur_u(&c), off = cur_u(&c), id = cur_u(&c);
		const struct rmapping *m;

		if (c.bad || id > r->nmaps)
			return corrupt(r, "a malformed address record", err, errlen);
		r->a_nat[i] = (struct out_addr){ .pc = pc, .symoff = off };
		if (id) {
			m = &r->maps[id - 1];
			r->a_nat[i].map_start = m->start;
			r->a_nat[i].map_end = m->end;
			r->a_nat[i].map_base = m->base;
			r->a_nat[i].build_id = m->build_id;
			r->a_nat[i].build_id_len = m->build_id_len;
		}
	}
	k = cur_u(&c);
	if (c.bad || k > LEAF_RECORD_MAX)
		return corrupt(r, "a malformed address record", err, errlen);
	for (uint64_t i = 0; i < k; i++) {
		r->a_leaf[i][0] = cur_u(&c);
		r->a_leaf[i][1] = cur_u(&c);
	}
	if (c.bad || c.p != c.end)
		return corrupt(r, "an address record with bytes left over", err, errlen);
	r->a_nnat = (uint32_t)n;
	r->a_nleaf = (uint32_t)k;
	r->a_pending = 1;
	return 0;
}

static int parse_extras(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t ev, n;

	if (r->x_pending)
		return corrupt(r, "two extras records for one sample", err, errlen);
	ev = cur_u(&c);
	n = cur_u(&c);
	if (c.bad || ev > r->nstrs || n > LEAF_RECORD_MAX)
		return corrupt(r, "a malformed extras record", err, errlen);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t kind = cur_u(&c), id = cur_u(&c);

		if (c.bad || !id || id > r->nstrs ||
		    (kind != OUT_FRAME_STATUS && kind != OUT_FRAME_KERNEL))
			return corrupt(r, "a malformed extras record", err, errlen);
		r->x_leaf[i] = (struct out_leaf){ (int)kind, r->strs[id - 1] };
	}
	if (c.p != c.end)
		return corrupt(r, "an extras record with bytes left over", err, errlen);
	r->x_event = ev ? r->strs[ev - 1] : NULL;
	r->x_nleaf = (uint32_t)n;
	r->x_pending = 1;
	return 0;
}

/* The sample's @n frame ids, from @c, into r->sample and r->sample_kinds;
 * *mixed: some frame is not Python code. */
static int sample_frames(struct rawrec_reader *r, struct cur *c, uint64_t n, int *mixed,
			 char *err, size_t errlen)
{
	if (n > (uint64_t)(c->end - c->p))	/* every frame id takes a byte at least */
		return corrupt(r, "a sample with more frames than its record holds", err, errlen);
	if (out_grow((void **)&r->sample, &r->sample_cap, n, sizeof(*r->sample))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (out_grow((void **)&r->sample_kinds, &r->sample_kinds_cap, n, sizeof(*r->sample_kinds))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*mixed = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = cur_u(c);

		if (c->bad || id >= r->nframes)
			return corrupt(r, "a sample uses a frame not defined before it", err,
				       errlen);
		r->sample[i] = r->frames[id];
		r->sample_kinds[i] = r->frame_kinds[id];
		*mixed |= r->frame_kinds[id] != OUT_FRAME_PYTHON;
	}
	if (c->p != c->end)
		return corrupt(r, "a sample record with bytes left over", err, errlen);
	return 0;
}

/* The pending 'A' record's addresses, given to sample @s (its leaf frames
 * from the 'X' record already). */
static int sample_addrs(struct rawrec_reader *r, struct out_sample *s, int mixed, char *err,
			size_t errlen)
{
	uint32_t k = 0, n = s->nframes;

	r->a_pending = 0;
	for (uint32_t i = 0; i < r->x_nleaf; i++)
		r->x_leaf[i].addr = r->x_leaf[i].symoff = 0;
	if (r->a_nleaf && (!s->leaf || r->a_nleaf != s->nleaf))
		return corrupt(r, "an address record for other leaf frames", err, errlen);
	for (uint32_t i = 0; i < r->a_nleaf; i++) {
		r->x_leaf[i].addr = r->a_leaf[i][0];
		r->x_leaf[i].symoff = r->a_leaf[i][1];
	}
	if (!r->a_nnat)
		return 0;
	if (out_grow((void **)&r->sample_addrs, &r->sample_addrs_cap, n,
		     sizeof(*r->sample_addrs))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (r->sample_kinds[i] != OUT_FRAME_NATIVE) {
			r->sample_addrs[i] = (struct out_addr){ 0 };
			continue;
		}
		/* one address per native frame: fewer would leave the rest
		 * of sample_addrs[] unset (a pointer the writers follow) */
		if (k == r->a_nnat)
			return corrupt(r, "an address record for other native frames", err,
				       errlen);
		r->sample_addrs[i] = r->a_nat[k++];
	}
	if (k != r->a_nnat || !mixed)
		return corrupt(r, "an address record for other native frames", err, errlen);
	s->addrs = r->sample_addrs;
	return 0;
}

static int parse_sample(struct rawrec_reader *r, struct out_sample *s, char *err,
			size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t tid, name, cpu, period, status, n;
	int64_t dts;
	int mixed, rc;

	tid = cur_u(&c);
	name = cur_u(&c);
	cpu = cur_u(&c);
	dts = cur_s(&c);
	period = cur_u(&c);
	status = cur_u(&c);
	n = cur_u(&c);
	if (c.bad)
		return corrupt(r, "a sample record ends early", err, errlen);
	if (tid > UINT32_MAX || cpu > UINT32_MAX || status > UINT32_MAX)
		return corrupt(r, "a sample holds a value out of range", err, errlen);
	if (name > r->nstrs)
		return corrupt(r, "a sample names a string not defined before it", err, errlen);
	rc = sample_frames(r, &c, n, &mixed, err, errlen);
	if (rc)
		return rc;
	r->prev_ts += (uint64_t)dts;
	*s = (struct out_sample){
		.comm = r->info.comm,
		.pid = r->info.pid,
		.tid = (pid_t)(uint32_t)tid,
		.thread_name = name ? r->strs[name - 1] : NULL,
		.cpu = (uint32_t)cpu,
		.ts_ns = r->prev_ts,
		.period_ns = period,
		.status = (uint32_t)status,
		.nframes = (uint32_t)n,
		.frames = r->sample,
	};
	s->kinds = mixed ? r->sample_kinds : NULL;
	if (r->x_pending) {
		s->event = r->x_event;
		s->leaf = r->x_leaf;
		s->nleaf = r->x_nleaf;
		r->x_pending = 0;
	}
	return r->a_pending ? sample_addrs(r, s, mixed, err, errlen) : 0;
}

static int parse_source(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct out_source src = { 0 };
	struct cur c = rec_cur(r);
	int nomem = 0, rc = 0;
	uint64_t flags;

	src.path = cur_str(&c, &nomem);
	src.mtime_ns = cur_u(&c);
	flags = cur_u(&c);
	src.text = cur_str(&c, &nomem);
	if (nomem) {
		seterr(err, errlen, "out of memory");
		rc = -ENOMEM;
	} else if (c.bad || c.p != c.end || flags > UINT32_MAX) {
		rc = corrupt(r, "a source record does not fit", err, errlen);
	} else if (out_sources__find(&r->sources, src.path) != OUT_NONE ||
		   r->sources.n >= OUT_SRC_MAX_FILES ||
		   strlen(src.text) > OUT_SRC_MAX_FILE ||
		   r->sources.bytes + strlen(src.text) > OUT_SRC_MAX_ALL) {
		rc = corrupt(r, "a source record is repeated or too large", err, errlen);
	} else {
		src.flags = (uint32_t)flags;
		src.len = strlen(src.text);
		/* No text: the flags said why; an empty string is not a file's text. */
		if (src.flags & (OUT_SRC_UNREADABLE | OUT_SRC_TOO_BIG | OUT_SRC_BINARY)) {
			free(src.text);
			src.text = NULL;
			src.len = 0;
		}
		rc = out_sources__add(&r->sources, &src);
		if (rc)
			seterr(err, errlen, "out of memory");
	}
	free(src.path);
	free(src.text);
	return rc;
}

static int parse_end(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct cur c = rec_cur(r);
	struct rawrec_end *e = &r->end;
	uint64_t flags;

	e->samples = cur_u(&c);
	e->lost = cur_u(&c);
	e->truncated = cur_u(&c);
	e->errors = cur_u(&c);
	e->unresolved = cur_u(&c);
	e->duration_ns = cur_u(&c);
	flags = cur_u(&c);
	if (c.bad || flags > UINT32_MAX)
		return corrupt(r, "its end record is malformed", err, errlen);
	e->flags = (uint32_t)flags;
	if (e->samples != r->nsamples)
		return corrupt(r, "its end record counts another number of samples", err,
			       errlen);
	r->have_end = 1;
	return 0;
}

/* A reader of @path ("-": stdin) as a gzip (or plain) stream. */
static int reader_new(const char *path, struct rawrec_reader **out, char *err, size_t errlen)
{
	int from_stdin = !strcmp(path, "-"), fd;
	struct rawrec_reader *r;

	*out = r = calloc(1, sizeof(*r));
	if (!r || !(r->name = strdup(from_stdin ? "stdin" : path)) ||
	    !(r->in = malloc(IN_BUFFER)) || !(r->rec = malloc(4096))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->rec_cap = 4096;
	/* gzclose() closes the descriptor it was given: stdin gets a copy. */
	if (from_stdin)
		fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		seterr(err, errlen, "cannot open %s: %s", r->name, strerror(e));
		return -e;
	}
	r->gz = gzdopen(fd, "rb");
	if (!r->gz) {
		close(fd);
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	gzbuffer(r->gz, GZ_BUFFER);
	return 0;
}

/* The magic and the version, or why the file is not a raw recording we read. */
static int read_magic(struct rawrec_reader *r, char *err, size_t errlen)
{
	static const unsigned char gzip_magic[2] = { 0x1f, 0x8b };
	unsigned char head[sizeof(rawrec_magic) + 2];
	unsigned int version;
	size_t got;
	int rc;

	rc = take(r, head, sizeof(head), &got, err, errlen);
	if (rc)
		return rc;
	if (got < sizeof(head)) {
		/* A recording killed right away: nothing, or part of the first bytes. */
		if (!got && !r->cut) {
			seterr(err, errlen, "%s is empty: not a raw recording", r->name);
			return -ENODATA;
		} else if (r->cut || !memcmp(head, rawrec_magic, got < 8 ? got : 8) ||
			   (gzdirect(r->gz) && got < 2 && !memcmp(head, gzip_magic, got))) {
			seterr(err, errlen, "%s is truncated before its header: no samples "
			       "in it", r->name);
			return -ENODATA;
		}
		seterr(err, errlen, "%s is not a pyprof-bpf raw recording", r->name);
		return -EPROTO;
	}
	if (memcmp(head, rawrec_magic, sizeof(rawrec_magic))) {
		seterr(err, errlen, "%s is not a pyprof-bpf raw recording%s", r->name,
		       gzdirect(r->gz) ? "" : " (it is gzip-compressed, but holds something else)");
		return -EPROTO;
	}
	version = head[8] | (unsigned int)head[9] << 8;
	r->version = version;
	if (version > RAWREC_VERSION || version < RAWREC_VERSION_OLDEST) {
		seterr(err, errlen, "%s is a version %u raw recording; this pyprof-bpf reads "
		       "versions %u to %u%s", r->name, version, RAWREC_VERSION_OLDEST, RAWREC_VERSION,
		       version > RAWREC_VERSION ? ": use a newer pyprof-bpf" : "");
		return version > RAWREC_VERSION ? -ENOTSUP : -EBADMSG;
	}
	return 0;
}

int rawrec_reader__open(const char *path, struct rawrec_reader **out, char *err,
			size_t errlen)
{
	struct rawrec_reader *r;
	int rc, type, boundary;

	*out = NULL;
	rc = reader_new(path, &r, err, errlen);
	if (!rc)
		rc = read_magic(r, err, errlen);
	if (!rc) {
		rc = read_record(r, &type, &boundary, err, errlen);
		if (!rc) {
			rc = -ENODATA;
			seterr(err, errlen, "%s is truncated before its header: no samples in it",
			       r->name);
		} else if (rc > 0) {
			rc = type == REC_HEADER ? parse_header(r, err, errlen) :
			     corrupt(r, "it does not start with its header", err, errlen);
		}
	}
	if (rc) {
		rawrec_reader__free(r);
		return rc;
	}
	*out = r;
	return 0;
}

const struct rawrec_info *rawrec_reader__info(const struct rawrec_reader *r)
{
	return &r->info;
}

int rawrec_reader__next(struct rawrec_reader *r, struct out_sample *s, char *err,
			size_t errlen)
{
	int rc, type = 0, boundary;

	if (r->failed) {
		seterr(err, errlen, "%s: reading stopped at an earlier error", r->name);
		return r->failed;
	}
	if (r->done)
		return 0;
	for (;;) {
		rc = read_record(r, &type, &boundary, err, errlen);
		if (rc < 0)
			break;
		if (!rc) {
			/* Complete: the end record, then the end of a whole gzip stream. */
			r->truncated = r->cut || !boundary || !r->have_end;
			r->done = 1;
			return 0;
		}
		if (r->have_end) {
			rc = corrupt(r, "data after its end record", err, errlen);
			break;
		}
		switch (type) {
		case REC_STRING:
			rc = parse_string(r, err, errlen);
			break;
		case REC_FRAME:
			rc = parse_frame(r, err, errlen);
			break;
		case REC_SAMPLE:
			rc = parse_sample(r, s, err, errlen);
			if (!rc) {
				r->nsamples++;
				return 1;
			}
			break;
		case REC_EXTRAS:
			rc = parse_extras(r, err, errlen);
			break;
		case REC_NATIVE:
			rc = parse_native(r, err, errlen);
			break;
		case REC_MAPPING:
			rc = parse_mapping(r, err, errlen);
			break;
		case REC_ADDRS:
			rc = parse_addrs(r, err, errlen);
			break;
		case REC_END:
			rc = r->x_pending || r->a_pending ?
			     corrupt(r, "an extras record with no sample", err, errlen) :
			     parse_end(r, err, errlen);
			break;
		case REC_SOURCE:
			rc = parse_source(r, err, errlen);
			break;
		case REC_HEADER:
			rc = corrupt(r, "a second header", err, errlen);
			break;
		default:
			/* Lower-case types are optional from version 2 (rawrec.h). */
			rc = r->version >= 2 && type >= 'a' && type <= 'z' ? 0 :
			     corrupt(r, "a record of an unknown type", err, errlen);
			break;
		}
		if (rc)
			break;
	}
	r->failed = rc;
	return rc;
}

const struct rawrec_end *rawrec_reader__end(const struct rawrec_reader *r)
{
	return r->done && !r->truncated ? &r->end : NULL;
}

const struct out_sources *rawrec_reader__sources(const struct rawrec_reader *r)
{
	return &r->sources;
}

uint64_t rawrec_reader__samples(const struct rawrec_reader *r)
{
	return r->nsamples;
}

void rawrec_reader__free(struct rawrec_reader *r)
{
	if (!r)
		return;
	if (r->gz)
		gzclose(r->gz);
	out_sources__clear(&r->sources);
	free((char *)r->info.comm);
	free((char *)r->info.mode);
	free(r->frame_kinds);
	free(r->sample_kinds);
	for (uint32_t i = 0; i < r->nmaps; i++)
		free(r->maps[i].build_id);
	free(r->maps);
	free(r->a_nat);
	free(r->sample_addrs);
	free((char *)r->info.python_version);
	free((char *)r->info.backend);
	for (uint32_t i = 0; i < r->nstrs; i++)
		free(r->strs[i]);
	free(r->strs);
	free(r->frames);
	free(r->sample);
	free(r->rec);
	free(r->in);
	free(r->name);
	free(r);
}
