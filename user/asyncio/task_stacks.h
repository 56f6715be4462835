/* SPDX-License-Identifier: MIT */
/*
 * asyncio/task_stacks.h - `record --async`: a sample of a thread running an
 * asyncio task, told as that task's frames, then `<task NAME>`, then the
 * frames of the task awaiting it and its marker, and so on to the root task.
 *
 * Which task runs and which tasks await it come with the sample (the BPF
 * program reads them with the stack: raw_sample.tasks). The running task's
 * frames are the sample's own, cut at its coroutine's frame (the event
 * loop's frames below it are left out). The awaiting tasks are suspended:
 * their names and coroutine frames are read from the target (an asyncio
 * snapshot, taken again when a task is missing from the last one, at most
 * every TASK_STACKS_MIN_GAP_NS).
 */
#ifndef PYPROF_ASYNCIO_TASK_STACKS_H
#define PYPROF_ASYNCIO_TASK_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include "asyncio/asyncio.h"
#include "types/raw_sample.h"
#include "symbols/symbolizer.h"

#define TASK_STACKS_MIN_GAP_NS (100 * 1000000ULL)
/* Frames of one spliced stack at most (markers included). */
#define TASK_STACKS_MAX 6144

struct task_stacks;

struct task_stacks_stats {
	uint64_t samples;	/* samples spliced */
	uint64_t not_in_stack;	/* a task running whose frame the stack lacked */
	uint64_t unknown;	/* tasks whose name neither the sample nor a snapshot had */
	uint64_t frames_read;	/* awaiters whose frames came with the sample */
	uint64_t from_snapshot;	/* awaiters whose frames came from a snapshot */
	uint64_t frames_unread;	/* awaiters with neither: [task-frames-unread] */
	uint64_t snapshots;	/* snapshots taken */
	uint64_t snapshot_errors;
	uint64_t cut;		/* chains the program cut, looped or could not read */
	uint64_t pending;	/* stacks of pending tasks given (--async=all) */
};

int task_stacks__new(struct pyproc *p, struct symbolizer *sym, const struct asyncio_offsets *ao,
		     struct task_stacks **out);
void task_stacks__free(struct task_stacks *ts);

/*
 * The task-aware stack of @r (which has r->ntasks > 0): frames innermost
 * first into *frames (valid until the next call), each with its kind
 * (OUT_FRAME_PYTHON or OUT_FRAME_STATUS for markers) in *kinds. Returns 1
 * when spliced, 0 when the sample is to be shown as it is (its running
 * task's frame is not in its stack: between two steps of the loop), or
 * -ENOMEM. --native: @mkinds non-NULL, @merged is the sample's stack with
 * its native frames (@nmerged, innermost first), and the running task's
 * part keeps the native frames among its own.
 */
int task_stacks__splice(struct task_stacks *ts, const struct raw_sample *r, uint64_t now_ns,
			const struct py_sym *merged, const uint8_t *mkinds, uint32_t nmerged,
			const struct py_sym **frames, const uint8_t **kinds, uint32_t *n);

/*
 * --async=all: every task of the process that is not running (pending, or
 * not started), from a snapshot taken now: @fn gets each one's stack, its
 * suspended frames (innermost: what it awaits), its marker, then its
 * awaiters' frames and markers as in task_stacks__splice(). A non-zero
 * return of @fn stops and is returned; else 0 or -errno (the snapshot
 * failed: nothing this time, counted).
 */
typedef int (*task_stack_fn)(void *ctx, const struct asyncio_task *t, const struct py_sym *frames,
			     const uint8_t *kinds, uint32_t n);
int task_stacks__pending(struct task_stacks *ts, uint64_t now_ns, task_stack_fn fn, void *ctx);

void task_stacks__stats(const struct task_stacks *ts, struct task_stacks_stats *st);
/* @sum += @st, count by count. */
void task_stacks_stats__add(struct task_stacks_stats *sum, const struct task_stacks_stats *st);

#endif
