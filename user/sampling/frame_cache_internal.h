/* SPDX-License-Identifier: MIT */
/*
 * frame_cache_internal.h - the frame cache's state, as frame_cache.c (the
 * splice) and frame_cache_anchor.c (the writes into the target) share it;
 * internal to them (users: frame_cache.h).
 */
#ifndef PYPROF_SAMPLING_FRAME_CACHE_INTERNAL_H
#define PYPROF_SAMPLING_FRAME_CACHE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "sampling/frame_cache.h"
#include "types/raw_sample.h"

/* Threads with a cache of their own; later ones are walked whole. */
#define FC_MAX_THREADS		1024
#define FC_SLOTS		2048		/* power of two, 2x the above */
/* Longest chain kept: Python frames plus interpreter links. */
#define FC_CHAIN_MAX		8192
/*
 * Re-anchoring: worth it once walks above the anchor exceed FC_ABOVE
 * frames; at most once per interval per thread, the interval doubling (up
 * to FC_INTERVAL_MAX) each time a re-anchor did not bring walks under
 * FC_ABOVE, and back to FC_INTERVAL_MIN when one did.
 */
#define FC_ABOVE		8
#define FC_INTERVAL_MIN		(100 * 1000000ULL)
#define FC_INTERVAL_MAX		(6400 * 1000000ULL)
/*
 * After a mismatch the thread is walked whole for a cooldown, doubling
 * from FC_COOLDOWN_MIN with every further mismatch up to FC_COOLDOWN_MAX:
 * an anchor someone else keeps writing (another profiler) would otherwise
 * cost a truncated sample per poll.
 */
#define FC_COOLDOWN_MIN		(50 * 1000000ULL)
#define FC_COOLDOWN_MAX		(10000 * 1000000ULL)
/*
 * What a write moves the sequence on by. The interpreter adds 1 per move,
 * so no chain cached before a write validates an anchor seen after it, and
 * a sequence 2^32 or more past the one we wrote was written again since
 * (by another pyprof-bpf: they all jump alike).
 */
#define FC_SEQ_JUMP		(1ULL << 32)

struct fc_thread {
	pid_t tid;			/* 0: free slot */
	uint64_t tstate;
	struct py_rawframe *chain;	/* the cached whole chain */
	uint32_t n, cap;
	/* Its Python frames alone, innermost first (what is handed on), and
	 * pyc[i]: the Python frames among chain[i..n) (pyc[n] = 0). Both are
	 * kept up to date by the splice, so handing on a spliced stack costs
	 * the frames it changed, not its depth. */
	struct py_rawframe *py;
	uint32_t *pyc;
	uint32_t npy;
	int32_t anchor_idx;		/* index of the anchor; -1: none usable */
	uint64_t seq;			/* sequence seen with it */
	bool walk_whole;		/* the kernel's flag, as last set */
	/* Re-anchoring. */
	uint64_t next_reanchor_ns;	/* not before (sample clock) */
	uint64_t interval_ns;
	uint64_t reanchored_ns;		/* when the last re-anchor ended */
	uint64_t good_ns;		/* last sample with the anchor high */
	/* Walk whole until then (sample clock), after mismatches. */
	uint64_t whole_until_ns;
	uint64_t cooldown_ns;
	/* The last output for this thread was the chain's Python frames. */
	bool out_is_chain;
	/* Samples taken before this moment (the end of the last re-anchor)
	 * saw the anchor as it was: they neither end walking whole nor
	 * judge the re-anchor. */
	uint64_t barrier_ns;
	/* Bumped whenever chain[] is replaced or dropped. */
	uint32_t gen;
	/*
	 * The anchor we wrote last, followed through every sample since
	 * (follows()): own_anchor/own_seq are the anchor and sequence as the
	 * latest sample showed them while they still derived from our
	 * write by the interpreter's moves alone, own_idx its index in
	 * chain[] (-1: not in it, its value is all we know). On exit,
	 * frame_cache__release() clears it if it is still ours. wrote:
	 * we wrote one into own_tstate (own or not any more).
	 */
	bool wrote;
	bool own;
	int32_t own_idx;
	uint64_t own_tstate;
	uint64_t own_anchor, own_seq;
};

/* An anchor we wrote into the state of a thread the cache forgot. */
struct fc_owned {
	pid_t tid;
	bool own;			/* as fc_thread.own */
	uint64_t tstate, anchor, seq;
};

struct frame_cache {
	pid_t pid;
	bool enabled;
	bool reanchor_ok;		/* writing the target allowed so far */
	unsigned int max_frames;
	uint64_t off_anchor;
	/* The sequence lies just after the anchor: one write sets both. */
	bool seq_follows;
	struct fc_thread *slots;
	size_t nthreads;
	struct py_rawframe *out;	/* the stack handed on */
	struct frame_cache_stats st;
	/* Anchors still ours in threads forgotten since (value only). */
	struct fc_owned *gone;
	size_t ngone;
};

/* @tid's cache; NULL: none. */
struct fc_thread *fc_find(struct frame_cache *fc, pid_t tid);
/* Is @f an interpreter's link (not a Python frame)? */
bool fc_is_interp(const struct py_rawframe *f);
/* Does the anchor @a with sequence @s still derive from the one we wrote
 * into @t by the interpreter's moves alone (frame_cache.c says how)? */
bool fc_follows(const struct fc_thread *t, uint64_t a, uint64_t s, uint64_t *moved);

#endif
