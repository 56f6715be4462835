/* SPDX-License-Identifier: MIT */
/*
 * leaf.h - the frames that say what a sampled thread was doing beyond its
 * Python code, on the leaf side of its stack (struct out_leaf):
 *
 *   <GC>               it was running a garbage collection
 *   [GIL released]     gil mode: on a CPU without the GIL (C code)
 *   [GIL wait]         off the CPU, waiting to take the GIL
 *   [syscall] NAME     off the CPU in system call NAME (x86-64 names),
 *                      followed by the kernel functions it slept in,
 *                      outermost first (entry code and the scheduler's
 *                      own frames left out)
 *   [blocked]          off the CPU blocked outside a system call, or in
 *                      one that could not be read (a thread found asleep
 *                      when the recording started, woken meanwhile)
 *   [runnable]         off the CPU but runnable: preempted, or woken and
 *                      waiting for a CPU
 */
#ifndef PYPROF_OFFCPU_LEAF_H
#define PYPROF_OFFCPU_LEAF_H

#include <stdbool.h>
#include "types/out_sample.h"
#include "types/raw_sample.h"

#define LEAF_MAX 40

enum leaf_part {
	LEAF_CPU,		/* a tick */
	LEAF_BLOCKED,		/* an off-CPU sample's blocked time */
	LEAF_RUNNABLE,		/* its runnable time */
};

struct leaf_names;

/*
 * With @kernel, kernel frames are named from /proc/kallsyms; when that
 * cannot be read (no root, kptr_restrict), -EPERM-like errors are returned
 * and the caller may go on with @kernel false.
 */
int leaf_names__new(bool kernel, struct leaf_names **out);
void leaf_names__free(struct leaf_names *l);
/*
 * Fill @out (LEAF_MAX entries) with @r's leaf frames for @part, outermost
 * first; @gil_mode adds [GIL released]. Returns how many. The names live as
 * long as @l.
 */
uint32_t leaf_names__frames(struct leaf_names *l, const struct raw_sample *r, enum leaf_part part,
			    bool gil_mode, struct out_leaf *out);

#endif
