/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * arch_x86.bpf.h - x86-64 (see arch.bpf.h). Included by compat.bpf.h after
 * TASK_READ.
 */
#ifndef PYPROF_ARCH_X86_BPF_H
#define PYPROF_ARCH_X86_BPF_H

/* The kernel stack: PAGE_SIZE << 2 (Debian's kernels have no KASAN). */
#define PYPROF_THREAD_SIZE	16384

/* pthread_self() of @task's thread, what CPython stores as thread_id: its
 * TCB, the fs base (glibc and musl alike). */
static __always_inline __u64 arch_thread_id(const struct task_struct *task)
{
	return TASK_READ(task, thread.fsbase);
}

/* @r was saved in user mode (privilege level 3). */
static __always_inline bool arch_user_mode(const struct pt_regs *r)
{
	return (r->cs & 3) == 3;
}

static __always_inline __u64 arch_sp(const struct pt_regs *r)
{
	return r->sp;
}

/* The system call a blocked task is in, and its first argument. */
static __always_inline __s64 arch_syscall_nr(const struct pt_regs *r)
{
	return (__s64)r->orig_ax;
}

static __always_inline __u64 arch_syscall_arg0(const struct pt_regs *r)
{
	return r->di;
}

/* --native: the user registers in DWARF order (PYPROF_NREGS). */
static __always_inline void arch_user_regs(__u64 *out, const struct pt_regs *r)
{
	out[0] = r->ax;
	out[1] = r->dx;
	out[2] = r->cx;
	out[3] = r->bx;
	out[4] = r->si;
	out[5] = r->di;
	out[6] = r->bp;
	out[7] = r->sp;
	out[8] = r->r8;
	out[9] = r->r9;
	out[10] = r->r10;
	out[11] = r->r11;
	out[12] = r->r12;
	out[13] = r->r13;
	out[14] = r->r14;
	out[15] = r->r15;
	out[16] = r->ip;
}

#endif
