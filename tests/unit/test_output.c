// SPDX-License-Identifier: MIT
/*
 * test_output.c - every output writer fed with synthetic samples: exact
 * perf-script and collapsed text, the naming rule's escapes, status frames,
 * JSON validity (speedscope, flame graph data), the pprof protobuf decoded by
 * hand, the top table, empty profiles, deep and repeated stacks (no growth),
 * format selection, and write errors. The unchanged-frames hint: which
 * hints are refused, and over random recordings that every format writes
 * the same bytes with true hints as with none.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>
#include "output/json_writer.h"
#include "output/internal.h"		/* white box: the model's tables */
#include "types/raw_sample.h"

/* ---- helpers ---- */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	assert_non_null(f);
	do {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static char *tmp_path(const char *suffix)
{
	char tmpl[] = "/tmp/test_output_XXXXXX";
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

/* Write @n samples with @format (and @opts) to a temporary file; return its bytes. */
static char *run_fmt(const char *format, const struct output_opts *opts,
		     const struct out_sample *s, size_t n, size_t *len)
{
	char err[256] = "", *path = tmp_path(".out"), *buf;
	struct output *o = NULL;

	assert_int_equal(output__new(format, path, opts, &o, err, sizeof(err)), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(output__add(o, &s[i]), 0);
	assert_int_equal(output__finish(o), 0);
	output__free(o);
	buf = slurp(path, len);
	unlink(path);
	free(path);
	return buf;
}

static const struct py_sym work_frames[] = {	/* innermost first */
	{ "Worker.hot", "/app/work.py", 42, 40 },
	{ "Worker.run", "/app/work.py", 30, 28 },
	{ "<module>", "/app/work.py", 77, 1 },
};

static struct out_sample sample(pid_t tid, uint64_t ts, uint32_t status,
				const struct py_sym *frames, uint32_t n)
{
	return (struct out_sample){
		.comm = "python3", .pid = 1234, .tid = tid, .thread_name = "MainThread",
		.cpu = 1, .ts_ns = ts, .period_ns = 10101010, .status = status,
		.nframes = n, .frames = frames,
	};
}

/* ---- a small JSON syntax checker ---- */

struct jp {
	const char *p;
	int depth;
};

static int j_value(struct jp *j);

static void j_ws(struct jp *j)
{
	while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
		j->p++;
}

static int j_string(struct jp *j)
{
	if (*j->p++ != '"')
		return -1;
	while (*j->p != '"') {
		unsigned char c = (unsigned char)*j->p;

		if (!c || c < 0x20)
			return -1;
		if (c == '\\') {
			j->p++;
			if (*j->p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i])
						return -1;
				j->p += 5;
				continue;
			}
			if (!*j->p || !strchr("\"\\/bfnrt", *j->p))
				return -1;
		}
		j->p++;
	}
	j->p++;
	return 0;
}

static int j_value(struct jp *j)
{
	if (++j->depth > 64)
		return -1;
	j_ws(j);
	if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		int obj = *j->p == '{';

		j->p++;
		j_ws(j);
		if (*j->p == close) {
			j->p++;
			j->depth--;
			return 0;
		}
		for (;;) {
			if (obj) {
				j_ws(j);
				if (j_string(j))
					return -1;
				j_ws(j);
				if (*j->p++ != ':')
					return -1;
			}
			if (j_value(j))
				return -1;
			j_ws(j);
			if (*j->p == ',') {
				j->p++;
				continue;
			}
			if (*j->p++ != close)
				return -1;
			break;
		}
	} else if (*j->p == '"') {
		if (j_string(j))
			return -1;
	} else if (!strncmp(j->p, "null", 4) || !strncmp(j->p, "true", 4)) {
		j->p += 4;
	} else if (!strncmp(j->p, "false", 5)) {
		j->p += 5;
	} else {
		const char *s = j->p;

		if (*j->p == '-')
			j->p++;
		while ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' ||
		       *j->p == 'E' || *j->p == '+' || *j->p == '-')
			j->p++;
		if (j->p == s)
			return -1;
	}
	j->depth--;
	return 0;
}

static int json_valid(const char *s)
{
	struct jp j = { s, 0 };

	if (j_value(&j))
		return 0;
	j_ws(&j);
	return *j.p == '\0';
}

/* ---- a small protobuf reader for the pprof test ---- */

struct pb {
	const uint8_t *p, *end;
};

static int pb_varint(struct pb *b, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return -1;
		*v |= (uint64_t)(*b->p & 0x7f) << shift;
		if (!(*b->p++ & 0x80))
			return 0;
	}
	return -1;
}

/* Next field: its number, wire type, and a varint value or a sub-buffer. */
static int pb_next(struct pb *b, uint32_t *field, uint32_t *wt, uint64_t *v, struct pb *sub)
{
	uint64_t key;

	if (b->p >= b->end || pb_varint(b, &key))
		return -1;
	*field = (uint32_t)(key >> 3);
	*wt = key & 7;
	if (*wt == 0)
		return pb_varint(b, v);
	if (*wt != 2 || pb_varint(b, v) || *v > (uint64_t)(b->end - b->p))
		return -1;
	sub->p = b->p;
	sub->end = b->p + *v;
	b->p += *v;
	return 0;
}

static uint8_t *gunzip(const char *in, size_t inlen, size_t *outlen)
{
	z_stream zs = { 0 };
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);
	int r;

	assert_non_null(out);
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)inlen;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	r = inflate(&zs, Z_FINISH);
	assert_int_equal(r, Z_STREAM_END);
	*outlen = zs.total_out;
	inflateEnd(&zs);
	return out;
}

struct pprof_sum {
	uint64_t nsamples, count, weight, nloc, nfn, nstr, nlabels;
	int str0_empty;
	char strs[64][64];
};

static void pprof_read(const char *gz, size_t len, struct pprof_sum *r)
{
	size_t n;
	uint8_t *raw = gunzip(gz, len, &n);
	struct pb b = { raw, raw + n }, sub, sub2;
	uint32_t field, wt, f2, wt2;
	uint64_t v, v2;

	memset(r, 0, sizeof(*r));
	while (b.p < b.end) {
		assert_int_equal(pb_next(&b, &field, &wt, &v, &sub), 0);
		if (field == 2) {
			r->nsamples++;
			while (sub.p < sub.end) {
				assert_int_equal(pb_next(&sub, &f2, &wt2, &v2, &sub2), 0);
				if (f2 == 2) {	/* packed values: count, weight */
					uint64_t c, w;

					assert_int_equal(pb_varint(&sub2, &c), 0);
					assert_int_equal(pb_varint(&sub2, &w), 0);
					r->count += c;
					r->weight += w;
				} else if (f2 == 3) {
					r->nlabels++;
				}
			}
		} else if (field == 4) {
			r->nloc++;
		} else if (field == 5) {
			r->nfn++;
		} else if (field == 6) {
			if (r->nstr == 0)
				r->str0_empty = v == 0;
			if (r->nstr < 64)
				snprintf(r->strs[r->nstr], sizeof(r->strs[0]), "%.*s", (int)v,
					 (const char *)sub.p);
			r->nstr++;
		}
	}
	free(raw);
}

static int pprof_has_str(const struct pprof_sum *r, const char *s)
{
	for (uint64_t i = 0; i < r->nstr && i < 64; i++)
		if (!strcmp(r->strs[i], s))
			return 1;
	return 0;
}

/* ---- tests ---- */

static void test_selection(void **state)
{
	static const struct {
		const char *name, *path, *want;
	} cases[] = {
		{ "perf-script", NULL, "perf-script" }, { "perf", NULL, "perf-script" },
		{ "PERF-SCRIPT", NULL, "perf-script" }, { "collapsed", NULL, "collapsed" },
		{ "folded", NULL, "collapsed" }, { "speedscope", NULL, "speedscope" },
		{ "pprof", NULL, "pprof" }, { "flamegraph", NULL, "flamegraph" },
		{ "html", NULL, "flamegraph" }, { "svg", NULL, "flamegraph" },
		{ "top", NULL, "top" }, { "pstats", NULL, "pstats" },
		{ "callgrind", NULL, "callgrind" }, { NULL, "x.pstats", "pstats" },
		{ NULL, "x.prof", "pstats" }, { NULL, "x.callgrind", "callgrind" },
		{ NULL, NULL, "perf-script" }, { NULL, "x.txt", "perf-script" },
		{ NULL, "x.perf", "perf-script" }, { NULL, "x.folded", "collapsed" },
		{ NULL, "x.collapsed", "collapsed" }, { NULL, "x.speedscope.json", "speedscope" },
		{ NULL, "X.JSON", "speedscope" }, { NULL, "x.pb.gz", "pprof" },
		{ NULL, "x.pprof", "pprof" }, { NULL, "x.html", "flamegraph" },
		{ NULL, "x.svg", "flamegraph" }, { NULL, "x.unknown", "perf-script" },
		{ NULL, "-", "perf-script" },
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct output *o = NULL;
		char *path = NULL;

		if (cases[i].path && strcmp(cases[i].path, "-"))
			path = tmp_path(cases[i].path);
		assert_int_equal(output__new(cases[i].name, path ? path : cases[i].path, NULL,
					     &o, err, sizeof(err)), 0);
		assert_string_equal(output__format(o), cases[i].want);
		output__free(o);	/* never finished: must still close and free */
		if (path) {
			unlink(path);
			free(path);
		}
	}
	assert_string_equal(output__format_for_path("a/b.speedscope.json"), "speedscope");
	assert_string_equal(output__format_for_path("a.pb.gz"), "pprof");
	/* valgrind's name, whatever follows; only as the file's own name */
	assert_string_equal(output__format_for_path("d/callgrind.out.123"), "callgrind");
	assert_string_equal(output__format_for_path("callgrind.out.x.txt"), "callgrind");
	assert_null(output__format_for_path("x.callgrind.out.1"));
	assert_null(output__format_for_path("a.gz"));
	assert_null(output__format_for_path(NULL));
	assert_null(output__format_for_path(".txt"));	/* nothing before the dot */
}

static void test_selection_errors(void **state)
{
	struct output *o = (struct output *)1;
	char err[256] = "";

	(void)state;
	assert_int_equal(output__new("flame", NULL, NULL, &o, err, sizeof(err)), -EINVAL);
	assert_null(o);
	assert_non_null(strstr(err, "\"flame\""));
	assert_non_null(strstr(err, output__format_names()));
	assert_non_null(strstr(err, "perf-script, collapsed, speedscope, pprof, otlp, flamegraph, "
				"pstats, callgrind, top"));
	assert_int_equal(output__new(NULL, "/nonexistent-dir/x.txt", NULL, &o, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-dir/x.txt"));
	output__free(NULL);
}

static void test_perf_exact(void **state)
{
	struct out_sample s[2] = {
		sample(1240, 5273112233999ull, SAMPLE_COMPLETE, work_frames, 3),
		sample(1241, 12000000ull, SAMPLE_COMPLETE, work_frames, 1),
	};
	char *out;

	(void)state;
	s[1].comm = "my prog;x";
	s[1].cpu = 12;
	s[1].period_ns = 0;
	out = run_fmt("perf-script", NULL, s, 2, NULL);
	assert_string_equal(out,
		"python3    1234/1240    [001]  5273.112233:   10101010 cpu-clock: \n"
		"\td9f7c12f3aa29242 py::Worker.hot:/app/work.py:42 (/app/work.py)\n"
		"\t4f685efb82854f2d py::Worker.run:/app/work.py:30 (/app/work.py)\n"
		"\tfb466166b2ffe417 py::<module>:/app/work.py:77 (/app/work.py)\n"
		"\n"
		/* time went backwards: printed as the previous time; period 0 -> 1 */
		"my_prog_x    1234/1241    [012]  5273.112233:          1 cpu-clock: \n"
		"\td9f7c12f3aa29242 py::Worker.hot:/app/work.py:42 (/app/work.py)\n"
		"\n");
	free(out);
}

/* --native --kernel: frames as perf script prints them, folded as
 * stackcollapse-perf.pl --kernel folds them, pprof's mappings. */
static const struct py_sym native_frames[] = {	/* innermost first */
	{ "deflate", "/usr/lib/libz.so.1", 0, 0 },
	{ "[unknown]", "/usr/lib/libz.so.1", 0, 0 },
	{ "__vdso_time", "[vdso]", 0, 0 },
	{ "Worker.hot", "/app/work.py", 42, 40 },
	{ "[unknown]", "", 0, 0 },
};
static const uint8_t native_kinds[] = {
	OUT_FRAME_NATIVE, OUT_FRAME_NATIVE, OUT_FRAME_NATIVE, OUT_FRAME_PYTHON, OUT_FRAME_NATIVE,
};
static const unsigned char libz_id[] = { 0xde, 0xad, 0xbe, 0xef };
static const struct out_addr native_addrs[] = {
	{ 0x7f0000001234, 0x34, 0x7f0000000000, 0x7f0000020000, 0x7f0000000000, libz_id, 4 },
	{ 0x7f0000005678, 0, 0x7f0000000000, 0x7f0000020000, 0x7f0000000000, libz_id, 4 },
	{ 0x7ffd00000a10, 0x10, 0x7ffd00000000, 0x7ffd00002000, 0x7ffd00000000, NULL, 0 },
	{ 0 },
	{ 0x1234, 0, 0, 0, 0, NULL, 0 },
};
static const struct out_leaf kernel_leaf[] = {	/* outermost first */
	{ OUT_FRAME_KERNEL, "vfs_read", 0xffffffff816b8aabull, 0xbb },
	{ OUT_FRAME_KERNEL, "read_zero", 0xffffffff81d33df7ull, 0x77 },
};

static void test_native_kernel(void **state)
{
	struct out_sample s = sample(1240, 5273112233999ull, SAMPLE_COMPLETE, native_frames, 5);
	char *out, *p, *data;
	size_t len;
	z_stream zs;
	unsigned char raw[8192];

	(void)state;
	s.kinds = native_kinds;
	s.addrs = native_addrs;
	s.leaf = kernel_leaf;
	s.nleaf = 2;
	out = run_fmt("perf-script", NULL, &s, 1, NULL);
	assert_string_equal(out,
		"python3    1234/1240    [001]  5273.112233:   10101010 cpu-clock: \n"
		"\tffffffff81d33df7 read_zero+0x77 ([kernel.kallsyms])\n"
		"\tffffffff816b8aab vfs_read+0xbb ([kernel.kallsyms])\n"
		"\t            1234 deflate+0x34 (/usr/lib/libz.so.1)\n"
		"\t            5678 [unknown] (/usr/lib/libz.so.1)\n"
		"\t             a10 __vdso_time+0x10 ([vdso])\n"
		"\td9f7c12f3aa29242 py::Worker.hot:/app/work.py:42 (/app/work.py)\n"
		"\t            1234 [unknown] ([unknown])\n"
		"\n");
	free(out);
	/* the same frames without addresses (an older raw recording): FNV-1a
	 * addresses, no offsets, whichever came first */
	{
		struct out_sample two[2] = { s, s };
		char *p2;

		two[1].addrs = NULL;
		two[1].ts_ns++;
		out = run_fmt("perf-script", NULL, two, 2, NULL);
		p2 = strstr(out, "\n\n") + 2;
		assert_non_null(strstr(out, "\t            1234 deflate+0x34 (/usr/lib/libz.so.1)\n"));
		assert_null(strstr(p2, "deflate+0x"));
		assert_non_null(strstr(p2, " deflate (/usr/lib/libz.so.1)\n"));
		free(out);
		two[0].addrs = NULL;
		two[1].addrs = native_addrs;
		out = run_fmt("perf-script", NULL, two, 2, NULL);
		p2 = strstr(out, "\n\n") + 2;
		assert_non_null(strstr(p2, "\t            1234 deflate+0x34 (/usr/lib/libz.so.1)\n"));
		free(out);
	}
	out = run_fmt("collapsed", NULL, &s, 1, NULL);
	assert_string_equal(out,
		"python3;[unknown];py::Worker.hot:/app/work.py:42;__vdso_time_[k];"
		"[libz.so.1];deflate;vfs_read_[k];read_zero_[k] 10101010\n");
	free(out);
	/* pprof: the libz mapping with its range and build id, a kernel one */
	out = run_fmt("pprof", NULL, &s, 1, &len);
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (unsigned char *)out;
	zs.avail_in = (uInt)len;
	zs.next_out = raw;
	zs.avail_out = sizeof(raw) - 1;
	assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
	raw[zs.total_out] = 0;
	data = (char *)raw;
	for (p = data; p < data + zs.total_out; p++)
		if (!*p)
			*p = ' ';
	assert_non_null(strstr(data, "/usr/lib/libz.so.1"));
	assert_non_null(strstr(data, "deadbeef"));
	assert_non_null(strstr(data, "[kernel.kallsyms]"));
	inflateEnd(&zs);
	free(out);
}

static void test_perf_escapes(void **state)
{
	static const struct py_sym fr[] = {
		{ "f(x);y \"q\" 'a'->b:c%", "/tmp/my dir/\xc3\xa9 (1).py", 5, 3 },
		{ "tab\tnl\n\xe2\x80\xa8nbsp\xc2\xa0" "bad\xff", "", -1, -1 },
		{ "\xe5\x87\xbd\xe6\x95\xb0-x>y", "/a:b->c.py", 7, 7 },
	};
	struct out_sample s = sample(7, 1000, SAMPLE_COMPLETE, fr, 3);
	char *out;

	(void)state;
	/* collapsed: only ';', '%', controls, line separators, bad UTF-8 and
	 * the qualname's ':' encoded; spaces, quotes, "->" as written */
	out = run_fmt("collapsed", NULL, &s, 1, NULL);
	assert_string_equal(out,
		"python3;"
		"py::\xe5\x87\xbd\xe6\x95\xb0-x>y:/a:b->c.py:7;"
		"py::tab%09nl%0A%E2%80%A8nbsp\xc2\xa0" "bad%FF::0;"
		"py::f(x)%3By \"q\" 'a'->b%3Ac%25:"
		"/tmp/my dir/\xc3\xa9 (1).py:5"
		" 10101010\n");
	free(out);
	/* perf-script: what any of its readers trips on */
	out = run_fmt("perf-script", NULL, &s, 1, NULL);
	assert_non_null(strstr(out, " py::\xe5\x87\xbd\xe6\x95\xb0-x>y:/a:b-%3Ec.py:7 "));
	assert_non_null(strstr(out, " py::tab%09nl%0A%E2%80%A8nbsp%C2%A0bad%FF::0 "));
	assert_non_null(strstr(out, " py::f%28x%29%3By%20%22q%22%20%27a%27-%3Eb%3Ac%25:"
				    "/tmp/my%20dir/\xc3\xa9%20%281%29.py:5 "));
	/* The dso is the escaped file, "[python]" when there is none. */
	assert_non_null(strstr(out, ":5 (/tmp/my%20dir/\xc3\xa9%20%281%29.py)\n"));
	assert_non_null(strstr(out, "bad%FF::0 ([python])\n"));
	free(out);
}

static void test_status_frames(void **state)
{
	struct out_sample s[] = {
		sample(1, 1000, SAMPLE_NO_PYSTATE, NULL, 0),
		sample(1, 2000, SAMPLE_TRUNCATED, work_frames, 2),
		sample(1, 3000, SAMPLE_READ_FAULT, work_frames, 1),
		sample(1, 4000, SAMPLE_COMPLETE, NULL, 0),
		sample(1, 5000, 9, NULL, 0),
	};
	char *out;

	(void)state;
	out = run_fmt("collapsed", NULL, s, 5, NULL);
	assert_string_equal(out,
		"python3;[no-python-frames] 10101010\n"
		"python3;[no-python-state] 10101010\n"
		"python3;[read-fault];py::Worker.hot:/app/work.py:42 10101010\n"
		"python3;[status-9] 10101010\n"
		"python3;[truncated];py::Worker.run:/app/work.py:30;"
		"py::Worker.hot:/app/work.py:42 10101010\n");
	free(out);
	out = run_fmt("perf-script", NULL, s, 5, NULL);
	assert_non_null(strstr(out, "cpu-clock: \n\t461153c7396454f7 [no-python-state] "
				    "([pyprof-bpf])\n\n"));
	assert_non_null(strstr(out, "/app/work.py:30 (/app/work.py)\n"
				    "\td4a7a24da4381edd [truncated] ([pyprof-bpf])\n\n"));
	/* Five samples, five empty lines, the last one at the very end. */
	{
		int blank = 0;

		for (char *p = out; (p = strstr(p, "\n\n")); p += 2)
			blank++;
		assert_int_equal(blank, 5);
		assert_int_equal(out[strlen(out) - 1], '\n');
		assert_int_equal(out[strlen(out) - 2], '\n');
	}
	free(out);
}

static void test_collapsed_roots_and_lines(void **state)
{
	struct py_sym other[3];
	struct out_sample s[4];
	struct output_opts opts = { 0 };
	char *out;

	(void)state;
	memcpy(other, work_frames, sizeof(other));
	other[0].line = 43;	/* same function, another line */
	s[0] = sample(1240, 1000, SAMPLE_COMPLETE, work_frames, 3);
	s[1] = sample(1241, 1000, SAMPLE_COMPLETE, work_frames, 3);
	s[2] = sample(1241, 2000, SAMPLE_COMPLETE, other, 3);
	s[3] = sample(1241, 3000, SAMPLE_COMPLETE, other, 3);
	s[1].thread_name = "Thread-1 (worker)";
	s[2].thread_name = NULL;	/* keeps the name it had */
	s[3].thread_name = NULL;
	out = run_fmt("collapsed", &opts, s, 4, NULL);
	assert_string_equal(out,
		"python3;py::<module>:/app/work.py:77;py::Worker.run:/app/work.py:30;"
		"py::Worker.hot:/app/work.py:42 20202020\n"
		"python3;py::<module>:/app/work.py:77;py::Worker.run:/app/work.py:30;"
		"py::Worker.hot:/app/work.py:43 20202020\n");
	free(out);
	opts.no_lines = 1;
	out = run_fmt("collapsed", &opts, s, 4, NULL);
	assert_string_equal(out,
		"python3;py::<module>:/app/work.py:1;py::Worker.run:/app/work.py:28;"
		"py::Worker.hot:/app/work.py:40 40404040\n");
	free(out);
	opts.per_thread_roots = 1;
	opts.comm_root = 1;
	out = run_fmt("collapsed", &opts, s, 4, NULL);
	assert_string_equal(out,
		"python3;[python3:1234];[MainThread:1240];py::<module>:/app/work.py:1;"
		"py::Worker.run:/app/work.py:28;py::Worker.hot:/app/work.py:40 10101010\n"
		"python3;[python3:1234];[Thread-1 (worker):1241];py::<module>:/app/work.py:1;"
		"py::Worker.run:/app/work.py:28;py::Worker.hot:/app/work.py:40 30303030\n");
	free(out);
}

static void test_speedscope(void **state)
{
	static const struct py_sym fr[] = {
		{ "uni\xc3\xa9\xe2\x80\xa8 \"q\" \\ <\x01>", "/x\xff.py", 1, 1 },
	};
	struct out_sample s[3] = {
		sample(1240, 1000, SAMPLE_COMPLETE, work_frames, 3),
		sample(1241, 1000, SAMPLE_COMPLETE, fr, 1),
		sample(1241, 2000, SAMPLE_NO_PYSTATE, NULL, 0),
	};
	char *out;

	(void)state;
	out = run_fmt("speedscope", NULL, s, 3, NULL);
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"$schema\":"
				    "\"https://www.speedscope.app/file-format-schema.json\""));
	assert_non_null(strstr(out, "{\"name\":\"Worker.hot\",\"file\":\"/app/work.py\","
				    "\"line\":42}"));
	assert_non_null(strstr(out, "\"uni\xc3\xa9\xe2\x80\xa8 \\\"q\\\" \\\\ <\\u0001>\""));
	assert_non_null(strstr(out, "\"file\":\"/x\\ufffd.py\""));
	assert_non_null(strstr(out, "\"name\":\"python3 pid 1234 tid 1240 (MainThread)\""));
	assert_non_null(strstr(out, "\"samples\":[[0,1,2]],\n\"weights\":[10101010]"));
	assert_non_null(strstr(out, "\"samples\":[[3],[4]],\n\"weights\":[10101010,10101010]"));
	assert_non_null(strstr(out, "\"unit\":\"nanoseconds\""));
	free(out);
}

static void test_pprof(void **state)
{
	struct out_sample s[4] = {
		sample(1240, 1000, SAMPLE_COMPLETE, work_frames, 3),
		sample(1240, 2000, SAMPLE_COMPLETE, work_frames, 3),
		sample(1241, 3000, SAMPLE_COMPLETE, work_frames, 2),
		sample(1241, 4000, SAMPLE_TRUNCATED, work_frames, 1),
	};
	struct pprof_sum r;
	size_t len;
	char *out;

	(void)state;
	s[3].period_ns = 5;
	out = run_fmt("pprof", NULL, s, 4, &len);
	assert_true(len > 18);
	assert_int_equal((unsigned char)out[0], 0x1f);
	assert_int_equal((unsigned char)out[1], 0x8b);
	pprof_read(out, len, &r);
	assert_true(r.str0_empty);
	assert_int_equal(r.nsamples, 3);		/* distinct (stack, thread) */
	assert_int_equal(r.count, 4);
	assert_int_equal(r.weight, 3 * 10101010ull + 5);
	assert_int_equal(r.nloc, 4);			/* 3 Python frames + [truncated] */
	assert_int_equal(r.nfn, 4);
	assert_int_equal(r.nlabels, 9);			/* pid, thread_id, thread_name */
	assert_true(pprof_has_str(&r, "samples") && pprof_has_str(&r, "count"));
	assert_true(pprof_has_str(&r, "cpu") && pprof_has_str(&r, "nanoseconds"));
	assert_true(pprof_has_str(&r, "Worker.hot") && pprof_has_str(&r, "/app/work.py"));
	assert_true(pprof_has_str(&r, "[truncated]") && pprof_has_str(&r, "MainThread"));
	free(out);
}

static void test_flamegraph(void **state)
{
	static const struct py_sym fr[] = {
		{ "evil</script><script>alert(1)</script>&amp;", "/x]]>y.py", 1, 1 },
	};
	struct out_sample s[2] = {
		sample(1240, 1000, SAMPLE_COMPLETE, work_frames, 3),
		sample(1241, 2000, SAMPLE_COMPLETE, fr, 1),
	};
	struct output_opts opts = { .title = "t<i>tle & \"x\"" };
	char *out, *p, *data, *end;
	int n = 0;

	(void)state;
	out = run_fmt("flamegraph", &opts, s, 2, NULL);
	assert_int_equal(strncmp(out, "<!DOCTYPE html>", 15), 0);
	assert_non_null(strstr(out, "<title>t&lt;i&gt;tle &amp; &quot;x&quot;</title>"));
	for (p = out; (p = strstr(p, "</script>")); p++)
		n++;
	assert_int_equal(n, 2);		/* the data's and the code's: nothing from names */
	data = strstr(out, "<script type=\"application/json\" id=\"fg-data\">");
	assert_non_null(data);
	data += strlen("<script type=\"application/json\" id=\"fg-data\">");
	end = strstr(data, "</script>");
	*end = '\0';
	assert_true(json_valid(data));
	assert_non_null(strstr(data, "\"evil\\u003c/script\\u003e\\u003cscript\\u003e"));
	assert_non_null(strstr(data, "[\"all\",\"\",0,16]"));
	free(out);

	/* SVG: XML with one CDATA section, no "]]>" from the data. */
	{
		char *path = tmp_path(".svg"), err[256], *svg;
		struct output *o = NULL;

		assert_int_equal(output__new(NULL, path, NULL, &o, err, sizeof(err)), 0);
		assert_int_equal(output__add(o, &s[0]), 0);
		assert_int_equal(output__add(o, &s[1]), 0);
		assert_int_equal(output__finish(o), 0);
		output__free(o);
		svg = slurp(path, NULL);
		assert_int_equal(strncmp(svg, "<?xml", 5), 0);
		assert_non_null(strstr(svg, "<svg "));
		n = 0;
		for (p = svg; (p = strstr(p, "]]>")); p++)
			n++;
		assert_int_equal(n, 1);
		assert_null(strstr(svg, "<script><"));
		assert_non_null(strstr(svg, "/x]]\\u003ey.py"));
		free(svg);
		unlink(path);
		free(path);
	}
}

static void test_top(void **state)
{
	static const struct py_sym rec[] = {	/* recursion counts once in total */
		{ "fib", "/app/f.py", 3, 1 }, { "fib", "/app/f.py", 4, 1 },
		{ "fib", "/app/f.py", 4, 1 }, { "main\x1b[2J", "/app/f.py", 9, 8 },
	};
	struct out_sample s[5];
	struct output_opts opts = { 0 };
	char *out;

	(void)state;
	for (int i = 0; i < 3; i++)
		s[i] = sample(1, 1000 * i, SAMPLE_COMPLETE, rec, 4);
	s[3] = sample(1, 5000, SAMPLE_COMPLETE, rec + 3, 1);
	s[4] = sample(2, 6000, SAMPLE_NO_PYSTATE, NULL, 0);
	out = run_fmt("top", &opts, s, 5, NULL);
	assert_string_equal(out,
		"5 samples in 2 threads, 0.051 s of CPU\n"
		"  OWN    OWN% TOTAL  TOTAL%  FUNCTION (FILE:LINE)\n"
		"    3  60.00%     3  60.00%  fib (/app/f.py:1)\n"
		"    1  20.00%     4  80.00%  main?[2J (/app/f.py:8)\n"
		"    1  20.00%     1  20.00%  [no-python-state]\n");
	free(out);
	opts.top_rows = 1;
	out = run_fmt("top", &opts, s, 5, NULL);
	assert_non_null(strstr(out, "fib (/app/f.py:1)\n(2 more functions)\n"));
	free(out);
}

static void test_empty(void **state)
{
	static const char *const fmts[] = { "perf-script", "collapsed", "speedscope", "pprof",
					    "flamegraph", "svg", "top", "pstats", "callgrind" };
	struct pprof_sum r;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		char *out = run_fmt(fmts[i], NULL, NULL, 0, &len);

		if (!strcmp(fmts[i], "perf-script") || !strcmp(fmts[i], "collapsed"))
			assert_int_equal(len, 0);
		else if (!strcmp(fmts[i], "speedscope"))
			assert_true(json_valid(out));
		else if (!strcmp(fmts[i], "pprof")) {
			pprof_read(out, len, &r);
			assert_int_equal(r.nsamples, 0);
			assert_true(r.str0_empty);
		} else if (!strcmp(fmts[i], "top"))
			assert_non_null(strstr(out, "(no samples)"));
		else if (!strcmp(fmts[i], "pstats"))	/* marshal's empty dict */
			assert_true(len == 2 && !memcmp(out, "{0", 2));
		else if (!strcmp(fmts[i], "callgrind"))
			assert_non_null(strstr(out, "events: cpu_ns samples\nsummary: 0 0\n"));
		else
			assert_true(len > 100);
		free(out);
	}
}

/* A 5,000-deep stack, added 200 times to every format: no table grows after the first. */
static void test_deep_repeated(void **state)
{
	static const char *const fmts[] = { "perf-script", "collapsed", "speedscope", "pprof",
					    "flamegraph", "top" };
	enum { DEPTH = 5000 };
	struct py_sym *fr = calloc(DEPTH, sizeof(*fr));
	char names[64][16];

	(void)state;
	assert_non_null(fr);
	for (int i = 0; i < 64; i++)
		snprintf(names[i], sizeof(names[i]), "f%d", i);
	for (int i = 0; i < DEPTH; i++)
		fr[i] = (struct py_sym){ names[i % 64], "/deep.py", i % 64 + 1, i % 64 + 1 };
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		char err[256], *path = tmp_path(".out");
		struct output *o = NULL;
		struct out_sample s = sample(1, 0, SAMPLE_COMPLETE, fr, DEPTH);
		uint32_t nframes, nnodes, naggs, nstrs;

		assert_int_equal(output__new(fmts[k], path, NULL, &o, err, sizeof(err)), 0);
		assert_int_equal(output__add(o, &s), 0);
		nframes = o->m.nframes;
		nnodes = o->m.nnodes;
		naggs = o->m.naggs;
		nstrs = o->m.strs.n;
		for (int i = 0; i < 200; i++) {
			s.ts_ns += 1000;
			assert_int_equal(output__add(o, &s), 0);
		}
		assert_int_equal(o->m.nframes, nframes);
		assert_int_equal(o->m.nnodes, nnodes);
		assert_int_equal(o->m.naggs, naggs);
		assert_int_equal(o->m.strs.n, nstrs);
		assert_int_equal(o->m.total_count, 201);
		assert_int_equal(nframes, 64);
		if (strcmp(fmts[k], "perf-script"))
			assert_int_equal(nnodes, DEPTH);
		assert_int_equal(output__finish(o), 0);
		assert_int_equal(output__add(o, &s), -EINVAL);
		assert_int_equal(output__finish(o), -EINVAL);
		output__free(o);
		unlink(path);
		free(path);
	}
	free(fr);
}

/* ---- unchanged outer frames (out_sample.unchanged): reuse never shows ---- */

static int str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static int psym_eq(const struct py_sym *a, const struct py_sym *b)
{
	return str_eq(a->function, b->function) && str_eq(a->file, b->file) &&
	       a->line == b->line && a->firstlineno == b->firstlineno;
}

/* How many outermost frames of @s are, symbol for symbol, those of @prev. */
static uint32_t outer_equal(const struct out_sample *s, const struct out_sample *prev)
{
	uint32_t u = 0;

	while (u < s->nframes && u < prev->nframes &&
	       psym_eq(&s->frames[s->nframes - 1 - u], &prev->frames[prev->nframes - 1 - u]))
		u++;
	return u;
}

/* Set every sample's hint: its outer frames equal to the previous sample
 * of its (pid, tid), whatever the statuses (the output must check those). */
static void set_hints(struct out_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		s[i].unchanged = 0;
		for (size_t j = i; j-- > 0;) {
			if (s[j].pid == s[i].pid && s[j].tid == s[i].tid) {
				s[i].unchanged = outer_equal(&s[i], &s[j]);
				break;
			}
		}
	}
}

static const char *const reuse_fmts[] = { "perf-script", "collapsed", "speedscope", "pprof",
					  "flamegraph", "svg", "top" };

/* @s as given and with no hint at all give the same bytes, in every format. */
static void assert_hints_invisible(const struct output_opts *opts, const struct out_sample *s,
				   size_t n)
{
	struct out_sample *plain = malloc((n ? n : 1) * sizeof(*plain));

	assert_non_null(plain);
	memcpy(plain, s, n * sizeof(*s));
	for (size_t i = 0; i < n; i++)
		plain[i].unchanged = 0;
	for (size_t k = 0; k < sizeof(reuse_fmts) / sizeof(reuse_fmts[0]); k++) {
		size_t la, lb, at = 0;
		char *a = run_fmt(reuse_fmts[k], opts, s, n, &la);
		char *b = run_fmt(reuse_fmts[k], opts, plain, n, &lb);

		while (at < la && at < lb && a[at] == b[at])
			at++;
		if (la != lb || at != la)
			fail_msg("%s (threads %d, comm root %d, no lines %d): with hints "
				 "%zu bytes, without %zu, first difference at %zu",
				 reuse_fmts[k], opts->per_thread_roots, opts->comm_root,
				 opts->no_lines, la, lb, at);
		free(a);
		free(b);
	}
	free(plain);
}

/* A false hint the output trusts shows in what it writes, which is what
 * makes the byte-for-byte comparisons mean something; those it must refuse
 * do not. */
static void test_unchanged_refused(void **state)
{
	static const struct py_sym other[] = {	/* innermost first */
		{ "other.leaf", "/app/o.py", 5, 4 },
		{ "other.mid", "/app/o.py", 9, 8 },
		{ "other.main", "/app/o.py", 2, 1 },
	};
	const struct py_sym spliced[] = { other[0], work_frames[1], work_frames[2] };
	struct output_opts opts = { .per_thread_roots = 1, .comm_root = 1 };
	struct out_sample s[3], t[2];
	char *a, *b;

	(void)state;
	s[0] = sample(1, 1000, SAMPLE_COMPLETE, work_frames, 3);
	s[1] = sample(1, 2000, SAMPLE_COMPLETE, other, 3);
	s[1].unchanged = 2;	/* false: the output believes it */
	t[0] = s[0];
	t[1] = sample(1, 2000, SAMPLE_COMPLETE, spliced, 3);
	a = run_fmt("collapsed", &opts, s, 2, NULL);
	b = run_fmt("collapsed", &opts, t, 2, NULL);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, "Worker.run:/app/work.py:30;py::other.leaf"));
	free(a);
	free(b);

	for (int c = 0; c < 10; c++) {
		s[0] = sample(1, 1000, SAMPLE_COMPLETE, work_frames, 3);
		s[1] = sample(1, 2000, SAMPLE_COMPLETE, other, 3);
		s[1].unchanged = 2;
		switch (c) {
		case 0:		/* the previous sample was not a whole stack */
			s[0].status = SAMPLE_TRUNCATED;
			break;
		case 1:		/* this one is not */
			s[1].status = SAMPLE_TRUNCATED;
			break;
		case 2:
			s[1].status = SAMPLE_READ_FAULT;
			break;
		case 3:		/* the previous one had no frame */
			s[0].nframes = 0;
			break;
		case 4:		/* its thread root has another name */
			s[1].thread_name = "renamed";
			break;
		case 5:		/* more than it has */
			s[1].nframes = 1;
			break;
		case 6:		/* more than the previous one had */
			s[0].nframes = 1;
			break;
		case 7:		/* another thread's previous sample */
			s[1].tid = 2;
			break;
		case 8:		/* another process's */
			s[1].pid = 99;
			break;
		default:	/* no previous sample at all: s[1] alone */
			break;
		}
		for (int k = 0; k < 8; k++) {
			struct output_opts o = { .per_thread_roots = k & 1, .comm_root = k >> 1 & 1,
						 .no_lines = k >> 2 };

			assert_hints_invisible(&o, c == 9 ? s + 1 : s, c == 9 ? 1 : 2);
		}
	}

	/* The previous sample of a (pid, tid) is that of any comm: the thread
	 * ran python3, then python3.12 (an exec), then python3 again. */
	s[0] = sample(1, 1000, SAMPLE_COMPLETE, work_frames, 3);
	s[1] = sample(1, 2000, SAMPLE_COMPLETE, other, 3);
	s[2] = sample(1, 3000, SAMPLE_COMPLETE, other, 3);
	s[1].comm = "python3.12";
	set_hints(s, 3);
	assert_int_equal(s[2].unchanged, 3);
	assert_hints_invisible(&opts, s, 3);
}

/* A random recording: threads of two processes whose stacks share outer
 * frames, statuses that are not whole stacks, thread names that change. */
enum { SEQ_DEPTH = 24, SEQ_NAMES = 12, SEQ_POOL = 36, SEQ_THREADS = 7 };

static uint64_t seq_rng;

static uint32_t seq_rnd(uint32_t n)
{
	seq_rng ^= seq_rng << 13;
	seq_rng ^= seq_rng >> 7;
	seq_rng ^= seq_rng << 17;
	return n ? (uint32_t)((seq_rng >> 11) % n) : 0;
}

struct seq_thread {
	pid_t pid, tid;
	uint32_t stack[SEQ_DEPTH];	/* pool indices, outermost first */
	uint32_t n;
	uint32_t name;
	uint32_t comm;
};

/* Sym i and i + SEQ_NAMES differ by their line only: one frame with no_lines. */
static void seq_pool(struct py_sym *pool)
{
	static char fn[SEQ_NAMES][24];
	static const char *const files[] = { "/app/main.py", "/app/lib/w.py", NULL };

	for (int i = 0; i < SEQ_NAMES; i++)
		snprintf(fn[i], sizeof(fn[i]), i == 5 ? "odd name;%d" : "mod.f%d", i);
	for (int i = 0; i < SEQ_POOL; i++)
		pool[i] = (struct py_sym){
			.function = i == SEQ_POOL - 1 ? NULL : fn[i % SEQ_NAMES],
			.file = files[i % 3],
			.firstlineno = i % SEQ_NAMES * 10 + 1,
			.line = i % SEQ_NAMES * 10 + 2 + i / SEQ_NAMES,
		};
}

/* @n samples into @s, their frames into @frames (n * SEQ_DEPTH). */
static void seq_build(uint64_t seed, struct out_sample *s, struct py_sym *frames, size_t n,
		      int comm_changes)
{
	static const char *const names[] = { "MainThread", "worker", "Thread-2 (run)", NULL, "" };
	static const char *const comms[] = { "python3", "python3.12" };
	struct seq_thread th[SEQ_THREADS];
	struct py_sym pool[SEQ_POOL];

	seq_rng = seed;
	seq_pool(pool);
	for (int i = 0; i < SEQ_THREADS; i++) {
		th[i] = (struct seq_thread){ .pid = i < 4 ? 1234 : 1235, .tid = 1234 + i % 4 };
		th[i].name = seq_rnd(5);
	}
	for (size_t i = 0; i < n; i++) {
		struct seq_thread *t = &th[seq_rnd(SEQ_THREADS)];
		struct py_sym *f = frames + i * SEQ_DEPTH;
		uint32_t r = seq_rnd(100), status = SAMPLE_COMPLETE, nf;

		if (r < 30) {
			;			/* the same stack */
		} else if (r < 55) {		/* the leaf's line */
			if (t->n)
				t->stack[t->n - 1] = (t->stack[t->n - 1] + SEQ_NAMES) % SEQ_POOL;
		} else {			/* returns, then calls */
			uint32_t calls = seq_rnd(r < 95 ? 5 : SEQ_DEPTH);

			t->n = r < 90 && t->n > 3 ? t->n - seq_rnd(4) : seq_rnd(t->n + 1);
			for (; calls && t->n < SEQ_DEPTH; calls--)
				t->stack[t->n++] = seq_rnd(SEQ_POOL);
		}
		if (!seq_rnd(150))
			t->name = seq_rnd(5);
		if (comm_changes && !seq_rnd(100))
			t->comm ^= 1;
		nf = t->n;
		r = seq_rnd(100);
		if (r < 4) {
			status = SAMPLE_TRUNCATED;
		} else if (r < 7) {
			status = SAMPLE_NO_PYSTATE;
			nf = 0;
		} else if (r < 9) {
			status = SAMPLE_READ_FAULT;
			nf = seq_rnd(nf + 1);
		} else if (r < 10) {
			status = 9;
		} else if (r < 12) {
			nf = 0;			/* complete, and empty */
		}
		/* Innermost first; a truncated stack keeps the innermost. */
		for (uint32_t k = 0; k < nf; k++)
			f[k] = pool[t->stack[t->n - 1 - k]];
		s[i] = (struct out_sample){
			.comm = comms[t->comm], .pid = t->pid, .tid = t->tid,
			.thread_name = names[t->name], .cpu = seq_rnd(8), .ts_ns = 1000000 * i,
			.period_ns = seq_rnd(20) ? 10101010 : 0, .status = status,
			.nframes = nf, .frames = f,
		};
	}
	set_hints(s, n);
}

static void random_hints(uint64_t seed, size_t n, int comm_changes)
{
	struct out_sample *s = calloc(n, sizeof(*s));
	struct py_sym *frames = calloc(n * SEQ_DEPTH, sizeof(*frames));
	size_t hinted = 0;

	assert_non_null(s);
	assert_non_null(frames);
	seq_build(seed, s, frames, n, comm_changes);
	for (size_t i = 0; i < n; i++)
		hinted += s[i].unchanged > 0 && s[i].status == SAMPLE_COMPLETE;
	assert_true(hinted > n / 3);
	for (int k = 0; k < 8; k++) {
		struct output_opts o = { .per_thread_roots = k & 1, .comm_root = k >> 1 & 1,
					 .no_lines = k >> 2 };

		assert_hints_invisible(&o, s, n);
	}
	free(frames);
	free(s);
}

static void test_unchanged_random(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 3; seed++)
		random_hints(seed * 0x9e3779b97f4a7c15ull, 1500, 0);
	random_hints(0x2545f4914f6cdd1dull, 1500, 1);	/* comms change too */
}

/* Disk full: streaming formats fail in output__add, the others in output__finish. */
static void test_write_errors(void **state)
{
	static const char *const fmts[] = { "collapsed", "speedscope", "pprof", "flamegraph",
					    "top", "pstats", "callgrind" };
	struct out_sample s = sample(1, 0, SAMPLE_COMPLETE, work_frames, 3);
	struct output *o = NULL;
	char err[256];
	int r = 0;

	(void)state;
	if (access("/dev/full", W_OK)) {
		fail_msg("/dev/full is needed to test write errors");
		return;
	}
	assert_int_equal(output__new("perf-script", "/dev/full", NULL, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 100000 && !r; i++)
		r = output__add(o, &s);
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(output__add(o, &s), -ENOSPC);	/* sticky */
	assert_int_equal(output__finish(o), -ENOSPC);
	output__free(o);
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		assert_int_equal(output__new(fmts[k], "/dev/full", NULL, &o, err, sizeof(err)), 0);
		assert_int_equal(output__add(o, &s), 0);
		assert_int_equal(output__finish(o), -ENOSPC);
		output__free(o);
	}
}

static size_t count_str(const char *hay, size_t len, const char *needle, size_t nlen)
{
	size_t n = 0;

	for (size_t i = 0; i + nlen <= len; i++)
		n += !memcmp(hay + i, needle, nlen);
	return n;
}

/* pstats and callgrind: names that would break them, and a recursion through
 * another function (f -> g -> f) counted once per sample. */
static void test_callgraph(void **state)
{
	static const struct py_sym frames[] = {	/* innermost first */
		{ "f", "/app/w.py", 3, 2 }, { "g", "/app/w.py", 8, 7 },
		{ "f", "/app/w.py", 4, 2 }, { "bad\nname\xff", "/app/x\r.py", 12, 11 },
	};
	static const char pstats_name[] = "u\x0b\0\0\0bad\nname\xef\xbf\xbd";
	struct out_sample s = sample(1, 0, SAMPLE_COMPLETE, frames, 4);
	size_t len;
	char *out;

	(void)state;
	out = run_fmt("callgrind", NULL, &s, 1, &len);
	assert_non_null(strstr(out, " /app/x?.py\nfn=(1) bad?name\xff\n"));
	/* calls into g and into f's outermost frame; not g's call of f */
	assert_int_equal(count_str(out, len, "calls=1 ", 8), 2);
	/* f: its call of g at line 4, its self cost at line 3 */
	assert_non_null(strstr(out, "cfn=(3) g\ncalls=1 7\n4 10101010 1\n3 10101010 1\n\n"));
	free(out);
	out = run_fmt("pstats", NULL, &s, 1, &len);
	assert_int_equal(count_str(out, len, pstats_name, sizeof(pstats_name) - 1), 2);
	assert_true(len > 2 && out[0] == '{' && out[len - 1] == '0');
	free(out);
}

/* A marker is keyed as cProfile keys a built-in: ("~", 0, name); fl=??? in callgrind. */
static void test_callgraph_markers(void **state)
{
	static const struct out_leaf gil = { OUT_FRAME_STATUS, "[GIL wait]", 0, 0 };
	static const char key[] = ")\x03u\x01\0\0\0~i\0\0\0\0u\x0a\0\0\0[GIL wait]";
	struct out_sample s = sample(1, 0, SAMPLE_COMPLETE, work_frames, 3);
	size_t len;
	char *out;

	(void)state;
	s.leaf = &gil;
	s.nleaf = 1;
	out = run_fmt("pstats", NULL, &s, 1, &len);
	assert_int_equal(count_str(out, len, key, sizeof(key) - 1), 1);
	free(out);
	out = run_fmt("callgrind", NULL, &s, 1, &len);
	assert_non_null(strstr(out, " ???\ncfn=(4) [GIL wait]\ncalls=1 0\n42 10101010 1\n"));
	assert_non_null(strstr(out, "\nfn=(4)\n0 10101010 1\n"));
	free(out);
}

static char *json_str(int html, const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(html ? json_write_string_html(f, s) : json_write_string(f, s), 0);
	fclose(f);
	return buf;
}

static void test_json_writer(void **state)
{
	static const struct {
		int html;
		const char *in, *want;
	} cases[] = {
		{ 0, "plain", "\"plain\"" },
		{ 0, "q\"b\\s/", "\"q\\\"b\\\\s/\"" },
		{ 0, "\n\t\r\b\f\x01\x1f\x7f", "\"\\n\\t\\r\\b\\f\\u0001\\u001f\x7f\"" },
		{ 0, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
		  "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"" },
		{ 0, "a\xff" "b\xc3", "\"a\\ufffdb\\ufffd\"" },
		{ 0, "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },	/* a surrogate */
		{ 0, "\xc0\xaf", "\"\\ufffd\\ufffd\"" },		/* overlong */
		{ 0, "</script>", "\"</script>\"" },
		{ 1, "</script>&", "\"\\u003c/script\\u003e\\u0026\"" },
		{ 1, "\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\"" },
		{ 0, NULL, "null" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = json_str(cases[i].html, cases[i].in);

		assert_string_equal(got, cases[i].want);
		assert_true(json_valid(got));
		free(got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selection),
		cmocka_unit_test(test_selection_errors),
		cmocka_unit_test(test_perf_exact),
		cmocka_unit_test(test_perf_escapes),
		cmocka_unit_test(test_native_kernel),
		cmocka_unit_test(test_status_frames),
		cmocka_unit_test(test_collapsed_roots_and_lines),
		cmocka_unit_test(test_speedscope),
		cmocka_unit_test(test_pprof),
		cmocka_unit_test(test_flamegraph),
		cmocka_unit_test(test_top),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_deep_repeated),
		cmocka_unit_test(test_unchanged_refused),
		cmocka_unit_test(test_unchanged_random),
		cmocka_unit_test(test_write_errors),
		cmocka_unit_test(test_json_writer),
		cmocka_unit_test(test_callgraph),
		cmocka_unit_test(test_callgraph_markers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
