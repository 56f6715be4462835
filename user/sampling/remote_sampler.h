/* SPDX-License-Identifier: MIT */
/*
 * remote_sampler.h - the backend without BPF: on each tick, walk threads'
 * stacks from outside with process_vm_readv (pyproc.c), as CPython 3.15's
 * own profiler does. It does not stop the target, so a stack can be torn by
 * a thread that runs while it is read (each is read twice and kept only
 * when both reads agree).
 *
 * Which threads a tick samples follows sampler_opts.mode:
 *   SAMPLER_MODE_CPU    those in state R (running or runnable) in
 *                       /proc/PID/task/TID/stat at the tick; a thread whose
 *                       state cannot be read is skipped
 *   SAMPLER_MODE_WALL   every thread, running or not
 *   SAMPLER_MODE_GIL    as CPU, each sample marked SAMPLE_F_GIL_KNOWN and
 *                       SAMPLE_F_GIL_HELD (+ SAMPLE_F_GC while a collection
 *                       runs) from one read of the GIL per tick, when where
 *                       the GIL is is known
 *   SAMPLER_MODE_OFFCPU not supported: polling cannot see why a thread
 *                       waits (remote_sampler__open returns -ENOTSUP)
 * Every sample is SAMPLE_KIND_CPU.
 */
#ifndef PYPROF_REMOTE_SAMPLER_H
#define PYPROF_REMOTE_SAMPLER_H

#include "sampling/sampler.h"

struct remote_sampler;

int remote_sampler__open(struct pyproc *p, const struct sampler_opts *o,
			 struct remote_sampler **out);
/* Take one sample of every thread the mode samples; -ESRCH when the
 * target is gone. */
int remote_sampler__tick(struct remote_sampler *s, sample_fn fn, void *ctx);
void remote_sampler__stats(const struct remote_sampler *s, struct sampler_stats *st);
/* Recording over: the frame-cache anchors this sampler wrote and still
 * owns are zeroed in the target (3.15), as CPython's profiler does on exit;
 * -v says what the cache did. remote_sampler__free() does it too. */
void remote_sampler__finish(struct remote_sampler *s);
void remote_sampler__free(struct remote_sampler *s);

#endif
