// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * pyprof.bpf.c - the programs the loader (user/sampling/bpf/)
 * attaches: snapshots of the Python frame chains of the targets' threads.
 *
 * pyprof_sample runs at every tick of a software cpu-clock perf event: one
 * event per CPU (every task's ticks come here, another process's dropped at
 * once) or one per thread of the targets (inherited by the threads they
 * create). It finds the thread's PyThreadState (tstate.bpf.h) and copies,
 * for each Python frame from the innermost outwards, the frame address, the
 * code object address, the instruction pointer and the code object's
 * co_version (frames.bpf.h); a code object met for the first time is sent
 * too, enough of it to name it (codes.bpf.h). Names and lines are resolved
 * later in userspace. Every CPython offset comes from the process's entry
 * in the procs map, which the loader writes at run time when it finds a
 * Python (a followed child starts with its parent's), and which each CPU
 * copies while it is unchanged (procs.bpf.h). A tick may also send its user
 * and kernel stacks (--native, --kernel: native.bpf.h) and its asyncio task
 * chain (--async: tasks.bpf.h) before its sample.
 *
 * Off-CPU modes: pyprof_switch samples a target's thread as it leaves the
 * CPU and notes the interval until it runs again, pyprof_wakeup when it was
 * woken (offcpu.bpf.h). pyprof_fork, pyprof_exec and pyprof_exit follow the
 * targets' processes.
 *
 * The sampled thread is stopped while this runs, so what it reads is one
 * consistent moment. Frames are read in windows of the data stack (a caller
 * lies just below its callee), each co_version once per sample.
 *
 * CPython 3.15 (config.frame_cache): the walk also reads the thread's
 * anchor, tstate->last_profiled_frame, and its sequence, and stops at the
 * anchor when it is a Python frame: userspace (user/sampling/frame_cache.c)
 * splices the callers it cached. It walks whole while userspace asks
 * (walk_whole), and whenever anchor or sequence changed since the thread's
 * last sample (moved, or written by anyone). In this mode (and with
 * --native's keep_entries) interpreter-owned frames are recorded too,
 * flagged, as links of the chain the anchor moves along.
 * This program never writes the target: bpf_probe_write_user is refused
 * under kernel lockdown, and would fail in the interrupt context of a
 * perf_event program anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "pyprof.h"
#include "maps.bpf.h"
#include "procs.bpf.h"
#include "tstate.bpf.h"
#include "codes.bpf.h"
#include "frames.bpf.h"
#include "filter.bpf.h"
#include "tasks.bpf.h"
#include "native.bpf.h"
#include "offcpu.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/*
 * GIL and GC: whether the sampled thread held the GIL (with read_gil), and
 * whether it was running a collection: the one whose chain holds gc_frame
 * (3.15), else the GIL's holder while a collection runs.
 */
static __always_inline void gil_gc(struct scratch *sc, struct pyprof_sample *s, __u64 tstate)
{
	__u64 holder = 0, gcf = 0;
	__u32 locked = 0, collecting = 0;
	bool gil_read = false, held = false;

	if (sc->cfg.gc_collecting &&
	    !bpf_probe_read_user(&collecting, sizeof(collecting),
				 (const void *)sc->cfg.gc_collecting) &&
	    collecting && sc->cfg.gc_frame &&
	    !bpf_probe_read_user(&gcf, sizeof(gcf), (const void *)sc->cfg.gc_frame) && gcf) {
		/* The collector's frame is its innermost, or close to it
		 * when finalizers run Python code. */
		__u32 n = s->nframes;

		for (__u32 i = 0; i < 8; i++) {
			if (i >= n || i >= PYPROF_MAX_FRAMES)
				break;
			if (s->frames[i].frame == gcf) {
				s->flags |= PYPROF_SF_GC;
				break;
			}
		}
		collecting = 0;		/* decided */
	}
	if ((sc->cfg.read_gil || collecting) && sc->cfg.gil_holder && sc->cfg.gil_locked &&
	    !bpf_probe_read_user(&holder, sizeof(holder), (const void *)sc->cfg.gil_holder) &&
	    !bpf_probe_read_user(&locked, sizeof(locked), (const void *)sc->cfg.gil_locked)) {
		gil_read = true;
		held = locked && holder == tstate;
	}
	if (gil_read && sc->cfg.read_gil) {
		s->flags |= PYPROF_SF_GIL_KNOWN;
		if (held)
			s->flags |= PYPROF_SF_GIL_HELD;
	}
	if (collecting && held)
		s->flags |= PYPROF_SF_GC;
}

/*
 * --opcodes: the instruction byte the innermost Python frame was executing,
 * at its instruction pointer in the code's adaptive bytecode. The thread is
 * stopped: the byte is the one it executes. Interpreter frames (sent with
 * the frame cache or --native) come first at most a few times.
 */
static __always_inline void read_opcode(struct scratch *sc, struct pyprof_sample *s)
{
	__u32 n = s->nframes;
	__u8 op = 0;

	s->opcode = 0;
	for (__u32 i = 0; i < 4; i++) {
		struct pyprof_frame *f;

		if (i >= n || i >= PYPROF_MAX_FRAMES)
			return;
		f = &s->frames[i];
		if (f->flags & PYPROF_FF_INTERP)
			continue;
		if (!f->code || f->instr < f->code + sc->cfg.code_adaptive ||
		    bpf_probe_read_user(&op, 1, (const void *)f->instr))
			return;
		s->opcode = PYPROF_OP_KNOWN | op;
		return;
	}
}

/* The type of @obj when it is an exception instance, else 0. */
static __always_inline __u64 exception_type(struct scratch *sc, __u64 obj)
{
	__u64 type = 0, flags = 0;

	if (!obj || bpf_probe_read_user(&type, sizeof(type), (const void *)(obj + sc->cfg.ob_type)) ||
	    !type ||
	    bpf_probe_read_user(&flags, sizeof(flags), (const void *)(type + sc->cfg.tp_flags)))
		return 0;
	return flags & PYPROF_TPFLAGS_BASE_EXC ? type : 0;
}

/* One item of the exception stack: its exception's type ends the walk,
 * else its previous_item is next (0: the end, or unreadable). */
static long exc_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	__u64 it[2];

	if (!sc->exc_item)
		return 1;
	if (bpf_probe_read_user(it, sizeof(it), (const void *)sc->exc_item)) {
		sc->exc_item = 0;
		return 1;
	}
	sc->exc_found = exception_type(sc, it[0]);
	if (sc->exc_found)
		return 1;
	sc->exc_item = it[1];
	return 0;
}
DEFINE_LOOP(exc_step)

/*
 * Exception mode: the type of the exception thread state @tstate has in
 * flight, else of the topmost one its exception stack holds (the handlers
 * of the frames, generators and coroutines running: an item without one,
 * a generator's that handles nothing, passes to the previous); 0: none;
 * PYPROF_EXC_CHAIN_CUT: the chain went on past PYPROF_EXC_CHAIN items.
 */
static __always_inline __u64 thread_exception(struct scratch *sc, __u64 tstate)
{
	__u64 cur = 0, type;

	if (!bpf_probe_read_user(&cur, sizeof(cur), (const void *)(tstate + sc->cfg.exc_current)) &&
	    (type = exception_type(sc, cur)))
		return type;
	sc->exc_item = 0;
	sc->exc_found = 0;
	if (bpf_probe_read_user(&sc->exc_item, sizeof(sc->exc_item),
				(const void *)(tstate + sc->cfg.exc_info)))
		return 0;
	RUN_LOOP(PYPROF_EXC_CHAIN, exc_step, PYPROF_EXC_CHAIN);
	if (sc->exc_found)
		return sc->exc_found;
	return sc->exc_item ? PYPROF_EXC_CHAIN_CUT : 0;
}

/* The current thread's entry (@born: its start time), counting its sample. */
static __always_inline struct pyprof_thread *thread_entry(__u32 tid, __u64 born)
{
	struct pyprof_thread *th = bpf_map_lookup_elem(&threads, &tid);

	if (!th)
		return NULL;
	th->samples++;
	if (th->born != born) {
		/* Another thread with this tid (or an entry the loader made):
		 * nothing known of this one's past. */
		if (th->born)
			th->had_state = 0;
		th->born = born;
	}
	return th;
}

/* Start this CPU's sample record and walk: no frames, no flags yet. */
static __always_inline void begin_sample(struct scratch *sc, __u32 tgid, __u32 tid, __u32 cpu)
{
	struct pyprof_sample *s = &sc->s;
	struct walk *w = &sc->w;

	__builtin_memset(w, 0, sizeof(*w));
	w->gen = ++sc->gen;
	w->lap = 1;
	s->kind = PYPROF_REC_SAMPLE;
	s->ts_ns = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->flags = 0;
	s->opcode = 0;
	s->nframes = 0;
	s->cache_frame = 0;
	s->cache_seq = 0;
	s->cache_prev = 0;
	s->exc_type = 0;
	s->period = 0;
}

/* The stack of a thread with state @tstate, and what else its sample says. */
static __always_inline void read_stack(struct scratch *sc, struct pyprof_thread *th,
				       const struct tstate_view *tv, __u64 tstate, bool switch_out)
{
	walk_stack(sc, th, tv);
	gil_gc(sc, &sc->s, tstate);
	if (sc->cfg.read_opcode)
		read_opcode(sc, &sc->s);
	if (async_tasks && sc->cfg.async_running_task)
		send_tasks(sc, &sc->s, tstate);
	if (th)
		note_walked(sc, th, tv->fp);
}

/* Send the sample with the walk's status. Returns 1 when sent, else 0. */
static __always_inline int submit_sample(struct scratch *sc, bool switch_out)
{
	struct pyprof_sample *s = &sc->s;
	__u32 n;

	s->status = sc->w.status;
	if (switch_out)
		s->flags |= PYPROF_SF_SWITCH_OUT;
	n = s->nframes;
	if (n > PYPROF_MAX_FRAMES)
		n = PYPROF_MAX_FRAMES;
	s->nframes = n;

	/* No wake-up: the consumer drains the ring on its own timer. A
	 * wake-up per record throttled sampling to about once per poll. */
	if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_SIZE(n), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return 0;
	}
	return 1;
}

/*
 * Sample the current thread: a tick (@switch_out false), or its leaving the
 * CPU (off-CPU modes; the thread is prev of a sched_switch, still current).
 * Returns 1 when a sample record was sent, 2 when a switch-out's record
 * was sent without a walk (PYPROF_SF_REUSE), else 0. Every record sent
 * says in its status why its frames are what they are.
 */
static __always_inline int sample_current(struct scratch *sc, __u32 tgid, __u32 tid, __u32 cpu,
					  bool switch_out, __u64 period, __u32 event)
{
	struct tstate_view *tv;
	struct task_struct *task;
	struct pyprof_thread *th;
	__u64 tstate, born;
	bool exiting;

	task = current_task();
	if (!sampled_process(sc, tgid, (__u64)TASK_READ(task, mm), switch_out))
		return 0;
	born = TASK_READ(task, start_time);
	th = thread_entry(tid, born);
	begin_sample(sc, tgid, tid, cpu);
	sc->s.period = period;
	sc->s.flags = event << PYPROF_SF_EVENT_SHIFT;
	tv = &sc->tv;
	__builtin_memset(tv, 0, sizeof(*tv));
	/*
	 * An exiting thread runs no Python, and its state may be gone: once it
	 * is freed, a new thread (on the stack, so the thread id, this one
	 * left to glibc's cache) may hold its memory and pass the check, and
	 * lend its stack to this one (a request's thread sampled 2.3 ms after
	 * join() showed the next request's handler).
	 */
	exiting = TASK_READ(task, flags) & PF_EXITING;
	tstate = exiting ? 0 : find_tstate(sc, th, tid, arch_thread_id(task) - sc->cfg.thread_id_below_tp, born, tv);
	sc->s.tstate = tstate;
	/* Exception mode: a thread with none is not sampled at all. */
	if (sc->cfg.exc_mode && !switch_out &&
	    (!tstate || !(sc->s.exc_type = thread_exception(sc, tstate))))
		return 0;
	if (!tstate)
		sc->w.status = stateless_status(th, task, tid == tgid, sc->s.ts_ns, born, exiting);
	else if (switch_out && th && walked_just_now(sc, th, tv->fp))
		return send_reused(sc, tstate);
	else
		read_stack(sc, th, tv, tstate, switch_out);
	return submit_sample(sc, switch_out);
}

/* sample_current() on this CPU's scratch space, unless a sample is being
 * taken on it already: the kernel runs one program inside another (a
 * tick's interrupt inside a tracepoint's hit) and the inner one would
 * overwrite the walk of the outer. The inner sample is counted, not taken. */
static __always_inline int take_sample(bool switch_out, __u64 period, __u32 event)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *sc;
	int sent;

	if (only_tgid && tgid != only_tgid) {
		count(PYPROF_CNT_FOREIGN);
		return 0;
	}
	sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return 0;
	if (sc->busy) {
		count(PYPROF_CNT_NESTED);
		return 0;
	}
	*(volatile __u32 *)&sc->busy = 1;
	sent = sample_current(sc, tgid, tid, cpu, switch_out, period, event);
	*(volatile __u32 *)&sc->busy = 0;
	return sent;
}

/* Which -e event fired: its link's cookie, with several (the program that
 * runs on 5.10-5.16 has one event, and no cookies before 5.15). */
static __always_inline __u32 event_index(void *ctx)
{
#ifdef PYPROF_NO_BPF_LOOP
	return 0;
#else
	return multi_event ? (__u32)bpf_get_attach_cookie(ctx) & (PYPROF_MAX_EVENTS - 1) : 0;
#endif
}

SEC("perf_event")
int pyprof_sample(struct bpf_perf_event_data *ctx)
{
	__u32 event = event_index(ctx);

	if (native_stack)
		tick_ustack();
	if (kernel_stacks)
		tick_kstack(ctx);
	take_sample(false, ctx->sample_period, event);
	return 0;
}

/* -e SUBSYS:NAME -c N: is this hit of tracepoint @event the Nth on its
 * CPU? Counted among the target's hits when there is one target, among
 * every task's else. */
static __always_inline bool tp_due(__u32 event)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *sc;

	if (only_tgid && (bpf_get_current_pid_tgid() >> 32) != only_tgid)
		return false;
	sc = bpf_map_lookup_elem(&scratch, &cpu);
	return sc && ++sc->tp_hits[event & (PYPROF_MAX_EVENTS - 1)] % tp_period == 0;
}

/* --filter: does this hit of the target pass? (Another process's is
 * dropped later, by take_sample, at no cost here.) */
static __always_inline bool tp_filtered_in(void *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *sc;

	if (only_tgid && (bpf_get_current_pid_tgid() >> 32) != only_tgid)
		return false;
	sc = bpf_map_lookup_elem(&scratch, &cpu);
	return sc && filter_passes(sc, ctx);
}

/*
 * -e SUBSYS:NAME: a tracepoint, attached once for the whole machine (a
 * tracepoint's programs run at every hit, whichever perf event attached
 * them); the target's hits are sampled, one in tp_period, by the same body
 * as a tick's, each weighing tp_period events. Loaded only then.
 */
SEC("tracepoint")
int pyprof_tracepoint(void *ctx)
{
	__u32 event = event_index(ctx);

	if (tp_filter.nops && event == tp_filter.event && !tp_filtered_in(ctx))
		return 0;
	if (tp_period > 1 && !tp_due(event))
		return 0;
	if (native_stack)
		tick_ustack();
	if (kernel_stacks)
		tick_kstack(ctx);
	take_sample(false, tp_period, event);
	return 0;
}

/*
 * A thread of a target leaves the CPU: blocked (interruptible or not), or
 * preempted while runnable. Its stack is sampled now (it is current), the
 * time noted; a blocked one's system call and kernel stack follow.
 */
static __always_inline void switch_out(void *ctx, struct task_struct *prev, __u32 state,
				       bool preempt)
{
	/* Preempted while setting up a wait (its state says sleeping, but it
	 * stays on the run queue): runnable, not blocked. */
	bool blocked = !preempt && (state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE));
	struct pyprof_offcpu v = {};
	__u32 tid = prev->pid;

	/* Stopped, traced, dead: not waiting for anything of its own. */
	if ((!blocked && state && !preempt) || (prev->flags & PF_EXITING))
		return;
	close_missed(prev);
	if (!take_sample(true, 0, 0))
		return;
	/* The interval opens, noted here rather than in a helper: so built,
	 * clang kept blocked's two halves across take_sample() and the
	 * verifier walked it twice (195k instructions instead of 98k). */
	v.off_ns = bpf_ktime_get_ns();
	v.wake_ns = blocked ? 0 : v.off_ns;
	v.exec_ns = prev->se.sum_exec_runtime;
	if (bpf_map_update_elem(&offcpu, &tid, &v, BPF_ANY))
		count(PYPROF_CNT_OFFCPU_NOTE_FAILED);
	if (blocked)
		send_switch(ctx, prev, state);
}

/*
 * Off-CPU modes (attached only then): every context switch of the machine
 * comes here; a task of no target costs one comparison (two lookups with
 * several targets).
 */
#ifdef PYPROF_NO_BPF_LOOP
/* Before 5.18 the tracepoint passes no prev_state: the task's own, read here
 * (what 5.18 passes, but for a wake-up racing with this switch). */
SEC("tp_btf/sched_switch")
int BPF_PROG(pyprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	unsigned int prev_state = task_state(prev);
#else
SEC("tp_btf/sched_switch")
int BPF_PROG(pyprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
#endif
	if (is_target(prev->tgid))
		switch_out(ctx, prev, prev_state, preempt);
	if (is_target(next->tgid))
		switch_in(next);
	return 0;
}

/* A thread off the CPU is woken: the rest of its interval is runnable. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(pyprof_wakeup, struct task_struct *p)
{
	__u32 tid;
	struct pyprof_offcpu *o;

	if (!is_target(p->tgid))
		return 0;
	tid = p->pid;
	o = bpf_map_lookup_elem(&offcpu, &tid);
	if (o && o->off_ns && !o->wake_ns)
		o->wake_ns = bpf_ktime_get_ns();
	return 0;
}

/*
 * A followed process forked (follow_children): the child is followed too,
 * with its parent's configuration, which describes the child's copy of the
 * address space as well; its address space is noted at its first tick.
 * New threads are not processes: they are found at their first sample.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(pyprof_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct pyprof_proc *pp, *cp;

	if (!follow_children || ptgid == ctgid)
		return 0;
	pp = bpf_map_lookup_elem(&procs, &ptgid);
	if (!pp)
		return 0;
	if (bpf_map_update_elem(&procs, &ctgid, pp, BPF_NOEXIST)) {
		count(PYPROF_CNT_PROCS_FULL);
		return 0;
	}
	cp = bpf_map_lookup_elem(&procs, &ctgid);
	if (cp) {
		cp->mm = 0;
		/* Only the main target's samples go through userspace's
		 * frame cache: a child walks whole, Python frames only. */
		cp->cfg.frame_cache = 0;
		/* A child that shares its parent's address space (vfork(),
		 * posix_spawn(): subprocess, multiprocessing's spawn) runs
		 * no Python of its own before it execs: its stack would be
		 * the parent's, and by the time userspace reads the child
		 * the image is the new one. Followed for its exec only. */
		if (child->mm == parent->mm)
			cp->configured = 0;
		__sync_fetch_and_add(&procs_epoch, 1);
	}
	proc_event(PYPROF_PROC_FORK, ctgid, ptgid);
	return 0;
}

/*
 * A followed process exec'd: its configuration described the old image.
 * Its ticks are dropped until the loader configures the new one (if it is
 * a Python).
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(pyprof_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct pyprof_proc *pc = bpf_map_lookup_elem(&procs, &tgid);

	if (!pc)
		return 0;
	pc->configured = 0;
	pc->mm = 0;
	__sync_fetch_and_add(&procs_epoch, 1);
	proc_event(PYPROF_PROC_EXEC, tgid, 0);
	return 0;
}

/* A followed process ended (its leader exits last but for the rare
 * pthread_exit() of main; the loader checks /proc for those). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(pyprof_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (p->pid != p->tgid || !bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	proc_event(PYPROF_PROC_EXIT, tgid, 0);
	return 0;
}
