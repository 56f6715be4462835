/* SPDX-License-Identifier: MIT */
/*
 * frame_cache.h - the userspace side of CPython 3.15's frame cache: turn the
 * BPF walk's short records (new frames down to the anchor) back into whole
 * stacks by splicing the callers cached from an earlier sample.
 *
 * The protocol (CPython 3.15, Include/internal/pycore_interpframe.h): the
 * thread state holds an anchor, last_profiled_frame, and a sequence,
 * last_profiled_frame_seq. Whenever the interpreter pops the frame the
 * anchor points at (return, exception, yield), it moves the anchor to that
 * frame's caller and adds 1 to the sequence. Popping an interpreter-owned
 * (entry) frame does not move it: an anchor that reaches an entry frame
 * stays there. Only a profiler writes the anchor.
 *
 * So when a stopped thread shows anchor A at index j of its whole chain C
 * (innermost first, interpreter frames included) with sequence s, and a
 * later stopped moment shows anchor A' with sequence s', the anchor moved
 * d = s' - s times along C: it is valid iff C[j..j+d] are all Python frames
 * and C[j+d] == A', and then the callers of A' are exactly C[j+d+1..]. A
 * frame popped without the anchor on it moves nothing, so a frame reusing a
 * popped frame's address never passes for it. Any other (A', s') is a
 * mismatch: the sample is delivered TRUNCATED (its new frames only, never a
 * guessed tail) and the kernel is told to walk this thread whole again.
 * Mismatches are kept for what cannot be helped (a record lost, memory):
 * the kernel stops at the anchor only when anchor and sequence are exactly
 * what the thread's previous sample saw, in a chain cached here, so an
 * anchor anyone else wrote (a second pyprof-bpf, CPython's profiler) costs
 * one whole walk, never a sample's callers.
 *
 * Every observation comes from the BPF walk of an interrupted, hence
 * stopped, thread: a whole walk that reached the thread's base frame is
 * stored (with the anchor's index in it, or none), a walk that stopped at
 * the anchor is validated as above and its spliced result stored in turn.
 *
 * Writing the anchor: the kernel cannot (bpf_probe_write_user is refused
 * under kernel lockdown, and from a perf_event program it would run in an
 * interrupt, where the helper fails anyway), so this module writes it from
 * userspace with process_vm_writev while the thread runs, as CPython's own
 * profiler does; the interpreter only ever compares the anchor with the
 * frame it pops, never dereferences it. Such a write can land on a frame
 * popped meanwhile, whose address a new frame may reuse; it is safe because
 * nothing is trusted until a whole walk of the stopped thread (in the
 * kernel) has seen the new anchor in its chain: the thread's walk_whole flag
 * is set before the write, and the same write moves the sequence on by
 * 2^32, so no chain cached before it validates any later anchor. A dangling
 * anchor is simply never found; a new frame at its address is live when
 * found, and its pop moves the anchor on as the protocol says. The
 * remaining window is the nanoseconds between the 16-byte write's two
 * stores. The caller must know the thread state is still linked in its
 * interpreter's list (user/sampling/bpf/threads.c reads the lists again just before):
 * a write into a freed one would land in whatever the target put there.
 * Writes are rare: only when the walks above the anchor have grown
 * long, at most once per interval per thread, backing off when re-anchoring
 * does not help, and only when the chosen frame is not already the anchor.
 * It anchors the first Python frame below the innermost of the latest
 * chain: the innermost changes fastest.
 *
 * On exit (frame_cache__release) every anchor still ours is zeroed, the
 * sequence kept, as CPython's profiler does. Ours: the value we wrote, or
 * where the interpreter's moves took it, judged sample by sample and by a
 * fresh read; one written over since by anyone else is left alone.
 *
 * Not thread-safe.
 */
#ifndef PYPROF_FRAME_CACHE_H
#define PYPROF_FRAME_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "target/py_offsets.h"
#include "target/pyproc.h"

struct frame_cache;

/* py_rawframe.reserved of an interpreter-owned link (PYPROF_FF_INTERP). */
#define FC_FRAME_INTERP 1u

/* frame_cache_rec.flags: the same bits as PYPROF_SF_* (bpf/pyprof.h). */
#define FC_REC_ANCHOR_READ	(1u << 8)
#define FC_REC_AT_ANCHOR	(1u << 9)
#define FC_REC_BASE		(1u << 10)

/* One record of the BPF walk. */
struct frame_cache_rec {
	pid_t tid;
	uint64_t ts_ns;
	uint64_t tstate;
	uint32_t status;		/* enum sample_status */
	uint32_t flags;			/* FC_REC_* */
	uint64_t anchor, seq;		/* with FC_REC_ANCHOR_READ */
	uint64_t anchor_prev;		/* with FC_REC_AT_ANCHOR: its caller */
	uint32_t nframes;
	/* Innermost first; .reserved is FC_FRAME_INTERP on interpreter
	 * links (sent only in cache mode). */
	const struct py_rawframe *frames;
};

/* What to hand on, and what the kernel should do next for this thread. */
struct frame_cache_out {
	uint32_t status;
	uint32_t nframes;
	const struct py_rawframe *frames;	/* Python frames only */
	/* The outermost `unchanged` frames are those of the thread's
	 * previous output (struct raw_sample.unchanged). */
	uint32_t unchanged;
	/* The thread's walk_whole flag must become walk_whole. */
	bool set_walk_whole;
	bool walk_whole;
	/* Worth re-anchoring now (frame_cache__reanchor). */
	bool reanchor;
	/* The callers could not be spliced (a mismatch): the stack holds the
	 * record's new frames only, status SAMPLE_TRUNCATED, though it may be
	 * no deeper than the limit. */
	bool cut;
};

struct frame_cache_stats {
	uint64_t whole;		/* records of whole walks */
	uint64_t spliced;	/* records completed from the cache */
	uint64_t mismatches;	/* delivered truncated, thread re-walked */
	uint64_t stored;	/* whole stacks stored */
	uint64_t frames_sent;	/* frames the kernel recorded */
	uint64_t frames_reused;	/* frames taken from the cache */
	uint64_t reanchors;	/* anchors written */
	uint64_t reanchor_failures;
	/* frame_cache__release(): anchors of ours zeroed, and anchors we
	 * wrote left as they were (in linked thread states): someone
	 * else's since, or the read or write failed. */
	uint64_t anchors_cleared;
	uint64_t anchors_left;
};

/*
 * @enabled false: a pass-through (no 3.15 protocol, or switched off); the
 * records then hold Python frames only. @o: the target's offsets; @pid: the
 * target. @max_frames: Python frames per delivered stack.
 */
int frame_cache__new(pid_t pid, const struct py_offsets *o, unsigned int max_frames,
		     bool enabled, struct frame_cache **out);
void frame_cache__free(struct frame_cache *fc);
/* Whether the cache may move anchors itself (writes into the target); off
 * until set. */
void frame_cache__set_reanchor(struct frame_cache *fc, bool allowed);

/*
 * Turn @r into a whole stack in @out (valid until the next call). Returns
 * 0, or -ENOMEM (the record is then passed on as it came, truncated).
 */
int frame_cache__process(struct frame_cache *fc, const struct frame_cache_rec *r,
			 struct frame_cache_out *out);

/*
 * Anchor the first Python frame below the innermost of thread @tid's latest
 * chain (its thread state at @tstate), unless it already is the anchor.
 * The caller must first have set the thread's walk_whole flag in the
 * kernel: samples after the write must walk whole until one observes the
 * new anchor (process() then asks for the flag to be cleared). Returns 0
 * (written, or nothing to write), -EPERM (not allowed, or no 3.15 layout
 * that one write covers; re-anchoring is then off for good), -ESRCH (gone),
 * -ENOENT (a thread without a cache), -EFAULT or another -errno.
 */
int frame_cache__reanchor(struct frame_cache *fc, pid_t tid, uint64_t tstate);

/*
 * On exit: zero every anchor this cache wrote that is still ours, leaving
 * its sequence as it is, as CPython's profiler does on exit. Ours: the
 * value we wrote, or where the interpreter's own moves took it from there,
 * as the thread's samples since and a fresh read show; an anchor written
 * since by anyone else (another pyprof-bpf, CPython's profiler) is left
 * alone. Only threads whose state is among the @n in @linked (tid and
 * thread state found again, linked in their interpreter's list, by a read
 * just before the call) are written: a state no longer linked may be
 * freed memory. Returns 0 or the first -errno of a read or write that
 * failed (a thread gone meanwhile is not an error).
 */
int frame_cache__release(struct frame_cache *fc, const struct py_thread *linked, size_t n);

/* Forget a thread (it exited, or its thread state changed). */
void frame_cache__forget(struct frame_cache *fc, pid_t tid);

void frame_cache__stats(const struct frame_cache *fc, struct frame_cache_stats *st);
/* -v: what the cache did, two lines to @out; @frames_from says where the
 * walked frames came from ("sent by the kernel", "walked"). */
void frame_cache_stats__print(const struct frame_cache_stats *st, const char *frames_from,
			      FILE *out);

#endif
