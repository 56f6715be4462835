// SPDX-License-Identifier: MIT
/*
 * output_pprof.c - pprof's profile.proto, gzipped, encoded by hand.
 *
 * Sample types [samples/count, cpu/nanoseconds] (cpu is the default), period
 * type cpu/nanoseconds with the recording's period. One sample per distinct
 * (stack, thread) with labels pid, thread_id and thread_name. One function
 * per (name, file, first line), one location per frame with its line; frame
 * names are the qualnames (synthetic frames keep their bracketed text). Read
 * by `go tool pprof`, Pyroscope, Parca, Grafana, speedscope, pprof-format.
 *
 * Mappings: id 1 is the process (the comm as its file name): Python and
 * marker frames' locations. --native adds one mapping per DSO (and process
 * address: memory_start, memory_limit = its mappings, first to last,
 * file_offset = start - where file offset 0 is mapped, filename, build_id in
 * hex when the file has one); kernel frames (--kernel, off-CPU stacks) are in
 * a "[kernel.kallsyms]" mapping spanning their addresses. Every mapping says
 * has_functions/filenames/line_numbers: the profile is symbolized, tools must
 * not symbolize it again. Frames aggregate by function in every format, so a
 * native or kernel frame is one location whose address is the first pc
 * sampled in it; its function's system_name is the symbol and its filename
 * the DSO's path ("[kernel.kallsyms]" for the kernel). A native function
 * without a symbol is named "[<DSO basename>]" (as stackcollapse-perf.pl
 * names it), not "[unknown]", so that pprof does not merge all of them.
 *
 * profile.proto field numbers used (github.com/google/pprof proto/profile.proto):
 *   Profile: 1 sample_type, 2 sample, 3 mapping, 4 location, 5 function,
 *            6 string_table, 10 duration_nanos, 9 time_nanos, 11 period_type,
 *            12 period, 14 default_sample_type
 *   ValueType: 1 type, 2 unit         Sample: 1 location_id, 2 value, 3 label
 *   Label: 1 key, 2 str, 3 num        Mapping: 1 id, 2 memory_start,
 *            3 memory_limit, 4 file_offset, 5 filename, 6 build_id, 7-9 has_*
 *   Location: 1 id, 2 mapping_id, 3 address, 4 line
 *   Line: 1 function_id, 2 line
 *   Function: 1 id, 2 name, 3 system_name, 4 filename, 5 start_line
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "output/internal.h"

struct pbuf {
	uint8_t *p;
	size_t n, cap;
	int err;
};

static void pb_bytes(struct pbuf *b, const void *d, size_t len)
{
	if (b->err)
		return;
	if (b->n + len > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (ncap < b->n + len)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, d, len);
	b->n += len;
}

static void pb_varint(struct pbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	pb_bytes(b, tmp, n);
}

enum { WT_VARINT = 0, WT_LEN = 2 };

static void pb_key(struct pbuf *b, unsigned int field, unsigned int wt)
{
	pb_varint(b, (uint64_t)field << 3 | wt);
}

/* A varint field, skipped when zero (proto3 default). */
static void pb_uint(struct pbuf *b, unsigned int field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WT_VARINT);
	pb_varint(b, v);
}

/* Append @sub as a length-delimited field and empty it. */
static void pb_sub(struct pbuf *b, unsigned int field, struct pbuf *sub)
{
	if (sub->err && !b->err)
		b->err = sub->err;
	pb_key(b, field, WT_LEN);
	pb_varint(b, sub->n);
	pb_bytes(b, sub->p, sub->n);
	sub->n = 0;
}

struct pprof_ctx {
	struct out_strtab strs;	/* string_table; id 0 is "" */
	int err;
};

/* Index of @s in the string table; proto strings are UTF-8, so bad bytes become U+FFFD. */
static uint64_t str(struct pprof_ctx *c, const char *s)
{
	const unsigned char *p;
	uint32_t cp;
	int64_t id;
	char *clean;
	int len;

	for (p = (const unsigned char *)s; *p; p += len) {
		len = out_utf8_seq(p, &cp);
		if (!len)
			break;
	}
	if (*p) {
		clean = out_utf8_clean(s);
		if (!clean) {
			c->err = -ENOMEM;
			return 0;
		}
		id = out_strtab__id(&c->strs, clean);
		free(clean);
	} else {
		id = out_strtab__id(&c->strs, s);
	}

	if (id < 0) {
		c->err = (int)id;
		return 0;
	}
	return (uint64_t)id;
}

static void value_type(struct pprof_ctx *c, struct pbuf *b, struct pbuf *sub,
		       unsigned int field, const char *type, const char *unit)
{
	pb_uint(sub, 1, str(c, type));
	pb_uint(sub, 2, str(c, unit));
	pb_sub(b, field, sub);
}

static int gzip_out(struct output *o, const struct pbuf *b)
{
	uint8_t chunk[16384];
	z_stream zs;
	int zr;

	memset(&zs, 0, sizeof(zs));
	/* windowBits 15 + 16: a gzip wrapper (mtime 0, so the output is reproducible). */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = b->p;
	zs.avail_in = (uInt)b->n;
	do {
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zr = deflate(&zs, Z_FINISH);
		if (zr == Z_STREAM_ERROR)
			break;
		if (fwrite(chunk, 1, sizeof(chunk) - zs.avail_out, o->f) !=
		    sizeof(chunk) - zs.avail_out)
			break;
	} while (zr != Z_STREAM_END);
	deflateEnd(&zs);
	if (output__check_io(o))
		return o->err;
	return zr == Z_STREAM_END ? 0 : -EIO;
}

/* The sample type of the time values: cpu, or what --mode weighs; or the
 * event -e counted. */
static const char *pprof_kind(const struct output *o)
{
	const char *m = o->opts.mode;

	if (output__weighs_bytes(&o->opts))
		return "memory";
	if (output__count_event(&o->opts))
		return output__count_event(&o->opts);
	if (m && !strcmp(m, "wall"))
		return "wall";
	if (m && !strcmp(m, "off-cpu"))
		return "off-cpu";
	return "cpu";
}

/* Their unit: nanoseconds, a count of events, or bytes (--mode memory). */
static const char *pprof_unit(const struct output *o)
{
	if (output__weighs_bytes(&o->opts))
		return "bytes";
	return output__count_event(&o->opts) ? "count" : "nanoseconds";
}

/* Several events: a clock's weights are nanoseconds, another's a count. */
static const char *pp_event_unit(const char *event)
{
	return !strcmp(event, "cpu-clock") || !strcmp(event, "task-clock") ? "nanoseconds" :
	       "count";
}

/* A mapping of native or kernel frames. */
struct pp_mapping {
	uint64_t start, limit, offset;
	char *file;
	char *build_id;		/* hex; NULL: none */
};

/* What pprof keeps beyond the model: per frame id, its first address and
 * mapping (index + 1; 0: the process mapping). */
struct pp_state {
	uint64_t *addr;
	uint32_t *mapping;
	uint32_t nframes, cap;
	struct pp_mapping *maps;
	uint32_t nmaps, maps_cap;
	struct out_map map_of;		/* (dso string id, start) -> index */
	uint32_t kernel;		/* index + 1 of the kernel mapping, 0: none */
	struct out_strtab paths;
};

static void pp_free(struct output *o)
{
	struct pp_state *st = o->priv;

	if (!st)
		return;
	for (uint32_t i = 0; i < st->nmaps; i++) {
		free(st->maps[i].file);
		free(st->maps[i].build_id);
	}
	free(st->maps);
	free(st->addr);
	free(st->mapping);
	out_map__clear(&st->map_of);
	out_strtab__clear(&st->paths);
	free(st);
	o->priv = NULL;
}

static int pp_new_mapping(struct pp_state *st, uint64_t start, uint64_t limit, uint64_t offset,
			  const char *file, const unsigned char *id, size_t idlen, uint32_t *out)
{
	static const char hex[] = "0123456789abcdef";
	struct pp_mapping *mp;
	int err = out_grow((void **)&st->maps, &st->maps_cap, (uint64_t)st->nmaps + 1,
			   sizeof(*st->maps));

	if (err)
		return err;
	mp = &st->maps[st->nmaps];
	*mp = (struct pp_mapping){ start, limit, offset, strdup(file), NULL };
	if (!mp->file)
		return -ENOMEM;
	if (id && idlen) {
		mp->build_id = malloc(2 * idlen + 1);
		if (!mp->build_id) {
			free(mp->file);
			return -ENOMEM;
		}
		for (size_t i = 0; i < idlen; i++) {
			mp->build_id[2 * i] = hex[id[i] >> 4];
			mp->build_id[2 * i + 1] = hex[id[i] & 15];
		}
		mp->build_id[2 * idlen] = '\0';
	}
	*out = ++st->nmaps;
	return 0;
}

/* Notes the first address (and mapping) of each native and kernel frame. */
static int pprof_add(struct output *o, const struct out_sample *s, uint32_t thread,
		     const uint32_t *stack, uint32_t n)
{
	struct pp_state *st = o->priv;
	int err;

	(void)thread;
	if (!s->addrs && !s->nleaf)
		return 0;
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return -ENOMEM;
		o->priv = st;
	}
	if (o->m.nframes > st->nframes) {
		uint32_t cap = st->cap;

		err = out_grow((void **)&st->addr, &cap, o->m.nframes, sizeof(*st->addr));
		if (!err)
			err = out_grow((void **)&st->mapping, &st->cap, o->m.nframes,
				       sizeof(*st->mapping));
		if (err)
			return err;
		memset(st->addr + st->nframes, 0, (o->m.nframes - st->nframes) * sizeof(*st->addr));
		memset(st->mapping + st->nframes, 0,
		       (o->m.nframes - st->nframes) * sizeof(*st->mapping));
		st->nframes = o->m.nframes;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct out_frame *fr = &o->m.frames[stack[i]];
		uint32_t f = stack[i];

		if (fr->kind == OUT_FRAME_KERNEL && i + s->nleaf >= n) {
			const struct out_leaf *lf = &s->leaf[i - (n - s->nleaf)];
			struct pp_mapping *k;

			if (!lf->addr)
				continue;
			if (!st->kernel) {
				err = pp_new_mapping(st, lf->addr, lf->addr + 1, 0,
						     "[kernel.kallsyms]", NULL, 0, &st->kernel);
				if (err)
					return err;
			}
			k = &st->maps[st->kernel - 1];
			if (lf->addr < k->start)
				k->start = lf->addr;
			if (lf->addr >= k->limit)
				k->limit = lf->addr + 1;
			if (!st->addr[f]) {
				st->addr[f] = lf->addr;
				st->mapping[f] = st->kernel;
			}
		} else if (fr->kind == OUT_FRAME_NATIVE && s->addrs && i + s->nleaf < n &&
			   n - s->nleaf - 1 - i < s->nframes && !st->addr[f]) {
			const struct out_addr *a = &s->addrs[n - s->nleaf - 1 - i];
			int64_t path;
			uint32_t id;

			if (!a->pc || !a->map_end)
				continue;
			path = out_strtab__id(&st->paths, fr->file);
			if (path < 0)
				return (int)path;
			id = out_map__get(&st->map_of, (uint64_t)path, a->map_start);
			if (id == OUT_NONE) {
				err = pp_new_mapping(st, a->map_start, a->map_end,
						     a->map_start - a->map_base, fr->file,
						     a->build_id, a->build_id_len, &id);
				if (!err)
					err = out_map__put(&st->map_of, (uint64_t)path,
							   a->map_start, id);
				if (err)
					return err;
			}
			st->addr[f] = a->pc;
			st->mapping[f] = id;
		}
	}
	return 0;
}

/* What pprof_finish() encodes with: the string table, the profile, and two
 * scratch buffers for nested messages. */
struct pp_enc {
	struct pprof_ctx c;
	struct pbuf b, sub, sub2;
};

/* Several events: which one a stack's root frame ("[page-faults]") names;
 * its weight goes in that event's sample type. */
static uint32_t pp_event_of(const struct output_opts *opts, const struct out_frame *root)
{
	const char *f = root->function;
	size_t len = strlen(f);

	for (uint32_t k = 0; k < opts->nevents; k++)
		if (len == strlen(opts->events[k]) + 2 && f[0] == '[' &&
		    !strncmp(f + 1, opts->events[k], len - 2))
			return k;
	return 0;
}

/* The samples: one per aggregate, location ids leaf first (a frame's id +
 * 1); with several events, without the event's root frame, their weight in
 * its event's value. */
static void pp_samples(struct pp_enc *e, const struct out_model *m, const struct output_opts *opts,
		       uint32_t *path)
{
	struct pbuf *sub = &e->sub, *sub2 = &e->sub2;
	uint32_t skip = opts->nevents > 1;

	for (uint32_t i = 0; i < m->naggs && !e->b.err; i++) {
		const struct out_agg *a = &m->aggs[i];
		const struct out_thread *t = &m->threads[a->thread];
		uint32_t n = output__node_path(m, a->node, path);
		uint32_t ev = skip && n ? pp_event_of(opts, &m->frames[path[0]]) : 0;

		pb_key(sub, 1, WT_LEN);
		for (uint32_t j = 0; j + skip < n; j++)
			pb_varint(sub2, (uint64_t)path[n - 1 - j] + 1);
		pb_varint(sub, sub2->n);
		pb_bytes(sub, sub2->p, sub2->n);
		sub2->n = 0;
		pb_key(sub, 2, WT_LEN);
		pb_varint(sub2, a->count);
		for (uint32_t k = 0; k < opts->nevents && skip; k++)
			pb_varint(sub2, k == ev ? a->weight : 0);
		if (!skip)
			pb_varint(sub2, a->weight);
		pb_varint(sub, sub2->n);
		pb_bytes(sub, sub2->p, sub2->n);
		sub2->n = 0;
		/* Labels; a label's num may be 0, so it is written even when 0. */
		pb_uint(sub2, 1, str(&e->c, "pid"));
		pb_key(sub2, 3, WT_VARINT);
		pb_varint(sub2, (uint64_t)(int64_t)t->pid);
		pb_sub(sub, 3, sub2);
		pb_uint(sub2, 1, str(&e->c, "thread_id"));
		pb_key(sub2, 3, WT_VARINT);
		pb_varint(sub2, (uint64_t)(int64_t)t->tid);
		pb_sub(sub, 3, sub2);
		pb_uint(sub2, 1, str(&e->c, "thread_name"));
		pb_uint(sub2, 2, str(&e->c, t->name));
		pb_sub(sub, 3, sub2);
		pb_sub(&e->b, 2, sub);
	}
}

/* The mappings: 1 for the Python frames, then the native DSOs' (id 2...). */
static void pp_mappings(struct pp_enc *e, const struct out_model *m, const struct pp_state *st)
{
	struct pbuf *sub = &e->sub;

	/* One mapping, fully symbolized: tools must not try to symbolize it. */
	pb_uint(sub, 1, 1);
	pb_uint(sub, 5, str(&e->c, m->nthreads ? m->threads[0].comm : "python"));
	pb_uint(sub, 7, 1);
	pb_uint(sub, 8, 1);
	pb_uint(sub, 9, 1);
	pb_sub(&e->b, 3, sub);
	for (uint32_t i = 0; st && i < st->nmaps && !e->b.err; i++) {
		const struct pp_mapping *mp = &st->maps[i];

		pb_uint(sub, 1, (uint64_t)i + 2);
		pb_uint(sub, 2, mp->start);
		pb_uint(sub, 3, mp->limit);
		pb_uint(sub, 4, mp->offset);
		pb_uint(sub, 5, str(&e->c, mp->file));
		if (mp->build_id)
			pb_uint(sub, 6, str(&e->c, mp->build_id));
		pb_uint(sub, 7, 1);
		pb_uint(sub, 8, 1);
		pb_uint(sub, 9, 1);
		pb_sub(&e->b, 3, sub);
	}
}

/* The functions: one per (name, file, first line, kind) (output_funcs.c);
 * function id = its index + 1. */
static void pp_functions(struct pp_enc *e, const struct out_model *m, const struct out_funcs *fx)
{
	struct pbuf *sub = &e->sub;

	for (uint32_t id = 0; id < fx->n && !e->b.err; id++) {
		const struct out_frame *fr = &m->frames[fx->first[id]];
		char unk[256];
		const char *name = out_func__name(fr, unk, sizeof(unk));

		pb_uint(sub, 1, (uint64_t)id + 1);
		pb_uint(sub, 2, str(&e->c, name));
		pb_uint(sub, 3, str(&e->c, name));
		pb_uint(sub, 4, str(&e->c, fr->kind == OUT_FRAME_KERNEL ? "[kernel.kallsyms]" :
				    fr->file));
		pb_uint(sub, 5, (uint64_t)fr->firstlineno);
		pb_sub(&e->b, 5, sub);
	}
}

/* The locations: one per frame, its function and line (and address in its
 * native mapping). */
static void pp_locations(struct pp_enc *e, const struct out_model *m, const struct pp_state *st,
			 const struct out_funcs *fx)
{
	for (uint32_t i = 0; i < m->nframes && !e->b.err; i++) {
		uint32_t mp = st && i < st->nframes ? st->mapping[i] : 0;

		pb_uint(&e->sub, 1, (uint64_t)i + 1);
		pb_uint(&e->sub, 2, (uint64_t)mp + 1);
		if (mp)
			pb_uint(&e->sub, 3, st->addr[i]);
		pb_uint(&e->sub2, 1, (uint64_t)fx->of[i] + 1);
		pb_uint(&e->sub2, 2, (uint64_t)m->frames[i].line);
		pb_sub(&e->sub, 4, &e->sub2);
		pb_sub(&e->b, 4, &e->sub);
	}
}

/* Times, the period, and the string table last: every string is known by now. */
static void pp_tail(struct pp_enc *e, const struct output *o)
{
	const struct out_model *m = &o->m;

	pb_uint(&e->b, 9, o->opts.start_time_ns);
	pb_uint(&e->b, 10, o->opts.duration_ns ? o->opts.duration_ns : m->last_ts - m->first_ts);
	if (o->opts.nevents > 1) {	/* the first event's */
		value_type(&e->c, &e->b, &e->sub, 11, o->opts.events[0],
			   pp_event_unit(o->opts.events[0]));
		pb_uint(&e->b, 12, m->first_period);
		pb_uint(&e->b, 14, str(&e->c, o->opts.events[0]));
	} else {
		value_type(&e->c, &e->b, &e->sub, 11, pprof_kind(o), pprof_unit(o));
		pb_uint(&e->b, 12, m->first_period);
		pb_uint(&e->b, 14, str(&e->c, pprof_kind(o)));
	}
	for (size_t i = 0; i < o->opts.ncomments; i++)
		pb_uint(&e->b, 13, str(&e->c, o->opts.comments[i]));
	for (uint32_t i = 0; i < e->c.strs.n; i++) {
		size_t len = strlen(e->c.strs.strs[i]);

		pb_key(&e->b, 6, WT_LEN);
		pb_varint(&e->b, len);
		pb_bytes(&e->b, e->c.strs.strs[i], len);
	}
}

/* The profile.proto bytes of @o's model, not compressed, into *@out
 * (malloc'd, *@len bytes). 0 or -errno. */
int output_pprof__encode(struct output *o, uint8_t **out, size_t *len)
{
	const struct pp_state *st = o->priv;
	const struct out_model *m = &o->m;
	struct pp_enc e = { 0 };
	struct out_funcs fx = { 0 };
	uint32_t *path = NULL;
	int err;

	str(&e.c, "");
	path = out_model__path_buf(m);
	if (!path) {
		err = -ENOMEM;
		goto out;
	}
	value_type(&e.c, &e.b, &e.sub, 1, "samples", "count");
	if (o->opts.nevents > 1)
		for (uint32_t k = 0; k < o->opts.nevents; k++)
			value_type(&e.c, &e.b, &e.sub, 1, o->opts.events[k],
				   pp_event_unit(o->opts.events[k]));
	else
		value_type(&e.c, &e.b, &e.sub, 1, pprof_kind(o), pprof_unit(o));
	pp_samples(&e, m, &o->opts, path);
	pp_mappings(&e, m, st);
	err = out_funcs__build(m, &fx);
	if (err)
		goto out;
	pp_functions(&e, m, &fx);
	pp_locations(&e, m, st, &fx);
	pp_tail(&e, o);
	err = e.c.err ? e.c.err : e.b.err ? e.b.err : e.sub.err ? e.sub.err : e.sub2.err;
	if (!err) {
		*out = e.b.p;
		*len = e.b.n;
		e.b.p = NULL;
	}
out:
	out_funcs__free(&fx);
	free(path);
	free(e.b.p);
	free(e.sub.p);
	free(e.sub2.p);
	out_strtab__clear(&e.c.strs);
	return err;
}

static int pprof_finish(struct output *o)
{
	struct pbuf b = { 0 };
	int err = output_pprof__encode(o, &b.p, &b.n);

	if (!err)
		err = gzip_out(o, &b);
	free(b.p);
	return err;
}

const struct output_ops output_pprof_ops = {
	.aggregate = 1,
	.add = pprof_add,
	.finish = pprof_finish,
	.free_priv = pp_free,
};
