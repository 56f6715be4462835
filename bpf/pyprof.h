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
/* Largest frame prefix read per frame: one bpf_probe_read_user each. */
#define PYPROF_FRAME_READ_MAX	128
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
	/* Bits 8..15 are kept for the 3.15 frame cache (issue 4), which will
	 * end a walk early at tstate->last_profiled_frame and use cache_frame
	 * and cache_seq below. */
};

/* Indices of the per-CPU counter map. */
enum pyprof_counter {
	PYPROF_CNT_LOST = 0,	/* bpf_ringbuf_output() failed: ring full */
	PYPROF_CNT_FOREIGN,	/* event fired in another process */
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

	__u32 max_frames;		/* <= PYPROF_MAX_FRAMES */
	__u32 max_walk;			/* frames visited, Python or not */
	/* Process whose samples are kept, as bpf_get_current_pid_tgid()
	 * sees it; a guard should an event outlive an exec or fork. */
	__u32 tgid;
	__u32 pad;
};

/* Value of the tid -> thread map, keyed by host tid (__u32). */
struct pyprof_thread {
	__u64 tstate;			/* PyThreadState address; 0: unknown */
	/* Bumped by every sample of the thread: tells the loader that a
	 * thread it opened no event for is sampled through inheritance. */
	__u64 samples;
};

/* One frame, innermost first. Same layout as struct py_rawframe. */
struct pyprof_frame {
	__u64 frame;			/* _PyInterpreterFrame address */
	__u64 code;			/* code object address, tag cleared */
	__u64 instr;			/* instr_ptr (prev_instr before 3.13) */
	/* co_version of the code object (3.12+; 0 when unknown): with the
	 * address it identifies the object even after its address is reused. */
	__u32 code_version;
	__u32 reserved;
};

/*
 * One sample. Only the header and the first nframes frames are submitted:
 * a record is PYPROF_SAMPLE_SIZE(nframes) bytes long.
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
	/* Reserved for the frame cache (issue 4): zero for now. */
	__u64 cache_frame;
	__u64 cache_seq;
	struct pyprof_frame frames[PYPROF_MAX_FRAMES];
};

#define PYPROF_SAMPLE_HDR_SIZE	__builtin_offsetof(struct pyprof_sample, frames)
#define PYPROF_SAMPLE_SIZE(n)	(PYPROF_SAMPLE_HDR_SIZE + \
				 (unsigned long)(n) * sizeof(struct pyprof_frame))

#endif
