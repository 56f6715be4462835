/* SPDX-License-Identifier: MIT */
/*
 * proc_follow.h - the processes a recording follows besides its targets, and what became of
 * each: the descendants of --subprocesses (the sampler's fork, exec and exit
 * events, and those running already), the processes -a meets on a CPU. Each
 * is configured in the BPF program once it is found to run Python; one that
 * does not yet is looked at again for a while.
 */
#ifndef PYPROF_PROC_FOLLOW_H
#define PYPROF_PROC_FOLLOW_H

#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "target/procset.h"
#include "sampling/sampler.h"

struct bpf_sampler;
struct proc_follow_opts {
	bool all;		/* -a: every process met on a CPU */
	bool subprocesses;	/* --subprocesses: the targets' descendants */
	bool verbose;
	const regex_t *comm;	/* -a --comm: names to keep; NULL: any */
	size_t max_open;	/* -a: images open at once (said at the end) */
};

struct proc_follow;

/* Follow into @ps (which the caller keeps); @o is copied. */
int proc_follow__new(struct procset *ps, const struct proc_follow_opts *o,
		     struct proc_follow **out);
void proc_follow__free(struct proc_follow *pf);

/* The BPF sampler processes are configured in (NULL: none, remote backend). */
void proc_follow__set_sampler(struct proc_follow *pf, struct bpf_sampler *bs);

/* A fork, exec, exit or first sighting (-a) the sampler reported. */
void proc_follow__on_event(struct proc_follow *pf, enum sampler_proc_event ev, pid_t pid,
			   pid_t ppid);

/* While @defer, an exec'd process is noted but not opened (a command still
 * starting: proc_follow__retry_pending() takes them up afterwards). */
void proc_follow__defer(struct proc_follow *pf, bool defer);

/*
 * The process of a sample or code snapshot, opened if it was not yet (a
 * forked child shares its parent's image until its first sample); NULL when
 * it is not (or no longer) a Python being sampled.
 */
struct proc_entry *proc_follow__sample_proc(struct proc_follow *pf, pid_t pid);

/* Exec'd processes whose interpreter was not found yet: looked at again. */
void proc_follow__retry_pending(struct proc_follow *pf);

/* --subprocesses: the descendants of @roots that run already. */
void proc_follow__adopt_descendants(struct proc_follow *pf, const pid_t *roots, size_t nroots);

/* Is any followed process still running Python (or about to)? */
bool proc_follow__any_alive(struct proc_follow *pf);

/* The end summary's list of processes (when there were several, or -a). */
void proc_follow__print(struct proc_follow *pf, FILE *f);

#endif
