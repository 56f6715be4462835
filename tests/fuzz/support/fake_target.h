/* SPDX-License-Identifier: MIT */
/*
 * fake_target.h - a Python process made of the fuzzer's bytes, for the
 * harnesses that walk a target (threads, frames, code objects, tasks).
 *
 * Input: a struct fake_target_hdr, then the address space (fake_mem.h). The
 * offsets are those of the version the header names: 3.11 and 3.12 from our
 * tables, 3.13+ from the _Py_DebugOffsets found at hdr.runtime in the fake
 * memory, validated as pyproc__open() does.
 *
 * Seeds come from live processes: run a harness with
 *   FUZZ_CAPTURE="PID MINOR RUNTIME CODE_TYPE CORO_TYPE ASYNCGEN_TYPE EXTRA OUT"
 * (numbers in hex, the process stopped): it walks the process through
 * /proc/PID/mem once, writes what it read to OUT as an input, and exits.
 */
#ifndef PYPROF_FUZZ_FAKE_TARGET_H
#define PYPROF_FUZZ_FAKE_TARGET_H

#include <stddef.h>
#include <stdint.h>

struct pyproc;

struct fake_target_hdr {
	uint8_t minor;		/* 11 to 15 */
	uint8_t flags;		/* the harness's own */
	uint8_t pad[6];
	uint64_t runtime;	/* _PyRuntime */
	uint64_t code_type, coro_type, asyncgen_type;
	uint64_t extra;		/* the harness's own (an address) */
};

/* The process of @data; -EINVAL when the input makes none. */
int fake_target_open(const uint8_t *data, size_t size, struct fake_target_hdr *h,
		     struct pyproc **out);

typedef void (*fake_target_fn)(const struct fake_target_hdr *h, struct pyproc *p);

/* In LLVMFuzzerInitialize(): with FUZZ_CAPTURE set, make the seed and exit. */
void fake_target_capture_main(fake_target_fn run);

#endif
