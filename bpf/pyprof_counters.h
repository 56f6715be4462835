/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * pyprof_counters.h - part of pyprof.h: the indices of the per-CPU counter
 * map, what the BPF side counts and userspace sums (bpf_lifecycle__counter()).
 */
#ifndef PYPROF_COUNTERS_H
#define PYPROF_COUNTERS_H

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
	/* In-kernel thread-state lookups: walks of the thread lists, thread
	 * states found, lookups that found none, and remembered thread states
	 * that failed their check (the tid was reused, or the state freed). */
	PYPROF_CNT_LOOKUPS,
	PYPROF_CNT_LOOKUP_FOUND,
	PYPROF_CNT_LOOKUP_MISSES,
	PYPROF_CNT_STALE_TSTATE,
	/* Code objects sent (first sightings), and those the ring had no
	 * room for (userspace then reads them from the target, if alive). */
	PYPROF_CNT_CODES_SENT,
	PYPROF_CNT_CODES_LOST,
	/* Ticks of a followed process not (yet) configured as a Python. */
	PYPROF_CNT_UNCONFIGURED,
	/* Children not followed: the procs map was full. */
	PYPROF_CNT_PROCS_FULL,
	/* -a: processes seen for the first time (PYPROF_PROC_SEEN sent). */
	PYPROF_CNT_PROCS_SEEN,
	/* 3.11/3.12 samples walked from the caller's frame
	 * (PYPROF_SF_FROM_CALLER), and chains found cyclic. */
	PYPROF_CNT_FROM_CALLER,
	PYPROF_CNT_CYCLES,
	/* 3.11/3.12 samples said as PYPROF_EVAL_ENTRY. */
	PYPROF_CNT_EVAL_ENTRY,
	/* Off-CPU: a switch-out whose interval could not be noted in the
	 * offcpu map, and switch-ins of a target thread with none noted. */
	PYPROF_CNT_OFFCPU_NOTE_FAILED,
	PYPROF_CNT_SWITCH_IN_UNNOTED,
	/* Switch-outs of a thread whose last interval no switch-in closed
	 * (about 1 in 2,000 here, cause not found): closed then, its end
	 * inferred from the CPU time the thread ran since. */
	PYPROF_CNT_SWITCH_IN_INFERRED,
	/* Samples not taken: they fired while this CPU was taking another
	 * (an interrupt inside a tracepoint's program; seen on 7.2), whose
	 * scratch space they would have overwritten. */
	PYPROF_CNT_NESTED,
	PYPROF_CNT_NR,
};

#endif
