/* SPDX-License-Identifier: MIT */
/*
 * resolver.h - a raw sample made a resolved one: the middle stage of a
 * sample's path (sampler -> resolver -> sinks).
 *
 * The resolver finds the sample's process (target/proc_follow.h; it never
 * opens one: a process to be opened first is the caller's, between polls), names
 * its thread, symbolizes its frames through the process's stack memo and
 * symbolizer (the code snapshots the sampler sent first included), merges
 * its native stack (--native, native/mixed.h), splices its asyncio tasks
 * (--async, asyncio/task_stacks.h) and adds what the thread did beyond its
 * Python code (offcpu/leaf.h). It writes nothing and calls nothing above
 * it: what it learns for the sampler (a thread's stack end) is returned
 * with the sample.
 */
#ifndef PYPROF_RESOLVE_RESOLVER_H
#define PYPROF_RESOLVE_RESOLVER_H

#include <stdbool.h>
#include <stdint.h>
#include "native/mixed.h"
#include "offcpu/leaf.h"
#include "types/out_sample.h"
#include "types/raw_sample.h"

struct resolver;
struct proc_follow;
struct proc_entry;
struct task_stacks;
struct thread_names;

struct resolver_opts {
	struct proc_follow *follow;	/* the processes sampled: borrowed */
	uint64_t period_ns;		/* a tick's weight */
	const char *event;		/* a tick's event (-e), NULL: the clock's */
	/* Several -e events: raw_sample.event indexes their names. */
	const char *const *events;
	unsigned int nevents;
	uint64_t event_scale;		/* an event's weight (--mode memory: the page size); 0: 1 */
	bool gil_mode;			/* --mode gil: [GIL released] leaves */
	/* Given to the resolver, freed with it (mixer NULL: no --native). */
	struct leaf_names *leaf;
	struct thread_names *names;
	struct native_mixer *mixer;
};

/* What a raw sample becomes: a tick one output sample, an off-CPU interval
 * its blocked and its runnable parts (each weighing its time; a part of
 * no time is left out). Valid until the next resolve. */
struct resolved {
	struct out_sample s[2];
	uint32_t n;
	/* Two more than the leaf names take: exception mode's exception,
	 * --opcodes' instruction. */
	struct out_leaf leaf[2][LEAF_MAX + 2];
	char op[48];			/* its name */
	/* --native: what the sample taught of its thread's stack end */
	struct stack_end end;
};

struct resolver_stats {
	size_t unresolved;		/* frames that could not be named */
	size_t snapshot_errors;		/* code snapshots that could not be used */
	uint64_t clipped_ns;		/* off-CPU time past the window's end */
	struct sampler_stats unknown;	/* samples of processes not read: dropped */
	/* Several -e events: the samples of each, and the events they weigh. */
	uint64_t event_samples[SAMPLE_MAX_EVENTS], event_weight[SAMPLE_MAX_EVENTS];
};

/* On success the resolver owns @o's leaf, names and mixer. */
int resolver__new(const struct resolver_opts *o, struct resolver **out);
void resolver__free(struct resolver *rv);

/* Off-CPU time past @deadline_ns (0: none) is clipped off, runnable time first. */
void resolver__set_deadline(struct resolver *rv, uint64_t deadline_ns);
/* --async: a sample's task chain is spliced by @fn(@ctx, its process)'s
 * tables (NULL: that process has none). */
typedef struct task_stacks *(*tasks_of_fn)(void *ctx, const struct proc_entry *e);
void resolver__set_tasks_fn(struct resolver *rv, tasks_of_fn fn, void *ctx);

/* A code object's snapshot (sampler.h's code_fn): named from it even once
 * the target frees it. 0, or -EAGAIN: its process is to be opened first
 * (proc_follow__sample_proc(), between polls), then the snapshot given again. */
int resolver__add_code(struct resolver *rv, const struct raw_code *code);

/* 0 with @out filled; -ENOENT: the sample's process is not read (counted
 * in the stats, not shown under another's name); -EAGAIN: its process is
 * to be opened first (proc_follow__sample_proc(), between polls), then the
 * sample given again (nothing counted yet); else -errno. */
int resolver__resolve(struct resolver *rv, const struct raw_sample *r, struct resolved *out);

/* A sample left out before any process is sampled: counted as unknown. */
void resolver__drop(struct resolver *rv, const struct raw_sample *r);
/* A code snapshot left out (its process could not be opened): counted. */
void resolver__drop_code(struct resolver *rv);

/* The name of thread @tid of @pid (@comm: its process's). */
const char *resolver__thread_name(struct resolver *rv, pid_t pid, pid_t tid, const char *comm);

void resolver__stats(const struct resolver *rv, struct resolver_stats *st);
const struct native_mixer *resolver__mixer(const struct resolver *rv);

#endif
