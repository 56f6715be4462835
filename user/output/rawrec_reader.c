// SPDX-License-Identifier: MIT
/*
 * rawrec_reader.c - reading raw recordings (the format is described in
 * rawrec.h): each record's payload (rawrec_input.c cuts the stream into
 * records) parsed into samples, with every length, id and range checked
 * against what was read before it is trusted.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "output/rawrec.h"
#include "output/rawrec_format.h"
#include "output/rawrec_input.h"
#include "util/errbuf.h"

struct rawrec_reader {
	struct rawrec_input in;	/* the bytes, cut into records */
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

static int corrupt(struct rawrec_reader *r, const char *what, char *err, size_t errlen)
{
	return rawrec_input__corrupt(&r->in, what, err, errlen);
}

static struct rawrec_cur rec_cur(const struct rawrec_reader *r)
{
	return rawrec_input__cur(&r->in);
}

static int parse_header(struct rawrec_reader *r, char *err, size_t errlen)
{
	struct rawrec_cur c = rec_cur(r);
	struct rawrec_info *in = &r->info;
	uint64_t pid, freq, depth;
	int nomem = 0;

	pid = rawrec_cur__u(&c);
	in->comm = rawrec_cur__str(&c, &nomem);
	in->python_version = rawrec_cur__str(&c, &nomem);
	in->backend = rawrec_cur__str(&c, &nomem);
	freq = rawrec_cur__u(&c);
	in->period_ns = rawrec_cur__u(&c);
	depth = rawrec_cur__u(&c);
	in->start_time_ns = rawrec_cur__u(&c);
	in->start_mono_ns = rawrec_cur__u(&c);
	/* Appended later: a file of an older writer ends before it. */
	in->mode = c.p < c.end ? rawrec_cur__str(&c, &nomem) : NULL;
	in->event = c.p < c.end ? rawrec_cur__str(&c, &nomem) : NULL;
	if (in->event && !in->event[0]) {
		free((char *)in->event);	/* "": the clock's */
		in->event = NULL;
	}
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

	if (memchr(r->in.rec, 0, r->in.rec_len))
		return corrupt(r, "a string holds a NUL byte", err, errlen);
	rc = out_grow((void **)&r->strs, &r->strs_cap, (uint64_t)r->nstrs + 1, sizeof(*r->strs));
	s = rc ? NULL : strndup((const char *)r->in.rec, r->in.rec_len);
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
	struct rawrec_cur c = rec_cur(r);
	uint64_t fn, file;
	int64_t line, first;

	fn = rawrec_cur__u(&c);
	file = rawrec_cur__u(&c);
	line = rawrec_cur__s(&c);
	first = rawrec_cur__s(&c);
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
	struct rawrec_cur c = rec_cur(r);
	uint64_t kind, fn, file;

	kind = rawrec_cur__u(&c);
	fn = rawrec_cur__u(&c);
	file = rawrec_cur__u(&c);
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
	struct rawrec_cur c = rec_cur(r);
	struct rmapping *m;
	uint64_t start, end, base, len;

	start = rawrec_cur__u(&c);
	end = rawrec_cur__u(&c);
	base = rawrec_cur__u(&c);
	len = rawrec_cur__u(&c);
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
	struct rawrec_cur c = rec_cur(r);
	uint64_t n, k;

	if (r->a_pending)
		return corrupt(r, "two address records for one sample", err, errlen);
	n = rawrec_cur__u(&c);
	if (c.bad || n > (uint64_t)(c.end - c.p))
		return corrupt(r, "a malformed address record", err, errlen);
	if (out_grow((void **)&r->a_nat, &r->a_nat_cap, n, sizeof(*r->a_nat))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t pc = rawrec_cur__u(&c), off = rawrec_cur__u(&c), id = rawrec_cur__u(&c);
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
	k = rawrec_cur__u(&c);
	if (c.bad || k > LEAF_RECORD_MAX)
		return corrupt(r, "a malformed address record", err, errlen);
	for (uint64_t i = 0; i < k; i++) {
		r->a_leaf[i][0] = rawrec_cur__u(&c);
		r->a_leaf[i][1] = rawrec_cur__u(&c);
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
	struct rawrec_cur c = rec_cur(r);
	uint64_t ev, n;

	if (r->x_pending)
		return corrupt(r, "two extras records for one sample", err, errlen);
	ev = rawrec_cur__u(&c);
	n = rawrec_cur__u(&c);
	if (c.bad || ev > r->nstrs || n > LEAF_RECORD_MAX)
		return corrupt(r, "a malformed extras record", err, errlen);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t kind = rawrec_cur__u(&c), id = rawrec_cur__u(&c);

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
static int sample_frames(struct rawrec_reader *r, struct rawrec_cur *c, uint64_t n, int *mixed,
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
		uint64_t id = rawrec_cur__u(c);

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
	struct rawrec_cur c = rec_cur(r);
	uint64_t tid, name, cpu, period, status, n;
	int64_t dts;
	int mixed = 0, rc;	/* set by sample_frames() (gcc cannot see that it always is) */

	tid = rawrec_cur__u(&c);
	name = rawrec_cur__u(&c);
	cpu = rawrec_cur__u(&c);
	dts = rawrec_cur__s(&c);
	period = rawrec_cur__u(&c);
	status = rawrec_cur__u(&c);
	n = rawrec_cur__u(&c);
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
	struct rawrec_cur c = rec_cur(r);
	int nomem = 0, rc = 0;
	uint64_t flags;

	src.path = rawrec_cur__str(&c, &nomem);
	src.mtime_ns = rawrec_cur__u(&c);
	flags = rawrec_cur__u(&c);
	src.text = rawrec_cur__str(&c, &nomem);
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
	struct rawrec_cur c = rec_cur(r);
	struct rawrec_end *e = &r->end;
	uint64_t flags;

	e->samples = rawrec_cur__u(&c);
	e->lost = rawrec_cur__u(&c);
	e->truncated = rawrec_cur__u(&c);
	e->errors = rawrec_cur__u(&c);
	e->unresolved = rawrec_cur__u(&c);
	e->duration_ns = rawrec_cur__u(&c);
	flags = rawrec_cur__u(&c);
	if (c.bad || flags > UINT32_MAX)
		return corrupt(r, "its end record is malformed", err, errlen);
	e->flags = (uint32_t)flags;
	if (e->samples != r->nsamples)
		return corrupt(r, "its end record counts another number of samples", err,
			       errlen);
	r->have_end = 1;
	return 0;
}

int rawrec_reader__open(const char *path, struct rawrec_reader **out, char *err,
			size_t errlen)
{
	struct rawrec_reader *r;
	int rc, type, boundary;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = rawrec_input__open(&r->in, path, err, errlen);
	if (!rc)
		rc = rawrec_input__magic(&r->in, &r->version, err, errlen);
	if (!rc) {
		rc = rawrec_input__record(&r->in, &type, &boundary, err, errlen);
		if (!rc) {
			rc = -ENODATA;
			seterr(err, errlen, "%s is truncated before its header: no samples in it",
			       r->in.name);
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
		seterr(err, errlen, "%s: reading stopped at an earlier error", r->in.name);
		return r->failed;
	}
	if (r->done)
		return 0;
	for (;;) {
		rc = rawrec_input__record(&r->in, &type, &boundary, err, errlen);
		if (rc < 0)
			break;
		if (!rc) {
			/* Complete: the end record, then the end of a whole gzip stream. */
			r->truncated = r->in.cut || !boundary || !r->have_end;
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
	rawrec_input__close(&r->in);
	out_sources__clear(&r->sources);
	free((char *)r->info.comm);
	free((char *)r->info.mode);
	free((char *)r->info.event);
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
	free(r);
}
