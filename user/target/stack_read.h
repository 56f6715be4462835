/* SPDX-License-Identifier: MIT */
/*
 * stack_read.h - a thread's Python stack read from outside as it stood at
 * one instant, for the remote backend and dump alike.
 *
 * A thread that runs while it is read can give a torn stack: a parent read
 * after its child returned, a frame read while it was being pushed. Each
 * walk starts from a copy of the thread's stack chunks taken in one call
 * (3.11+, stack_chunks.h); the copy is the stack when the thread held still
 * during it and the chain walked in it holds together (frame_walk.c,
 * frame_sizes.h): one walk. A copy that does not is taken again, up to
 * STACK_READ_COPIES copies; then the read is torn. Where no copy can be had
 * (before 3.11, a chunk list that cannot be copied), the chain is read frame
 * by frame twice and kept only when both walks agree on every frame, and on
 * every instruction but the innermost. A thread stopped (--blocking,
 * thread_stop.h) holds still: its copy is taken as it is.
 */
#ifndef PYPROF_STACK_READ_H
#define PYPROF_STACK_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "target/pyproc.h"

/* Walks per read, at most (each of up to 32 copies while the thread moves,
 * or one whose chain did not hold: frame_walk.c); where no copy can be
 * had, pairs of walks frame by frame. */
#define STACK_READ_TRIES 64
#define STACK_READ_PAIRS 8
/*
 * Copies of a thread's chunks per read, at most (3-8 us each): a thread
 * that moves during all of them is given up as torn. A thread that moves
 * in long spells needs many: on docutils_sections.py with each copy made
 * slower (an extra 16-64 KB read inside it, as a slower machine would),
 * 128 copies gave up 1.1-1.4% of the samples, 256 0.46-0.69%, 1,024
 * 0.05-0.28%, at the same CPU per sample (give-ups are rare). A thread
 * that gives up often (one that calls and returns every few nanoseconds, as
 * alternating.py does) would cost a reader 1,024 copies a tick for little:
 * past STACK_READ_BUSY of its recent reads given up it gets
 * STACK_READ_COPIES_BUSY, past 4x that STACK_READ_COPIES_MIN.
 */
#define STACK_READ_COPIES 1024
#define STACK_READ_COPIES_BUSY 256
#define STACK_READ_COPIES_MIN 128
#define STACK_READ_BUSY 0.03
/* Copies in shape but for the same link of the same chain, running, with
 * the same bytes there (frame_walk.c), that make it a corrupt chain rather
 * than a torn one. */
#define STACK_READ_CORRUPT 3

struct stack_read {
	struct py_rawframe *frames;	/* the stack read, innermost first */
	struct py_rawframe *check;	/* the second walk */
	size_t max;			/* Python frames at most */
	size_t room;			/* room in each (the interpreter's links
					 * too, when the walk cache keeps them) */
	size_t n;			/* frames in @frames */
	int truncated;			/* pyproc__walk_cached()'s */
	bool torn;			/* no copy held still and in shape, or the walks
					 * never agreed: @frames is the last walk's */
};

int stack_read__init(struct stack_read *r, size_t max);
void stack_read__free(struct stack_read *r);

/*
 * Read the stack of thread state @tstate (its walk cache @c) into r->frames;
 * @stopped: its thread is stopped. 0 (r->torn says whether it was read at
 * one instant; a chain that loops in STACK_READ_CORRUPT copies running:
 * r->truncated PY_WALK_LOOPED, r->frames up to the repeat), -EFAULT for a
 * chain that breaks at the same place in STACK_READ_CORRUPT copies running
 * (corrupt: r->frames up to there), or pyproc__walk_cached()'s error.
 */
int stack_read__thread(struct stack_read *r, struct pyproc *p, uint64_t tstate,
		       struct py_walk_cache *c, bool stopped);

#endif
