// SPDX-License-Identifier: MIT
/*
 * output_pprof.c - pprof's profile.proto, gzipped: the model's tables as
 * the messages protoc-c generates from google/pprof's profile.proto
 * (Debian's golang-github-google-pprof-dev, scripts/fetch-protos.sh),
 * packed by libprotobuf-c.
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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "output/internal.h"
#include "perftools/profiles/profile.pb-c.h"

/* Sample types at most: the count, and one per event (-e takes 4). */
#define PP_MAX_TYPES 8

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

static void value_type(struct pprof_ctx *c, Perftools__Profiles__ValueType *vt,
		       const char *type, const char *unit)
{
	*vt = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	vt->type = (int64_t)str(c, type);
	vt->unit = (int64_t)str(c, unit);
}

static int gzip_out(struct output *o, const uint8_t *p, size_t n)
{
	uint8_t chunk[16384];
	z_stream zs;
	int zr;

	memset(&zs, 0, sizeof(zs));
	/* windowBits 15 + 16: a gzip wrapper (mtime 0, so the output is reproducible). */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)p;
	zs.avail_in = (uInt)n;
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

/* What output_pprof__encode() fills: the profile message and the arrays its
 * repeated fields point into, freed together. */
struct pp_enc {
	struct pprof_ctx c;
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType vts[PP_MAX_TYPES + 1], *vtp[PP_MAX_TYPES];
	Perftools__Profiles__Sample *smp, **smpp;
	uint64_t *locids;
	int64_t *values;
	Perftools__Profiles__Label *lbl, **lblp;
	Perftools__Profiles__Mapping *map, **mapp;
	Perftools__Profiles__Function *fn, **fnp;
	Perftools__Profiles__Location *loc, **locp;
	Perftools__Profiles__Line *line, **linep;
	int64_t *comments;
};

static void pp_enc_free(struct pp_enc *e)
{
	free(e->smp);
	free(e->smpp);
	free(e->locids);
	free(e->values);
	free(e->lbl);
	free(e->lblp);
	free(e->map);
	free(e->mapp);
	free(e->fn);
	free(e->fnp);
	free(e->loc);
	free(e->locp);
	free(e->line);
	free(e->linep);
	free(e->comments);
	free(e->prof.string_table);
	out_strtab__clear(&e->c.strs);
}

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

/* A sample's labels: pid, thread_id, thread_name. */
static void pp_labels(struct pp_enc *e, const struct out_thread *t, uint32_t i)
{
	Perftools__Profiles__Label *l = &e->lbl[3 * i];

	for (int k = 0; k < 3; k++) {
		l[k] = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
		e->lblp[3 * i + k] = &l[k];
	}
	l[0].key = (int64_t)str(&e->c, "pid");
	l[0].num = t->pid;
	l[1].key = (int64_t)str(&e->c, "thread_id");
	l[1].num = t->tid;
	l[2].key = (int64_t)str(&e->c, "thread_name");
	l[2].str = (int64_t)str(&e->c, t->name);
	e->smp[i].n_label = 3;
	e->smp[i].label = &e->lblp[3 * i];
}

/* The samples: one per aggregate, location ids leaf first (a frame's id +
 * 1); with several events, without the event's root frame, their weight in
 * its event's value. */
static int pp_samples(struct pp_enc *e, const struct out_model *m, const struct output_opts *opts,
		      uint32_t *path, size_t ntypes)
{
	uint32_t skip = opts->nevents > 1;
	size_t nlocs = 0, at = 0;

	for (uint32_t i = 0; i < m->naggs; i++)
		nlocs += output__node_path(m, m->aggs[i].node, path);
	e->smp = calloc(m->naggs + 1, sizeof(*e->smp));
	e->smpp = calloc(m->naggs + 1, sizeof(*e->smpp));
	e->locids = calloc(nlocs + 1, sizeof(*e->locids));
	e->values = calloc((size_t)m->naggs * ntypes + 1, sizeof(*e->values));
	e->lbl = calloc(3 * (size_t)m->naggs + 1, sizeof(*e->lbl));
	e->lblp = calloc(3 * (size_t)m->naggs + 1, sizeof(*e->lblp));
	if (!e->smp || !e->smpp || !e->locids || !e->values || !e->lbl || !e->lblp)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->naggs; i++) {
		const struct out_agg *a = &m->aggs[i];
		uint32_t n = output__node_path(m, a->node, path);
		uint32_t ev = skip && n ? pp_event_of(opts, &m->frames[path[0]]) : 0;
		Perftools__Profiles__Sample *s = &e->smp[i];
		int64_t *v = &e->values[(size_t)i * ntypes];

		*s = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
		s->location_id = &e->locids[at];
		for (uint32_t j = 0; j + skip < n; j++)
			e->locids[at + s->n_location_id++] = (uint64_t)path[n - 1 - j] + 1;
		at += s->n_location_id;
		v[0] = (int64_t)a->count;
		for (uint32_t k = 0; k < opts->nevents && skip; k++)
			v[1 + k] = k == ev ? (int64_t)a->weight : 0;
		if (!skip)
			v[1] = (int64_t)a->weight;
		s->n_value = ntypes;
		s->value = v;
		pp_labels(e, &m->threads[a->thread], i);
		e->smpp[i] = s;
	}
	e->prof.n_sample = m->naggs;
	e->prof.sample = e->smpp;
	return 0;
}

/* A mapping: fully symbolized, so tools do not symbolize it again. */
static void pp_mapping(struct pp_enc *e, uint32_t i, uint64_t start, uint64_t limit,
		       uint64_t offset, const char *file, const char *build_id)
{
	Perftools__Profiles__Mapping *mp = &e->map[i];

	*mp = (Perftools__Profiles__Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
	mp->id = (uint64_t)i + 1;
	mp->memory_start = start;
	mp->memory_limit = limit;
	mp->file_offset = offset;
	mp->filename = (int64_t)str(&e->c, file);
	mp->build_id = build_id ? (int64_t)str(&e->c, build_id) : 0;
	mp->has_functions = mp->has_filenames = mp->has_line_numbers = 1;
	e->mapp[i] = mp;
}

/* The mappings: 1 for the Python frames, then the native DSOs' (id 2...). */
static int pp_mappings(struct pp_enc *e, const struct out_model *m, const struct pp_state *st)
{
	uint32_t n = 1 + (st ? st->nmaps : 0);

	e->map = calloc(n, sizeof(*e->map));
	e->mapp = calloc(n, sizeof(*e->mapp));
	if (!e->map || !e->mapp)
		return -ENOMEM;
	pp_mapping(e, 0, 0, 0, 0, m->nthreads ? m->threads[0].comm : "python", NULL);
	for (uint32_t i = 1; i < n; i++) {
		const struct pp_mapping *mp = &st->maps[i - 1];

		pp_mapping(e, i, mp->start, mp->limit, mp->offset, mp->file, mp->build_id);
	}
	e->prof.n_mapping = n;
	e->prof.mapping = e->mapp;
	return 0;
}

/* The functions: one per (name, file, first line, kind) (output_funcs.c);
 * function id = its index + 1. */
static int pp_functions(struct pp_enc *e, const struct out_model *m, const struct out_funcs *fx)
{
	e->fn = calloc(fx->n + 1, sizeof(*e->fn));
	e->fnp = calloc(fx->n + 1, sizeof(*e->fnp));
	if (!e->fn || !e->fnp)
		return -ENOMEM;
	for (uint32_t id = 0; id < fx->n; id++) {
		const struct out_frame *fr = &m->frames[fx->first[id]];
		Perftools__Profiles__Function *f = &e->fn[id];
		char unk[256];
		const char *name = out_func__name(fr, unk, sizeof(unk));

		*f = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
		f->id = (uint64_t)id + 1;
		f->name = f->system_name = (int64_t)str(&e->c, name);
		f->filename = (int64_t)str(&e->c, fr->kind == OUT_FRAME_KERNEL ?
						   "[kernel.kallsyms]" : fr->file);
		f->start_line = fr->firstlineno;
		e->fnp[id] = f;
	}
	e->prof.n_function = fx->n;
	e->prof.function = e->fnp;
	return 0;
}

/* The locations: one per frame, its function and line (and address in its
 * native mapping). */
static int pp_locations(struct pp_enc *e, const struct out_model *m, const struct pp_state *st,
			const struct out_funcs *fx)
{
	e->loc = calloc(m->nframes + 1, sizeof(*e->loc));
	e->locp = calloc(m->nframes + 1, sizeof(*e->locp));
	e->line = calloc(m->nframes + 1, sizeof(*e->line));
	e->linep = calloc(m->nframes + 1, sizeof(*e->linep));
	if (!e->loc || !e->locp || !e->line || !e->linep)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nframes; i++) {
		uint32_t mp = st && i < st->nframes ? st->mapping[i] : 0;
		Perftools__Profiles__Location *l = &e->loc[i];

		*l = (Perftools__Profiles__Location)PERFTOOLS__PROFILES__LOCATION__INIT;
		e->line[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
		l->id = (uint64_t)i + 1;
		l->mapping_id = (uint64_t)mp + 1;
		l->address = mp ? st->addr[i] : 0;
		e->line[i].function_id = (uint64_t)fx->of[i] + 1;
		e->line[i].line = m->frames[i].line;
		e->linep[i] = &e->line[i];
		l->n_line = 1;
		l->line = &e->linep[i];
		e->locp[i] = l;
	}
	e->prof.n_location = m->nframes;
	e->prof.location = e->locp;
	return 0;
}

/* Times, the period, the comments, and the string table last: every string
 * is known by now. */
static int pp_tail(struct pp_enc *e, const struct output *o, size_t ntypes)
{
	const struct out_model *m = &o->m;
	const char *first = o->opts.nevents > 1 ? o->opts.events[0] : pprof_kind(o);

	e->prof.time_nanos = (int64_t)o->opts.start_time_ns;
	e->prof.duration_nanos = (int64_t)(o->opts.duration_ns ? o->opts.duration_ns :
						  m->last_ts - m->first_ts);
	/* The period is the first event's with several. */
	value_type(&e->c, &e->vts[ntypes], first,
		   o->opts.nevents > 1 ? pp_event_unit(first) : pprof_unit(o));
	e->prof.period_type = &e->vts[ntypes];
	e->prof.period = (int64_t)m->first_period;
	e->prof.default_sample_type = (int64_t)str(&e->c, first);
	e->comments = calloc(o->opts.ncomments + 1, sizeof(*e->comments));
	if (!e->comments)
		return -ENOMEM;
	for (size_t i = 0; i < o->opts.ncomments; i++)
		e->comments[i] = (int64_t)str(&e->c, o->opts.comments[i]);
	e->prof.n_comment = o->opts.ncomments;
	e->prof.comment = e->comments;
	if (e->c.err)
		return e->c.err;
	e->prof.string_table = calloc(e->c.strs.n + 1, sizeof(*e->prof.string_table));
	if (!e->prof.string_table)
		return -ENOMEM;
	memcpy(e->prof.string_table, e->c.strs.strs, e->c.strs.n * sizeof(char *));
	e->prof.n_string_table = e->c.strs.n;
	return 0;
}

/* The sample types: samples/count, then cpu/nanoseconds (or what --mode
 * or -e weighs), or one per event. */
static size_t pp_sample_types(struct pp_enc *e, const struct output *o)
{
	size_t n = 0;

	value_type(&e->c, &e->vts[n++], "samples", "count");
	if (o->opts.nevents > 1)
		for (uint32_t k = 0; k < o->opts.nevents && n < PP_MAX_TYPES; k++)
			value_type(&e->c, &e->vts[n++], o->opts.events[k],
				   pp_event_unit(o->opts.events[k]));
	else
		value_type(&e->c, &e->vts[n++], pprof_kind(o), pprof_unit(o));
	for (size_t i = 0; i < n; i++)
		e->vtp[i] = &e->vts[i];
	e->prof.n_sample_type = n;
	e->prof.sample_type = e->vtp;
	return n;
}

int output_pprof__encode(struct output *o, uint8_t **out, size_t *len)
{
	const struct pp_state *st = o->priv;
	const struct out_model *m = &o->m;
	struct pp_enc e = { .prof = PERFTOOLS__PROFILES__PROFILE__INIT };
	struct out_funcs fx = { 0 };
	uint32_t *path = out_model__path_buf(m);
	size_t ntypes;
	int err;

	str(&e.c, "");
	ntypes = pp_sample_types(&e, o);
	err = path ? pp_samples(&e, m, &o->opts, path, ntypes) : -ENOMEM;
	if (!err)
		err = pp_mappings(&e, m, st);
	if (!err)
		err = out_funcs__build(m, &fx);
	if (!err)
		err = pp_functions(&e, m, &fx);
	if (!err)
		err = pp_locations(&e, m, st, &fx);
	if (!err)
		err = pp_tail(&e, o, ntypes);
	if (!err) {
		*len = perftools__profiles__profile__get_packed_size(&e.prof);
		*out = malloc(*len ? *len : 1);
		if (*out)
			perftools__profiles__profile__pack(&e.prof, *out);
		else
			err = -ENOMEM;
	}
	out_funcs__free(&fx);
	free(path);
	pp_enc_free(&e);
	return err;
}

static int pprof_finish(struct output *o)
{
	uint8_t *p = NULL;
	size_t n = 0;
	int err = output_pprof__encode(o, &p, &n);

	if (!err)
		err = gzip_out(o, p, n);
	free(p);
	return err;
}

const struct output_ops output_pprof_ops = {
	.aggregate = 1,
	.add = pprof_add,
	.finish = pprof_finish,
	.free_priv = pp_free,
};
