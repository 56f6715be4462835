/* SPDX-License-Identifier: MIT */
/*
 * procset.h - the processes one recording samples: the -p targets and,
 * with --subprocesses, every process they start. Each has its own view of
 * the target (pyproc), symbolizer and stack memo, opened when its first
 * sample or code snapshot needs them (a forked child shares its parent's
 * image until it execs), and again after an exec.
 *
 * Owns everything it opens. Not thread-safe.
 */
#ifndef PYPROF_PROCSET_H
#define PYPROF_PROCSET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/pyproc.h"
#include "symbols/stack_memo.h"
#include "symbols/symbolizer.h"

enum proc_state {
	PROC_PYTHON,		/* open: p, sym and memo are there */
	PROC_FORKED,		/* a child sharing its parent's image, not opened yet */
	PROC_PENDING,		/* exec'd: its interpreter is looked for */
	PROC_NOT_PYTHON,	/* exec'd something that is not a Python we support */
	PROC_FAILED,		/* could not be opened (gone, or unreadable) */
	PROC_ENDED,		/* was PROC_PYTHON; ended, its image closed */
	PROC_NO_INTERP,		/* open, but no interpreter runs (yet): -a */
	PROC_EVICTED,		/* a Python whose image was closed to bound memory
				 * (procset__set_max_open): opened again when needed */
};

struct proc_entry {
	pid_t pid, ppid;
	enum proc_state state;
	bool exited;
	struct pyproc *p;
	struct symbolizer *sym;
	struct stack_memo *memo;
	char comm[32];
	char version[16];	/* "3.14.2"; empty until known */
	char why[PYPROF_ERRLEN];	/* PROC_NOT_PYTHON / PROC_FAILED: the reason */
	uint64_t samples;
	uint64_t pending_since_ns;	/* PROC_PENDING: CLOCK_MONOTONIC */
	uint64_t used;		/* last procset__touch() (CLOCK_MONOTONIC ns) */
	uint32_t reopened;	/* times opened again after an eviction */
	/* Bumped at each opening of an image (p, sym, memo): what holds on
	 * to them (--async's tables) tells a new image from the one it had. */
	uint64_t image_gen;
};

struct procset;

/* @max_frames: the stack memos' depth. */
int procset__new(unsigned int max_frames, struct procset **out);
void procset__free(struct procset *ps);

/*
 * At most @max Pythons keep their image (reader, symbols, memo) open at
 * once (0: no limit): opening one more closes the least recently touched
 * one's (PROC_EVICTED) if it has been unused for a second (else the cap
 * gives way: those sampled now are all needed; 3.11's never are, as their
 * code is named from snapshots only), and procset__open() opens it again
 * at its next use.
 */
void procset__set_max_open(struct procset *ps, size_t max);

/* @e was just used (a sample, a code snapshot): last to be evicted. */
void procset__touch(struct procset *ps, struct proc_entry *e);

/* The entry of @pid, or NULL. */
struct proc_entry *procset__find(struct procset *ps, pid_t pid);

/*
 * Add @pid (a -p target: @p already open, state PROC_PYTHON, taken over; a
 * followed child: @p NULL, state PROC_FORKED). An entry already there is
 * returned as it is. NULL when out of memory.
 */
struct proc_entry *procset__add(struct procset *ps, pid_t pid, pid_t ppid, struct pyproc *p);

/*
 * Open what @e needs to be symbolized (PROC_FORKED or PROC_PENDING): 0 and
 * PROC_PYTHON, or -errno with the state saying why (-ENOEXEC keeps a
 * PROC_PENDING entry pending: its interpreter may not be mapped yet).
 */
int procset__open(struct procset *ps, struct proc_entry *e);

/* @e exec'd: what described its old image is retired (kept until
 * procset__free(), as samples and the sampler may still use it); it
 * becomes PROC_PENDING. */
void procset__exec(struct procset *ps, struct proc_entry *e, uint64_t now_ns);

size_t procset__count(const struct procset *ps);

/*
 * Free the images procset__exec() retired, but @keep's (a -p target, whose
 * reader the sampler may still use). Safe once the samples taken before
 * those execs are consumed: the exec event comes after them in the ring,
 * so after the poll that delivered it. A forked child that execs (every
 * subprocess of a Python under -a or --subprocesses) retired one each.
 */
void procset__free_retired(struct procset *ps, pid_t keep);

/* @e, a Python that ended: its image (reader, symbols, memo) is freed; the
 * entry (name, version, counts) stays for the summary, as PROC_ENDED. */
void procset__close(struct procset *ps, struct proc_entry *e);

/* Remove @e (a process that never ran Python) and free it. */
void procset__remove(struct procset *ps, struct proc_entry *e);
struct proc_entry *procset__at(struct procset *ps, size_t i);

#endif
