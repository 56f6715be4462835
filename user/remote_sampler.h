/* SPDX-License-Identifier: MIT */
/*
 * remote_sampler.h - the backend without BPF: on each tick, walk every
 * thread's stack from outside with process_vm_readv (pyproc.c), as CPython
 * 3.15's own profiler does. It samples every thread (wall-clock), running or
 * not, and does not stop the target, so a stack can be torn by a thread that
 * runs while it is read.
 */
#ifndef PYPROF_REMOTE_SAMPLER_H
#define PYPROF_REMOTE_SAMPLER_H

#include "sampler.h"

struct remote_sampler;

int remote_sampler__open(struct pyproc *p, const struct sampler_opts *o,
			 struct remote_sampler **out);
/* Take one sample of every thread; -ESRCH when the target is gone. */
int remote_sampler__tick(struct remote_sampler *s, sample_fn fn, void *ctx);
void remote_sampler__stats(const struct remote_sampler *s, struct sampler_stats *st);
void remote_sampler__free(struct remote_sampler *s);

#endif
