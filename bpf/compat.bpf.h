/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * compat.bpf.h - what differs between the two builds of the program.
 *
 * pyprof.bpf.o (5.17+; also a backport's: the loader probes, never reads a
 * version) runs its loops with bpf_loop, reads the current task through its
 * BTF pointer and finds user registers with bpf_task_pt_regs.
 *
 * pyprof_noloop.bpf.o (-DPYPROF_NO_BPF_LOOP: 5.10 to 5.16, the kernels with
 * ring buffers, BTF and global functions but none of those three) does the
 * same work without them:
 *  - A loop is a bounded loop over chunks of PYPROF_LOOP_CHUNK steps, each
 *    chunk and each step a global function. The verifier checks a global
 *    function once, on its own, whatever calls it: a step costs its body
 *    once, a loop of 16384 steps a few thousand instructions, not its
 *    iterations times its body. A global function takes scalars only on
 *    5.10, so each step looks its CPU's scratch up itself (the walk's state
 *    is there already: it never lived on the stack).
 *  - The task is bpf_get_current_task()'s, its fields read with
 *    BPF_CORE_READ.
 *  - A task's user registers are the pt_regs at the top of its kernel stack
 *    (task->stack + THREAD_SIZE - sizeof(struct pt_regs); the size is the
 *    architecture's, arch_*.bpf.h), copied.
 *  - sched_switch passes no prev_state before 5.18: the task's is read.
 * The records, maps and globals are the same: the loader opens either
 * object through one skeleton (the build checks that they agree).
 */
#ifndef PYPROF_COMPAT_BPF_H
#define PYPROF_COMPAT_BPF_H

#include "maps.bpf.h"
#include <bpf/bpf_core_read.h>

#ifdef PYPROF_NO_BPF_LOOP

#define PYPROF_LOOP_CHUNK	64

/* Global (not static): checked once, on its own; see above. */
#define DEFINE_LOOP(fn)								\
__noinline long fn##__step(__u32 i)						\
{										\
	__u32 cpu = bpf_get_smp_processor_id();					\
	struct loop_ctx lc = { .sc = bpf_map_lookup_elem(&scratch, &cpu) };	\
										\
	return lc.sc ? fn(i, &lc) : 1;						\
}										\
__noinline long fn##__chunk(__u32 base, __u32 n)				\
{										\
	for (__u32 k = 0; k < PYPROF_LOOP_CHUNK; k++) {				\
		if (base + k >= n || fn##__step(base + k))			\
			return 1;						\
	}									\
	return 0;								\
}

/* bpf_loop(n, fn) for n at most @max (a constant). */
#define RUN_LOOP(n, fn, max)							\
	do {									\
		__u32 n_ = (n);							\
		for (__u32 j_ = 0; j_ < ((max) + PYPROF_LOOP_CHUNK - 1) / PYPROF_LOOP_CHUNK; j_++) \
			if (fn##__chunk(j_ * PYPROF_LOOP_CHUNK, n_))		\
				break;						\
	} while (0)

static __always_inline struct task_struct *current_task(void)
{
	return (struct task_struct *)bpf_get_current_task();
}

#define TASK_READ(t, field) BPF_CORE_READ((t), field)

/* Before 5.14 a task's state was `long state`. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/* @t's scheduling state (TASK_INTERRUPTIBLE, ...). */
static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return (__u32)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

#else /* bpf_loop, bpf_get_current_task_btf, bpf_task_pt_regs */

#define DEFINE_LOOP(fn)

#define RUN_LOOP(n, fn, max)							\
	do {									\
		struct loop_ctx lc_ = { .sc = sc };				\
		bpf_loop((n), fn, &lc_, 0);					\
	} while (0)

static __always_inline struct task_struct *current_task(void)
{
	return bpf_get_current_task_btf();
}

#define TASK_READ(t, field) ((t)->field)

#endif

#include "arch.bpf.h"

#ifdef PYPROF_NO_BPF_LOOP
/* The user registers of @task (saved at its entry into the kernel, at the
 * top of its kernel stack), copied into this CPU's scratch; NULL when
 * unreadable, or not a user context's (or not what was meant: a kernel
 * built with another stack size). */
static __always_inline struct pt_regs *user_regs(struct task_struct *task)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &cpu);
	__u64 stack = (__u64)BPF_CORE_READ(task, stack);

	if (!sc || !stack ||
	    bpf_probe_read_kernel(&sc->regs, sizeof(sc->regs),
				  (const void *)(stack + PYPROF_THREAD_SIZE - sizeof(sc->regs))))
		return NULL;
	return arch_user_mode(&sc->regs) ? &sc->regs : NULL;
}
#else
static __always_inline struct pt_regs *user_regs(struct task_struct *task)
{
	return (struct pt_regs *)bpf_task_pt_regs(task);
}
#endif

#endif
