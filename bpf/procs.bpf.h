/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * procs.bpf.h - the processes sampled: whether a task belongs to one, the
 * CPU's copy of its entry in the procs map (its configuration), -a's
 * announcements of processes met on a CPU, and the process events the
 * loader follows.
 */
#ifndef PYPROF_PROCS_BPF_H
#define PYPROF_PROCS_BPF_H

#include "maps.bpf.h"
#include "compat.bpf.h"

/* A process event for the loader (struct pyprof_proc_event). */
static __always_inline void proc_event(__u32 event, __u32 pid, __u32 ppid)
{
	struct pyprof_proc_event e = {
		.kind = PYPROF_REC_PROC, .event = event, .pid = pid, .ppid = ppid,
		.ts_ns = bpf_ktime_get_ns(),
	};

	if (bpf_ringbuf_output(&samples, &e, sizeof(e), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

/*
 * -a: a process with no entry met on a CPU: give it one (unconfigured, so
 * its next ticks cost one lookup) and tell the loader. Kernel threads and
 * the idle task have no address space to read.
 */
static __always_inline void note_new_proc(__u32 tgid)
{
	struct task_struct *task;
	long err;

	if (!tgid || tgid == own_tgid)
		return;
	task = current_task();
	if (!TASK_READ(task, mm))
		return;
	err = bpf_map_update_elem(&procs, &tgid, &unseen_proc, BPF_NOEXIST);
	if (err) {
		if (err != -EEXIST)
			count(PYPROF_CNT_PROCS_FULL);
		return;
	}
	count(PYPROF_CNT_PROCS_SEEN);
	proc_event(PYPROF_PROC_SEEN, tgid, 0);
}

/* Is @tgid a process sampled? One comparison while there is one. */
static __always_inline bool is_target(__u32 tgid)
{
	if (!tgid)
		return false;
	if (only_tgid)
		return tgid == only_tgid;
	return bpf_map_lookup_elem(&procs, &tgid) != NULL;
}

/*
 * Copy the entry of process @tgid (its configuration) into the CPU's
 * scratch, current as of @epoch. False when its ticks are dropped: no entry
 * (-a: the process is announced), or not configured.
 */
static __always_inline bool load_config(struct scratch *sc, __u32 tgid, __u64 mm, __u64 epoch,
					bool switch_out)
{
	struct pyprof_proc *pc = bpf_map_lookup_elem(&procs, &tgid);

	if (!pc) {
		if (all_procs && !switch_out)
			note_new_proc(tgid);
		count(PYPROF_CNT_FOREIGN);
		return false;
	}
	/* Followed, but not (yet) a Python the loader has configured: a
	 * child that exec'd something else, or whose interpreter is not yet
	 * found. */
	if (!pc->configured) {
		count(PYPROF_CNT_UNCONFIGURED);
		return false;
	}
	/* The first tick notes the address space; ticks in another one (an
	 * exec the exec tracepoint has not reported yet) are dropped. */
	if (!pc->mm)
		pc->mm = mm;	/* 0 (no address space) stays unnoted */
	sc->cfg = pc->cfg;
	sc->cfg_mm = pc->mm;
	sc->cfg_tgid = tgid;
	sc->cfg_epoch = epoch;
	return true;
}

/*
 * Is the current task, of process @tgid with address space @mm, one to
 * sample? Then sc->cfg is its process's configuration: the CPU's copy while
 * procs_epoch says it is current (a tick of the process the CPU last
 * sampled looks nothing up), else copied now.
 */
static __always_inline bool sampled_process(struct scratch *sc, __u32 tgid, __u64 mm,
					    bool switch_out)
{
	/* The epoch is read before the entry: a change made after the read
	 * bumps it past the copy. */
	__u64 epoch = READ_ONCE(procs_epoch);

	if ((!sc->cfg_mm || sc->cfg_tgid != tgid || sc->cfg_epoch != epoch) &&
	    !load_config(sc, tgid, mm, epoch, switch_out))
		return false;
	/* A thread past exit_mm() has no address space: nothing to read. */
	if (!mm) {
		count(PYPROF_CNT_NO_MM);
		return false;
	}
	if (mm != sc->cfg_mm) {
		count(PYPROF_CNT_EXECED);
		if (!execed_seen)
			execed_seen = 1;
		return false;
	}
	return true;
}

#endif
