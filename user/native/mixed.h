/* SPDX-License-Identifier: MIT */
/*
 * mixed.h - --native: a sample's Python frames and its native stack, one
 * stack in call order.
 *
 * A tick with --native carries the thread's registers and a copy of its
 * user stack, and its Python frames include the interpreter's entry frames
 * (where each evaluation loop's run of Python frames begins). strip() takes
 * those entry frames out before the Python frames are symbolized, keeping
 * the runs; merge() then unwinds the copy (DWARF, native/unwind.h), pairs
 * each run with its evaluation loop's native frame (native/merge.h) and
 * puts the result in the output sample. What a complete unwind teaches
 * about the thread's stack (where its outermost frame lies) is returned
 * to the caller, for the sampler's next copies of that thread.
 */
#ifndef PYPROF_NATIVE_MIXED_H
#define PYPROF_NATIVE_MIXED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "types/raw_sample.h"

struct out_sample;
struct native_mixer;

/* What a merge learnt of the thread's stack: set, the end its copies need
 * (0: the whole --stack-size again). */
struct stack_end {
	bool set;
	pid_t tid;
	uint64_t end;
};

struct native_mixer_stats {
	uint64_t samples;	/* merged */
	uint64_t unwind_failed;	/* cut at [unwind-failed] */
	uint64_t cut_by_copy;	/* of them: the stack copy ended first */
	uint64_t cut_by_end;	/* of them: copied up to an end learnt too low */
	uint64_t no_unwinder;	/* of a process that could not be opened */
	uint64_t copied;	/* stack bytes of the samples, all told */
};

/* @stack_bytes: --stack-size. */
int native_mixer__new(uint32_t stack_bytes, struct native_mixer **out);
void native_mixer__free(struct native_mixer *m);

/*
 * @r without its interpreter frames, into @out (valid until the next
 * call), its runs kept for merge(): every --native sample goes through
 * here, one of no Python frame too (its runs are its own). 0 or -ENOMEM.
 */
int native_mixer__strip(struct native_mixer *m, const struct raw_sample *r,
			struct raw_sample *out);

/*
 * @s's Python frames (symbolized from strip()'s output of @r) merged with
 * @r's native stack, in @s (valid until the next call). A stack that does
 * not merge, or unwinds short, is cut at [unwind-failed] and counted.
 */
void native_mixer__merge(struct native_mixer *m, const struct raw_sample *r,
			 struct out_sample *s, struct stack_end *end);

void native_mixer__stats(const struct native_mixer *m, struct native_mixer_stats *st);
/* Per process: how its unwinds ended (-v), one line each. */
/* Warnings for the end summary (a perf map refused, with why). */
void native_mixer__print_warnings(const struct native_mixer *m, FILE *f);
void native_mixer__print_unwinders(const struct native_mixer *m, FILE *f);

#endif
