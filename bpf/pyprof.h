/* SPDX-License-Identifier: MIT */
/*
 * pyprof.h - what the BPF sampler (pyprof.bpf.c) and its loader
 * (user/bpf_sampler.c) share: the walk's configuration and the sample record.
 *
 * Included by both sides, so plain __u64/__u32 only: no pointers, no
 * bitfields, no types that differ between the BPF target and x86-64.
 */
#ifndef PYPROF_PYPROF_H
#define PYPROF_PYPROF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/*
 * Capacity of one record. The default recursion limit is 1,000, and the
 * issue asks for whole stacks of at least 2,048 frames; the runtime limit
 * (pyprof_config.max_frames) may be anything up to this.
 */
#define PYPROF_MAX_FRAMES	4096
/* Largest frame prefix decoded per frame. */
#define PYPROF_FRAME_READ_MAX	128
/*
 * Frames of one thread sit contiguously in its data-stack chunks, a caller
 * just below its callee. The walk reads the data stack in windows of up to
 * config.window bytes (one bpf_probe_read_user: ~130 ns for 4 KB here,
 * against ~90 ns for one 80-byte frame) and decodes every frame inside. A
 * window starts no lower than its frame's page: the memory under a chunk
 * may be unmapped, and a read that faults costs ~750 ns. A power of two.
 */
#define PYPROF_WINDOW_MAX	8192
#define PYPROF_PAGE		4096
/* Distinct code objects whose co_version one sample remembers. */
#define PYPROF_VERSION_MEMO	64
/*
 * Frames visited per sample, Python and interpreter-owned, as a multiple of
 * max_frames: interpreter frames are skipped without spending the depth
 * budget, but a corrupt or cyclic chain must still end.
 */
#define PYPROF_WALK_FACTOR	4

/* Same values as enum sample_status in user/sampler.h. */
enum pyprof_status {
	PYPROF_COMPLETE = 0,
	PYPROF_TRUNCATED = 1,	/* deeper than max_frames: innermost kept */
	PYPROF_NO_PYSTATE = 2,	/* no thread state known for this tid */
	PYPROF_READ_FAULT = 3,	/* a read of the target failed mid-walk */
};

/* pyprof_sample.flags */
enum {
	/* Truncated because the walk budget ran out, not the depth limit:
	 * the chain is longer than max_frames * PYPROF_WALK_FACTOR frames,
	 * which only a corrupt (cyclic) chain or a pathological stack does. */
	PYPROF_SF_WALK_BUDGET = 1 << 0,
	/*
	 * 3.15 frame cache (config.frame_cache != 0); see user/frame_cache.h
	 * for the protocol.
	 *
	 * SF_ANCHOR_READ: cache_frame and cache_seq hold the thread state's
	 * last_profiled_frame and last_profiled_frame_seq, read in the same
	 * stopped moment as the frames.
	 */
	PYPROF_SF_ANCHOR_READ = 1 << 8,
	/* The walk stopped at the anchor: the last frame of the record is
	 * the Python frame at cache_frame; its callers are not in the record. */
	PYPROF_SF_AT_ANCHOR = 1 << 9,
	/* The chain ended at tstate->base_frame, the last frame of the
	 * record: the record is the whole chain (a stack that may be cached). */
	PYPROF_SF_BASE = 1 << 10,
};

/* pyprof_frame.flags */
enum {
	/*
	 * An interpreter-owned frame (entry frame, base frame): not a Python
	 * frame, but a link of the chain the 3.15 anchor moves along. Sent
	 * only when config.frame_cache is set; code and instr are 0.
	 */
	PYPROF_FF_INTERP = 1 << 0,
};

/* Indices of the per-CPU counter map. */
enum pyprof_counter {
	PYPROF_CNT_LOST = 0,	/* bpf_ringbuf_output() failed: ring full */
	PYPROF_CNT_FOREIGN,	/* event fired in another process */
	PYPROF_CNT_WINDOWS,	/* data-stack windows read */
	PYPROF_CNT_WINDOW_FAULTS, /* windows that faulted (the frame read alone) */
	PYPROF_CNT_FRAME_READS,	/* frames read on their own */
	PYPROF_CNT_VERSION_READS, /* co_version reads (others from the memo) */
	/* Ticks of the target after it exec'd another program: the thread
	 * states in the map are the old image's; nothing is read. */
	PYPROF_CNT_EXECED,
	/* Ticks of a target thread past exit_mm(): no memory to read. */
	PYPROF_CNT_NO_MM,
	PYPROF_CNT_NR,
};

/*
 * Everything the walk needs to know about the target. Filled by userspace
 * from the flat offsets table (user/py_offsets.h) before load; the BPF
 * program holds no CPython offset of its own. Offsets are byte offsets.
 */
struct pyprof_config {
	/* 3.13+: current frame pointer in the thread state. */
	__u64 tstate_current_frame;
	/* 3.11/3.12 (tstate_cframe != 0): tstate->cframe->current_frame. */
	__u64 tstate_cframe;
	__u64 cframe_current_frame;

	__u64 frame_previous;
	__u64 frame_executable;		/* f_code before 3.13 */
	__u64 frame_instr_ptr;		/* prev_instr before 3.13 */
	__u64 frame_owner;		/* one byte */
	/* Bytes read per frame: covers every field above, at most
	 * PYPROF_FRAME_READ_MAX. */
	__u64 frame_size;
	/* Owner values >= this are interpreter frames; 0: there are none. */
	__u64 frame_owner_interp_min;
	/* Bits cleared from f_executable (a tagged _PyStackRef since 3.14). */
	__u64 executable_tag_mask;
	/* co_version in the code object (4 bytes); 0: not read (3.11). */
	__u64 code_version;

	/*
	 * 3.15 frame cache (frame_cache != 0): the thread-state fields
	 * current_frame, base_frame, last_profiled_frame and
	 * last_profiled_frame_seq are read in one read of tstate_block_len
	 * bytes at tstate_block; the *_rel fields are offsets in that block.
	 */
	__u64 tstate_block;
	__u32 tstate_block_len;		/* <= PYPROF_TSTATE_BLOCK */
	__u32 current_frame_rel;
	__u32 base_frame_rel;
	__u32 anchor_rel;
	__u32 anchor_seq_rel;
	__u32 frame_cache;

	/* Data-stack window in bytes, above frame_size and at most
	 * PYPROF_WINDOW_MAX; 0 reads each frame on its own. */
	__u32 window;

	__u32 max_frames;		/* <= PYPROF_MAX_FRAMES */
	__u32 max_walk;			/* frames visited, Python or not */
	/* Process whose samples are kept, as bpf_get_current_pid_tgid()
	 * sees it; a guard should an event outlive an exec or fork. */
	__u32 tgid;
};

/* Largest thread-state block read at once (config.tstate_block_len). */
#define PYPROF_TSTATE_BLOCK	64

/* Value of the tid -> thread map, keyed by host tid (__u32). */
struct pyprof_thread {
	__u64 tstate;			/* PyThreadState address; 0: unknown */
	/* Bumped by every sample of the thread: tells the loader that a
	 * thread it opened no event for is sampled through inheritance. */
	__u64 samples;
	/* Frame cache: non-zero while userspace holds no cached stack it
	 * could splice onto this thread's anchor: the walk does not stop at
	 * the anchor, it goes down to the base frame. Set by userspace. */
	__u32 walk_whole;
	__u32 pad;
	/* Frame cache: the anchor and sequence the last sample saw (kept
	 * by the program). An anchor that changed while the sequence did
	 * not was written (by another profiler, or by us re-anchoring), not
	 * moved by the interpreter: that sample walks whole. */
	__u64 last_anchor;
	__u64 last_seq;
};

/* One frame, innermost first. Same layout as struct py_rawframe. */
struct pyprof_frame {
	__u64 frame;			/* _PyInterpreterFrame address */
	__u64 code;			/* code object address, tag cleared */
	__u64 instr;			/* instr_ptr (prev_instr before 3.13) */
	/* co_version of the code object (3.12+; 0 when unknown): with the
	 * address it identifies the object even after its address is reused. */
	__u32 code_version;
	__u32 flags;			/* PYPROF_FF_* */
};

/*
 * One sample. Only the header and the first nframes frames are submitted:
 * a record is PYPROF_SAMPLE_SIZE(nframes) bytes long. nframes counts the
 * PYPROF_FF_INTERP entries too; max_frames limits the Python frames.
 */
struct pyprof_sample {
	__u64 ts_ns;			/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 tstate;			/* 0 when status is PYPROF_NO_PYSTATE */
	__u32 pid;			/* host tgid */
	__u32 tid;			/* host tid */
	__u32 cpu;
	__u32 status;			/* enum pyprof_status */
	__u32 nframes;
	__u32 flags;			/* PYPROF_SF_* */
	/* With PYPROF_SF_ANCHOR_READ: the thread's anchor and its sequence
	 * (tstate->last_profiled_frame, ->last_profiled_frame_seq). */
	__u64 cache_frame;
	__u64 cache_seq;
	/* With PYPROF_SF_AT_ANCHOR: the anchor frame's caller, as read now
	 * (a check userspace makes against its cached stack). */
	__u64 cache_prev;
	struct pyprof_frame frames[PYPROF_MAX_FRAMES];
};

#define PYPROF_SAMPLE_HDR_SIZE	__builtin_offsetof(struct pyprof_sample, frames)
#define PYPROF_SAMPLE_SIZE(n)	(PYPROF_SAMPLE_HDR_SIZE + \
				 (unsigned long)(n) * sizeof(struct pyprof_frame))

#endif
