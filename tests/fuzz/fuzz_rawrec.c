/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rawrec.c - `report` on any file: the raw recording reader
 * (rawrec_reader.c; gzip or plain) and every sample it returns written in
 * an output format (to /dev/null), with the sources of its 'C' records.
 * The header's frequency picks the format and the output options, so
 * mutations try them all (every format at once is 7 times slower: each
 * interns and escapes every frame). Bit 13 adds a second output, pstats or
 * callgrind (bit 14), beside the first; bit 15 makes the samples also the
 * base of a differential view (report --diff).
 */
#include <stdint.h>
#include <string.h>
#include "memfile.h"
#include "output/output.h"
#include "output/rawrec.h"

static const char *const formats[] = {
	"perf-script", "collapsed", "speedscope", "pprof", "flamegraph", "top", "heatmap",
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

static void check_str(const char *s)
{
	if (s && strlen(s) > (1u << 20))	/* a record's bytes at most */
		__builtin_trap();
}

/* What the reader promises of a sample: frames and strings it defined. */
static void check_sample(const struct out_sample *s)
{
	check_str(s->comm);
	check_str(s->thread_name);
	check_str(s->event);
	if (s->nframes && !s->frames)
		__builtin_trap();
	for (uint32_t i = 0; i < s->nframes; i++) {
		check_str(s->frames[i].function);
		check_str(s->frames[i].file);
		if (s->kinds && s->kinds[i] != OUT_FRAME_PYTHON && s->kinds[i] != OUT_FRAME_NATIVE &&
		    s->kinds[i] != OUT_FRAME_STATUS)
			__builtin_trap();
	}
	if (s->nleaf > 64 || (s->nleaf && !s->leaf))
		__builtin_trap();
	for (uint32_t i = 0; i < s->nleaf; i++)
		if (!s->leaf[i].name)
			__builtin_trap();
}

static struct output *open_output(const struct rawrec_info *info, const char *format)
{
	struct output_opts o = {
		.per_thread_roots = info->freq_hz & 1,
		.no_lines = info->freq_hz >> 1 & 1,
		.comm_root = info->freq_hz >> 2 & 1,
		.process_roots = info->freq_hz >> 3 & 1,
		.start_time_ns = info->start_time_ns,
		.mode = info->mode,
		.top_rows = info->freq_hz >> 7 & 63,
	};
	struct output *out;
	char err[256];

	if (output__new(format, "/dev/null", &o, &out, err, sizeof(err)))
		__builtin_trap();	/* no input can make /dev/null fail */
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct output *out, *graph = NULL;
	const struct rawrec_info *info;
	struct rawrec_reader *r;
	struct out_sample s;
	const char *path;
	uint64_t n = 0;
	char err[256];
	int rc;

	memfile_set(data, size, &path);
	if (rawrec_reader__open(path, &r, err, sizeof(err)))
		return 0;
	info = rawrec_reader__info(r);
	check_str(info->comm);
	check_str(info->python_version);
	check_str(info->backend);
	check_str(info->mode);
	out = open_output(info, formats[(info->freq_hz >> 4) % NFORMATS]);
	if (info->freq_hz >> 13 & 1)
		graph = open_output(info, info->freq_hz >> 14 & 1 ? "callgrind" : "pstats");
	while ((rc = rawrec_reader__next(r, &s, err, sizeof(err))) > 0) {
		check_sample(&s);
		n++;
		if (output__add(out, &s) || (graph && output__add(graph, &s)) ||
		    (info->freq_hz >> 15 & 1 && output__add_base(out, &s)))
			__builtin_trap();
	}
	for (uint32_t i = 0; i < rawrec_reader__sources(r)->n; i++) {
		const struct out_source *src = &rawrec_reader__sources(r)->v[i];

		check_str(src->path);
		if ((src->text && strlen(src->text) != src->len) ||
		    output__add_source(out, src))
			__builtin_trap();
	}
	/* the count, and an error stays final */
	if (n != rawrec_reader__samples(r) ||
	    (rc < 0 && rawrec_reader__next(r, &s, err, sizeof(err)) != rc) ||
	    (rc == 0 && rawrec_reader__end(r) && rawrec_reader__end(r)->samples != n))
		__builtin_trap();
	if (output__finish(out) || (graph && output__finish(graph)))
		__builtin_trap();
	output__free(out);
	output__free(graph);
	rawrec_reader__free(r);
	return 0;
}
