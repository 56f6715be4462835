/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame_cache.c - CPython 3.15's frame cache (sampling/frame_cache.c) fed
 * records as the BPF walk sends them, made of the fuzzer's bytes: frames,
 * anchors and sequences all come from the target's memory.
 * Input: [u8 max_frames][u8 enabled] then records:
 *   [u8 tid][u8 tstate][u8 status][u8 flags][u8 anchor][u8 anchor_prev]
 *   [u16 seq][u8 nframes] then nframes x [u8 frame][u8 code][u8 instr][u8 bits]
 * Frame, code and anchor numbers become addresses of a few frames, so that
 * chains and anchors meet. The writes into the target (re-anchoring,
 * release) are not called: they would write into a real process.
 *
 * Invariants checked (frame_cache.h): at most max_frames frames out, the
 * unchanged ones among them, Python frames only; disabled, the records as
 * they came (the caller then sends Python frames only: these are not).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "fuzz_check.h"
#include "sampling/frame_cache.h"

#define REC_HEAD 9
#define FRAME_BYTES 4

static uint64_t addr(uint8_t n)
{
	return n ? 0x7f0000001000ull + (uint64_t)n * 0x50 : 0;
}

/* One record from @d; returns the bytes it took, 0 at the end. */
static size_t record(const uint8_t *d, size_t size, struct py_rawframe *f,
		     struct frame_cache_rec *r)
{
	size_t n;

	if (size < REC_HEAD)
		return 0;
	n = d[8];
	if (size - REC_HEAD < n * FRAME_BYTES)
		n = (size - REC_HEAD) / FRAME_BYTES;
	*r = (struct frame_cache_rec){
		.tid = 1 + d[0] % 4,
		.tstate = 0x1000 + (uint64_t)(d[1] % 4) * 0x1000,
		.status = d[2] % 8,
		.flags = (uint32_t)(d[3] & 7) << 8,
		.anchor = addr(d[4]),
		.anchor_prev = addr(d[5]),
		.seq = (uint64_t)(d[6] | d[7] << 8) | (d[7] & 0x80 ? 1ull << 32 : 0),
		.nframes = (uint32_t)n,
		.frames = f,
	};
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b = d + REC_HEAD + i * FRAME_BYTES;

		f[i] = (struct py_rawframe){ .frame = addr(b[0]), .code = 0x500000 + b[1] * 0x100,
					     .instr = 0x500000 + b[1] * 0x100 + b[2],
					     .code_version = b[3] >> 1,
					     .reserved = b[3] & FC_FRAME_INTERP };
	}
	return REC_HEAD + n * FRAME_BYTES;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct py_offsets o = { .tstate_last_profiled_frame = 0x100,
				.tstate_last_profiled_frame_seq = 0x108 };
	struct py_rawframe f[256];
	struct frame_cache_rec r;
	struct frame_cache_out out;
	struct frame_cache_stats st;
	struct frame_cache *fc;
	unsigned int max;
	size_t used;
	bool enabled;

	if (size < 2)
		return 0;
	max = 1 + data[0] % 64;
	enabled = data[1] & 1;
	if (frame_cache__new(0, &o, max, enabled, &fc))
		return 0;
	for (data += 2, size -= 2; (used = record(data, size, f, &r)); data += used, size -= used) {
		if (frame_cache__process(fc, &r, &out))
			continue;
		if (!enabled) {	/* a pass-through */
			CHECK(out.frames == r.frames && out.nframes == r.nframes);
			continue;
		}
		CHECK(out.nframes <= max && out.unchanged <= out.nframes);
		for (uint32_t i = 0; i < out.nframes; i++)
			CHECK(!(out.frames[i].reserved & FC_FRAME_INTERP));
		if (r.status == 7)
			frame_cache__forget(fc, r.tid);
	}
	frame_cache__stats(fc, &st);
	CHECK(st.spliced + st.whole + st.mismatches <= 65536);
	frame_cache__free(fc);
	return 0;
}
