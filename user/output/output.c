// SPDX-License-Identifier: MIT
/*
 * output.c - the dispatcher: the format table, format selection, and the API
 * that hands each sample to the model (output_model.c), then to its format's
 * writer (output_<format>.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "output/internal.h"
#include "util/errbuf.h"

static const char *const perf_aliases[] = { "perf", "perf-script", NULL };
static const char *const perf_exts[] = { ".txt", ".perf", ".perf-script", NULL };
static const char *const collapsed_aliases[] = { "folded", NULL };
static const char *const collapsed_exts[] = { ".folded", ".collapsed", NULL };
static const char *const speedscope_exts[] = { ".speedscope.json", ".json", NULL };
static const char *const pprof_exts[] = { ".pb.gz", ".pprof", ".pb", NULL };
static const char *const html_aliases[] = { "html", NULL };
static const char *const html_exts[] = { ".html", ".htm", NULL };
static const char *const svg_aliases[] = { "svg", NULL };
static const char *const svg_exts[] = { ".svg", NULL };
static const char *const pstats_exts[] = { ".pstats", ".prof", NULL };
static const char *const callgrind_exts[] = { ".callgrind", NULL };
static const char *const heatmap_exts[] = { ".heatmap.html", NULL };
static const char *const jsonl_exts[] = { ".jsonl", NULL };
static const char *const chrome_aliases[] = { "chrometrace", NULL };
static const char *const chrome_exts[] = { ".trace.json", NULL };
static const char *const otlp_exts[] = { ".otlp", ".otlp.pb", NULL };
static const char *const none[] = { NULL };

/* Formats are data: first match wins; names first, extensions by longest match. */
static const struct output_fmt formats[] = {
	{ "perf-script", perf_aliases, perf_exts, &output_perf_ops, 0 },
	{ "collapsed", collapsed_aliases, collapsed_exts, &output_collapsed_ops, 0 },
	{ "speedscope", none, speedscope_exts, &output_speedscope_ops, 0 },
	{ "pprof", none, pprof_exts, &output_pprof_ops, 0 },
	{ "otlp", none, otlp_exts, &output_otlp_ops, 0 },
	{ "flamegraph", html_aliases, html_exts, &output_flamegraph_ops, 0 },
	{ "flamegraph", svg_aliases, svg_exts, &output_flamegraph_ops, 1 },
	{ "pstats", none, pstats_exts, &output_pstats_ops, 0 },
	{ "callgrind", none, callgrind_exts, &output_callgrind_ops, 0 },
	{ "top", none, none, &output_top_ops, 0 },
	{ "heatmap", none, heatmap_exts, &output_heatmap_ops, 0 },
	{ "jsonl", none, jsonl_exts, &output_jsonl_ops, 0 },
	{ "chrome-trace", chrome_aliases, chrome_exts, &output_chrome_trace_ops, 0 },
};

#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

const char *output__format_names(void)
{
	return "perf-script, collapsed, speedscope, pprof, otlp, flamegraph, pstats, callgrind, "
	       "top, heatmap, jsonl, chrome-trace";
}

static const struct output_fmt *fmt_by_name(const char *name)
{
	for (size_t i = 0; i < NFORMATS; i++) {
		if (!strcasecmp(formats[i].name, name) && !formats[i].svg)
			return &formats[i];
		for (const char *const *a = formats[i].aliases; *a; a++)
			if (!strcasecmp(*a, name))
				return &formats[i];
	}
	return NULL;
}

static const struct output_fmt *fmt_by_path(const char *path)
{
	const struct output_fmt *best = NULL;
	size_t best_len = 0, plen;
	const char *base;

	if (!path)
		return NULL;
	/* valgrind's own name for its profiles, whatever follows. */
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (!strncmp(base, "callgrind.out.", 14))
		return fmt_by_name("callgrind");
	plen = strlen(path);
	for (size_t i = 0; i < NFORMATS; i++) {
		for (const char *const *e = formats[i].exts; *e; e++) {
			size_t elen = strlen(*e);

			if (elen > best_len && plen > elen &&
			    !strcasecmp(path + plen - elen, *e)) {
				best = &formats[i];
				best_len = elen;
			}
		}
	}
	return best;
}

const char *output__format_for_path(const char *path)
{
	const struct output_fmt *f = fmt_by_path(path);

	return f ? f->name : NULL;
}

const char *output__format(const struct output *o)
{
	return o->fmt->name;
}

/* ---- the API ---- */

int output__new(const char *format, const char *path, const struct output_opts *opts,
		struct output **out, char *err, size_t errlen)
{
	const struct output_fmt *fmt;
	struct output *o;
	int ret;

	*out = NULL;
	if (format) {
		fmt = fmt_by_name(format);
		if (!fmt) {
			seterr(err, errlen, "unknown output format \"%s\"; valid formats: %s",
			       format, output__format_names());
			return -EINVAL;
		}
		/* "flamegraph" writes SVG when the file says so. */
		if (fmt->ops == &output_flamegraph_ops && fmt_by_path(path) &&
		    fmt_by_path(path)->ops == &output_flamegraph_ops)
			fmt = fmt_by_path(path);
	} else {
		fmt = fmt_by_path(path);
		if (!fmt)
			fmt = &formats[0];
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	o->fmt = fmt;
	o->svg = fmt->svg;
	o->m.last_comm_id = -1;
	o->base.last_comm_id = -1;
	if (opts)
		o->opts = *opts;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
	} else {
		o->f = fopen(path, "we");
		if (!o->f) {
			ret = -errno;
			seterr(err, errlen, "cannot create %s: %s", path, strerror(errno));
			free(o);
			return ret;
		}
		o->close_f = 1;
		/* perf-script streams ~2 KB a sample (--native): fewer writes (each
		 * also updates the file's times) */
		setvbuf(o->f, NULL, _IOFBF, 1 << 16);
	}
	*out = o;
	return 0;
}

int output__add(struct output *o, const struct out_sample *s)
{
	uint32_t thread = 0, n = 0;
	int err;

	if (o->finished)
		return -EINVAL;
	if (o->err)
		return o->err;
	if (s->nframes && !s->frames)
		return -EINVAL;
	err = out_model__add(&o->m, &o->opts, o->fmt->ops->aggregate, s, &thread, &n);
	if (err)
		return err;
	if (o->fmt->ops->add)
		return o->fmt->ops->add(o, s, thread, o->m.threads[thread].ids, n);
	return 0;
}

int output__add_source(struct output *o, const struct out_source *src)
{
	if (o->finished)
		return -EINVAL;
	return o->fmt->ops->sources ? out_sources__add(&o->src, src) : 0;
}

int output__add_base(struct output *o, const struct out_sample *s)
{
	uint32_t thread = 0, n = 0;

	if (o->finished)
		return -EINVAL;
	if (s->nframes && !s->frames)
		return -EINVAL;
	return out_model__add(&o->base, &o->opts, 1, s, &thread, &n);
}

int output__finish(struct output *o)
{
	int err = 0;

	if (o->finished)
		return -EINVAL;
	o->finished = 1;
	if (!o->err && o->fmt->ops->finish)
		err = o->fmt->ops->finish(o);
	if (!err)
		err = output__check_io(o);
	if (o->close_f) {
		o->close_f = 0;
		if (fclose(o->f) && !err)
			err = -errno;
		o->f = NULL;
	} else if (fflush(o->f) && !err) {
		err = -errno;
	}
	if (!err && o->err)
		err = o->err;
	return err;
}

void output__set_duration(struct output *o, uint64_t duration_ns)
{
	o->opts.duration_ns = duration_ns;
}

void output__set_comments(struct output *o, const char *const *comments, size_t n)
{
	o->opts.comments = comments;
	o->opts.ncomments = n;
}

int output__flush(struct output *o)
{
	if (o->finished || o->err || !o->fmt->ops->stream)
		return o->err;
	if (fflush(o->f) && !o->err)
		o->err = -errno;
	return o->err;
}

void output__free(struct output *o)
{
	if (!o)
		return;
	if (o->fmt->ops->free_priv)
		o->fmt->ops->free_priv(o);
	if (o->close_f)
		fclose(o->f);
	out_model__free(&o->m);
	out_model__free(&o->base);
	out_sources__clear(&o->src);
	free(o);
}
