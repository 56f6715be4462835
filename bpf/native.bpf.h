/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * native.bpf.h - what a tick sends before its sample besides the Python
 * frames: --native, the user registers and the top of the user stack, which
 * userspace unwinds; --kernel, the kernel stack of a tick that interrupted
 * the kernel.
 */
#ifndef PYPROF_NATIVE_BPF_H
#define PYPROF_NATIVE_BPF_H

#include "maps.bpf.h"
#include "compat.bpf.h"

/* --kernel: the kernel stack of a tick that interrupted the kernel, sent
 * before its sample (same CPU: the ring keeps the order). */
static __always_inline void tick_kstack(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pyprof_switch *r;
	long got;

	if (only_tgid && (id >> 32) != only_tgid)
		return;
	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	got = bpf_get_stack(ctx, r->kstack, sizeof(r->kstack), 0);
	if (got <= 0) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		return;
	}
	r->kind = PYPROF_REC_KSTACK;
	r->tid = (__u32)id;
	r->pid = id >> 32;
	r->state = 0;
	r->syscall_nr = -1;
	r->syscall_arg0 = 0;
	r->nkstack = (__u32)(got / sizeof(__u64));
	r->pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

#ifndef PYPROF_NO_BPF_LOOP
/* Newer kernels (6.17+): a user read straight into a ring record sized at
 * run time. Elsewhere the record has the fixed, largest size (and always
 * in the program for kernels without bpf_loop, which have none of it). */
extern int bpf_probe_read_user_dynptr(struct bpf_dynptr *dptr, __u64 off, __u64 size,
				      const void *unsafe_ptr__ign) __weak __ksym;
#endif

#define USTACK_HDR	offsetof(struct pyprof_ustack, stack)

/* @r's header but its length: the thread, and the user registers of its
 * interrupted context. */
static __always_inline void ustack_header(struct pyprof_ustack *r, __u64 id,
					  const struct pt_regs *regs)
{
	r->kind = PYPROF_REC_USTACK;
	r->tid = (__u32)id;
	r->pid = id >> 32;
	arch_user_regs(r->regs, regs);
}

/* Bytes of the next copy from @at, @len in: to the page's end, at most @want. */
static __always_inline __u32 ustack_chunk(__u64 at, __u32 len, __u32 want)
{
	__u32 n = PYPROF_PAGE - (at & (PYPROF_PAGE - 1)), room = want - len;

	if (n > room)
		n = room;
	/* Bounds the verifier can follow: 1 to a page. */
	asm volatile("" : "+r"(n));
	n &= 2 * PYPROF_PAGE - 1;
	return n > PYPROF_PAGE ? 0 : n;
}

#ifndef PYPROF_NO_BPF_LOOP
/*
 * The copy into a record sized at run time (USTACK_HDR + @want bytes), where
 * the kernel can read user memory into a dynptr.
 */
static __always_inline void ustack_dynptr(__u64 id, const struct pt_regs *regs, __u64 sp,
					  __u32 want)
{
	struct pyprof_ustack *h;
	struct bpf_dynptr dp;
	__u32 len = 0;

	if (bpf_ringbuf_reserve_dynptr(&samples, USTACK_HDR + want, 0, &dp)) {
		bpf_ringbuf_discard_dynptr(&dp, BPF_RB_NO_WAKEUP);
		count(PYPROF_CNT_LOST);
		return;
	}
	for (int i = 0; i < PYPROF_USTACK_MAX / PYPROF_PAGE + 1; i++) {
		__u32 n;

		if (len >= want)
			break;
		n = ustack_chunk(sp + len, len, want);
		if (!n || bpf_probe_read_user_dynptr(&dp, USTACK_HDR + len, n,
						     (const void *)(sp + len)))
			break;
		len += n;
	}
	h = bpf_dynptr_data(&dp, 0, USTACK_HDR);
	if (!h) {
		bpf_ringbuf_discard_dynptr(&dp, BPF_RB_NO_WAKEUP);
		return;
	}
	ustack_header(h, id, regs);
	h->len = len;
	bpf_ringbuf_submit_dynptr(&dp, BPF_RB_NO_WAKEUP);
}
#endif

/* The copy into a record of the fixed, largest size (older kernels). */
static __always_inline void ustack_fixed(__u64 id, const struct pt_regs *regs, __u64 sp,
					 __u32 want)
{
	struct pyprof_ustack *r;
	__u32 len = 0;

	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	ustack_header(r, id, regs);
	for (int i = 0; i < PYPROF_USTACK_MAX / PYPROF_PAGE + 1; i++) {
		__u32 n;

		if (len >= want)
			break;
		n = ustack_chunk(sp + len, len, want);
		/* The bound on the register the read uses. */
		asm volatile("" : "+r"(len));
		if (!n || len > PYPROF_USTACK_MAX - PYPROF_PAGE ||
		    bpf_probe_read_user(&r->stack[len], n, (const void *)(sp + len)))
			break;
		len += n;
	}
	r->len = len;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/*
 * --native: the user registers of the tick's thread (those saved at its
 * last entry into the kernel: this interrupt's, when it came in user mode)
 * and the top of its user stack, page by page from rsp until native_stack
 * bytes or an unreadable page. Sent before the sample. Where the kernel
 * can read user memory into a ring record sized at run time, the record is
 * as long as what the copy may take (~5 KB on most threads, see ustack_end)
 * instead of 32 KB: the ring's memory a second of samples runs through,
 * and the cache misses of writing and reading it, shrink with it.
 */
static __always_inline void tick_ustack(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 want = native_stack, tid = (__u32)id;
	struct pt_regs *regs;
	__u64 sp, *end;

	if (only_tgid && (id >> 32) != only_tgid)
		return;
	regs = user_regs(current_task());
	if (!regs)
		return;
	/* From 128 bytes below sp: the red zone, where an epilogue's
	 * popped registers still are. */
	sp = arch_sp(regs) - PYPROF_USTACK_REDZONE;
	if (want > PYPROF_USTACK_MAX)
		want = PYPROF_USTACK_MAX;
	/* No further than the thread's outermost frame: a pthread's stack
	 * goes on into its TLS, readable, and a shallow C stack is copied
	 * whole in a few KB instead of the 32 the deepest need. */
	end = bpf_map_lookup_elem(&ustack_end, &tid);
	if (end && *end > sp && *end - sp < want)
		want = *end - sp;
#ifndef PYPROF_NO_BPF_LOOP
	if (bpf_probe_read_user_dynptr) {	/* resolved: 0 when absent */
		ustack_dynptr(id, regs, sp, want);
		return;
	}
#endif
	ustack_fixed(id, regs, sp, want);
}

#endif
