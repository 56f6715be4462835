/* SPDX-License-Identifier: MIT */
/*
 * record_async.c - --async: each sampled process's task-aware stacks, once its
 * asyncio tables are found (3.14: once it imports asyncio), and (--async=all)
 * the stacks of its pending tasks. One table per process (-p A,B,
 * --subprocesses, -a), made again when its image is (an exec, an eviction).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "asyncio/task_stacks.h"
#include "commands/recording.h"
#include "resolve/resolver.h"
#include "sampling/sampler.h"
#include "target/procset.h"
#include "util/clock.h"

/* A process whose asyncio is not imported yet is looked at again this
 * often (a -a host has hundreds: each look reads its maps). */
#define ASYNC_RETRY_NS (1000 * 1000000ULL)

enum async_state {
	ASYNC_WAIT,		/* asyncio not found yet: tried again at retry_ns */
	ASYNC_ON,		/* its tasks are read: ts */
	ASYNC_NEVER,		/* cannot have them (before 3.14, tables unusable) */
};

struct async_proc {
	pid_t pid;
	uint64_t image_gen;	/* the image the tables were made for */
	enum async_state state;
	uint64_t retry_ns;
	struct task_stacks *ts;
};

/* What the program needs to read a sample's running task and its awaiters. */
static struct sampler_async program_offsets(const struct proc_entry *e,
					    const struct asyncio_offsets *ao)
{
	/* The program reads objects' types and names' heads at 8, as every
	 * build here has them. */
	int ob8 = pyproc__offsets(e->p)->ob_type == 8;

	return (struct sampler_async){
		.running_task = ao->tstate_running_task,
		.task_awaited_by = ao->task_awaited_by,
		.task_awaited_by_is_set = ao->task_awaited_by_is_set,
		.task_is_task = ao->task_is_task,
		.task_coro = ao->task_coro,
		.set_used = ao->set_used,
		.set_mask = ao->set_mask,
		.set_table = ao->set_table,
		.task_name = ob8 ? ao->task_name : 0,
		.type_flags = ao->type_flags,
		.coro_type = pyproc__coro_type(e->p),
		.asyncgen_type = pyproc__asyncgen_type(e->p),
		.gen_iframe = ob8 ? (uint32_t)ao->gen_iframe : 0,
		.gen_frame_state = (uint32_t)ao->gen_frame_state,
		.frame_stackpointer = (uint32_t)ao->frame_stackpointer,
		.awaited_slot = ao->awaited_slot,
		.state_yield_from = ao->state_yield_from,
		.state_yield_from_locked = ao->state_yield_from_locked,
		.state_cleared = ao->state_cleared,
	};
}

/* @pid's entry, or NULL. Asked at every sample in a task (tasks_of()):
 * the last one found is tried first, as samples come in runs of a process. */
static struct async_proc *find(struct recording *rec, pid_t pid)
{
	if (rec->async_last < rec->nasync && rec->async[rec->async_last].pid == pid)
		return &rec->async[rec->async_last];
	for (size_t i = 0; i < rec->nasync; i++) {
		if (rec->async[i].pid == pid) {
			rec->async_last = i;
			return &rec->async[i];
		}
	}
	return NULL;
}

/* Drop @a's tables (their counts kept for the summary). */
static void reset(struct recording *rec, struct async_proc *a)
{
	struct task_stacks_stats st;

	if (a->ts) {
		task_stacks__stats(a->ts, &st);
		task_stacks_stats__add(&rec->async_gone, &st);
		task_stacks__free(a->ts);
	}
	a->ts = NULL;
	a->state = ASYNC_WAIT;
	a->retry_ns = 0;
}

/* @e's entry, made when missing; NULL: out of memory. */
static struct async_proc *entry_of(struct recording *rec, const struct proc_entry *e)
{
	struct async_proc *a = find(rec, e->pid), *v;

	if (!a) {
		if (rec->nasync == rec->capasync) {
			size_t cap = rec->capasync ? 2 * rec->capasync : 8;

			v = realloc(rec->async, cap * sizeof(*v));
			if (!v)
				return NULL;
			rec->async = v;
			rec->capasync = cap;
		}
		a = &rec->async[rec->nasync++];
		*a = (struct async_proc){ .pid = e->pid, .image_gen = e->image_gen };
	}
	if (a->image_gen != e->image_gen) {
		reset(rec, a);
		a->image_gen = e->image_gen;
	}
	return a;
}

/* Was @e's asyncio the one --async was asked for alone (-p PID, a command)? */
static bool alone(const struct recording *rec, const struct proc_entry *e)
{
	return !rec->multi && e == rec->main_proc;
}

/*
 * Find @e's asyncio tables and have the program read its samples' running
 * task and awaiters. 0 when done, or to be tried again later, or when the
 * process cannot have them (several processes: the others go on); -errno
 * with rec->err for the one process asked for that cannot.
 */
static int enable_one(struct recording *rec, struct proc_entry *e, struct async_proc *a,
		      uint64_t now)
{
	struct asyncio_offsets ao;
	struct sampler_async sa;
	char err[PYPROF_ERRLEN];
	int rc;

	rc = asyncio_offsets__load(e->p, &ao, err, sizeof(err));
	if (rc == -ENOENT) {
		if (alone(rec, e) && !rec->async_waiting)
			fprintf(stderr, "pyprof-bpf: --async: asyncio is not imported yet; its "
				"tasks are shown once it is\n");
		rec->async_waiting |= alone(rec, e);
		a->retry_ns = now + (alone(rec, e) ? 0 : ASYNC_RETRY_NS);
		return 0;
	}
	if (rc == -ENOTSUP)
		snprintf(err, sizeof(err), "--async: process %d runs Python %s: task-aware "
			 "stacks need CPython 3.14 or later (its .AsyncioDebug table, see README)",
			 (int)e->pid, e->version);
	if (!rc) {
		rc = task_stacks__new(e->p, e->sym, &ao, &a->ts);
		if (rc)
			return rc;
		sa = program_offsets(e, &ao);
		rc = sampler__set_async(rec->sampler, e->pid, &sa);
		if (rc == -ENOENT && !alone(rec, e)) {
			/* Not configured in the program yet: next time. */
			reset(rec, a);
			a->retry_ns = now + ASYNC_RETRY_NS;
			return 0;
		}
		if (rc)
			snprintf(err, sizeof(err), "--async: cannot configure the BPF program "
				 "for process %d: %s", (int)e->pid, strerror(-rc));
	}
	if (rc) {
		reset(rec, a);
		a->state = ASYNC_NEVER;
		if (!alone(rec, e))
			return 0;
		snprintf(rec->err, sizeof(rec->err), "%s", err);
		return rc;
	}
	a->state = ASYNC_ON;
	rec->async_on++;
	if (alone(rec, e) && rec->async_waiting)
		fprintf(stderr, "pyprof-bpf: --async: asyncio imported; sampling its tasks\n");
	return 0;
}

/* The resolver's view: @e's tables, when on for its image. */
static struct task_stacks *tasks_of(void *ctx, const struct proc_entry *e)
{
	struct async_proc *a = find(ctx, e->pid);

	return a && a->state == ASYNC_ON && a->image_gen == e->image_gen ? a->ts : NULL;
}

int recording__async_enable(struct recording *rec)
{
	uint64_t now = mono_ns();
	int rc;

	if (!sampler__has(rec->sampler, SAMPLER_CAP_ASYNC))
		return 0;
	resolver__set_tasks_fn(rec->rv, tasks_of, rec);
	for (size_t i = 0; i < procset__count(rec->procs); i++) {
		struct proc_entry *e = procset__at(rec->procs, i);
		struct async_proc *a;

		if (e->state != PROC_PYTHON) {
			/* Ended, evicted, exec'ing: its tables go with its image. */
			if ((a = find(rec, e->pid)) && a->ts)
				reset(rec, a);
			continue;
		}
		a = entry_of(rec, e);
		if (!a)
			return -ENOMEM;
		if (a->state != ASYNC_WAIT || now < a->retry_ns)
			continue;
		rc = enable_one(rec, e, a, now);
		if (rc)
			return rc;
	}
	return 0;
}

void recording__async_stats(const struct recording *rec, struct task_stacks_stats *st)
{
	struct task_stacks_stats one;

	*st = rec->async_gone;
	for (size_t i = 0; i < rec->nasync; i++) {
		if (!rec->async[i].ts)
			continue;
		task_stacks__stats(rec->async[i].ts, &one);
		task_stacks_stats__add(st, &one);
	}
}

void recording__async_free(struct recording *rec)
{
	for (size_t i = 0; i < rec->nasync; i++)
		task_stacks__free(rec->async[i].ts);
	free(rec->async);
	rec->async = NULL;
	rec->nasync = rec->capasync = 0;
}

struct pending_ctx {
	struct recording *rec;
	struct proc_entry *e;
};

/* --async=all: one pending task's stack, weighing the time since the last. */
static int on_pending_task(void *ctx, const struct asyncio_task *t, const struct py_sym *frames,
			   const uint8_t *kinds, uint32_t n)
{
	struct pending_ctx *pc = ctx;
	struct recording *rec = pc->rec;
	struct proc_entry *e = pc->e;
	pid_t tid = t->tid ? t->tid : e->pid;
	struct out_sample s = {
		.comm = e->comm,
		.pid = e->pid,
		.tid = tid,
		.thread_name = resolver__thread_name(rec->rv, e->pid, tid, e->comm),
		.ts_ns = mono_ns(),
		.period_ns = rec->pending_weight,
		.status = SAMPLE_COMPLETE,
		.frames = frames,
		.kinds = kinds,
		.nframes = n,
		.event = "task-wait",
	};

	return sinks__emit(&rec->sinks, &s);
}

/* --async=all: every pending task of every process with tables, once a
 * period; the weight is the time since the last time (a snapshot of many
 * tasks takes a while). */
int recording__emit_pending(struct recording *rec)
{
	uint64_t now = mono_ns();
	int rc = 0;

	if (!rec->async_on)
		return 0;
	if (!rec->pending_ns) {
		rec->pending_ns = now;
		return 0;
	}
	if (now - rec->pending_ns < rec->period_ns)
		return 0;
	if (rec->deadline_ns && now > rec->deadline_ns)
		now = rec->deadline_ns;
	rec->pending_weight = now - rec->pending_ns;
	for (size_t i = 0; i < rec->nasync && rc != -ENOMEM && !rec->sinks.err; i++) {
		struct pending_ctx pc = { rec, procset__find(rec->procs, rec->async[i].pid) };

		if (!pc.e || !tasks_of(rec, pc.e))
			continue;
		rc = task_stacks__pending(rec->async[i].ts, now, on_pending_task, &pc);
	}
	rec->pending_ns = now;
	/* A snapshot that failed (the target changing, or gone) costs this
	 * round: counted in the summary. */
	return rc == -ENOMEM || rec->sinks.err ? rc : 0;
}
