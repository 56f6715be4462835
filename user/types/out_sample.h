/* SPDX-License-Identifier: MIT */
/*
 * out_sample.h - a resolved sample: what the resolver makes of a raw sample
 * and what every sink takes (the output writers, the raw recording, top's
 * aggregate, the agent's windows). A type of its own, so that the stages
 * that make or pass samples need not include the writers' header
 * (output/output.h).
 *
 * A sample's strings and arrays belong to whoever made it: a sink copies
 * what it keeps, so they need only live for the call that hands it over.
 */
#ifndef PYPROF_TYPES_OUT_SAMPLE_H
#define PYPROF_TYPES_OUT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "types/py_sym.h"

/* What a frame of a sample is (out_sample.kinds, out_leaf.kind, the writers' frames). */
enum out_frame_kind {
	OUT_FRAME_PYTHON = 0,
	OUT_FRAME_STATUS,	/* [truncated], [no-python-state], ... */
	OUT_FRAME_PROCESS,	/* [comm:pid] */
	OUT_FRAME_THREAD,	/* [thread:tid] */
	OUT_FRAME_KERNEL,	/* a kernel function (off-CPU stacks) */
	OUT_FRAME_NATIVE,	/* a native function: name, file = its DSO */
};

/* One sample as the recorder hands it over. */
struct out_sample {
	const char *comm;		/* process name; NULL or "" -> "unknown" */
	pid_t pid;
	pid_t tid;
	const char *thread_name;	/* Python or OS thread name; may be NULL */
	uint32_t cpu;
	uint64_t ts_ns;			/* CLOCK_MONOTONIC */
	uint64_t period_ns;		/* weight of this sample; 0 counts as 1 */
	uint32_t status;		/* enum sample_status (sampler.h) */
	uint32_t nframes;
	const struct py_sym *frames;	/* innermost first */
	/* A hint, 0 when unknown: the outermost `unchanged` frames are those
	 * of the previous sample of the same (pid, tid) given to this output,
	 * symbol for symbol (struct stack_memo); they are not looked up again. */
	uint32_t unchanged;
	/* The perf-script event of this sample ("offcpu-time"); NULL: the
	 * output's (output_opts.event). */
	const char *event;
	/* Frames on the leaf side of the Python frames, outermost first:
	 * what the thread did beyond its Python code (<GC>, [GIL wait],
	 * [syscall] NAME, kernel functions, [runnable]). */
	const struct out_leaf *leaf;
	uint32_t nleaf;
	/* --native: the kind of each of frames[] (OUT_FRAME_PYTHON, _NATIVE:
	 * function = symbol, file = DSO path; _STATUS: a marker such as
	 * [unwind-failed]); NULL: all Python. */
	const uint8_t *kinds;
	/* --native: where each native frame of frames[] is (entries of other
	 * frames are ignored); NULL: no addresses known. */
	const struct out_addr *addrs;
};

/*
 * Where a native frame's code is: perf-script prints "pc - map_base" (the
 * file-relative address, as `perf script` does for a DSO) and
 * symbol+0x<symoff>; pprof makes a location at pc in the mapping
 * [map_start, map_end) of the frame's DSO.
 */
struct out_addr {
	uint64_t pc;		/* sampled pc or return address; 0: unknown */
	uint64_t symoff;	/* pc - its symbol's start (frames with a symbol) */
	uint64_t map_start, map_end;	/* the DSO's mappings, first to last; 0: unknown */
	uint64_t map_base;	/* where the DSO's file offset 0 is mapped */
	const unsigned char *build_id;	/* NULL: unknown */
	size_t build_id_len;
};

/* A frame that is not Python code, on a sample's leaf side. */
struct out_leaf {
	int kind;		/* OUT_FRAME_STATUS or OUT_FRAME_KERNEL */
	const char *name;	/* "[GIL wait]", "tcp_recvmsg" ... */
	/* A kernel frame's address and its offset into the function (perf
	 * script's "ffffffff81234567 read_zero+0x17"); 0: not known. */
	uint64_t addr, symoff;
};

/* Weight of a sample: its period, or 1 when the period is 0 (as FlameGraph does). */
static inline uint64_t out_weight(const struct out_sample *s)
{
	return s->period_ns ? s->period_ns : 1;
}

#endif
