// SPDX-License-Identifier: MIT
/*
 * rawrec_writer.c - writing raw recordings (the format is described in
 * rawrec.h): the writer interns strings and frames the first time it sees
 * them and appends small records to a gzip stream.
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

#define REC_PREFIX (1 + VARINT_MAX)	/* a record's type and length */
/* Flush the compressed stream once per second of samples, so a killed recording keeps most. */
#define FLUSH_NS 1000000000ull

int rawrec__wanted(const char *format, const char *path)
{
	size_t n;

	if (format)
		return !strcasecmp(format, "raw");
	if (!path)
		return 0;
	n = strlen(path);
	return n > 7 && !strcasecmp(path + n - 7, ".pyprof");
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;	/* FNV-1a */
	return h;
}

#define HASH_INIT 1469598103934665603ull

struct wframe {
	uint32_t fn, file;	/* string ids */
	int32_t line, first;
	int32_t kind;		/* OUT_FRAME_PYTHON, or (an 'N' record) _NATIVE, _STATUS */
};

struct rawrec_writer {
	gzFile gz;
	int err;		/* first write error, -errno; every later call returns it */
	int closed;
	char **strs;		/* by string id - 1 */
	uint32_t nstrs, strs_cap;
	uint32_t *str_slots;	/* open addressing: string id, 0 = empty */
	uint32_t str_nslots;
	struct wframe *frames;	/* by frame id */
	uint32_t nframes, frames_cap;
	uint32_t *frame_slots;	/* frame id + 1, 0 = empty */
	uint32_t frame_nslots;
	uint32_t *ids;		/* frame ids of the sample being added */
	uint32_t ids_cap;
	unsigned char *buf;	/* a record: its payload is encoded at buf + REC_PREFIX */
	size_t buf_cap;
	uint64_t nsamples;
	uint64_t prev_ts;
	uint64_t flushed_ts;
	struct out_map mappings;	/* (start, end) -> 'M' id */
	uint32_t nmappings;
	uint32_t *mids;		/* the mapping ids of the sample's native frames */
	uint32_t mids_cap;
};

static size_t put_u(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

static size_t put_str(unsigned char *p, const char *s, size_t len)
{
	size_t n = put_u(p, len);

	memcpy(p + n, s, len);
	return n + len;
}

/* Room for a payload of @len bytes. */
static int wbuf(struct rawrec_writer *w, size_t len)
{
	size_t need = REC_PREFIX + len, ncap;
	unsigned char *n;

	if (need <= w->buf_cap)
		return 0;
	ncap = w->buf_cap ? w->buf_cap : 4096;
	while (ncap < need)
		ncap *= 2;
	n = realloc(w->buf, ncap);
	if (!n)
		return -ENOMEM;
	w->buf = n;
	w->buf_cap = ncap;
	return 0;
}

/* The -errno of a failed gz call (errno is read before gzerror() can change it). */
static int gz_errno(gzFile gz)
{
	int e = errno, zerr;

	gzerror(gz, &zerr);
	if (zerr == Z_ERRNO)
		return e ? -e : -EIO;
	return zerr == Z_MEM_ERROR ? -ENOMEM : -EIO;
}

/* Write the record @type whose @len-byte payload is at w->buf + REC_PREFIX. */
static int put_record(struct rawrec_writer *w, int type, size_t len)
{
	unsigned char hdr[REC_PREFIX];
	size_t h = 1;

	hdr[0] = (unsigned char)type;
	h += put_u(hdr + 1, len);
	memcpy(w->buf + REC_PREFIX - h, hdr, h);
	errno = 0;
	if (gzwrite(w->gz, w->buf + REC_PREFIX - h, (unsigned int)(h + len)) != (int)(h + len))
		w->err = gz_errno(w->gz);
	return w->err;
}

/* Id of @s, writing its string record the first time; 0 for NULL. */
static int64_t str_id(struct rawrec_writer *w, const char *s)
{
	uint64_t h;
	uint32_t i, mask, id;
	size_t len;
	char *copy;
	int err;

	if (!s)
		return 0;
	len = strlen(s);
	h = hash_bytes(HASH_INIT, s, len);
	mask = w->str_nslots - 1;
	if (w->str_nslots) {
		for (i = h & mask; w->str_slots[i]; i = (i + 1) & mask)
			if (!strcmp(w->strs[w->str_slots[i] - 1], s))
				return w->str_slots[i];
	}
	if (len > RAWREC_MAX_RECORD)
		return -E2BIG;
	if ((uint64_t)(w->nstrs + 1) * 2 > w->str_nslots) {
		uint32_t nn = w->str_nslots ? w->str_nslots * 2 : 256;
		uint32_t *ns;

		if (nn < w->str_nslots)
			return -ENOMEM;
		ns = calloc(nn, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (uint32_t k = 0; k < w->nstrs; k++) {
			const char *t = w->strs[k];

			for (i = hash_bytes(HASH_INIT, t, strlen(t)) & (nn - 1); ns[i];
			     i = (i + 1) & (nn - 1))
				;
			ns[i] = k + 1;
		}
		free(w->str_slots);
		w->str_slots = ns;
		w->str_nslots = nn;
		mask = nn - 1;
	}
	err = out_grow((void **)&w->strs, &w->strs_cap, (uint64_t)w->nstrs + 1, sizeof(*w->strs));
	if (!err)
		err = wbuf(w, len);
	if (err)
		return err;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	memcpy(w->buf + REC_PREFIX, s, len);
	err = put_record(w, REC_STRING, len);
	if (err) {
		free(copy);
		return err;
	}
	id = ++w->nstrs;
	w->strs[id - 1] = copy;
	for (i = h & mask; w->str_slots[i]; i = (i + 1) & mask)
		;
	w->str_slots[i] = id;
	return id;
}

static uint64_t frame_hash(const struct wframe *f)
{
	return hash_bytes(HASH_INIT, f, sizeof(*f));
}

/* Id of the frame @ps of @kind, writing its strings' and its own records the
 * first time. */
static int64_t frame_id(struct rawrec_writer *w, const struct py_sym *ps, int kind)
{
	struct wframe f = { 0 };
	int64_t fn, file;
	uint32_t i, mask, id;
	size_t n = 0;
	int err;

	fn = str_id(w, ps->function);
	if (fn < 0)
		return fn;
	file = str_id(w, ps->file);
	if (file < 0)
		return file;
	f.fn = (uint32_t)fn;
	f.file = (uint32_t)file;
	f.kind = kind;
	f.line = kind == OUT_FRAME_PYTHON ? ps->line : 0;
	f.first = kind == OUT_FRAME_PYTHON ? ps->firstlineno : 0;
	mask = w->frame_nslots - 1;
	if (w->frame_nslots) {
		for (i = frame_hash(&f) & mask; w->frame_slots[i]; i = (i + 1) & mask)
			if (!memcmp(&w->frames[w->frame_slots[i] - 1], &f, sizeof(f)))
				return w->frame_slots[i] - 1;
	}
	if ((uint64_t)(w->nframes + 1) * 2 > w->frame_nslots) {
		uint32_t nn = w->frame_nslots ? w->frame_nslots * 2 : 256;
		uint32_t *ns;

		if (nn < w->frame_nslots)
			return -ENOMEM;
		ns = calloc(nn, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (uint32_t k = 0; k < w->nframes; k++) {
			i = frame_hash(&w->frames[k]) & (nn - 1);
			while (ns[i])
				i = (i + 1) & (nn - 1);
			ns[i] = k + 1;
		}
		free(w->frame_slots);
		w->frame_slots = ns;
		w->frame_nslots = nn;
		mask = nn - 1;
	}
	err = out_grow((void **)&w->frames, &w->frames_cap, (uint64_t)w->nframes + 1,
		   sizeof(*w->frames));
	if (!err)
		err = wbuf(w, 4 * VARINT_MAX);
	if (err)
		return err;
	if (kind != OUT_FRAME_PYTHON) {
		n += put_u(w->buf + REC_PREFIX + n, (uint64_t)kind);
		n += put_u(w->buf + REC_PREFIX + n, f.fn);
		n += put_u(w->buf + REC_PREFIX + n, f.file);
		err = put_record(w, REC_NATIVE, n);
	} else {
		n += put_u(w->buf + REC_PREFIX + n, f.fn);
		n += put_u(w->buf + REC_PREFIX + n, f.file);
		n += put_u(w->buf + REC_PREFIX + n, zigzag(f.line));
		n += put_u(w->buf + REC_PREFIX + n, zigzag(f.first));
		err = put_record(w, REC_FRAME, n);
	}
	if (err)
		return err;
	id = w->nframes++;
	w->frames[id] = f;
	for (i = frame_hash(&f) & mask; w->frame_slots[i]; i = (i + 1) & mask)
		;
	w->frame_slots[i] = id + 1;
	return id;
}

static int write_header(struct rawrec_writer *w, const struct rawrec_info *info)
{
	const char *comm = info->comm ? info->comm : "";
	const char *py = info->python_version ? info->python_version : "";
	const char *be = info->backend ? info->backend : "";
	const char *ev = info->event ? info->event : "";
	size_t lc = strlen(comm), lp = strlen(py), lb = strlen(be), le = strlen(ev), n = 0;
	unsigned char *p;
	int err;

	if (lc + lp + lb + le > RAWREC_MAX_RECORD / 2)
		return -E2BIG;
	err = wbuf(w, sizeof(rawrec_magic) + 2 + REC_PREFIX + lc + lp + lb + le + 16 +
		   11 * VARINT_MAX);
	if (err)
		return err;
	p = w->buf + REC_PREFIX;
	n += put_u(p + n, (uint32_t)info->pid);
	n += put_str(p + n, comm, lc);
	n += put_str(p + n, py, lp);
	n += put_str(p + n, be, lb);
	n += put_u(p + n, info->freq_hz);
	n += put_u(p + n, info->period_ns);
	n += put_u(p + n, info->max_frames);
	n += put_u(p + n, info->start_time_ns);
	n += put_u(p + n, info->start_mono_ns);
	n += put_str(p + n, info->mode ? info->mode : "cpu", info->mode ? strlen(info->mode) : 3);
	n += put_str(p + n, ev, le);
	/* The magic and version go out in the same write as the header record. */
	{
		unsigned char head[sizeof(rawrec_magic) + 2];

		memcpy(head, rawrec_magic, sizeof(rawrec_magic));
		head[sizeof(rawrec_magic)] = RAWREC_VERSION & 0xff;
		head[sizeof(rawrec_magic) + 1] = RAWREC_VERSION >> 8;
		errno = 0;
		if (gzwrite(w->gz, head, sizeof(head)) != (int)sizeof(head))
			return w->err = gz_errno(w->gz);
	}
	return put_record(w, REC_HEADER, n);
}

int rawrec_writer__open(const char *path, const struct rawrec_info *info,
			struct rawrec_writer **out, char *err, size_t errlen)
{
	int to_stdout = !path || !strcmp(path, "-");
	const char *name = to_stdout ? "stdout" : path;
	struct rawrec_writer *w;
	int fd = -1, rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (to_stdout && isatty(STDOUT_FILENO)) {
		rc = -EINVAL;
		seterr(err, errlen, "a raw recording is binary: not writing it to a terminal "
		       "(use -o FILE.pyprof)");
		goto fail;
	}
	/* gzclose() closes the descriptor it was given: stdout gets a copy. */
	if (to_stdout)
		fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		seterr(err, errlen, "cannot create %s: %s", name, strerror(errno));
		goto fail;
	}
	w->gz = gzdopen(fd, "wb");
	if (!w->gz) {
		rc = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	fd = -1;
	gzbuffer(w->gz, GZ_BUFFER);
	rc = write_header(w, info);
	if (rc) {
		seterr(err, errlen, "writing %s: %s", name, strerror(-rc));
		goto fail;
	}
	*out = w;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	rawrec_writer__free(w);
	return rc;
}

/* The 'X' record of a sample with an event or leaf frames. */
static int put_extras(struct rawrec_writer *w, const struct out_sample *s)
{
	int64_t ev, ids[LEAF_RECORD_MAX];
	unsigned char *p;
	size_t n = 0;
	int err;

	if (!s->event && !s->nleaf)
		return 0;
	if (s->nleaf > LEAF_RECORD_MAX || (s->nleaf && !s->leaf))
		return -EINVAL;
	/* Strings first: their records go out through the same buffer. */
	ev = str_id(w, s->event);
	if (ev < 0)
		return (int)ev;
	for (uint32_t i = 0; i < s->nleaf; i++) {
		ids[i] = str_id(w, s->leaf[i].name ? s->leaf[i].name : "");
		if (ids[i] < 0)
			return (int)ids[i];
	}
	err = wbuf(w, (2 + 2 * (size_t)s->nleaf) * VARINT_MAX);
	if (err)
		return err;
	p = w->buf + REC_PREFIX;
	n += put_u(p + n, (uint64_t)ev);
	n += put_u(p + n, s->nleaf);
	for (uint32_t i = 0; i < s->nleaf; i++) {
		n += put_u(p + n, s->leaf[i].kind == OUT_FRAME_KERNEL ? OUT_FRAME_KERNEL :
				  OUT_FRAME_STATUS);
		n += put_u(p + n, (uint64_t)ids[i]);
	}
	return put_record(w, REC_EXTRAS, n);
}

/* The id of the 'M' record of @a's mapping (written now if new); 0: none. */
static int64_t mapping_id(struct rawrec_writer *w, const struct out_addr *a)
{
	uint32_t id;
	size_t n = 0, idlen;
	int err;

	if (!a->map_end)
		return 0;
	id = out_map__get(&w->mappings, a->map_start, a->map_end);
	if (id != OUT_NONE)
		return id;
	idlen = a->build_id && a->build_id_len <= BUILD_ID_MAX ? a->build_id_len : 0;
	err = wbuf(w, 4 * (size_t)VARINT_MAX + idlen);
	if (err)
		return err;
	n += put_u(w->buf + REC_PREFIX + n, a->map_start);
	n += put_u(w->buf + REC_PREFIX + n, a->map_end);
	n += put_u(w->buf + REC_PREFIX + n, a->map_base);
	n += put_str(w->buf + REC_PREFIX + n, (const char *)a->build_id, idlen);
	err = put_record(w, REC_MAPPING, n);
	if (err)
		return err;
	id = ++w->nmappings;
	err = out_map__put(&w->mappings, a->map_start, a->map_end, id);
	if (err)
		return err;
	return id;
}

/* The 'A' record of a sample whose native or kernel frames have addresses. */
static int put_addrs(struct rawrec_writer *w, const struct out_sample *s)
{
	uint32_t nnat = 0, nk = 0;
	unsigned char *p;
	size_t n = 0;
	int err;

	for (uint32_t i = 0; s->addrs && s->kinds && i < s->nframes; i++)
		nnat += s->kinds[i] == OUT_FRAME_NATIVE;
	for (uint32_t i = 0; s->leaf && i < s->nleaf; i++)
		nk += s->leaf[i].addr != 0;
	if (!nk && !(nnat && s->addrs))
		return 0;
	if (!s->addrs)
		nnat = 0;
	err = out_grow((void **)&w->mids, &w->mids_cap, s->nframes, sizeof(*w->mids));
	if (err)
		return err;
	/* Mapping records first: they go out through the same buffer. */
	for (uint32_t i = 0, k = 0; nnat && i < s->nframes; i++) {
		int64_t id;

		if (s->kinds[i] != OUT_FRAME_NATIVE)
			continue;
		id = mapping_id(w, &s->addrs[i]);
		if (id < 0)
			return (int)id;
		w->mids[k++] = (uint32_t)id;
	}
	err = wbuf(w, (2 + 3 * (size_t)nnat + 2 * (size_t)s->nleaf) * VARINT_MAX);
	if (err)
		return err;
	p = w->buf + REC_PREFIX;
	n += put_u(p + n, nnat);
	for (uint32_t i = 0, k = 0; nnat && i < s->nframes; i++) {
		if (s->kinds[i] != OUT_FRAME_NATIVE)
			continue;
		n += put_u(p + n, s->addrs[i].pc);
		n += put_u(p + n, s->addrs[i].symoff);
		n += put_u(p + n, w->mids[k++]);
	}
	n += put_u(p + n, nk ? s->nleaf : 0);
	for (uint32_t i = 0; nk && i < s->nleaf; i++) {
		n += put_u(p + n, s->leaf[i].addr);
		n += put_u(p + n, s->leaf[i].symoff);
	}
	if (n > RAWREC_MAX_RECORD)
		return -E2BIG;
	return put_record(w, REC_ADDRS, n);
}

int rawrec_writer__add(struct rawrec_writer *w, const struct out_sample *s)
{
	unsigned char *p;
	int64_t name, id;
	size_t n = 0;
	int err;

	if (w->err)
		return w->err;
	if (w->closed || (s->nframes && !s->frames))
		return -EINVAL;
	name = str_id(w, s->thread_name);
	if (name < 0)
		return (int)name;
	err = out_grow((void **)&w->ids, &w->ids_cap, s->nframes, sizeof(*w->ids));
	if (err)
		return err;
	for (uint32_t i = 0; i < s->nframes; i++) {
		id = frame_id(w, &s->frames[i], s->kinds && (s->kinds[i] == OUT_FRAME_NATIVE ||
							     s->kinds[i] == OUT_FRAME_STATUS) ?
				s->kinds[i] : OUT_FRAME_PYTHON);
		if (id < 0)
			return (int)id;
		w->ids[i] = (uint32_t)id;
	}
	err = put_extras(w, s);
	if (!err)
		err = put_addrs(w, s);
	if (err)
		return err;
	err = wbuf(w, 7 * (size_t)VARINT_MAX + (size_t)s->nframes * 5);
	if (err)
		return err;
	p = w->buf + REC_PREFIX;
	n += put_u(p + n, (uint32_t)s->tid);
	n += put_u(p + n, (uint64_t)name);
	n += put_u(p + n, s->cpu);
	n += put_u(p + n, zigzag((int64_t)(s->ts_ns - w->prev_ts)));
	n += put_u(p + n, s->period_ns);
	n += put_u(p + n, s->status);
	n += put_u(p + n, s->nframes);
	for (uint32_t i = 0; i < s->nframes; i++)
		n += put_u(p + n, w->ids[i]);
	if (n > RAWREC_MAX_RECORD)
		return -E2BIG;	/* ~200000 frames: far past the sampler's depth limit */
	err = put_record(w, REC_SAMPLE, n);
	if (err)
		return err;
	w->prev_ts = s->ts_ns;
	if (!w->nsamples++) {
		w->flushed_ts = s->ts_ns;
	} else if (s->ts_ns > w->flushed_ts && s->ts_ns - w->flushed_ts >= FLUSH_NS) {
		w->flushed_ts = s->ts_ns;
		errno = 0;
		if (gzflush(w->gz, Z_SYNC_FLUSH) != Z_OK)
			return w->err = gz_errno(w->gz);
	}
	return 0;
}

int rawrec_writer__add_source(struct rawrec_writer *w, const struct out_source *src)
{
	size_t lp = strlen(src->path), lt = src->text ? src->len : 0, n = 0;
	unsigned char *p;
	int err;

	if (w->err)
		return w->err;
	if (w->closed)
		return -EINVAL;
	/* A record holds a file of the largest size we keep, and its path. */
	if (lt > OUT_SRC_MAX_FILE || lp > RAWREC_MAX_RECORD - OUT_SRC_MAX_FILE - 4 * VARINT_MAX)
		return -E2BIG;
	err = wbuf(w, lp + lt + 4 * VARINT_MAX);
	if (err)
		return err;
	p = w->buf + REC_PREFIX;
	n += put_str(p + n, src->path, lp);
	n += put_u(p + n, src->mtime_ns);
	n += put_u(p + n, src->flags);
	n += put_str(p + n, src->text ? src->text : "", lt);
	return put_record(w, REC_SOURCE, n);
}

int rawrec_writer__close(struct rawrec_writer *w, const struct rawrec_end *end)
{
	const struct rawrec_end none = { 0 };
	unsigned char *p;
	size_t n = 0;
	int rc, zr, e;

	if (w->closed)
		return -EINVAL;
	w->closed = 1;
	if (!end)
		end = &none;
	rc = w->err ? w->err : wbuf(w, 7 * VARINT_MAX);
	if (!rc) {
		p = w->buf + REC_PREFIX;
		n += put_u(p + n, w->nsamples);
		n += put_u(p + n, end->lost);
		n += put_u(p + n, end->truncated);
		n += put_u(p + n, end->errors);
		n += put_u(p + n, end->unresolved);
		n += put_u(p + n, end->duration_ns);
		n += put_u(p + n, end->flags);
		rc = put_record(w, REC_END, n);
	}
	errno = 0;
	zr = gzclose(w->gz);
	e = errno;
	w->gz = NULL;
	if (!rc && zr != Z_OK)
		rc = zr == Z_ERRNO && e ? -e : -EIO;
	return rc;
}

void rawrec_writer__free(struct rawrec_writer *w)
{
	if (!w)
		return;
	if (w->gz)
		gzclose(w->gz);
	for (uint32_t i = 0; i < w->nstrs; i++)
		free(w->strs[i]);
	free(w->strs);
	free(w->str_slots);
	free(w->frames);
	free(w->frame_slots);
	free(w->ids);
	free(w->buf);
	out_map__clear(&w->mappings);
	free(w->mids);
	free(w);
}
