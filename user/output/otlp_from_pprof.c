// SPDX-License-Identifier: MIT
/*
 * otlp_from_pprof.c - a pprof profile as an OTLP profiles export request
 * (otlp.h). The pprof is unpacked and the request packed by protoc-c's
 * generated code; this file only maps one's tables onto the other's.
 * The pprof may come from a spool file: every index in it is checked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "output/otlp.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "perftools/profiles/profile.pb-c.h"

#define P(x) Opentelemetry__Proto__Profiles__V1development__##x
#define PINIT(x) OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__##x##__INIT
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Perftools__Profiles__Profile Pprof;

/* An id of the pprof (a mapping's, a function's, a location's) and its
 * index in the request's table. */
struct id_index {
	uint64_t id;
	int32_t index;
};

struct id_map {
	struct id_index *v;
	size_t n;
};

/* One open-addressed set of int32 table indices, hashed by the caller. */
struct index_set {
	int32_t *slot;		/* -1: empty */
	size_t mask;
};

struct conv {
	const Pprof *pp;
	/* The string table: the pprof's, then the strings added here. */
	char **strs;
	size_t nstrs, cap;
	struct id_map maps, fns, locs;
	P(Mapping) *mapv, **mapp;
	P(Function) *fnv, **fnp;
	P(Location) *locv, **locp;
	P(Line) *linev, **linep;
	P(Stack) *stackv, **stackp;
	int32_t *stack_locs;	/* every stack's location indices, one after another */
	size_t nstacks, nstack_locs;
	struct index_set stack_set;
	P(KeyValueAndUnit) *attrv, **attrp;
	AnyValue *anyv;
	size_t nattrs;
	struct index_set attr_set;
	/* Per pprof sample: its stack and attributes (2 at most) in the
	 * request, and its process (an index into pids). */
	int32_t *sample_stack, *sample_attrs;
	uint8_t *sample_nattrs;
	size_t *sample_proc;
	int64_t *pids;
	size_t npids;
	int32_t key_tid, key_tname;
};

static int cmp_id(const void *a, const void *b)
{
	const struct id_index *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* The request's index of pprof id @id; 0 (the zero entry) for id 0; -1
 * for an id the pprof does not define. */
static int32_t id_map__find(const struct id_map *m, uint64_t id)
{
	struct id_index key = { .id = id }, *hit;

	if (!id)
		return 0;
	hit = bsearch(&key, m->v, m->n, sizeof(*m->v), cmp_id);
	return hit ? hit->index : -1;
}

/* Id @ids[i] at index i + 1 (@n ids); two alike are -EINVAL. */
static int id_map__build(struct id_map *m, const uint64_t *ids, size_t n)
{
	m->v = calloc(n ? n : 1, sizeof(*m->v));
	if (!m->v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		m->v[i] = (struct id_index){ .id = ids[i], .index = (int32_t)(i + 1) };
	m->n = n;
	qsort(m->v, n, sizeof(*m->v), cmp_id);
	for (size_t i = 1; i < n; i++)
		if (m->v[i].id == m->v[i - 1].id)
			return -EINVAL;
	return 0;
}

/* The ids of the pprof's mappings, functions and locations, mapped. */
static int id_maps_build(struct conv *c)
{
	const Pprof *pp = c->pp;
	size_t n = pp->n_mapping > pp->n_function ? pp->n_mapping : pp->n_function;
	uint64_t *ids = calloc((n > pp->n_location ? n : pp->n_location) + 1, sizeof(*ids));
	int err;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < pp->n_mapping; i++)
		ids[i] = pp->mapping[i]->id;
	err = id_map__build(&c->maps, ids, pp->n_mapping);
	for (size_t i = 0; !err && i < pp->n_function; i++)
		ids[i] = pp->function[i]->id;
	if (!err)
		err = id_map__build(&c->fns, ids, pp->n_function);
	for (size_t i = 0; !err && i < pp->n_location; i++)
		ids[i] = pp->location[i]->id;
	if (!err)
		err = id_map__build(&c->locs, ids, pp->n_location);
	free(ids);
	return err;
}

static int index_set__init(struct index_set *s, size_t want)
{
	size_t n = 16;

	while (n < 2 * want)
		n <<= 1;
	s->slot = malloc(n * sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	memset(s->slot, 0xff, n * sizeof(*s->slot));
	s->mask = n - 1;
	return 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

/* A pprof string index as the request's, or -1 when out of the table. */
static int32_t pp_str(const struct conv *c, int64_t i)
{
	return i >= 0 && (uint64_t)i < c->pp->n_string_table ? (int32_t)i : -1;
}

/* The index of @s in the string table, added when new. */
static int32_t str_index(struct conv *c, const char *s)
{
	for (size_t i = 0; i < c->nstrs; i++)
		if (!strcmp(c->strs[i], s))
			return (int32_t)i;
	if (c->nstrs == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		char **v = realloc(c->strs, cap * sizeof(*v));

		if (!v)
			return -1;
		c->strs = v;
		c->cap = cap;
	}
	c->strs[c->nstrs] = (char *)s;	/* packed, never written */
	return (int32_t)c->nstrs++;
}

static int tables_alloc(struct conv *c)
{
	const Pprof *pp = c->pp;
	size_t nlines = 0, nlocs = 0, nlabels = 0;

	for (size_t i = 0; i < pp->n_location; i++)
		nlines += pp->location[i]->n_line;
	for (size_t i = 0; i < pp->n_sample; i++) {
		nlocs += pp->sample[i]->n_location_id;
		nlabels += pp->sample[i]->n_label;
	}
	c->mapv = calloc(pp->n_mapping + 1, sizeof(*c->mapv));
	c->mapp = calloc(pp->n_mapping + 1, sizeof(*c->mapp));
	c->fnv = calloc(pp->n_function + 1, sizeof(*c->fnv));
	c->fnp = calloc(pp->n_function + 1, sizeof(*c->fnp));
	c->locv = calloc(pp->n_location + 1, sizeof(*c->locv));
	c->locp = calloc(pp->n_location + 1, sizeof(*c->locp));
	c->linev = calloc(nlines + 1, sizeof(*c->linev));
	c->linep = calloc(nlines + 1, sizeof(*c->linep));
	c->stackv = calloc(pp->n_sample + 1, sizeof(*c->stackv));
	c->stackp = calloc(pp->n_sample + 1, sizeof(*c->stackp));
	c->stack_locs = calloc(nlocs + 1, sizeof(*c->stack_locs));
	c->attrv = calloc(nlabels + 1, sizeof(*c->attrv));
	c->attrp = calloc(nlabels + 1, sizeof(*c->attrp));
	c->anyv = calloc(nlabels + 1, sizeof(*c->anyv));
	c->sample_stack = calloc(pp->n_sample + 1, sizeof(*c->sample_stack));
	c->sample_attrs = calloc(2 * pp->n_sample + 1, sizeof(*c->sample_attrs));
	c->sample_nattrs = calloc(pp->n_sample + 1, sizeof(*c->sample_nattrs));
	c->sample_proc = calloc(pp->n_sample + 1, sizeof(*c->sample_proc));
	c->pids = calloc(pp->n_sample + 1, sizeof(*c->pids));
	if (!c->mapv || !c->mapp || !c->fnv || !c->fnp || !c->locv || !c->locp || !c->linev ||
	    !c->linep || !c->stackv || !c->stackp || !c->stack_locs || !c->attrv || !c->attrp ||
	    !c->anyv || !c->sample_stack || !c->sample_attrs || !c->sample_nattrs ||
	    !c->sample_proc || !c->pids)
		return -ENOMEM;
	if (index_set__init(&c->stack_set, pp->n_sample + 1) ||
	    index_set__init(&c->attr_set, nlabels + 1))
		return -ENOMEM;
	return 0;
}

static void conv_free(struct conv *c)
{
	free(c->strs);
	free(c->maps.v);
	free(c->fns.v);
	free(c->locs.v);
	free(c->mapv);
	free(c->mapp);
	free(c->fnv);
	free(c->fnp);
	free(c->locv);
	free(c->locp);
	free(c->linev);
	free(c->linep);
	free(c->stackv);
	free(c->stackp);
	free(c->stack_locs);
	free(c->attrv);
	free(c->attrp);
	free(c->anyv);
	free(c->stack_set.slot);
	free(c->attr_set.slot);
	free(c->sample_stack);
	free(c->sample_attrs);
	free(c->sample_nattrs);
	free(c->sample_proc);
	free(c->pids);
}

/* The mapping, function and location tables, each led by its zero entry. */
static int dictionary_tables(struct conv *c)
{
	const Pprof *pp = c->pp;
	P(Mapping) zmap = PINIT(MAPPING);
	P(Function) zfn = PINIT(FUNCTION);
	P(Location) zloc = PINIT(LOCATION);
	P(Line) zline = PINIT(LINE);
	size_t nl = 0;

	int err = id_maps_build(c);

	if (err)
		return err;
	for (size_t i = 0; i <= pp->n_mapping; i++) {
		c->mapv[i] = zmap;
		c->mapp[i] = &c->mapv[i];
		if (!i)
			continue;
		c->mapv[i].memory_start = pp->mapping[i - 1]->memory_start;
		c->mapv[i].memory_limit = pp->mapping[i - 1]->memory_limit;
		c->mapv[i].file_offset = pp->mapping[i - 1]->file_offset;
		if ((c->mapv[i].filename_strindex = pp_str(c, pp->mapping[i - 1]->filename)) < 0)
			return -EINVAL;
	}
	for (size_t i = 0; i <= pp->n_function; i++) {
		const Perftools__Profiles__Function *f = i ? pp->function[i - 1] : NULL;

		c->fnv[i] = zfn;
		c->fnp[i] = &c->fnv[i];
		if (!f)
			continue;
		c->fnv[i].name_strindex = pp_str(c, f->name);
		c->fnv[i].system_name_strindex = pp_str(c, f->system_name);
		c->fnv[i].filename_strindex = pp_str(c, f->filename);
		c->fnv[i].start_line = f->start_line;
		if (c->fnv[i].name_strindex < 0 || c->fnv[i].system_name_strindex < 0 ||
		    c->fnv[i].filename_strindex < 0)
			return -EINVAL;
	}
	c->linev[0] = zline;
	for (size_t i = 0; i <= pp->n_location; i++) {
		const Perftools__Profiles__Location *l = i ? pp->location[i - 1] : NULL;

		c->locv[i] = zloc;
		c->locp[i] = &c->locv[i];
		if (!l)
			continue;
		if ((c->locv[i].mapping_index = id_map__find(&c->maps, l->mapping_id)) < 0)
			return -EINVAL;
		c->locv[i].address = l->address;
		c->locv[i].n_lines = l->n_line;
		c->locv[i].lines = &c->linep[nl];
		for (size_t k = 0; k < l->n_line; k++, nl++) {
			c->linev[nl] = zline;
			c->linep[nl] = &c->linev[nl];
			c->linev[nl].line = l->line[k]->line;
			c->linev[nl].column = l->line[k]->column;
			if ((c->linev[nl].function_index =
				     id_map__find(&c->fns, l->line[k]->function_id)) < 0)
				return -EINVAL;
		}
	}
	return 0;
}

/* The stack of pprof sample @s, added to the stack table when new. */
static int32_t stack_of(struct conv *c, const Perftools__Profiles__Sample *s)
{
	int32_t *locs = &c->stack_locs[c->nstack_locs];
	uint64_t h = s->n_location_id;
	size_t i;

	for (size_t k = 0; k < s->n_location_id; k++) {
		if ((locs[k] = id_map__find(&c->locs, s->location_id[k])) <= 0)
			return -1;
		h = mix(h, (uint64_t)locs[k]);
	}
	for (i = h & c->stack_set.mask; c->stack_set.slot[i] >= 0; i = (i + 1) & c->stack_set.mask) {
		const P(Stack) *st = &c->stackv[c->stack_set.slot[i]];

		if (st->n_location_indices == s->n_location_id &&
		    !memcmp(st->location_indices, locs, s->n_location_id * sizeof(*locs)))
			return c->stack_set.slot[i];
	}
	c->stackv[c->nstacks] = (P(Stack))PINIT(STACK);
	c->stackv[c->nstacks].n_location_indices = s->n_location_id;
	c->stackv[c->nstacks].location_indices = locs;
	c->stackp[c->nstacks] = &c->stackv[c->nstacks];
	c->nstack_locs += s->n_location_id;
	c->stack_set.slot[i] = (int32_t)c->nstacks;
	return (int32_t)c->nstacks++;
}

/* The attribute @key = a string (@sidx >= 0, a string index) or @num,
 * added to the attribute table when new. */
static int32_t attr_of(struct conv *c, int32_t key, int32_t sidx, int64_t num)
{
	uint64_t h = mix(mix((uint64_t)key, (uint64_t)sidx), (uint64_t)num);
	size_t i;

	for (i = h & c->attr_set.mask; c->attr_set.slot[i] >= 0; i = (i + 1) & c->attr_set.mask) {
		const P(KeyValueAndUnit) *a = &c->attrv[c->attr_set.slot[i]];

		if (a->key_strindex != key)
			continue;
		if (sidx >= 0 ? a->value->value_case ==
					OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
				      a->value->string_value == c->strs[sidx]
			      : a->value->value_case ==
					OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE &&
				      a->value->int_value == num)
			return c->attr_set.slot[i];
	}
	c->anyv[c->nattrs] = (AnyValue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	if (sidx >= 0) {
		c->anyv[c->nattrs].value_case =
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		c->anyv[c->nattrs].string_value = c->strs[sidx];
	} else {
		c->anyv[c->nattrs].value_case =
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		c->anyv[c->nattrs].int_value = num;
	}
	c->attrv[c->nattrs] = (P(KeyValueAndUnit))PINIT(KEY_VALUE_AND_UNIT);
	c->attrv[c->nattrs].key_strindex = key;
	c->attrv[c->nattrs].value = &c->anyv[c->nattrs];
	c->attrp[c->nattrs] = &c->attrv[c->nattrs];
	c->attr_set.slot[i] = (int32_t)c->nattrs;
	return (int32_t)c->nattrs++;
}

/* The process (by its "pid" label) of sample @k: an index into pids. */
static size_t proc_of(struct conv *c, int64_t pid)
{
	for (size_t i = 0; i < c->npids; i++)
		if (c->pids[i] == pid)
			return i;
	c->pids[c->npids] = pid;
	return c->npids++;
}

/* Each sample's stack, thread attributes and process. */
static int sample_keys(struct conv *c)
{
	const Pprof *pp = c->pp;
	P(KeyValueAndUnit) zattr = PINIT(KEY_VALUE_AND_UNIT);
	static AnyValue zany = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;

	c->anyv[0] = zany;
	c->attrv[0] = zattr;
	c->attrv[0].value = NULL;
	c->attrp[0] = &c->attrv[0];
	c->nattrs = 1;
	c->stackv[0] = (P(Stack))PINIT(STACK);
	c->stackp[0] = &c->stackv[0];
	c->nstacks = 1;
	for (size_t k = 0; k < pp->n_sample; k++) {
		const Perftools__Profiles__Sample *s = pp->sample[k];
		int64_t pid = 0;

		if ((c->sample_stack[k] = stack_of(c, s)) < 0)
			return -EINVAL;
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];
			int32_t key = pp_str(c, l->key), val = pp_str(c, l->str), a = -1;

			if (key < 0 || val < 0)
				return -EINVAL;
			if (!strcmp(c->strs[key], "pid"))
				pid = l->num;
			else if (!strcmp(c->strs[key], "thread_id"))
				a = attr_of(c, c->key_tid, -1, l->num);
			else if (!strcmp(c->strs[key], "thread_name") && val > 0)
				a = attr_of(c, c->key_tname, val, 0);
			if (a > 0 && c->sample_nattrs[k] < 2)
				c->sample_attrs[2 * k + c->sample_nattrs[k]++] = a;
		}
		c->sample_proc[k] = proc_of(c, pid);
	}
	return 0;
}

/* The OTLP name of a pprof sample type. */
static const char *type_name(const char *pprof_type)
{
	return !strcmp(pprof_type, "off-cpu") ? "off_cpu" : pprof_type;
}

struct built {
	P(ResourceProfiles) *rp, **rpp;
	P(ScopeProfiles) *sp, **spp;
	P(Profile) *prof, **profp;
	P(ValueType) *vt;
	P(Sample) *smp, **smpp;
	int64_t *values;
	KeyValue *kv, **kvp;
	AnyValue *kvany;
	Opentelemetry__Proto__Resource__V1__Resource *res;
	Opentelemetry__Proto__Common__V1__InstrumentationScope *scope;
};

static void built_free(struct built *b)
{
	free(b->rp);
	free(b->rpp);
	free(b->sp);
	free(b->spp);
	free(b->prof);
	free(b->profp);
	free(b->vt);
	free(b->smp);
	free(b->smpp);
	free(b->values);
	free(b->kv);
	free(b->kvp);
	free(b->kvany);
	free(b->res);
	free(b->scope);
}

/* The described process of @pid in @res, NULL when none is. */
static const struct otlp_resource *described(const struct otlp_resource *res, size_t nres,
					     int64_t pid)
{
	for (size_t i = 0; i < nres; i++)
		if (res[i].pid == pid)
			return &res[i];
	return NULL;
}

/* Process @p's resource: process.pid, then what @r says. */
static void resource_of(struct built *b, size_t p, int64_t pid, const struct otlp_resource *r,
			size_t *nkv)
{
	Opentelemetry__Proto__Resource__V1__Resource zres =
		OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	size_t first = *nkv, n = r ? r->nattrs : 0;

	for (size_t i = 0; i <= n; i++, (*nkv)++) {
		KeyValue *kv = &b->kv[*nkv];
		AnyValue *v = &b->kvany[*nkv];
		const struct otlp_attr *a = i ? &r->attrs[i - 1] : NULL;

		*kv = (KeyValue)OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
		*v = (AnyValue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
		kv->key = (char *)(a ? a->key : "process.pid");
		if (a && a->str) {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			v->string_value = (char *)a->str;
		} else {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			v->int_value = a ? a->num : pid;
		}
		kv->value = v;
		b->kvp[*nkv] = kv;
	}
	b->res[p] = zres;
	b->res[p].n_attributes = *nkv - first;
	b->res[p].attributes = &b->kvp[first];
}

static size_t ntypes_of(const Pprof *pp)
{
	return pp->n_sample_type > 1 ? pp->n_sample_type - 1 : pp->n_sample_type;
}

/* One Profile per (process, sample type), each holding the process's
 * samples that weigh something in that type. */
static int profiles_of(struct conv *c, struct built *b, const struct otlp_resource *res,
		       size_t nres)
{
	const Pprof *pp = c->pp;
	size_t ntypes = ntypes_of(pp), skip = pp->n_sample_type > 1, nkv = 0, ns = 0;
	size_t nattrs_res = c->npids;

	for (size_t i = 0; i < nres; i++)
		nattrs_res += res[i].nattrs;
	b->rp = calloc(c->npids, sizeof(*b->rp));
	b->rpp = calloc(c->npids, sizeof(*b->rpp));
	b->sp = calloc(c->npids, sizeof(*b->sp));
	b->spp = calloc(c->npids, sizeof(*b->spp));
	b->res = calloc(c->npids, sizeof(*b->res));
	b->prof = calloc(c->npids * ntypes, sizeof(*b->prof));
	b->profp = calloc(c->npids * ntypes, sizeof(*b->profp));
	b->vt = calloc(2 * ntypes + 2, sizeof(*b->vt));
	b->smp = calloc(pp->n_sample * ntypes + 1, sizeof(*b->smp));
	b->smpp = calloc(pp->n_sample * ntypes + 1, sizeof(*b->smpp));
	b->values = calloc(pp->n_sample * ntypes + 1, sizeof(*b->values));
	b->kv = calloc(nattrs_res + c->npids, sizeof(*b->kv));
	b->kvp = calloc(nattrs_res + c->npids, sizeof(*b->kvp));
	b->kvany = calloc(nattrs_res + c->npids, sizeof(*b->kvany));
	b->scope = calloc(1, sizeof(*b->scope));
	if (!b->rp || !b->rpp || !b->sp || !b->spp || !b->res || !b->prof || !b->profp ||
	    !b->vt || !b->smp || !b->smpp || !b->values || !b->kv || !b->kvp || !b->kvany ||
	    !b->scope)
		return -ENOMEM;
	*b->scope = (Opentelemetry__Proto__Common__V1__InstrumentationScope)
		OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	b->scope->name = "pyprof-bpf";
	for (size_t t = 0; t < ntypes; t++) {
		const Perftools__Profiles__ValueType *vt = pp->sample_type[t + skip];
		int32_t type = pp_str(c, vt->type), unit = pp_str(c, vt->unit);

		if (type < 0 || unit < 0)
			return -EINVAL;
		b->vt[t] = (P(ValueType))PINIT(VALUE_TYPE);
		b->vt[t].type_strindex = str_index(c, type_name(c->strs[type]));
		b->vt[t].unit_strindex = unit;
		if (b->vt[t].type_strindex < 0)
			return -ENOMEM;
	}
	if (pp->period_type) {
		b->vt[ntypes] = (P(ValueType))PINIT(VALUE_TYPE);
		b->vt[ntypes].type_strindex = pp_str(c, pp->period_type->type);
		b->vt[ntypes].unit_strindex = pp_str(c, pp->period_type->unit);
		if (b->vt[ntypes].type_strindex < 0 || b->vt[ntypes].unit_strindex < 0)
			return -EINVAL;
	}
	for (size_t p = 0; p < c->npids; p++) {
		resource_of(b, p, c->pids[p], described(res, nres, c->pids[p]), &nkv);
		for (size_t t = 0; t < ntypes; t++) {
			P(Profile) *pr = &b->prof[p * ntypes + t];

			*pr = (P(Profile))PINIT(PROFILE);
			pr->sample_type = &b->vt[t];
			pr->time_unix_nano = (uint64_t)pp->time_nanos;
			pr->duration_nano = (uint64_t)pp->duration_nanos;
			pr->period_type = pp->period_type ? &b->vt[ntypes] : NULL;
			pr->period = pp->period;
			pr->samples = &b->smpp[ns];
			for (size_t k = 0; k < pp->n_sample; k++) {
				const Perftools__Profiles__Sample *s = pp->sample[k];
				P(Sample) *o = &b->smp[ns];

				if (c->sample_proc[k] != p || s->n_value != pp->n_sample_type ||
				    !s->value[t + skip])
					continue;
				*o = (P(Sample))PINIT(SAMPLE);
				o->stack_index = c->sample_stack[k];
				o->n_attribute_indices = c->sample_nattrs[k];
				o->attribute_indices = &c->sample_attrs[2 * k];
				b->values[ns] = s->value[t + skip];
				o->n_values = 1;
				o->values = &b->values[ns];
				b->smpp[ns++] = o;
				pr->n_samples++;
			}
			b->profp[p * ntypes + t] = pr;
		}
		b->sp[p] = (P(ScopeProfiles))PINIT(SCOPE_PROFILES);
		b->sp[p].scope = b->scope;
		b->sp[p].n_profiles = ntypes;
		b->sp[p].profiles = &b->profp[p * ntypes];
		b->spp[p] = &b->sp[p];
		b->rp[p] = (P(ResourceProfiles))PINIT(RESOURCE_PROFILES);
		b->rp[p].resource = &b->res[p];
		b->rp[p].n_scope_profiles = 1;
		b->rp[p].scope_profiles = &b->spp[p];
		b->rpp[p] = &b->rp[p];
	}
	return 0;
}

/* The whole request, packed into *@out. */
static int pack(struct conv *c, struct built *b, uint8_t **out, size_t *outlen)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest req =
		OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	P(ProfilesDictionary) dict = PINIT(PROFILES_DICTIONARY);
	static uint8_t zero_trace[16], zero_span[8];
	P(Link) zlink = PINIT(LINK), *linkp = &zlink;

	zlink.trace_id.data = zero_trace;
	zlink.trace_id.len = sizeof(zero_trace);
	zlink.span_id.data = zero_span;
	zlink.span_id.len = sizeof(zero_span);
	dict.n_mapping_table = c->pp->n_mapping + 1;
	dict.mapping_table = c->mapp;
	dict.n_location_table = c->pp->n_location + 1;
	dict.location_table = c->locp;
	dict.n_function_table = c->pp->n_function + 1;
	dict.function_table = c->fnp;
	dict.n_link_table = 1;
	dict.link_table = &linkp;
	dict.n_string_table = c->nstrs;
	dict.string_table = c->strs;
	dict.n_attribute_table = c->nattrs;
	dict.attribute_table = c->attrp;
	dict.n_stack_table = c->nstacks;
	dict.stack_table = c->stackp;
	req.dictionary = &dict;
	req.n_resource_profiles = c->npids;
	req.resource_profiles = b->rpp;
	*outlen = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(&req);
	*out = malloc(*outlen ? *outlen : 1);
	if (!*out)
		return -ENOMEM;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(&req, *out);
	return 0;
}

int otlp__from_pprof(const void *pprof, size_t len, const struct otlp_resource *res,
		     size_t nres, uint8_t **out, size_t *outlen)
{
	struct conv c = { 0 };
	struct built b = { 0 };
	Pprof *pp = perftools__profiles__profile__unpack(NULL, len, pprof);
	int err;

	if (!pp)
		return -EINVAL;
	c.pp = pp;
	/* The pprof's strings keep their indices; str_index() adds after them. */
	err = pp->n_string_table && !pp->string_table[0][0] && pp->n_sample_type ? 0 : -EINVAL;
	c.cap = pp->n_string_table + 16;
	if (!err && !(c.strs = malloc(c.cap * sizeof(*c.strs))))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < pp->n_string_table; i++)
		c.strs[c.nstrs++] = pp->string_table[i];
	if (!err)
		err = tables_alloc(&c);
	if (!err && ((c.key_tid = str_index(&c, "thread.id")) < 0 ||
		     (c.key_tname = str_index(&c, "thread.name")) < 0))
		err = -ENOMEM;
	if (!err)
		err = dictionary_tables(&c);
	if (!err)
		err = sample_keys(&c);
	if (!err)
		err = profiles_of(&c, &b, res, nres);
	if (!err)
		err = pack(&c, &b, out, outlen);
	built_free(&b);
	conv_free(&c);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	return err;
}

static const char *copy_text(struct otlp_resource *r, const char *s)
{
	size_t n = strlen(s) + 1;
	char *at = r->text + r->used;

	if (n > sizeof(r->text) - r->used)
		return NULL;
	memcpy(at, s, n);
	r->used += n;
	return at;
}

int otlp_resource__add(struct otlp_resource *r, const char *key, const char *str, int64_t num)
{
	size_t used = r->used;
	struct otlp_attr a = { .num = num };

	for (size_t i = 0; i < r->nattrs; i++)
		if (!strcmp(r->attrs[i].key, key))
			return 0;
	if (r->nattrs == OTLP_ATTRS_MAX || !(a.key = copy_text(r, key)) ||
	    (str && !(a.str = copy_text(r, str)))) {
		r->used = used;
		return -E2BIG;
	}
	r->attrs[r->nattrs++] = a;
	return 0;
}

int otlp_resource__add_host(struct otlp_resource *r)
{
	struct utsname u;
	const char *arch;

	if (uname(&u))
		return -errno;
	arch = !strcmp(u.machine, "x86_64") ? "amd64" : !strcmp(u.machine, "aarch64") ? "arm64" :
									      u.machine;
	return otlp_resource__add(r, "host.name", u.nodename, 0) ?:
	       otlp_resource__add(r, "host.arch", arch, 0);
}
