/* SPDX-License-Identifier: MIT */
/* resolver.c - a raw sample made a resolved one (resolver.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "asyncio/task_stacks.h"
#include "resolve/resolver.h"
#include "target/proc_follow.h"
#include "symbols/stack_memo.h"
#include "symbols/symbolizer.h"
#include "target/exc_offsets.h"
#include "target/exceptions.h"
#include "target/opcodes/opnames.h"
#include "target/procset.h"
#include "target/thread_names.h"
#include "util/clock.h"

/* Exception mode: type names already read, by type object (a direct-mapped
 * cache: types live long, and a name is one or two reads of the target). */
#define EXC_NAMES 64

struct exc_name {
	pid_t pid;
	uint64_t type;
	char name[80];		/* "[exception] NAME" */
};

struct resolver {
	struct resolver_opts o;
	struct exc_name exc[EXC_NAMES];
	uint64_t deadline_ns;
	tasks_of_fn tasks_of;
	void *tasks_ctx;
	struct resolver_stats st;
};

int resolver__new(const struct resolver_opts *o, struct resolver **out)
{
	struct resolver *rv = calloc(1, sizeof(*rv));

	*out = NULL;
	if (!rv)
		return -ENOMEM;
	rv->o = *o;
	*out = rv;
	return 0;
}

void resolver__free(struct resolver *rv)
{
	if (!rv)
		return;
	leaf_names__free(rv->o.leaf);
	thread_names__free(rv->o.names);
	native_mixer__free(rv->o.mixer);
	free(rv);
}

void resolver__set_deadline(struct resolver *rv, uint64_t deadline_ns)
{
	rv->deadline_ns = deadline_ns;
}

void resolver__set_tasks_fn(struct resolver *rv, tasks_of_fn fn, void *ctx)
{
	rv->tasks_of = fn;
	rv->tasks_ctx = ctx;
}

int resolver__add_code(struct resolver *rv, const struct raw_code *code)
{
	bool later;
	struct proc_entry *e = proc_follow__lookup(rv->o.follow, code->pid, &later);

	if (!e && later)
		return -EAGAIN;
	/* One that cannot be taken only leaves the object to be read later. */
	if (!e || symbolizer__add_code(e->sym, code))
		rv->st.snapshot_errors++;
	return 0;
}

const char *resolver__thread_name(struct resolver *rv, pid_t pid, pid_t tid, const char *comm)
{
	return thread_names__get(rv->o.names, pid, tid, comm);
}

/*
 * An off-CPU interval, ending at r->ts_ns: clipped to the window's end
 * (runnable time last, so first to go), as its blocked part (with why) and
 * its runnable part, each weighing its nanoseconds.
 */
static void split_interval(struct resolver *rv, const struct raw_sample *r, struct resolved *out)
{
	uint64_t blocked = r->blocked_ns, runnable = r->runnable_ns, cut;
	struct out_sample s = out->s[0];

	if (rv->deadline_ns && s.ts_ns > rv->deadline_ns) {
		cut = s.ts_ns - rv->deadline_ns;
		rv->st.clipped_ns += cut;
		if (cut >= runnable) {
			cut -= runnable;
			runnable = 0;
			blocked = cut >= blocked ? 0 : blocked - cut;
		} else {
			runnable -= cut;
		}
		s.ts_ns = rv->deadline_ns;
	}
	s.event = "offcpu-time";
	out->n = 0;
	if (blocked) {
		out->s[out->n] = s;
		out->s[out->n].period_ns = blocked;
		out->s[out->n].nleaf = rv->o.leaf ? leaf_names__frames(rv->o.leaf, r, LEAF_BLOCKED,
									false, out->leaf[out->n]) : 0;
		out->s[out->n].leaf = out->leaf[out->n];
		out->n++;
		s.unchanged = 0;	/* the next part is not the same stack again */
	}
	if (runnable) {
		out->s[out->n] = s;
		out->s[out->n].period_ns = runnable;
		out->s[out->n].nleaf = rv->o.leaf ? leaf_names__frames(rv->o.leaf, r, LEAF_RUNNABLE,
									false, out->leaf[out->n]) : 0;
		out->s[out->n].leaf = out->leaf[out->n];
		out->n++;
	}
}

/* --async: the task chain the sample carries spliced into its stack. */
static int splice_tasks(struct resolver *rv, struct proc_entry *e, const struct raw_sample *r,
			struct out_sample *s)
{
	struct task_stacks *ts;
	int rc;

	if (!rv->tasks_of || !r->ntasks || !(ts = rv->tasks_of(rv->tasks_ctx, e)))
		return 0;
	rc = task_stacks__splice(ts, r, mono_ns(), s->frames,
				 rv->o.mixer && r->uregs ? s->kinds : NULL, s->nframes,
				 &s->frames, &s->kinds, &s->nframes);
	if (rc < 0)
		return rc;
	if (rc)
		s->unchanged = 0;
	return 0;
}

/* "[exception] NAME" of exception type @type of @e's process. */
static const char *exc_leaf(struct resolver *rv, struct proc_entry *e, uint64_t type)
{
	struct exc_name *x = &rv->exc[(type >> 4) % EXC_NAMES];
	char name[64];

	if (type == EXC_TYPE_CHAIN_CUT)
		return "[exception-chain-cut]";
	if (x->pid == e->pid && x->type == type)
		return x->name;
	if (!e->p || exceptions__type_name(e->p, type, name, sizeof(name)))
		return "[exception] ?";	/* not kept: read again next time */
	x->pid = e->pid;
	x->type = type;
	snprintf(x->name, sizeof(x->name), "[exception] %s", name);
	return x->name;
}

/* A tick: native frames merged, tasks spliced, leaf frames added. */
static int finish_tick(struct resolver *rv, struct proc_entry *e, const struct raw_sample *orig,
		       const struct raw_sample *r, struct resolved *out)
{
	struct out_sample *s = &out->s[0];
	int rc;

	if (rv->o.mixer && r->uregs)
		native_mixer__merge(rv->o.mixer, r, s, &out->end);
	rc = splice_tasks(rv, e, r, s);
	if (rc)
		return rc;
	s->nleaf = 0;
	s->leaf = out->leaf[0];
	if (orig->exc_type)
		out->leaf[0][s->nleaf++] = (struct out_leaf){ OUT_FRAME_STATUS,
							      exc_leaf(rv, e, orig->exc_type) };
	/* --opcodes: the instruction, next to the frame that executed it. */
	if ((orig->opcode & SAMPLE_OP_KNOWN) && r->nframes && e->p)
		out->leaf[0][s->nleaf++] = (struct out_leaf){
			OUT_FRAME_STATUS, opnames__leaf(pyproc__offsets(e->p)->version_hex,
							(uint8_t)orig->opcode, out->op,
							sizeof(out->op)) };
	if (rv->o.leaf)
		s->nleaf += leaf_names__frames(rv->o.leaf, orig, LEAF_CPU, rv->o.gil_mode,
					       out->leaf[0] + s->nleaf);
	out->n = 1;
	return 0;
}

int resolver__resolve(struct resolver *rv, const struct raw_sample *r, struct resolved *out)
{
	bool later;
	struct proc_entry *e = proc_follow__lookup(rv->o.follow, r->pid, &later);
	const struct raw_sample *orig = r;
	struct raw_sample stripped;
	int rc;

	out->n = 0;
	out->end = (struct stack_end){ 0 };
	if (!e && later)
		return -EAGAIN;
	if (!e) {
		sampler_stats__count(&rv->st.unknown, r->status);
		return -ENOENT;
	}
	e->samples++;
	if (rv->o.nevents > 1 && r->event < rv->o.nevents && r->event < SAMPLE_MAX_EVENTS) {
		rv->st.event_samples[r->event]++;
		rv->st.event_weight[r->event] += r->period;
	}
	out->s[0] = (struct out_sample){
		.comm = e->comm, .pid = r->pid, .tid = r->tid, .cpu = r->cpu, .ts_ns = r->ts_ns,
		.period_ns = r->period ? r->period * (rv->o.event_scale ? rv->o.event_scale : 1) :
			     rv->o.period_ns, .status = r->status,
		.event = rv->o.nevents > 1 && r->event < rv->o.nevents ? rv->o.events[r->event] :
			 rv->o.event,
		.thread_name = thread_names__get(rv->o.names, r->pid, r->tid, e->comm),
	};
	/* --native: every sample, one of no Python frame too (start-up,
	 * finalization): its runs are its own, never the last sample's. */
	if (rv->o.mixer) {
		rc = native_mixer__strip(rv->o.mixer, r, &stripped);
		if (rc)
			return rc;
		r = &stripped;
	}
	/* -ENOMEM only costs the reuse: the symbols are there. */
	stack_memo__resolve(e->memo, e->sym, r, &out->s[0].frames, &out->s[0].nframes,
			    &out->s[0].unchanged, &rv->st.unresolved);
	if (r->kind == SAMPLE_KIND_OFFCPU) {
		rc = splice_tasks(rv, e, r, &out->s[0]);
		if (rc)
			return rc;
		split_interval(rv, r, out);
		return 0;
	}
	return finish_tick(rv, e, orig, r, out);
}

void resolver__drop(struct resolver *rv, const struct raw_sample *r)
{
	sampler_stats__count(&rv->st.unknown, r->status);
}

void resolver__drop_code(struct resolver *rv)
{
	rv->st.snapshot_errors++;
}

void resolver__stats(const struct resolver *rv, struct resolver_stats *st)
{
	*st = rv->st;
}

const struct native_mixer *resolver__mixer(const struct resolver *rv)
{
	return rv->o.mixer;
}
