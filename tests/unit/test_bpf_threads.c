// SPDX-License-Identifier: MIT
/*
 * test_bpf_threads.c - a thread the scan finds gone keeps its frame cache
 * until the ring has been consumed past the scan (user/sampling/bpf/
 * threads.c): its last samples, taken just before it ended and still in the
 * ring, are spliced whole, not delivered [truncated]. A sampler built by
 * hand, no BPF: the scan's results and the ring positions are given.
 * Runs under ASan/UBSan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sampling/bpf/internal.h"
#include "sampling/frame_cache.h"

#define TID 7

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

static uint64_t addr_of(int i)
{
	return 0x1000 + 0x100 * (uint64_t)i;
}

/* Frames @ids, innermost first; negative ids are interpreter links. */
static void build(struct py_rawframe *f, const int *ids, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		int i = abs(ids[k]);

		memset(&f[k], 0, sizeof(f[k]));
		f[k].frame = addr_of(i);
		if (ids[k] < 0) {
			f[k].reserved = FC_FRAME_INTERP;
			continue;
		}
		f[k].code = 0x900000 + 0x10 * (uint64_t)i;
		f[k].instr = f[k].code + 0x40;
		f[k].code_version = 100 + (uint64_t)i;
	}
}

/* A sample of TID: a whole walk (@base), or one stopped at anchor 4. */
static uint32_t sample(struct frame_cache *fc, bool base, uint64_t ts)
{
	static const int whole[] = { 5, 4, 3, -50, 2, 1, -99 };
	static const int top[] = { 8, 7, 4 };
	struct py_rawframe f[8];
	struct frame_cache_out o;
	struct frame_cache_rec r = {
		.tid = TID, .ts_ns = ts, .tstate = 0x5000, .status = SAMPLE_COMPLETE,
		.flags = FC_REC_ANCHOR_READ | (base ? FC_REC_BASE : FC_REC_AT_ANCHOR),
		.anchor = addr_of(4), .seq = 10, .anchor_prev = addr_of(3),
		.nframes = base ? 7 : 3, .frames = f,
	};

	build(f, base ? whole : top, r.nframes);
	assert_int_equal(frame_cache__process(fc, &r, &o), 0);
	if (!base && o.status == SAMPLE_COMPLETE)
		assert_int_equal(o.nframes, 6);		/* 8 7 4 3 2 1 */
	return o.status;
}

/* A sampler that knows threads @tids (sorted), TID's callers cached. */
static struct bpf_sampler *sampler(const pid_t *tids, size_t n)
{
	struct bpf_sampler *s = calloc(1, sizeof(*s));
	bool changed = false;

	assert_non_null(s);
	s->threads_fd = s->ustack_end_fd = -1;
	assert_int_equal(frame_cache__new(1, &offsets, 100, true, &s->fc), 0);
	assert_int_equal(bpf_threads__grow(&s->tids, &s->cap_tids, n + 1, sizeof(pid_t)), 0);
	memcpy(s->tids, tids, n * sizeof(pid_t));
	assert_int_equal(bpf_threads__carry_over(s, n, 0, &changed), 0);
	assert_int_equal(s->nth, n);
	assert_int_equal(sample(s->fc, true, 1), SAMPLE_COMPLETE);
	assert_int_equal(sample(s->fc, false, 2), SAMPLE_COMPLETE);
	return s;
}

/* The next scan finds threads @tids. */
static void scan(struct bpf_sampler *s, const pid_t *tids, size_t n, uint64_t pos)
{
	bool changed = false;

	assert_int_equal(bpf_threads__grow(&s->tids, &s->cap_tids, n + 1, sizeof(pid_t)), 0);
	if (n)
		memcpy(s->tids, tids, n * sizeof(pid_t));
	assert_int_equal(bpf_threads__carry_over(s, n, pos, &changed), 0);
	assert_true(changed);
}

static void sampler_free(struct bpf_sampler *s)
{
	frame_cache__free(s->fc);
	free(s->th);
	free(s->dying);
	free(s->tids);
	free(s);
}

static void test_gone_thread_kept_until_ring_consumed(void **state)
{
	struct bpf_sampler *s = sampler((const pid_t[]){ 3, TID, 9 }, 3);

	(void)state;
	/* TID ends; the scan finds it gone with the producer at 1000. */
	scan(s, (const pid_t[]){ 3, 9 }, 2, 1000);
	assert_int_equal(s->nth, 2);
	assert_null(bpf_threads__find(s->th, s->nth, TID));
	assert_int_equal(s->ndying, 1);
	/* A poll that has not reached 1000: its last samples, still in the
	 * ring, are spliced whole (the old code forgot the cache at the scan:
	 * [truncated] > 8 > 7 > 4). */
	bpf_threads__retire_due(s, 999);
	assert_int_equal(s->ndying, 1);
	assert_int_equal(sample(s->fc, false, 3), SAMPLE_COMPLETE);
	/* Consumed past the scan: retired, its cache gone. */
	bpf_threads__retire_due(s, 1000);
	assert_int_equal(s->ndying, 0);
	assert_int_equal(sample(s->fc, false, 4), SAMPLE_TRUNCATED);
	sampler_free(s);
}

static void test_retired_in_scan_order(void **state)
{
	struct bpf_sampler *s = sampler((const pid_t[]){ 3, TID, 9 }, 3);

	(void)state;
	scan(s, (const pid_t[]){ TID, 9 }, 2, 500);	/* 3 gone */
	scan(s, (const pid_t[]){ 9 }, 1, 1000);		/* TID gone */
	assert_int_equal(s->ndying, 2);
	bpf_threads__retire_due(s, 700);
	assert_int_equal(s->ndying, 1);
	assert_int_equal(s->dying[0].tid, TID);
	assert_int_equal(sample(s->fc, false, 3), SAMPLE_COMPLETE);
	bpf_threads__retire_due(s, 5000);
	assert_int_equal(s->ndying, 0);
	sampler_free(s);
}

static void test_reused_tid_retires_at_once(void **state)
{
	struct bpf_sampler *s = sampler((const pid_t[]){ TID }, 1);

	(void)state;
	scan(s, NULL, 0, 1000);
	assert_int_equal(s->ndying, 1);
	/* A new thread with the same tid before any poll: the old one's state
	 * goes now, not later over the new thread's. */
	scan(s, (const pid_t[]){ TID }, 1, 2000);
	assert_int_equal(s->ndying, 0);
	assert_int_equal(s->nth, 1);
	assert_int_equal(sample(s->fc, false, 3), SAMPLE_TRUNCATED);
	bpf_threads__retire_due(s, 2000);
	assert_int_equal(s->nth, 1);
	sampler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gone_thread_kept_until_ring_consumed),
		cmocka_unit_test(test_retired_in_scan_order),
		cmocka_unit_test(test_reused_tid_retires_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
