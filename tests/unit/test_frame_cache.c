// SPDX-License-Identifier: MIT
/*
 * test_frame_cache.c - the splicing and validation of user/sampling/frame_cache.c
 * on synthetic records: what is spliced, what is refused, what the kernel
 * is told. Runs under ASan/UBSan.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sampling/frame_cache.h"
#include "sampling/sampler.h"

#define MS 1000000ULL

static const struct py_offsets offsets = {
	.tstate_current_frame = 72,
	.tstate_base_frame = 80,
	.tstate_last_profiled_frame = 88,
	.tstate_last_profiled_frame_seq = 96,
	.frame_size = 80,
	.frame_previous = 8,
	.frame_owner = 74,
	.frame_owner_interp_min = 3,
};

/* A chain: frames F(i) at 0x1000 + 0x100 * i; E(i) interpreter links. */
struct chain {
	struct py_rawframe f[64];
	uint32_t n;
};

static uint64_t addr_of(unsigned i)
{
	return 0x1000 + 0x100 * (uint64_t)i;
}

static void push(struct chain *c, unsigned i, bool interp)
{
	struct py_rawframe *f = &c->f[c->n++];

	memset(f, 0, sizeof(*f));
	f->frame = addr_of(i);
	if (interp) {
		f->reserved = FC_FRAME_INTERP;
	} else {
		f->code = 0x900000 + 0x10 * (uint64_t)i;
		f->instr = f->code + 0x40;
		f->code_version = 100 + i;
	}
}

/* Frames @ids innermost first; negative ids are interpreter links. */
static void build(struct chain *c, const int *ids, unsigned n)
{
	c->n = 0;
	for (unsigned k = 0; k < n; k++)
		push(c, (unsigned)abs(ids[k]), ids[k] < 0);
}

static struct frame_cache_rec rec(const struct chain *c, uint32_t flags, uint64_t anchor,
				  uint64_t seq, uint64_t ts_ms)
{
	struct frame_cache_rec r = {
		.tid = 7, .ts_ns = ts_ms * MS, .tstate = 0x5000, .status = SAMPLE_COMPLETE,
		.flags = FC_REC_ANCHOR_READ | flags, .anchor = anchor, .seq = seq,
		.nframes = c->n, .frames = c->f,
	};
	return r;
}

/* The Python frames of @c, as the callback should get them. */
static void expect_stack(const struct frame_cache_out *o, const int *ids, unsigned n)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		if (ids[i] < 0)
			continue;
		assert_true(k < o->nframes);
		assert_int_equal(o->frames[k].frame, addr_of((unsigned)ids[i]));
		assert_int_equal(o->frames[k].reserved, 0);
		assert_int_equal(o->frames[k].code_version, 100 + ids[i]);
		k++;
	}
	assert_int_equal(o->nframes, k);
}

static struct frame_cache *new_cache(unsigned max_frames)
{
	struct frame_cache *fc = NULL;

	assert_int_equal(frame_cache__new(1, &offsets, max_frames, true, &fc), 0);
	return fc;
}

/* Base frame -99, entry link -50: [5 4 3 -50 2 1 -99] */
static const int whole5[] = { 5, 4, 3, -50, 2, 1, -99 };

/* Store whole5 with the anchor at frame 4 (index 1), sequence 10. */
static struct frame_cache *primed(void)
{
	struct frame_cache *fc = new_cache(100);
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	build(&c, whole5, 7);
	r = rec(&c, FC_REC_BASE, addr_of(4), 10, 1);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_COMPLETE);
	expect_stack(&o, whole5, 7);
	/* An anchor found in the chain: stop walking whole. */
	assert_true(o.set_walk_whole);
	assert_false(o.walk_whole);
	return fc;
}

static void test_disabled_passes_through(void **state)
{
	struct frame_cache *fc = NULL;
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;
	static const int ids[] = { 3, 2, 1 };

	(void)state;
	assert_int_equal(frame_cache__new(1, &offsets, 100, false, &fc), 0);
	build(&c, ids, 3);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(1), 0, 1);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_ptr_equal(o.frames, c.f);
	assert_int_equal(o.nframes, 3);
	assert_false(o.set_walk_whole);
	frame_cache__free(fc);
}

static void test_no_anchor_in_chain_keeps_walking_whole(void **state)
{
	struct frame_cache *fc = new_cache(100);
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	build(&c, whole5, 7);
	/* The anchor is a dead address, and then an interpreter link. */
	r = rec(&c, FC_REC_BASE, 0xdead000, 10, 1);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.set_walk_whole);		/* already whole */
	r = rec(&c, FC_REC_BASE, addr_of(50), 10, 2);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.set_walk_whole);
	/* Not complete: never stored. */
	r = rec(&c, 0, addr_of(4), 10, 3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.set_walk_whole);
	frame_cache__free(fc);
}

static void test_splice_same_anchor(void **state)
{
	struct frame_cache *fc = primed();
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;
	static const int now[] = { 8, 7, 4 };
	static const int want[] = { 8, 7, 4, 3, -50, 2, 1, -99 };

	(void)state;
	/* New frames 8 and 7 above the anchor, which has not moved. */
	build(&c, now, 3);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_COMPLETE);
	expect_stack(&o, want, 8);
	/* 3, 2 and 1 were the outermost frames of the previous output too. */
	assert_int_equal(o.unchanged, 3);
	/* The stored chain is the spliced one: again from the anchor. */
	build(&c, (const int[]){ 9, 4 }, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 3);
	r.anchor_prev = addr_of(3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	expect_stack(&o, (const int[]){ 9, 4, 3, -50, 2, 1, -99 }, 7);
	assert_int_equal(o.unchanged, 3);
	/* A whole walk that is not stored breaks the run... */
	build(&c, (const int[]){ 9, 4 }, 2);
	r = rec(&c, 0, addr_of(4), 10, 4);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.unchanged, 0);
	/* ...and the next splice, right as it is, claims nothing. */
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 5);
	r.anchor_prev = addr_of(3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	expect_stack(&o, (const int[]){ 9, 4, 3, -50, 2, 1, -99 }, 7);
	assert_int_equal(o.unchanged, 0);
	r.ts_ns += MS;
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.unchanged, 3);
	frame_cache__free(fc);
}

static void test_splice_after_pops(void **state)
{
	struct frame_cache *fc = primed();
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	/* 4 and then 3 returned: the anchor moved to 3 (11), then to the
	 * entry link (12): an interpreter link is no anchor to stop at. 4
	 * popped once: anchor at 3 with sequence 11. */
	build(&c, (const int[]){ 6, 3 }, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(3), 11, 2);
	r.anchor_prev = addr_of(50);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_COMPLETE);
	expect_stack(&o, (const int[]){ 6, 3, -50, 2, 1, -99 }, 6);
	frame_cache__free(fc);
}

/* Each refused record: delivered truncated, its own frames only. */
static void expect_refused(struct frame_cache *fc, struct frame_cache_rec *r,
			   const int *ids, unsigned n, bool flag_change)
{
	struct frame_cache_out o;

	assert_int_equal(frame_cache__process(fc, r, &o), 0);
	assert_int_equal(o.status, SAMPLE_TRUNCATED);
	expect_stack(&o, ids, n);
	assert_int_equal(o.set_walk_whole, flag_change);
	if (flag_change)
		assert_true(o.walk_whole);
}

static void test_mismatches(void **state)
{
	static const int top4[] = { 8, 4 };
	static const int top3[] = { 8, 3 };
	static const int top2[] = { 8, 2 };
	struct frame_cache *fc;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	/* Same address, sequence moved: 4 popped and a new frame at 4's
	 * address took the anchor's place: C[1 + 1] is 3, not 4. */
	fc = primed();
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 11, 2);
	r.anchor_prev = addr_of(3);
	expect_refused(fc, &r, top4, 2, true);
	frame_cache__free(fc);

	/* Moved without the sequence (written by someone else). */
	fc = primed();
	build(&c, top3, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(3), 10, 2);
	r.anchor_prev = addr_of(50);
	expect_refused(fc, &r, top3, 2, true);
	frame_cache__free(fc);

	/* Across the interpreter link: the anchor cannot pass it. */
	fc = primed();
	build(&c, top2, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(2), 13, 2);
	r.anchor_prev = addr_of(1);
	expect_refused(fc, &r, top2, 2, true);
	frame_cache__free(fc);

	/* Sequence went back. */
	fc = primed();
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 9, 2);
	r.anchor_prev = addr_of(3);
	expect_refused(fc, &r, top4, 2, true);
	frame_cache__free(fc);

	/* Beyond the chain. */
	fc = primed();
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10 + 1000, 2);
	r.anchor_prev = addr_of(3);
	expect_refused(fc, &r, top4, 2, true);
	frame_cache__free(fc);

	/* Another code object at the anchor's address. */
	fc = primed();
	build(&c, top4, 2);
	c.f[1].code_version++;
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(3);
	{
		struct frame_cache_out o;

		assert_int_equal(frame_cache__process(fc, &r, &o), 0);
		assert_int_equal(o.status, SAMPLE_TRUNCATED);
		assert_int_equal(o.nframes, 2);
		assert_true(o.set_walk_whole);
	}
	frame_cache__free(fc);

	/* Another caller. */
	fc = primed();
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(2);
	expect_refused(fc, &r, top4, 2, true);
	frame_cache__free(fc);

	/* Another thread state under the same tid. */
	fc = primed();
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(3);
	r.tstate = 0x6000;
	expect_refused(fc, &r, top4, 2, true);
	frame_cache__free(fc);

	/* Nothing cached for this thread. */
	fc = new_cache(100);
	build(&c, top4, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(3);
	expect_refused(fc, &r, top4, 2, false);	/* new threads walk whole */
	frame_cache__free(fc);
}

static void test_cooldown_after_mismatch(void **state)
{
	struct frame_cache *fc = primed();
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	build(&c, (const int[]){ 8, 4 }, 2);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 11, 100);
	r.anchor_prev = addr_of(3);
	expect_refused(fc, &r, (const int[]){ 8, 4 }, 2, true);
	/* A whole walk soon after: stored, but the thread stays whole. */
	build(&c, whole5, 7);
	r = rec(&c, FC_REC_BASE, addr_of(4), 11, 110);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.set_walk_whole);
	/* After the cooldown: back to splicing. */
	r = rec(&c, FC_REC_BASE, addr_of(4), 11, 100 + 60);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_true(o.set_walk_whole);
	assert_false(o.walk_whole);
	frame_cache__free(fc);
}

static void test_depth_limit(void **state)
{
	struct frame_cache *fc = new_cache(3);
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	build(&c, whole5, 7);
	r = rec(&c, FC_REC_BASE, addr_of(4), 10, 1);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_TRUNCATED);
	expect_stack(&o, (const int[]){ 5, 4, 3 }, 3);
	/* Spliced: the innermost three again. */
	build(&c, (const int[]){ 9, 8, 4 }, 3);
	r = rec(&c, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
	r.anchor_prev = addr_of(3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_TRUNCATED);
	expect_stack(&o, (const int[]){ 9, 8, 4 }, 3);
	assert_int_equal(o.unchanged, 0);	/* the outermost were cut */
	frame_cache__free(fc);
}

static void test_reanchor_wanted_when_deep(void **state)
{
	struct frame_cache *fc = new_cache(100);
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;
	int ids[40];

	(void)state;
	for (int i = 0; i < 39; i++)
		ids[i] = 40 - i;
	ids[39] = -99;
	build(&c, ids, 40);
	/* Deep and unanchored: worth anchoring. */
	r = rec(&c, FC_REC_BASE, 0, 0, 1);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_true(o.reanchor);
	/* Anchored one below the top: not worth it. */
	r = rec(&c, FC_REC_BASE, addr_of(39), 0, 2);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.reanchor);
	/* Shallow: never. */
	build(&c, (const int[]){ 2, 1, -99 }, 3);
	r = rec(&c, FC_REC_BASE, 0, 0, 3);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_false(o.reanchor);
	frame_cache__free(fc);
}

/* Many threads, colliding slots, forgotten in any order. */
static void test_thread_table(void **state)
{
	struct frame_cache *fc = new_cache(100);
	struct frame_cache_out o;
	struct chain c;
	struct frame_cache_rec r;

	(void)state;
	build(&c, whole5, 7);
	for (int round = 0; round < 3; round++) {
		for (pid_t tid = 1; tid <= 1000; tid++) {
			r = rec(&c, FC_REC_BASE, addr_of(4), 10, 1);
			r.tid = tid * 2048;	/* same home slot for many */
			assert_int_equal(frame_cache__process(fc, &r, &o), 0);
		}
		for (pid_t tid = 1; tid <= 1000; tid += 2)
			frame_cache__forget(fc, tid * 2048);
		/* The others are all still there: they splice. */
		for (pid_t tid = 2; tid <= 1000; tid += 2) {
			struct chain t;

			build(&t, (const int[]){ 8, 4 }, 2);
			r = rec(&t, FC_REC_AT_ANCHOR, addr_of(4), 10, 2);
			r.anchor_prev = addr_of(3);
			r.tid = tid * 2048;
			assert_int_equal(frame_cache__process(fc, &r, &o), 0);
			assert_int_equal(o.status, SAMPLE_COMPLETE);
		}
		for (pid_t tid = 2; tid <= 1000; tid += 2)
			frame_cache__forget(fc, tid * 2048);
	}
	frame_cache__free(fc);
}

/* ------------------------------------------------------------------------ */
/* Re-anchoring and clearing on exit, with this very process as the target:
 * its "thread state" is tsmem, anchor and sequence at offsets 88 and 96. */

static uint64_t tsmem[16];
#define TS_ANCHOR 11
#define TS_SEQ 12
#define JUMP (1ULL << 32)

static uint64_t tsaddr(void)
{
	return (uint64_t)(uintptr_t)tsmem;
}

static uint64_t ts_get(int i)
{
	return ((volatile uint64_t *)tsmem)[i];
}

static void ts_set(uint64_t anchor, uint64_t seq)
{
	((volatile uint64_t *)tsmem)[TS_ANCHOR] = anchor;
	((volatile uint64_t *)tsmem)[TS_SEQ] = seq;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A record of this process's thread, taken now (after any write). */
static struct frame_cache_rec self_rec(const struct chain *c, uint32_t flags, uint64_t anchor,
				       uint64_t seq)
{
	struct frame_cache_rec r = rec(c, flags, anchor, seq, 0);

	r.tid = getpid();
	r.tstate = tsaddr();
	r.ts_ns = mono_ns();
	return r;
}

/*
 * whole5 cached with no anchor at sequence 7, then re-anchored: frame 4
 * (the first Python frame below the innermost) written with 7 + 2^32.
 */
static struct frame_cache *written(void)
{
	struct frame_cache *fc = NULL;
	struct frame_cache_out o;
	struct frame_cache_rec r;
	struct chain c;

	assert_int_equal(frame_cache__new(getpid(), &offsets, 100, true, &fc), 0);
	frame_cache__set_reanchor(fc, true);
	ts_set(0, 7);
	build(&c, whole5, 7);
	r = self_rec(&c, FC_REC_BASE, 0, 7);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(frame_cache__reanchor(fc, getpid(), tsaddr()), 0);
	assert_int_equal(ts_get(TS_ANCHOR), addr_of(4));
	assert_int_equal(ts_get(TS_SEQ), 7 + JUMP);
	return fc;
}

/* frame_cache__release() with this thread's state linked (or not); the
 * anchor and sequence after it. */
static void release(struct frame_cache *fc, bool linked, uint64_t *anchor, uint64_t *seq)
{
	struct py_thread l = { .tstate = tsaddr(), .host_tid = getpid() };

	assert_int_equal(frame_cache__release(fc, &l, linked ? 1 : 0), 0);
	*anchor = ts_get(TS_ANCHOR);
	*seq = ts_get(TS_SEQ);
}

static uint64_t cleared(const struct frame_cache *fc)
{
	struct frame_cache_stats st;

	frame_cache__stats(fc, &st);
	return st.anchors_cleared;
}

static void test_release_ours(void **state)
{
	struct frame_cache *fc;
	uint64_t a, s;

	(void)state;
	/* Unmoved: cleared, the sequence kept. */
	fc = written();
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	assert_int_equal(s, 7 + JUMP);
	assert_int_equal(cleared(fc), 1);
	/* Nothing is ours twice. */
	release(fc, true, &a, &s);
	assert_int_equal(cleared(fc), 1);
	frame_cache__free(fc);

	/* Moved by the interpreter: 4 popped (to 3), then 3 (to the entry
	 * link 50, where it stays). Both ours. */
	fc = written();
	ts_set(addr_of(3), 8 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	assert_int_equal(s, 8 + JUMP);
	frame_cache__free(fc);
	fc = written();
	ts_set(addr_of(50), 9 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	frame_cache__free(fc);

	/* A thread state not linked any more: never written. */
	fc = written();
	release(fc, false, &a, &s);
	assert_int_equal(a, addr_of(4));
	assert_int_equal(cleared(fc), 0);
	frame_cache__free(fc);

	/* Without the re-anchoring, nothing of ours. */
	assert_int_equal(frame_cache__new(getpid(), &offsets, 100, true, &fc), 0);
	ts_set(addr_of(4), 7);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(4));
	frame_cache__free(fc);
}

static void test_release_leaves_others(void **state)
{
	struct frame_cache *fc;
	uint64_t a, s;

	(void)state;
	/* CPython's profiler writes the anchor alone. */
	fc = written();
	ts_set(addr_of(2), 7 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(2));
	frame_cache__free(fc);

	/* ...and then the interpreter moved it on: not where our anchor's
	 * moves lead (4 -> 3). */
	fc = written();
	ts_set(addr_of(1), 8 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(1));
	frame_cache__free(fc);

	/* Another pyprof-bpf: its own jump, even onto our very frame. */
	fc = written();
	ts_set(addr_of(4), 7 + 2 * JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(4));
	frame_cache__free(fc);

	/* Past the interpreter link: no move of the interpreter's. */
	fc = written();
	ts_set(addr_of(2), 10 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(2));
	frame_cache__free(fc);
}

/* What the samples since the write saw decides too. */
static void test_release_follows_samples(void **state)
{
	struct frame_cache *fc;
	struct frame_cache_out o;
	struct frame_cache_rec r;
	struct chain c;
	uint64_t a, s;

	(void)state;
	/* Seen unmoved by a whole walk, then spliced after one pop (4 ->
	 * 3); now moved once more (3 -> entry link 50): ours. */
	fc = written();
	build(&c, whole5, 7);
	r = self_rec(&c, FC_REC_BASE, addr_of(4), 7 + JUMP);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	build(&c, (const int[]){ 6, 3 }, 2);
	r = self_rec(&c, FC_REC_AT_ANCHOR, addr_of(3), 8 + JUMP);
	r.anchor_prev = addr_of(50);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	assert_int_equal(o.status, SAMPLE_COMPLETE);
	ts_set(addr_of(50), 9 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	frame_cache__free(fc);

	/* A sample taken before the write (older sequence) says nothing. */
	fc = written();
	build(&c, whole5, 7);
	r = self_rec(&c, FC_REC_BASE, 0, 7);
	r.ts_ns = 1;
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	frame_cache__free(fc);

	/* Once a sample showed someone else's anchor, it is theirs for
	 * good, even if our value comes back. */
	fc = written();
	build(&c, whole5, 7);
	r = self_rec(&c, FC_REC_BASE, addr_of(2), 7 + JUMP);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	ts_set(addr_of(4), 7 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(4));
	frame_cache__free(fc);

	/* A forgotten thread: its state may still be linked; only the
	 * unmoved value is known to be ours. */
	fc = written();
	frame_cache__forget(fc, getpid());
	release(fc, true, &a, &s);
	assert_int_equal(a, 0);
	frame_cache__free(fc);
	fc = written();
	frame_cache__forget(fc, getpid());
	ts_set(addr_of(3), 8 + JUMP);
	release(fc, true, &a, &s);
	assert_int_equal(a, addr_of(3));
	frame_cache__free(fc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disabled_passes_through),
		cmocka_unit_test(test_no_anchor_in_chain_keeps_walking_whole),
		cmocka_unit_test(test_splice_same_anchor),
		cmocka_unit_test(test_splice_after_pops),
		cmocka_unit_test(test_mismatches),
		cmocka_unit_test(test_cooldown_after_mismatch),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_reanchor_wanted_when_deep),
		cmocka_unit_test(test_thread_table),
		cmocka_unit_test(test_release_ours),
		cmocka_unit_test(test_release_leaves_others),
		cmocka_unit_test(test_release_follows_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
