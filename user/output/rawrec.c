/* SPDX-License-Identifier: MIT */
/*
 * rawrec.c - raw recordings (the format is described in rawrec.h). The
 * writer interns strings and frames the first time it sees them and appends
 * small records to a gzip stream; the reader checks every length, id and
 * range against what it has read before it trusts it.
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
#include "util/errbuf.h"

static const unsigned char magic[8] = { 0x89, 'p', 'y', 'p', 'r', 'o', 'f', '\n' };

enum {
	REC_HEADER = 'H',
	REC_STRING = 'S',
	REC_FRAME = 'F',
	REC_SAMPLE = 'P',
	REC_EXTRAS = 'X',
	REC_NATIVE = 'N',
	REC_MAPPING = 'M',
	REC_ADDRS = 'A',
	REC_END = 'E',
};

#define VARINT_MAX 10			/* bytes of a 64-bit varint */
#define LEAF_RECORD_MAX 64		/* leaf frames in an 'X' record */
#define BUILD_ID_MAX 64			/* bytes of a build id in an 'M' record */
#define REC_PREFIX (1 + VARINT_MAX)	/* a record's type and length */
#define GZ_BUFFER (64u * 1024)
#define IN_BUFFER (64u * 1024)
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

static uint64_t zigzag(int64_t v)
{
	return (uint64_t)v << 1 ^ (v < 0 ? ~0ull : 0);
}

static int64_t unzigzag(uint64_t u)
{
	return (int64_t)(u >> 1 ^ (0 - (u & 1)));
}

/* ======================================================================
 * The writer
 * ====================================================================== */

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
	size_t lc = strlen(comm), lp = strlen(py), lb = strlen(be), n = 0;
	unsigned char *p;
	int err;

	if (lc + lp + lb > RAWREC_MAX_RECORD / 2)
		return -E2BIG;
	err = wbuf(w, sizeof(magic) + 2 + REC_PREFIX + lc + lp + lb + 16 + 10 * VARINT_MAX);
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
	/* The magic and version go out in the same write as the header record. */
	{
		unsigned char head[sizeof(magic) + 2];

		memcpy(head, magic, sizeof(magic));
		head[sizeof(magic)] = RAWREC_VERSION & 0xff;
		head[sizeof(magic) + 1] = RAWREC_VERSION >> 8;
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

/* ======================================================================
 * The reader
 * ====================================================================== */

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

static int parse_sample(struct rawrec_reader *r, struct out_sample *s, char *err,
			size_t errlen)
{
	struct cur c = rec_cur(r);
	uint64_t tid, name, cpu, period, status, n;
	int64_t dts;
	int mixed;

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
	if (n > (uint64_t)(c.end - c.p))	/* every frame id takes a byte at least */
		return corrupt(r, "a sample with more frames than its record holds", err, errlen);
	if (out_grow((void **)&r->sample, &r->sample_cap, n, sizeof(*r->sample))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (out_grow((void **)&r->sample_kinds, &r->sample_kinds_cap, n, sizeof(*r->sample_kinds))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	mixed = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = cur_u(&c);

		if (c.bad || id >= r->nframes)
			return corrupt(r, "a sample uses a frame not defined before it", err,
				       errlen);
		r->sample[i] = r->frames[id];
		r->sample_kinds[i] = r->frame_kinds[id];
		mixed |= r->frame_kinds[id] != OUT_FRAME_PYTHON;
	}
	if (c.p != c.end)
		return corrupt(r, "a sample record with bytes left over", err, errlen);
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
	if (r->a_pending) {
		uint32_t k = 0;

		r->a_pending = 0;
		for (uint32_t i = 0; i < r->x_nleaf; i++)
			r->x_leaf[i].addr = r->x_leaf[i].symoff = 0;
		if (r->a_nleaf && (!s->leaf || r->a_nleaf != s->nleaf))
			return corrupt(r, "an address record for other leaf frames", err, errlen);
		for (uint32_t i = 0; i < r->a_nleaf; i++) {
			r->x_leaf[i].addr = r->a_leaf[i][0];
			r->x_leaf[i].symoff = r->a_leaf[i][1];
		}
		if (r->a_nnat) {
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
				if (k == r->a_nnat)
					break;
				r->sample_addrs[i] = r->a_nat[k++];
			}
			if (k != r->a_nnat || !mixed)
				return corrupt(r, "an address record for other native frames", err,
					       errlen);
			s->addrs = r->sample_addrs;
		}
	}
	return 0;
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

int rawrec_reader__open(const char *path, struct rawrec_reader **out, char *err,
			size_t errlen)
{
	static const unsigned char gzip_magic[2] = { 0x1f, 0x8b };
	unsigned char head[sizeof(magic) + 2];
	struct rawrec_reader *r;
	unsigned int version;
	int from_stdin = !strcmp(path, "-"), fd = -1, rc, type, boundary;
	size_t got;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->name = strdup(from_stdin ? "stdin" : path)) ||
	    !(r->in = malloc(IN_BUFFER)) || !(r->rec = malloc(4096))) {
		rc = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	r->rec_cap = 4096;
	/* gzclose() closes the descriptor it was given: stdin gets a copy. */
	if (from_stdin)
		fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		seterr(err, errlen, "cannot open %s: %s", r->name, strerror(errno));
		goto fail;
	}
	r->gz = gzdopen(fd, "rb");
	if (!r->gz) {
		rc = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	fd = -1;
	gzbuffer(r->gz, GZ_BUFFER);

	rc = take(r, head, sizeof(head), &got, err, errlen);
	if (rc)
		goto fail;
	if (got < sizeof(head)) {
		/* A recording killed right away: nothing, or part of the first bytes. */
		if (!got && !r->cut) {
			rc = -ENODATA;
			seterr(err, errlen, "%s is empty: not a raw recording", r->name);
		} else if (r->cut || !memcmp(head, magic, got < 8 ? got : 8) ||
			   (gzdirect(r->gz) && got < 2 && !memcmp(head, gzip_magic, got))) {
			rc = -ENODATA;
			seterr(err, errlen, "%s is truncated before its header: no samples "
			       "in it", r->name);
		} else {
			rc = -EPROTO;
			seterr(err, errlen, "%s is not a pyprof-bpf raw recording", r->name);
		}
		goto fail;
	}
	if (memcmp(head, magic, sizeof(magic))) {
		rc = -EPROTO;
		seterr(err, errlen, "%s is not a pyprof-bpf raw recording%s", r->name,
		       gzdirect(r->gz) ? "" : " (it is gzip-compressed, but holds something else)");
		goto fail;
	}
	version = head[8] | (unsigned int)head[9] << 8;
	if (version != RAWREC_VERSION) {
		rc = version > RAWREC_VERSION ? -ENOTSUP : -EBADMSG;
		seterr(err, errlen, "%s is a version %u raw recording; this pyprof-bpf reads "
		       "version %u%s", r->name, version, RAWREC_VERSION,
		       version > RAWREC_VERSION ? ": use a newer pyprof-bpf" : "");
		goto fail;
	}
	rc = read_record(r, &type, &boundary, err, errlen);
	if (rc < 0)
		goto fail;
	if (!rc) {
		rc = -ENODATA;
		seterr(err, errlen, "%s is truncated before its header: no samples in it",
		       r->name);
		goto fail;
	}
	if (type != REC_HEADER) {
		rc = corrupt(r, "it does not start with its header", err, errlen);
		goto fail;
	}
	rc = parse_header(r, err, errlen);
	if (rc)
		goto fail;
	*out = r;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	rawrec_reader__free(r);
	return rc;
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
		case REC_HEADER:
			rc = corrupt(r, "a second header", err, errlen);
			break;
		default:
			rc = corrupt(r, "a record of an unknown type", err, errlen);
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
