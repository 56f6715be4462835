// SPDX-License-Identifier: MIT
/*
 * test_rawrec.c - raw recordings: a round trip of awkward samples (NULL and
 * empty strings, bytes that are not UTF-8, extreme lines and values, time
 * going backwards, a deep stack, a long string); every output format written
 * from the reader is byte-identical to writing the samples directly; a file
 * cut at every length reads up to its last complete record and says it is
 * truncated; every byte flipped gives an error or (where gzip cannot see it)
 * the same samples; hand-made corrupt and foreign files give their errors;
 * no allocation per sample once strings and frames are known.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>
#include "output/output.h"
#include "output/rawrec.h"
#include "types/raw_sample.h"

/* The sanitizer runtime's allocation hooks (LLVM's sanitizer/allocator_interface.h). */
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t),
					      void (*f)(const volatile void *))
	__attribute__((weak));

/* ---- files ---- */

static char *tmp_path(const char *suffix)
{
	char tmpl[] = "/tmp/test_rawrec_XXXXXX";
	int fd = mkstemp(tmpl);
	char *p;

	assert_true(fd >= 0);
	close(fd);
	unlink(tmpl);
	p = malloc(strlen(tmpl) + strlen(suffix) + 1);
	assert_non_null(p);
	strcpy(p, tmpl);
	strcat(p, suffix);
	return p;
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0, r;

	assert_non_null(f);
	do {
		if (n + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

static void spill(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* The decompressed content of a gzip file. */
static unsigned char *gunzip(const char *path, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0;
	int r;

	assert_non_null(gz);
	do {
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 131072;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		r = gzread(gz, buf + n, 65536);
		assert_true(r >= 0);
		n += (size_t)r;
	} while (r > 0);
	assert_int_equal(gzclose(gz), Z_OK);
	*len = n;
	return buf;
}

/* ---- the samples ---- */

#define NSAMPLES 64
#define NSMALL 24	/* the first samples: no long string, no deep stack */
#define DEEP 3000

static char long_name[70001];
static struct py_sym pool[12];
static struct py_sym deep[DEEP];
static struct py_sym stacks[NSAMPLES][8];
static struct out_sample samples[NSAMPLES];

static const struct rawrec_info info = {
	.pid = 4242,
	.comm = "python3.14",
	.python_version = "3.14.0",
	.backend = "bpf",
	.freq_hz = 199,
	.period_ns = 5025125,
	.max_frames = 2048,
	.start_time_ns = 1764489600123456789ull,
	.start_mono_ns = 987654321000ull,
};

static const struct rawrec_end end_in = {
	.lost = 3, .truncated = 2, .errors = 1, .unresolved = 7,
	.duration_ns = 3000000000ull, .flags = RAWREC_END_TARGET_EXITED,
};

static void make_samples(void)
{
	static const char *const names[] = { "MainThread", "worker \xc3\xbc", NULL, "", "w\xff" };
	uint64_t ts = 5000000000000ull;

	assert_true(NSMALL <= 30);	/* sample 30 is the deep one */
	memset(long_name, 'q', sizeof(long_name) - 1);
	pool[0] = (struct py_sym){ "<module>", "/app/main.py", 77, 1 };
	pool[1] = (struct py_sym){ "main", "/app/main.py", 70, 60 };
	pool[2] = (struct py_sym){ "hot", "/app/work.py", 12, 10 };
	pool[3] = (struct py_sym){ "hot", "/app/work.py", 13, 10 };
	pool[4] = (struct py_sym){ "warm", "/app/work.py", 20, 18 };
	pool[5] = (struct py_sym){ NULL, NULL, -1, 0 };
	pool[6] = (struct py_sym){ "", "", 0, 0 };
	pool[7] = (struct py_sym){ "bad\xff\xfe utf8;()", "/tmp/\xe9 dir/x.py", INT_MAX, INT_MIN };
	pool[8] = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
	pool[9] = (struct py_sym){ long_name, "/app/long.py", 5, 5 };
	pool[10] = (struct py_sym){ "\xe5\x87\xbd\xe6\x95\xb0", "/srv/\xe2\x80\xa8.py", 9, 9 };
	pool[11] = (struct py_sym){ "hot", "/app/other.py", 12, 10 };
	for (int i = 0; i < DEEP; i++)
		deep[i] = (struct py_sym){ i % 2 ? "level_odd" : "level_even", "/app/levels.py",
					   100 + i, 100 };
	for (int i = 0; i < NSAMPLES; i++) {
		struct out_sample *s = &samples[i];
		uint32_t n = 0;

		/* Innermost first: a leaf chosen from the pool, then a fixed base. */
		static const int leaf[] = { 2, 3, 4, 5, 6, 8, 10, 11, 2 };

		stacks[i][n++] = pool[i == 37 ? 9 : leaf[i % 9]];
		if (i % 5 == 1)
			stacks[i][n++] = pool[7];
		stacks[i][n++] = pool[1];
		stacks[i][n++] = pool[0];
		ts += i == 20 ? (uint64_t)-7000000 : 300000000;	/* one step back in time */
		*s = (struct out_sample){
			.comm = info.comm,
			.pid = info.pid,
			.tid = i % 7 == 6 ? -5 : 100 + i % 3,
			.thread_name = names[i % 5],
			.cpu = i == 3 ? UINT32_MAX : (uint32_t)(i % 4),
			.ts_ns = ts,
			.period_ns = i == 9 ? 0 : i == 10 ? UINT64_MAX : info.period_ns,
			.status = (uint32_t)(i % 11 == 4 ? SAMPLE_TRUNCATED :
					     i % 13 == 5 ? SAMPLE_READ_FAULT : 0),
			.nframes = n,
			.frames = stacks[i],
		};
		if (i % 17 == 8) {	/* no Python state: no frames */
			s->status = SAMPLE_NO_PYSTATE;
			s->nframes = 0;
			s->frames = NULL;
		}
		if (i % 23 == 11)	/* status this version does not know */
			s->status = 77;
		if (i == 30) {
			s->nframes = DEEP;
			s->frames = deep;
		}
	}
}

static int str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void assert_sample_equal(const struct out_sample *got, const struct out_sample *want)
{
	assert_true(str_eq(got->comm, want->comm));
	assert_int_equal(got->pid, want->pid);
	assert_int_equal(got->tid, want->tid);
	assert_true(str_eq(got->thread_name, want->thread_name));
	assert_int_equal(got->cpu, want->cpu);
	assert_true(got->ts_ns == want->ts_ns);
	assert_true(got->period_ns == want->period_ns);
	assert_int_equal(got->status, want->status);
	assert_int_equal(got->nframes, want->nframes);
	for (uint32_t i = 0; i < want->nframes; i++) {
		assert_true(str_eq(got->frames[i].function, want->frames[i].function));
		assert_true(str_eq(got->frames[i].file, want->frames[i].file));
		assert_int_equal(got->frames[i].line, want->frames[i].line);
		assert_int_equal(got->frames[i].firstlineno, want->frames[i].firstlineno);
	}
}

static void write_rec(const char *path, const struct out_sample *v, size_t n, int close)
{
	struct rawrec_writer *w = NULL;
	char err[256] = "";

	assert_int_equal(rawrec_writer__open(path, &info, &w, err, sizeof(err)), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rawrec_writer__add(w, &v[i]), 0);
	if (close)
		assert_int_equal(rawrec_writer__close(w, &end_in), 0);
	rawrec_writer__free(w);
}

/* How reading a file went. */
struct outcome {
	int open_rc;		/* rawrec_reader__open() */
	int rc;			/* the last rawrec_reader__next() */
	size_t n;		/* samples read */
	int complete;		/* rawrec_reader__end() != NULL */
	int same;		/* every sample read equals samples[i] */
	char err[512];
};

static int sample_same(const struct out_sample *a, const struct out_sample *b)
{
	if (!str_eq(a->comm, b->comm) || a->pid != b->pid || a->tid != b->tid ||
	    !str_eq(a->thread_name, b->thread_name) || a->cpu != b->cpu ||
	    a->ts_ns != b->ts_ns || a->period_ns != b->period_ns || a->status != b->status ||
	    a->nframes != b->nframes)
		return 0;
	for (uint32_t i = 0; i < a->nframes; i++)
		if (!str_eq(a->frames[i].function, b->frames[i].function) ||
		    !str_eq(a->frames[i].file, b->frames[i].file) ||
		    a->frames[i].line != b->frames[i].line ||
		    a->frames[i].firstlineno != b->frames[i].firstlineno)
			return 0;
	return 1;
}

static struct outcome read_rec(const char *path)
{
	struct outcome o = { .same = 1 };
	struct rawrec_reader *r = NULL;
	struct out_sample s;

	o.open_rc = rawrec_reader__open(path, &r, o.err, sizeof(o.err));
	if (o.open_rc) {
		assert_null(r);
		assert_true(o.err[0]);
		return o;
	}
	while ((o.rc = rawrec_reader__next(r, &s, o.err, sizeof(o.err))) > 0) {
		/* Whatever a reader returns is in bounds (ASan checks the reads). */
		for (uint32_t i = 0; i < s.nframes; i++)
			if (s.frames[i].function)
				(void)strlen(s.frames[i].function);
		if (o.n >= NSAMPLES || !sample_same(&s, &samples[o.n]))
			o.same = 0;
		o.n++;
	}
	if (o.rc == 0) {
		o.complete = rawrec_reader__end(r) != NULL;
		assert_int_equal(rawrec_reader__samples(r), o.n);
		/* It stays at its end. */
		assert_int_equal(rawrec_reader__next(r, &s, NULL, 0), 0);
	} else {
		assert_true(o.err[0]);
		assert_int_equal(rawrec_reader__next(r, &s, NULL, 0), o.rc);
	}
	rawrec_reader__free(r);
	return o;
}

/* ---- tests ---- */

static void test_wanted(void **state)
{
	(void)state;
	assert_true(rawrec__wanted(NULL, "rec.pyprof"));
	assert_true(rawrec__wanted(NULL, "/x/REC.PYPROF"));
	assert_true(rawrec__wanted("raw", NULL));
	assert_true(rawrec__wanted("RAW", "out.folded"));
	assert_false(rawrec__wanted(NULL, ".pyprof"));
	assert_false(rawrec__wanted(NULL, "rec.pyprof.txt"));
	assert_false(rawrec__wanted(NULL, NULL));
	assert_false(rawrec__wanted("collapsed", "rec.pyprof"));
}

static void test_round_trip(void **state)
{
	char *path = tmp_path(".pyprof"), err[512] = "";
	struct rawrec_reader *r = NULL;
	const struct rawrec_info *in;
	const struct rawrec_end *e;
	struct out_sample s;
	size_t n = 0;
	int rc;

	(void)state;
	write_rec(path, samples, NSAMPLES, 1);
	assert_int_equal(rawrec_reader__open(path, &r, err, sizeof(err)), 0);
	in = rawrec_reader__info(r);
	assert_int_equal(in->pid, info.pid);
	assert_string_equal(in->comm, info.comm);
	assert_string_equal(in->python_version, info.python_version);
	assert_string_equal(in->backend, info.backend);
	assert_int_equal(in->freq_hz, info.freq_hz);
	assert_true(in->period_ns == info.period_ns);
	assert_int_equal(in->max_frames, info.max_frames);
	assert_true(in->start_time_ns == info.start_time_ns);
	assert_true(in->start_mono_ns == info.start_mono_ns);
	assert_null(rawrec_reader__end(r));	/* not before the end */
	while ((rc = rawrec_reader__next(r, &s, err, sizeof(err))) > 0) {
		assert_true(n < NSAMPLES);
		assert_sample_equal(&s, &samples[n]);
		n++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(n, NSAMPLES);
	e = rawrec_reader__end(r);
	assert_non_null(e);
	assert_true(e->samples == NSAMPLES);
	assert_true(e->lost == end_in.lost && e->truncated == end_in.truncated &&
		    e->errors == end_in.errors && e->unresolved == end_in.unresolved &&
		    e->duration_ns == end_in.duration_ns && e->flags == end_in.flags);
	rawrec_reader__free(r);

	/* An empty recording is a complete one. */
	write_rec(path, samples, 0, 1);
	{
		struct outcome o = read_rec(path);

		assert_int_equal(o.open_rc, 0);
		assert_int_equal(o.rc, 0);
		assert_int_equal(o.n, 0);
		assert_true(o.complete);
	}
	unlink(path);
	free(path);
}

/* Every format, from the samples and from their recording: the same bytes. */
static void test_same_output_bytes(void **state)
{
	static const char *const formats[][2] = {
		{ "perf-script", ".txt" }, { "collapsed", ".folded" },
		{ "speedscope", ".json" }, { "pprof", ".pb.gz" }, { "flamegraph", ".html" },
		{ "flamegraph", ".svg" }, { "top", ".txt" },
	};
	static const struct output_opts optsets[] = {
		{ 0 },
		{ .per_thread_roots = 1, .no_lines = 1, .start_time_ns = 1764489600123456789ull },
		{ .comm_root = 1, .top_rows = 5, .title = "t" },
	};
	char *rec = tmp_path(".pyprof"), err[512] = "";

	(void)state;
	write_rec(rec, samples, NSAMPLES, 1);
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		for (size_t k = 0; k < sizeof(optsets) / sizeof(optsets[0]); k++) {
			char *a = tmp_path(formats[f][1]), *b = tmp_path(formats[f][1]);
			struct rawrec_reader *r = NULL;
			struct output *o = NULL;
			unsigned char *da, *db;
			struct out_sample s;
			size_t la, lb;
			int rc;

			assert_int_equal(output__new(formats[f][0], a, &optsets[k], &o, err,
						     sizeof(err)), 0);
			for (size_t i = 0; i < NSAMPLES; i++)
				assert_int_equal(output__add(o, &samples[i]), 0);
			assert_int_equal(output__finish(o), 0);
			output__free(o);

			assert_int_equal(rawrec_reader__open(rec, &r, err, sizeof(err)), 0);
			assert_int_equal(output__new(formats[f][0], b, &optsets[k], &o, err,
						     sizeof(err)), 0);
			while ((rc = rawrec_reader__next(r, &s, err, sizeof(err))) > 0)
				assert_int_equal(output__add(o, &s), 0);
			assert_int_equal(rc, 0);
			assert_int_equal(output__finish(o), 0);
			output__free(o);
			rawrec_reader__free(r);

			da = slurp(a, &la);
			db = slurp(b, &lb);
			assert_true(la > 100);
			assert_int_equal(la, lb);
			assert_memory_equal(da, db, la);
			free(da);
			free(db);
			unlink(a);
			unlink(b);
			free(a);
			free(b);
		}
	}
	unlink(rec);
	free(rec);
}

/* Offsets in @d (decompressed) where each complete sample record ends, walking records. */
static size_t sample_ends(const unsigned char *d, size_t len, size_t *ends, size_t max)
{
	size_t pos = 10, n = 0;

	while (pos < len) {
		int type = d[pos++];
		uint64_t rl = 0;

		for (int shift = 0;; shift += 7) {
			assert_true(pos < len);
			rl |= (uint64_t)(d[pos] & 0x7f) << shift;
			if (!(d[pos++] & 0x80))
				break;
		}
		pos += rl;
		assert_true(pos <= len);
		if (type == 'P') {
			assert_true(n < max);
			ends[n++] = pos;
		}
	}
	return n;
}

/* Cut the compressed file at every length: the samples before the cut, and a warning. */
static void test_truncated_every_length(void **state)
{
	char *path = tmp_path(".pyprof");
	unsigned char *full;
	size_t size, prev = 0;
	int seen_fail = 0;

	(void)state;
	write_rec(path, samples, NSMALL, 1);
	full = slurp(path, &size);
	for (size_t len = size + 1; len-- > 0;) {
		struct outcome o;

		assert_int_equal(truncate(path, (off_t)len), 0);
		o = read_rec(path);
		if (len == size) {
			assert_int_equal(o.open_rc, 0);
			assert_int_equal(o.rc, 0);
			assert_true(o.complete && o.same);
			assert_int_equal(o.n, NSMALL);
			prev = o.n;
			continue;
		}
		if (o.open_rc) {
			/* Cut before the first flush: nothing to decode, not even the header. */
			assert_int_equal(o.open_rc, -ENODATA);
			assert_true(strstr(o.err, "truncated") || strstr(o.err, "empty"));
			seen_fail = 1;
			prev = 0;
			continue;
		}
		assert_false(seen_fail);	/* once readable, longer cuts are too */
		assert_int_equal(o.rc, 0);
		assert_false(o.complete);
		assert_true(o.same);
		assert_true(o.n <= prev);	/* shorter files, fewer samples */
		if (len == size - 1)
			assert_int_equal(o.n, NSMALL);	/* only the gzip trailer is cut */
		prev = o.n;
	}
	/*
	 * The writer flushes once per second of samples (300 ms apart here): a
	 * recording killed half way keeps about half its samples.
	 */
	spill(path, full, size / 2);
	{
		struct outcome o = read_rec(path);

		assert_int_equal(o.open_rc, 0);
		assert_true(o.n > 0 && o.same);
	}
	free(full);
	unlink(path);
	free(path);
}

/* The same on the decompressed data: exactly the samples whose record is whole. */
static void test_truncated_records(void **state)
{
	char *path = tmp_path(".pyprof"), *raw = tmp_path(".raw");
	size_t ends[NSMALL], n, dlen, k = 0;
	unsigned char *d;

	(void)state;
	write_rec(path, samples, NSMALL, 1);
	d = gunzip(path, &dlen);
	n = sample_ends(d, dlen, ends, NSMALL);
	assert_int_equal(n, NSMALL);
	spill(raw, d, dlen);
	for (size_t len = dlen + 1; len-- > 0;) {
		struct outcome o;

		assert_int_equal(truncate(raw, (off_t)len), 0);
		o = read_rec(raw);
		while (k < n && ends[n - 1 - k] > len)
			k++;	/* k: samples whose record does not fit */
		if (o.open_rc) {
			assert_int_equal(o.open_rc, -ENODATA);
			assert_int_equal(n - k, 0);
			continue;
		}
		assert_int_equal(o.rc, 0);
		assert_true(o.same);
		assert_int_equal(o.n, n - k);
		assert_int_equal(o.complete, len == dlen);
	}
	free(d);
	unlink(path);
	unlink(raw);
	free(path);
	free(raw);
}

/* Every byte of the compressed file flipped: an error, or what gzip cannot see. */
static void test_corrupt_every_byte(void **state)
{
	char *path = tmp_path(".pyprof"), *bad = tmp_path(".pyprof");
	unsigned char *full;
	size_t size, errors = 0;

	(void)state;
	write_rec(path, samples, NSMALL, 1);
	full = slurp(path, &size);
	for (size_t i = 0; i < size; i++) {
		struct outcome o;

		full[i] ^= 0xff;
		spill(bad, full, size);
		full[i] ^= 0xff;
		o = read_rec(bad);
		if (o.open_rc || o.rc < 0) {
			errors++;
			continue;
		}
		/* Never different samples: those read are the written ones. */
		assert_true(o.same);
		if (!o.complete)
			continue;
		/* Complete and whole: only bytes no check covers (gzip's mtime, flags, OS). */
		assert_int_equal(o.n, NSMALL);
		assert_true(i < 10);
	}
	assert_true(errors > size * 9 / 10);
	free(full);
	unlink(path);
	unlink(bad);
	free(path);
	free(bad);
}

/* Every byte of the decompressed data flipped (no CRC to help): never a crash. */
static void test_corrupt_records(void **state)
{
	char *path = tmp_path(".pyprof"), *raw = tmp_path(".raw");
	unsigned char *d;
	size_t dlen;

	(void)state;
	write_rec(path, samples, NSMALL, 1);
	d = gunzip(path, &dlen);
	for (size_t i = 0; i < dlen; i++) {
		struct outcome o;

		for (int bit = 0; bit < 8; bit += 7) {	/* a low and a high bit */
			d[i] ^= (unsigned char)(1u << bit);
			spill(raw, d, dlen);
			d[i] ^= (unsigned char)(1u << bit);
			o = read_rec(raw);
			if (i < 8)
				assert_int_equal(o.open_rc, -EPROTO);
			else if (i < 10)
				assert_true(o.open_rc == -ENOTSUP || o.open_rc == -EBADMSG);
			if (o.open_rc || o.rc < 0)
				assert_true(o.err[0]);
		}
	}
	free(d);
	unlink(path);
	unlink(raw);
	free(path);
	free(raw);
}

/* ---- hand-made streams ---- */

struct stream {
	unsigned char b[4096];
	size_t n;
};

static void s_bytes(struct stream *s, const void *p, size_t n)
{
	assert_true(s->n + n <= sizeof(s->b));
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void s_u(struct stream *s, uint64_t v)
{
	do {
		unsigned char c = (unsigned char)(v & 0x7f);

		v >>= 7;
		if (v)
			c |= 0x80;
		s_bytes(s, &c, 1);
	} while (v);
}

/* A record: type, then the payload given as varints (-1 ends the list). */
static void s_rec(struct stream *s, int type, ...)
{
	struct stream p = { .n = 0 };
	unsigned char t = (unsigned char)type;
	va_list ap;
	long long v;

	va_start(ap, type);
	while ((v = va_arg(ap, long long)) != -1)
		s_u(&p, (uint64_t)v);
	va_end(ap);
	s_bytes(s, &t, 1);
	s_u(s, p.n);
	s_bytes(s, p.b, p.n);
}

static void s_start(struct stream *s, unsigned int version)
{
	static const unsigned char magic[8] = { 0x89, 'p', 'y', 'p', 'r', 'o', 'f', '\n' };
	unsigned char v[2] = { version & 0xff, version >> 8 };

	s->n = 0;
	s_bytes(s, magic, 8);
	s_bytes(s, v, 2);
	/* pid, comm "c", python "3", backend "b", freq, period, depth, times */
	s_rec(s, 'H', 7LL, 1LL, (long long)'c', 1LL, (long long)'3', 1LL, (long long)'b', 99LL,
	      10LL, 64LL, 0LL, 0LL, -1LL);
}

/* One string "f" (id 1), one frame (id 0), one sample using them. */
static void s_body(struct stream *s)
{
	s_rec(s, 'S', (long long)'f', -1LL);
	s_rec(s, 'F', 1LL, 1LL, 2LL, 2LL, -1LL);
	s_rec(s, 'P', 9LL, 1LL, 0LL, 2LL, 5LL, 0LL, 1LL, 0LL, -1LL);
}

static struct outcome read_stream(const struct stream *s, int gzip)
{
	char *path = tmp_path(".pyprof");
	struct outcome o;

	if (gzip) {
		gzFile gz = gzopen(path, "wb");

		assert_non_null(gz);
		assert_int_equal(gzwrite(gz, s->b, (unsigned int)s->n), (int)s->n);
		assert_int_equal(gzclose(gz), Z_OK);
	} else {
		spill(path, s->b, s->n);
	}
	o = read_rec(path);
	unlink(path);
	free(path);
	return o;
}

static void expect_corrupt(const struct stream *s, const char *what)
{
	struct outcome o = read_stream(s, 1);

	if (o.open_rc) {
		assert_int_equal(o.open_rc, -EBADMSG);
	} else {
		assert_int_equal(o.rc, -EBADMSG);
	}
	if (!strstr(o.err, what))
		fail_msg("\"%s\" does not say \"%s\"", o.err, what);
	assert_non_null(strstr(o.err, "is corrupt"));
}

static void test_corrupt_streams(void **state)
{
	struct stream s;
	struct outcome o;
	unsigned char b;

	(void)state;
	/* The hand-made stream itself is good. */
	s_start(&s, 1);
	s_body(&s);
	/* With a field a later writer added: skipped. */
	s_rec(&s, 'E', 1LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 99LL, -1LL);
	o = read_stream(&s, 1);
	assert_int_equal(o.open_rc, 0);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.n, 1);
	assert_true(o.complete);
	o = read_stream(&s, 0);		/* uncompressed reads too */
	assert_true(o.complete && o.n == 1);

	s_start(&s, 1);
	s_rec(&s, 'P', 9LL, 0LL, 0LL, 2LL, 5LL, 0LL, 1LL, 0LL, -1LL);
	expect_corrupt(&s, "frame not defined");
	s_start(&s, 1);
	s_rec(&s, 'F', 1LL, 0LL, 2LL, 2LL, -1LL);
	expect_corrupt(&s, "string not defined");
	s_start(&s, 1);
	s_rec(&s, 'S', (long long)'f', -1LL);
	s_rec(&s, 'P', 9LL, 2LL, 0LL, 2LL, 5LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "string not defined");
	s_start(&s, 1);
	s_body(&s);
	s_rec(&s, 'P', 9LL, 1LL, 0LL, 2LL, 5LL, 0LL, 1LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "left over");
	s_start(&s, 1);
	s_rec(&s, 'P', 9LL, 0LL, 0LL, 2LL, 5LL, 0LL, 200LL, 0LL, -1LL);
	expect_corrupt(&s, "more frames");
	s_start(&s, 1);
	s_rec(&s, 'P', 9LL, 1LL, -1LL);
	expect_corrupt(&s, "ends early");
	s_start(&s, 1);
	s_rec(&s, 'P', 1LL << 33, 0LL, 0LL, 2LL, 5LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "out of range");
	s_start(&s, 1);
	s_rec(&s, 'F', 0LL, 0LL, 1LL << 40, 0LL, -1LL);
	expect_corrupt(&s, "line is out of range");
	s_start(&s, 1);
	s_rec(&s, 'F', 0LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "wrong size");
	s_start(&s, 1);
	s_rec(&s, 'S', (long long)'a', 0LL, (long long)'b', -1LL);
	expect_corrupt(&s, "NUL");
	s_start(&s, 1);
	s_rec(&s, 'H', 1LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "second header");
	s_start(&s, 1);
	s_rec(&s, 'Z', -1LL);
	expect_corrupt(&s, "unknown type");
	/* A lower-case type is optional from version 2 on, not before. */
	s_start(&s, 1);
	s_rec(&s, 'z', 3LL, -1LL);
	expect_corrupt(&s, "unknown type");
	s_start(&s, 2);
	s_rec(&s, 'z', 3LL, -1LL);
	s_body(&s);
	o = read_stream(&s, 1);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.n, 1);
	s_start(&s, 2);
	s_rec(&s, 'Z', -1LL);
	expect_corrupt(&s, "unknown type");
	/* Source records: whole, once a path. */
	s_start(&s, 2);
	s_rec(&s, 'C', 1LL, (long long)'p', 5LL, 0LL, 1LL, (long long)'x', 7LL, -1LL);
	expect_corrupt(&s, "source record does not fit");
	s_start(&s, 2);
	s_rec(&s, 'C', 1LL, (long long)'p', 5LL, 0LL, 1LL, (long long)'x', -1LL);
	s_rec(&s, 'C', 1LL, (long long)'p', 5LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "source record is repeated");
	s_start(&s, 1);
	s_body(&s);
	s_rec(&s, 'E', 2LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "another number of samples");
	s_start(&s, 1);
	s_rec(&s, 'E', 0LL, 0LL, -1LL);
	expect_corrupt(&s, "end record is malformed");
	s_start(&s, 1);
	s_rec(&s, 'E', 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, -1LL);
	s_body(&s);
	expect_corrupt(&s, "after its end record");
	s_start(&s, 1);
	b = 'S';
	s_bytes(&s, &b, 1);
	s_u(&s, RAWREC_MAX_RECORD + 1);
	expect_corrupt(&s, "longer than the format allows");
	s_start(&s, 1);
	s_bytes(&s, &b, 1);
	for (int i = 0; i < 9; i++)
		s_bytes(&s, "\xff", 1);
	s_bytes(&s, "\x02", 1);	/* the tenth byte takes the length past 64 bits */
	expect_corrupt(&s, "does not fit 64 bits");

	/* The header: first, whole, in range. */
	s_start(&s, 1);
	s.n = 10;
	s_body(&s);
	expect_corrupt(&s, "does not start with its header");
	s_start(&s, 1);
	s.n = 10;
	s_rec(&s, 'H', 7LL, 5LL, -1LL);
	expect_corrupt(&s, "header ends early");
	s_start(&s, 1);
	s.n = 10;
	s_rec(&s, 'H', 1LL << 32, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, 0LL, -1LL);
	expect_corrupt(&s, "out of range");

	/* Versions. */
	s_start(&s, 3);
	o = read_stream(&s, 1);
	assert_int_equal(o.open_rc, -ENOTSUP);
	assert_non_null(strstr(o.err, "version 3"));
	assert_non_null(strstr(o.err, "newer"));
	s_start(&s, 0);
	o = read_stream(&s, 1);
	assert_int_equal(o.open_rc, -EBADMSG);

	/* Cut inside the header record, or with only magic and version. */
	s_start(&s, 1);
	s.n -= 3;
	o = read_stream(&s, 1);
	assert_int_equal(o.open_rc, -ENODATA);
	s.n = 10;
	o = read_stream(&s, 0);
	assert_int_equal(o.open_rc, -ENODATA);
	s.n = 4;
	o = read_stream(&s, 0);
	assert_int_equal(o.open_rc, -ENODATA);
	/* Without an end record: truncated, whatever the gzip stream says. */
	s_start(&s, 1);
	s_body(&s);
	o = read_stream(&s, 1);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.n, 1);
	assert_false(o.complete);
}

/* Source files ('C' records) come back as written, a file's text or why there is none. */
static void test_sources(void **state)
{
	const struct out_source in[] = {
		{ .path = "/app/a.py", .text = "x = 1\n\xff\n", .len = 8, .mtime_ns = 17,
		  .flags = OUT_SRC_CHANGED },
		{ .path = "/app/none.py", .flags = OUT_SRC_UNREADABLE },
		{ .path = "/app/empty.py", .text = "", .len = 0, .mtime_ns = 3 },
	};
	char *path = tmp_path(".pyprof");
	struct rawrec_writer *w = NULL;
	struct rawrec_reader *r = NULL;
	const struct out_sources *got;
	struct out_sample s;
	char err[256] = "";
	int rc;

	(void)state;
	assert_int_equal(rawrec_writer__open(path, &info, &w, err, sizeof(err)), 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(rawrec_writer__add_source(w, &in[i]), 0);
		assert_int_equal(rawrec_writer__add(w, &samples[i]), 0);
	}
	assert_int_equal(rawrec_writer__close(w, &end_in), 0);
	rawrec_writer__free(w);
	assert_int_equal(rawrec_reader__open(path, &r, err, sizeof(err)), 0);
	while ((rc = rawrec_reader__next(r, &s, err, sizeof(err))) > 0)
		;
	if (rc)
		fail_msg("%s", err);
	assert_non_null(rawrec_reader__end(r));
	got = rawrec_reader__sources(r);
	assert_int_equal(got->n, 3);
	for (size_t i = 0; i < 3; i++) {
		uint32_t k = out_sources__find(got, in[i].path);

		assert_int_equal(k, i);
		assert_int_equal(got->v[k].flags, in[i].flags);
		assert_int_equal(got->v[k].mtime_ns, in[i].mtime_ns);
		assert_int_equal(got->v[k].len, in[i].len);
		if (in[i].text)
			assert_memory_equal(got->v[k].text, in[i].text, in[i].len + 1);
		else
			assert_null(got->v[k].text);
	}
	assert_int_equal(out_sources__find(got, "/app/b.py"), OUT_NONE);
	rawrec_reader__free(r);
	unlink(path);
	free(path);
}

static void test_foreign_files(void **state)
{
	char *path = tmp_path(".pyprof"), *pb = tmp_path(".pb.gz"), err[512] = "";
	struct rawrec_reader *r = NULL;
	struct output *o = NULL;
	struct outcome oc;
	gzFile gz;

	(void)state;
	spill(path, "", 0);
	oc = read_rec(path);
	assert_int_equal(oc.open_rc, -ENODATA);
	assert_non_null(strstr(oc.err, "empty"));
	assert_non_null(strstr(oc.err, path));

	spill(path, "import os\nprint(os.getpid())\n", 29);
	oc = read_rec(path);
	assert_int_equal(oc.open_rc, -EPROTO);
	assert_non_null(strstr(oc.err, "not a pyprof-bpf raw recording"));
	spill(path, "x", 1);
	assert_int_equal(read_rec(path).open_rc, -EPROTO);
	spill(path, "\x1f", 1);		/* the first byte of gzip: a cut file */
	assert_int_equal(read_rec(path).open_rc, -ENODATA);

	gz = gzopen(path, "wb");
	assert_non_null(gz);
	assert_true(gzputs(gz, "some other compressed text, long enough") > 0);
	assert_int_equal(gzclose(gz), Z_OK);
	oc = read_rec(path);
	assert_int_equal(oc.open_rc, -EPROTO);
	assert_non_null(strstr(oc.err, "gzip-compressed"));

	/* Another of our own formats: pprof, gzipped protobuf. */
	assert_int_equal(output__new(NULL, pb, NULL, &o, err, sizeof(err)), 0);
	for (size_t i = 0; i < NSAMPLES; i++)
		assert_int_equal(output__add(o, &samples[i]), 0);
	assert_int_equal(output__finish(o), 0);
	output__free(o);
	assert_int_equal(read_rec(pb).open_rc, -EPROTO);

	assert_int_equal(rawrec_reader__open("/nonexistent/rec.pyprof", &r, err, sizeof(err)),
			 -ENOENT);
	assert_null(r);
	assert_non_null(strstr(err, "/nonexistent/rec.pyprof"));
	assert_int_equal(rawrec_reader__open("/tmp", &r, err, sizeof(err)), -EISDIR);
	assert_null(r);
	rawrec_reader__free(NULL);
	rawrec_writer__free(NULL);
	unlink(path);
	unlink(pb);
	free(path);
	free(pb);
}

static void test_write_errors(void **state)
{
	struct rawrec_writer *w = NULL;
	char err[512] = "", *big, *path = tmp_path(".pyprof");
	struct py_sym f;
	struct out_sample s;
	int rc = 0;

	(void)state;
	assert_int_equal(rawrec_writer__open("/nonexistent/x.pyprof", &info, &w, err,
					     sizeof(err)), -ENOENT);
	assert_null(w);
	assert_non_null(strstr(err, "cannot create /nonexistent/x.pyprof"));

	/* A full disk shows by the flush at the latest, and stays. */
	assert_int_equal(rawrec_writer__open("/dev/full", &info, &w, err, sizeof(err)), 0);
	for (int k = 0; k < 2000 && !rc; k++)
		for (size_t i = 0; i < NSAMPLES && !rc; i++)
			rc = rawrec_writer__add(w, &samples[i]);
	if (!rc)
		rc = rawrec_writer__close(w, &end_in);
	else
		assert_int_equal(rawrec_writer__add(w, &samples[0]), rc);
	assert_int_equal(rc, -ENOSPC);
	rawrec_writer__free(w);
	w = NULL;

	/* A string longer than a record: refused, the file stays readable. */
	big = malloc(RAWREC_MAX_RECORD + 2);
	assert_non_null(big);
	memset(big, 'b', RAWREC_MAX_RECORD + 1);
	big[RAWREC_MAX_RECORD + 1] = '\0';
	f = (struct py_sym){ big, "/x.py", 1, 1 };
	s = samples[0];
	s.nframes = 1;
	s.frames = &f;
	assert_int_equal(rawrec_writer__open(path, &info, &w, err, sizeof(err)), 0);
	assert_int_equal(rawrec_writer__add(w, &samples[0]), 0);
	assert_int_equal(rawrec_writer__add(w, &s), -E2BIG);
	assert_int_equal(rawrec_writer__add(w, &samples[1]), 0);
	assert_int_equal(rawrec_writer__close(w, &end_in), 0);
	assert_int_equal(rawrec_writer__close(w, &end_in), -EINVAL);
	assert_int_equal(rawrec_writer__add(w, &samples[1]), -EINVAL);
	rawrec_writer__free(w);
	{
		struct outcome o = read_rec(path);

		assert_int_equal(o.rc, 0);
		assert_int_equal(o.n, 2);
		assert_true(o.complete);
	}
	/* Killed: never closed. */
	assert_int_equal(rawrec_writer__open(path, &info, &w, err, sizeof(err)), 0);
	assert_int_equal(rawrec_writer__add(w, &samples[0]), 0);
	rawrec_writer__free(w);
	{
		struct outcome o = read_rec(path);

		assert_int_equal(o.rc, 0);
		assert_false(o.complete);
	}
	free(big);
	unlink(path);
	free(path);
}

static size_t mallocs;

static void count_malloc(const volatile void *p, size_t n)
{
	(void)p;
	(void)n;
	mallocs++;
}

static void ignore_free(const volatile void *p)
{
	(void)p;
}

/* Once strings and frames are known, neither side allocates per sample. */
static void test_no_alloc_per_sample(void **state)
{
	char *path = tmp_path(".pyprof"), err[512] = "";
	struct rawrec_writer *w = NULL;
	struct rawrec_reader *r = NULL;
	struct out_sample s;
	size_t n = 0;

	(void)state;
	if (!__sanitizer_install_malloc_and_free_hooks)
		fail_msg("needs the sanitizer runtime: run it with `make unit`");
	assert_int_equal(rawrec_writer__open(path, &info, &w, err, sizeof(err)), 0);
	for (size_t i = 0; i < NSAMPLES; i++)
		assert_int_equal(rawrec_writer__add(w, &samples[i]), 0);
	mallocs = 0;
	__sanitizer_install_malloc_and_free_hooks(count_malloc, ignore_free);
	for (int k = 0; k < 50; k++) {
		for (size_t i = 0; i < NSAMPLES; i++) {
			s = samples[i];
			s.ts_ns += (uint64_t)(k + 1) * 100000000000ull;	/* flushes too */
			assert_int_equal(rawrec_writer__add(w, &s), 0);
		}
	}
	__sanitizer_install_malloc_and_free_hooks(NULL, NULL);
	assert_int_equal(mallocs, 0);
	assert_int_equal(rawrec_writer__close(w, NULL), 0);
	rawrec_writer__free(w);

	assert_int_equal(rawrec_reader__open(path, &r, err, sizeof(err)), 0);
	for (; n < NSAMPLES; n++)
		assert_int_equal(rawrec_reader__next(r, &s, err, sizeof(err)), 1);
	mallocs = 0;
	__sanitizer_install_malloc_and_free_hooks(count_malloc, ignore_free);
	while (rawrec_reader__next(r, &s, err, sizeof(err)) > 0)
		n++;
	__sanitizer_install_malloc_and_free_hooks(NULL, NULL);
	assert_int_equal(mallocs, 0);
	assert_int_equal(n, 51 * NSAMPLES);
	assert_non_null(rawrec_reader__end(r));
	rawrec_reader__free(r);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_same_output_bytes),
		cmocka_unit_test(test_truncated_every_length),
		cmocka_unit_test(test_truncated_records),
		cmocka_unit_test(test_corrupt_every_byte),
		cmocka_unit_test(test_corrupt_records),
		cmocka_unit_test(test_corrupt_streams),
		cmocka_unit_test(test_sources),
		cmocka_unit_test(test_foreign_files),
		cmocka_unit_test(test_write_errors),
		cmocka_unit_test(test_no_alloc_per_sample),
	};

	make_samples();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
