/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * offcpu.bpf.h - off-CPU modes: the interval a thread of a target spends off
 * the CPU (offcpu map, PYPROF_REC_SWITCH and PYPROF_REC_SWITCH_IN records),
 * and the switch-outs that need no walk.
 */
#ifndef PYPROF_OFFCPU_BPF_H
#define PYPROF_OFFCPU_BPF_H

#include "maps.bpf.h"
#include "frames.bpf.h"

#define TASK_INTERRUPTIBLE	0x1	/* include/linux/sched.h */
#define TASK_UNINTERRUPTIBLE	0x2

/*
 * A thread leaving the CPU whose last interval is still open: its switch-in
 * was never seen (rare; see PYPROF_CNT_SWITCH_IN_INFERRED). It has run
 * since, without a switch-out, so it came back its CPU time since ago: the
 * interval is closed with that end, before the new one opens.
 */
static __always_inline void close_missed(struct task_struct *prev)
{
	__u32 tid = prev->pid;
	struct pyprof_offcpu *o = bpf_map_lookup_elem(&offcpu, &tid);
	struct pyprof_switch_in r = { .kind = PYPROF_REC_SWITCH_IN };
	__u64 now, ran;

	if (!o || !o->off_ns)
		return;
	now = bpf_ktime_get_ns();
	ran = prev->se.sum_exec_runtime - o->exec_ns;
	r.tid = tid;
	r.pid = prev->tgid;
	r.off_ns = o->off_ns;
	r.in_ns = now - ran > o->off_ns && ran < now ? now - ran : o->off_ns;
	r.wake_ns = o->wake_ns && o->wake_ns <= r.in_ns ? o->wake_ns : 0;
	o->off_ns = 0;
	o->wake_ns = 0;
	count(PYPROF_CNT_SWITCH_IN_INFERRED);
	if (bpf_ringbuf_output(&samples, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

/* A thread of a target back on a CPU after an interval noted off it. */
static __always_inline void switch_in(struct task_struct *next)
{
	__u32 tid = next->pid;
	struct pyprof_offcpu *o = bpf_map_lookup_elem(&offcpu, &tid);
	struct pyprof_switch_in r = { .kind = PYPROF_REC_SWITCH_IN };

	if (!o || !o->off_ns) {
		count(PYPROF_CNT_SWITCH_IN_UNNOTED);
		return;
	}
	r.tid = tid;
	r.pid = next->tgid;
	r.off_ns = o->off_ns;
	r.wake_ns = o->wake_ns;
	r.in_ns = bpf_ktime_get_ns();
	o->off_ns = 0;
	o->wake_ns = 0;
	if (bpf_ringbuf_output(&samples, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

/*
 * A thread leaving the CPU again within offcpu_walk_ns of its last walk, in
 * the same innermost frame @fp at the same instruction (a loop handing the
 * GIL over at its back edge), has the stack that walk found: it need not be
 * walked again (PYPROF_SF_REUSE).
 */
static __always_inline bool walked_just_now(struct scratch *sc, const struct pyprof_thread *th,
					    __u64 fp)
{
	const __u8 *buf;

	if (!sc->cfg.offcpu_walk_ns || !fp || fp != th->last_fp ||
	    sc->s.ts_ns - th->last_walk_ns >= sc->cfg.offcpu_walk_ns)
		return false;
	buf = frame_bytes(sc, fp);
	return buf && field64(buf, sc->cfg.frame_instr_ptr) == th->last_instr;
}

/* Send the sample of a switch-out that reuses the last walk: its header
 * only. Returns 2 when sent, else 0 (take_sample()'s values). */
static __always_inline int send_reused(struct scratch *sc, __u64 tstate)
{
	struct pyprof_sample *s = &sc->s;

	s->flags |= PYPROF_SF_SWITCH_OUT | PYPROF_SF_REUSE;
	s->status = PYPROF_COMPLETE;
	s->tstate = tstate;
	s->nframes = 0;
	if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_HDR_SIZE, BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return 0;
	}
	return 2;
}

/* What the thread's next switch-out compares with (walked_just_now()). */
static __always_inline void note_walked(struct scratch *sc, struct pyprof_thread *th, __u64 fp)
{
	struct pyprof_sample *s = &sc->s;

	th->last_walk_ns = s->ts_ns;
	th->last_fp = fp;
	th->last_instr = s->nframes && s->frames[0].frame == fp ? s->frames[0].instr : 0;
}

/* A blocked thread's system call and kernel stack (PYPROF_REC_SWITCH),
 * after its sample. */
static __always_inline void send_switch(void *ctx, struct task_struct *prev, __u32 state)
{
	struct pyprof_switch *r;
	struct pt_regs *regs;
	long got;

	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	r->kind = PYPROF_REC_SWITCH;
	r->tid = prev->pid;
	r->pid = prev->tgid;
	r->state = state;
	regs = user_regs(prev);
	r->syscall_nr = -1;
	r->syscall_arg0 = 0;
	if (regs) {
		r->syscall_nr = arch_syscall_nr(regs);
		r->syscall_arg0 = arch_syscall_arg0(regs);
	}
	/* Always taken, walked or not: what it sleeps in is this very wait's. */
	r->pad = 0;
	got = bpf_get_stack(ctx, r->kstack, sizeof(r->kstack), 0);
	r->nkstack = got > 0 ? (__u32)(got / sizeof(__u64)) : 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

#endif
