/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * arch_arm64.bpf.h - AArch64 (see arch.bpf.h). Included by compat.bpf.h
 * after TASK_READ.
 */
#ifndef PYPROF_ARCH_ARM64_BPF_H
#define PYPROF_ARCH_ARM64_BPF_H

/* The kernel stack with 4 KiB pages (Debian's arm64 kernels): 16 KiB. */
#define PYPROF_THREAD_SIZE	16384

/* PSTATE's mode field: EL0 with SP_EL0 (AArch64 user mode); bit 4: AArch32. */
#define PYPROF_PSR_MODE_MASK	0x1f
#define PYPROF_PSR_MODE_EL0T	0x0

/*
 * The thread pointer (TPIDR_EL0, saved in the task at each switch). glibc's
 * pthread_self() on AArch64, CPython's thread_id, lies below it by
 * sizeof(struct pthread): the lookup is to subtract that (#34, not yet).
 */
static __always_inline __u64 arch_thread_id(const struct task_struct *task)
{
	return TASK_READ(task, thread.uw.tp_value);
}

static __always_inline bool arch_user_mode(const struct pt_regs *r)
{
	return (r->pstate & PYPROF_PSR_MODE_MASK) == PYPROF_PSR_MODE_EL0T;
}

static __always_inline __u64 arch_sp(const struct pt_regs *r)
{
	return r->sp;
}

static __always_inline __s64 arch_syscall_nr(const struct pt_regs *r)
{
	return r->syscallno;
}

static __always_inline __u64 arch_syscall_arg0(const struct pt_regs *r)
{
	return r->orig_x0;
}

/* --native: x0-x30, sp, pc (DWARF 0-30, 31, 32; PYPROF_NREGS). */
static __always_inline void arch_user_regs(__u64 *out, const struct pt_regs *r)
{
	for (int i = 0; i < 31; i++)
		out[i] = r->regs[i];
	out[31] = r->sp;
	out[32] = r->pc;
}

#endif
