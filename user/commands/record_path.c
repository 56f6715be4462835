// SPDX-License-Identifier: MIT
/*
 * record_path.c - a sample's path through the recording: the callbacks the
 * sampler calls inside a poll (samples, code snapshots, process events),
 * and what they could not do there, done between polls.
 *
 * Inside a poll the path only walks down: resolver, then sinks. A process
 * to open (a child's first sample, -a's evicted one met again), a process
 * event (a fork, exec or exit changes what is sampled and how it is named)
 * and what the sampler is to be told (configure or forget a process, a
 * thread's stack end) wait: the record is held (record_hold.h) and
 * everything after it in the poll too, so that the order stays the
 * sampler's (code snapshots before the samples that hold them, an exec
 * before the samples of its new image). recording__replay() then applies
 * them in order, opening processes and telling the sampler through
 * sampler.h, between polls.
 */
#include <errno.h>
#include <stdlib.h>
#include "commands/recording.h"
#include "resolve/resolver.h"
#include "target/proc_follow.h"
#include "target/procset.h"

/* The resolver, then the sinks. -EAGAIN from the resolver: held. */
static int resolve_and_emit(struct recording *rec, const struct raw_sample *r, bool replay)
{
	struct resolved res;
	int rc;

	rc = resolver__resolve(rec->rv, r, &res);
	if (rc == -EAGAIN && !replay) {
		record_hold__sample(&rec->hold, r);	/* else counted as lost */
		return 0;
	}
	if (rc == -EAGAIN) {
		/* Opened, yet not to be read: as a process that could not be. */
		resolver__drop(rec->rv, r);
		return 0;
	}
	if (rc == -ENOENT)
		return 0;	/* a process that could not be opened: counted */
	if (rc)
		return rc;
	/* What the sample taught of its thread's stack bounds the next copies. */
	if (res.end.set && recording__queue_stack_end(rec, res.end.tid, res.end.end))
		return -ENOMEM;
	for (uint32_t i = 0; i < res.n; i++) {
		rc = sinks__emit(&rec->sinks, &res.s[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* One raw sample down the path: the window's check, the resolver, the sinks. */
static int on_sample(void *ctx, const struct raw_sample *r)
{
	struct recording *rec = ctx;
	bool offcpu = r->kind == SAMPLE_KIND_OFFCPU;

	/* An interval ends when its thread runs again: one that began
	 * before -d's end is kept, clipped. */
	if (rec->deadline_ns && (offcpu ? r->ts_ns - r->blocked_ns - r->runnable_ns : r->ts_ns) >
	    rec->deadline_ns) {
		if (!offcpu)
			rec->past_deadline = 1;	/* taken after -d ended: not part of it */
		sampler_stats__count(&rec->late, r->status);
		return offcpu ? 0 : 1;
	}
	if (record_hold__busy(&rec->hold)) {
		record_hold__sample(&rec->hold, r);	/* else counted as lost */
		return 0;
	}
	return resolve_and_emit(rec, r, false);
}

static void on_code(void *ctx, const struct raw_code *code)
{
	struct recording *rec = ctx;

	if (record_hold__busy(&rec->hold) || resolver__add_code(rec->rv, code) == -EAGAIN)
		record_hold__code(&rec->hold, code);
}

/* The sampler's process events: a command starting is counted here, the
 * rest applied between polls. */
static void on_proc(void *ctx, enum sampler_proc_event ev, pid_t pid, pid_t ppid, uint64_t ts_ns)
{
	struct recording *rec = ctx;
	const struct record_env *env = rec->env;

	if (pid == env->pid && rec->launching) {
		if (ev == SAMPLER_PROC_EXEC) {
			rec->cmd_execs++;
			rec->cmd_exec_ns = ts_ns;
		}
		return;
	}
	if (!env->subprocesses && !env->all && !(ev == SAMPLER_PROC_EXEC && pid == env->pid))
		return;
	record_hold__proc(&rec->hold, ev, pid, ppid, ts_ns);
}

void recording__set_tool(struct recording *rec)
{
	rec->tool = (struct sampler_tool){ .sample = on_sample, .code = on_code,
					   .proc = on_proc, .ctx = rec };
}

int recording__queue_stack_end(struct recording *rec, pid_t tid, uint64_t end)
{
	struct stack_end *v;
	size_t cap;

	if (rec->nends == rec->capends) {
		cap = rec->capends ? rec->capends * 2 : 64;
		v = realloc(rec->ends, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		rec->ends = v;
		rec->capends = cap;
	}
	rec->ends[rec->nends++] = (struct stack_end){ .set = true, .tid = tid, .end = end };
	return 0;
}

void recording__apply_requests(struct recording *rec)
{
	char err[PYPROF_ERRLEN];
	struct proc_request q;
	struct proc_entry *e;
	int rc;

	if (!rec->sampler)
		return;		/* none loaded yet: nothing can have been asked */
	while (proc_follow__next_request(rec->follow, &q)) {
		switch (q.kind) {
		case PROC_REQ_ADD:
			e = procset__find(rec->procs, q.pid);
			if (!e || e->state != PROC_PYTHON || !e->p)
				break;	/* closed since: its next sample opens it again */
			err[0] = '\0';
			rc = sampler__add_process(rec->sampler, e->p, err, sizeof(err));
			proc_follow__added(rec->follow, e, rc, err);
			break;
		case PROC_REQ_FORGET:
			sampler__forget_process(rec->sampler, q.pid);
			break;
		case PROC_REQ_TRACK:
			sampler__track_process(rec->sampler, q.pid);
			break;
		}
	}
	for (size_t i = 0; i < rec->nends; i++)
		sampler__set_stack_end(rec->sampler, rec->ends[i].tid, rec->ends[i].end);
	rec->nends = 0;
}

/* A process event, applied. */
static void apply_proc(struct recording *rec, const struct held *h)
{
	const struct record_env *env = rec->env;

	if (!env->subprocesses && !env->all) {
		/* Only a command started is tracked then (exec events): an
		 * exec once it is sampled replaces the interpreter it was
		 * configured for. The tracepoint unconfigured it already;
		 * writing that again covers an exec that came just before
		 * the configuration (recording__start_command). */
		sampler__track_process(rec->sampler, h->p.pid);
		rec->main_execed = 1;
		return;
	}
	proc_follow__on_event(rec->follow, h->p.ev, h->p.pid, h->p.ppid);
}

int recording__replay(struct recording *rec)
{
	struct held *h;
	int rc = 0;

	while (!rc && (h = record_hold__peek(&rec->hold))) {
		switch (h->kind) {
		case HELD_PROC:
			apply_proc(rec, h);
			break;
		case HELD_CODE:
			proc_follow__sample_proc(rec->follow, h->c.pid);
			recording__apply_requests(rec);
			if (resolver__add_code(rec->rv, &h->c) == -EAGAIN)
				resolver__drop_code(rec->rv);
			break;
		case HELD_SAMPLE:
			proc_follow__sample_proc(rec->follow, h->s.pid);
			recording__apply_requests(rec);
			rc = resolve_and_emit(rec, &h->s, true);
			break;
		}
		record_hold__pop(&rec->hold);
	}
	recording__apply_requests(rec);
	return rc;
}
