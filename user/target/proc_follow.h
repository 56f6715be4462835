/* SPDX-License-Identifier: MIT */
/*
 * proc_follow.h - the processes a recording follows besides its targets, and what became of
 * each: the descendants of --subprocesses (the sampler's fork, exec and exit
 * events, and those running already), the processes -a meets on a CPU. Each
 * is configured in the sampler once it is found to run Python; one that
 * does not yet is looked at again for a while.
 *
 * Process bookkeeping only: it opens processes (target/procset.h) but asks
 * nothing of the sampler itself. What the sampler is to be told (configure
 * a process, forget one, track one) is queued as requests that the command
 * applies through sampling/sampler.h (proc_follow__next_request()), between
 * polls. Nothing here is to be called from inside a poll but
 * proc_follow__lookup(), which changes nothing.
 */
#ifndef PYPROF_PROC_FOLLOW_H
#define PYPROF_PROC_FOLLOW_H

#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "target/procset.h"
#include "types/raw_sample.h"

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

/* Can processes be configured in the sampler (one with several processes)?
 * If not, one found to run Python is not sampled (said in the summary). */
void proc_follow__set_configurable(struct proc_follow *pf, bool configurable);

/* What the sampler is to be told, in the order it was decided. */
enum proc_request_kind {
	PROC_REQ_ADD = 1,	/* sample pid's Python (its entry's pyproc) */
	PROC_REQ_FORGET,	/* pid ended: its configuration is freed */
	PROC_REQ_TRACK,		/* follow pid's execs and children, not sampled */
};

struct proc_request {
	enum proc_request_kind kind;
	pid_t pid;
};

/* The oldest request not yet taken, into *@r; false when none is left. */
bool proc_follow__next_request(struct proc_follow *pf, struct proc_request *r);
/* The sampler's answer to PROC_REQ_ADD for @e: 0, or -errno with @why
 * (then @e is not sampled, and the summary says why). */
void proc_follow__added(struct proc_follow *pf, struct proc_entry *e, int rc, const char *why);

/* A fork, exec, exit or first sighting (-a) the sampler reported. */
void proc_follow__on_event(struct proc_follow *pf, enum sampler_proc_event ev, pid_t pid,
			   pid_t ppid);

/* While @defer, an exec'd process is noted but not opened (a command still
 * starting: proc_follow__retry_pending() takes them up afterwards). */
void proc_follow__defer(struct proc_follow *pf, bool defer);

/*
 * The process of a sample or code snapshot, opened if it was not yet (a
 * forked child shares its parent's image until its first sample); NULL when
 * it is not (or no longer) a Python being sampled. Between polls only.
 */
struct proc_entry *proc_follow__sample_proc(struct proc_follow *pf, pid_t pid);

/*
 * What proc_follow__sample_proc() would give, changing nothing (but the
 * entry's place among the most recently sampled): NULL with *@later set
 * when @pid's process is to be opened (or opened again) first, which only
 * proc_follow__sample_proc() does. Safe inside a poll.
 */
struct proc_entry *proc_follow__lookup(struct proc_follow *pf, pid_t pid, bool *later);

/* Exec'd processes whose interpreter was not found yet: looked at again. */
void proc_follow__retry_pending(struct proc_follow *pf);

/* --subprocesses: the descendants of @roots that run already. */
void proc_follow__adopt_descendants(struct proc_follow *pf, const pid_t *roots, size_t nroots);

/* Is any followed process still running Python (or about to)? */
bool proc_follow__any_alive(struct proc_follow *pf);

/* The end summary's list of processes (when there were several, or -a). */
void proc_follow__print(struct proc_follow *pf, FILE *f);

#endif
