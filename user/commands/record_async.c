/* SPDX-License-Identifier: MIT */
/*
 * record_async.c - --async: the main target's task-aware stacks, once its
 * asyncio tables are found (3.14: once it imports asyncio), and (--async=all)
 * the stacks of its pending tasks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "asyncio/task_stacks.h"
#include "commands/recording.h"
#include "resolve/resolver.h"
#include "sampling/bpf_sampler.h"
#include "target/procset.h"
#include "util/clock.h"

/* What the program needs to read a sample's running task and its awaiters. */
static struct sampler_async program_offsets(const struct proc_entry *e,
					    const struct asyncio_offsets *ao)
{
	return (struct sampler_async){
		.running_task = ao->tstate_running_task,
		.task_awaited_by = ao->task_awaited_by,
		.task_awaited_by_is_set = ao->task_awaited_by_is_set,
		.task_is_task = ao->task_is_task,
		.task_coro = ao->task_coro,
		.set_used = ao->set_used,
		.set_mask = ao->set_mask,
		.set_table = ao->set_table,
		/* The program copies names from ob_type at 8, as every
		 * build here has it. */
		.task_name = pyproc__offsets(e->p)->ob_type == 8 ? ao->task_name : 0,
		.type_flags = ao->type_flags,
		/* The awaiters' frames: the program reads objects' types at 8
		 * too. */
		.coro_type = pyproc__coro_type(e->p),
		.asyncgen_type = pyproc__asyncgen_type(e->p),
		.gen_iframe = pyproc__offsets(e->p)->ob_type == 8 ? (uint32_t)ao->gen_iframe : 0,
		.gen_frame_state = (uint32_t)ao->gen_frame_state,
		.frame_stackpointer = (uint32_t)ao->frame_stackpointer,
		.awaited_slot = ao->awaited_slot,
		.state_yield_from = ao->state_yield_from,
		.state_yield_from_locked = ao->state_yield_from_locked,
		.state_cleared = ao->state_cleared,
	};
}

/*
 * Find the main target's asyncio tables and have the program read each
 * sample's running task and its awaiters. 0 when done or to be tried again
 * later (3.14 maps its _asyncio module when asyncio is imported); -errno
 * with rec->err for a target that cannot have it.
 */
int recording__async_enable(struct recording *rec)
{
	struct proc_entry *e = rec->main_proc;
	struct asyncio_offsets ao;
	struct sampler_async sa;
	struct task_stacks *tasks;
	int rc;

	if (resolver__tasks(rec->rv) || !e || !rec->bs)
		return 0;
	rc = asyncio_offsets__load(e->p, &ao, rec->err, sizeof(rec->err));
	if (rc == -ENOENT) {
		if (!rec->async_waiting)
			fprintf(stderr, "pyprof-bpf: --async: asyncio is not imported yet; its "
				"tasks are shown once it is\n");
		rec->async_waiting = 1;
		return 0;
	}
	if (rc == -ENOTSUP)
		snprintf(rec->err, sizeof(rec->err), "--async: process %d runs Python %s: "
			 "task-aware stacks need CPython 3.14 or later (its .AsyncioDebug table, "
			 "see README)", (int)e->pid, e->version);
	if (rc)
		return rc;
	rc = task_stacks__new(e->p, e->sym, &ao, &tasks);
	if (rc) {
		snprintf(rec->err, sizeof(rec->err), "out of memory");
		return rc;
	}
	resolver__set_tasks(rec->rv, tasks, e);
	sa = program_offsets(e, &ao);
	rc = bpf_sampler__set_async(rec->bs, &sa);
	if (rc)
		snprintf(rec->err, sizeof(rec->err), "--async: cannot configure the BPF program: %s",
			 strerror(-rc));
	else if (rec->async_waiting)
		fprintf(stderr, "pyprof-bpf: --async: asyncio imported; sampling its tasks\n");
	return rc;
}

/* --async=all: one pending task's stack, weighing the time since the last. */
static int on_pending_task(void *ctx, const struct asyncio_task *t, const struct py_sym *frames,
			   const uint8_t *kinds, uint32_t n)
{
	struct recording *rec = ctx;
	struct proc_entry *e = rec->main_proc;
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

/* --async=all: every pending task, once a period; the weight is the time
 * since the last time (a snapshot of many tasks takes a while). */
int recording__emit_pending(struct recording *rec)
{
	struct task_stacks *tasks = resolver__tasks(rec->rv);
	uint64_t now = mono_ns();
	int rc;

	if (!tasks)
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
	rc = task_stacks__pending(tasks, now, on_pending_task, rec);
	rec->pending_ns = now;
	/* A snapshot that failed (the target changing, or gone) costs this
	 * round: counted in the summary. */
	return rc == -ENOMEM || rec->sinks.err ? rc : 0;
}
