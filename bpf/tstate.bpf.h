/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * tstate.bpf.h - the sampled thread's PyThreadState: the one the threads
 * map remembers while it passes its checks, else found in the target's
 * interpreters' thread lists; and what one read of it gives (current
 * frame, thread id, status, the 3.15 anchor).
 */
#ifndef PYPROF_TSTATE_BPF_H
#define PYPROF_TSTATE_BPF_H

#include "maps.bpf.h"
#include "compat.bpf.h"

/* A thread-state field from the block read in one go; 0 when absent. */
static __always_inline __u64 block64(const __u8 *tsb, __u32 rel)
{
	if (rel > PYPROF_TSTATE_BLOCK - sizeof(__u64))
		return 0;
	return *(const __u64 *)(tsb + rel);
}

/* Read the thread-state block of @tstate into sc->tsb. 0 or a read fault. */
static __always_inline long read_tsb(struct scratch *sc, __u64 tstate)
{
	__u32 len = sc->cfg.tstate_block_len;

	if (len > PYPROF_TSTATE_BLOCK)
		len = PYPROF_TSTATE_BLOCK;
	return bpf_probe_read_user(sc->tsb, len, (const void *)(tstate + sc->cfg.tstate_block));
}

/* The block's _status word says the thread state is its thread's current one. */
static __always_inline bool tsb_active(const struct scratch *sc)
{
	__u32 rel = sc->cfg.status_rel;

	return rel < PYPROF_TSTATE_BLOCK - sizeof(__u32) &&
	       (*(const __u32 *)(sc->tsb + (rel & (PYPROF_TSTATE_BLOCK - 1))) &
		(1u << PYPROF_TSTATE_ACTIVE_BIT));
}

/*
 * Read @tstate's block: current frame (through the C frame record on
 * 3.11/3.12), thread id, status and, on 3.15, base frame and anchor with its
 * sequence. Returns 0 or -1 on a read fault.
 */
static __always_inline long read_tstate(struct scratch *sc, __u64 tstate, struct tstate_view *v,
					struct pyprof_sample *s)
{
	__u64 cframe, prev, rec[PYPROF_CFRAME_READ / 8];

	if (read_tsb(sc, tstate))
		return -1;
	v->thread_id = block64(sc->tsb, sc->cfg.thread_id_rel);
	v->active = tsb_active(sc);
	v->base = 0;
	if (sc->cfg.frame_cache) {
		v->base = block64(sc->tsb, sc->cfg.base_frame_rel);
		s->cache_frame = block64(sc->tsb, sc->cfg.anchor_rel);
		s->cache_seq = block64(sc->tsb, sc->cfg.anchor_seq_rel);
		s->flags |= PYPROF_SF_ANCHOR_READ;
	}
	if (!sc->cfg.tstate_cframe) {
		v->fp = block64(sc->tsb, sc->cfg.current_frame_rel);
		return 0;
	}
	/*
	 * 3.11/3.12: the frame pointer lives in the C frame record, and the
	 * record before it holds the caller's frame, which a sound chain
	 * passes: an evaluation loop publishes its record before it sets
	 * the record's frame (a few instructions in which the frame is what
	 * that stack slot held before).
	 */
	v->fp = 0;
	v->caller = 0;
	v->caller_ok = false;
	v->unfilled = false;
	cframe = block64(sc->tsb, sc->cfg.cframe_rel);
	if (!cframe)
		return 0;
	if (bpf_probe_read_user(rec, sizeof(rec), (const void *)cframe))
		return -1;
	v->fp = rec[(sc->cfg.cframe_current_frame / 8) & (PYPROF_CFRAME_READ / 8 - 1)];
	prev = rec[(sc->cfg.cframe_previous / 8) & (PYPROF_CFRAME_READ / 8 - 1)];
	if (prev && bpf_probe_read_user(&v->caller, sizeof(v->caller),
					(const void *)(prev + sc->cfg.cframe_current_frame)))
		v->caller = 0;
	/* The thread's records live on its C stack, callers' at higher
	 * addresses (the first in the thread state, its frame NULL). */
	v->caller_ok = prev > cframe && prev - cframe < PYPROF_CSTACK_SPAN;
	/* A frame-less record that is not the state's own is a loop's on the
	 * C stack before it set its frame: a filled one always has one (its
	 * slot held 0: a fresh stack; a request thread 0.3 ms into its
	 * handler was said to run no Python). */
	v->unfilled = !v->fp && sc->cfg.root_cframe && cframe != tstate + sc->cfg.root_cframe;
	return 0;
}

/* One step of the lookup: one thread state, or the move to an interpreter. */
static long lookup_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct lookup *l = &sc->l;
	__u64 next = 0;

	if (!l->ts) {
		/* The next interpreter, and the head of its thread list. */
		if (!l->started) {
			l->started = 1;
			if (bpf_probe_read_user(&next, sizeof(next),
						(const void *)sc->cfg.interpreters_head))
				return 1;
			l->head = next;
		} else if (!l->interp ||
			   bpf_probe_read_user(&next, sizeof(next),
					       (const void *)(l->interp + sc->cfg.interp_next))) {
			return 1;
		}
		l->interp = next;
		if (!next)
			return 1;
		l->ninterps++;
		if (bpf_probe_read_user(&l->ts, sizeof(l->ts),
					(const void *)(next + sc->cfg.interp_threads_head)))
			return 1;
		return 0;
	}
	if (read_tsb(sc, l->ts))
		return 1;
	if (block64(sc->tsb, sc->cfg.thread_id_rel) == l->want) {
		l->nfound++;
		if (!l->first)
			l->first = l->ts;
		if (tsb_active(sc))
			l->active = l->ts;
	}
	l->ts = block64(sc->tsb, sc->cfg.next_rel);
	return 0;
}
DEFINE_LOOP(lookup_step)

/*
 * Find the thread state of the current thread by walking every
 * interpreter's thread list (bounded by lookup_steps). With several (the
 * thread runs in subinterpreters), the active one, else the first. Returns
 * it, 0 when none; *n is how many matched.
 */
static __always_inline __u64 lookup_tstate(struct scratch *sc, __u64 want, __u32 *n)
{
	struct lookup *l = &sc->l;

	__builtin_memset(l, 0, sizeof(*l));
	*n = 0;
	if (!want || !sc->cfg.lookup_steps)
		return 0;
	l->want = want;
	count(PYPROF_CNT_LOOKUPS);
	RUN_LOOP(sc->cfg.lookup_steps, lookup_step, PYPROF_LOOKUP_STEPS_MAX);
	*n = l->nfound;
	if (!l->nfound) {
		count(PYPROF_CNT_LOOKUP_MISSES);
		return 0;
	}
	count(PYPROF_CNT_LOOKUP_FOUND);
	return l->active ? l->active : l->first;
}

/*
 * Remember what a lookup found for @tid (or that it found nothing, and
 * when). A new thread state means nothing cached for it: walk whole.
 */
static __always_inline void remember(struct scratch *sc, struct pyprof_thread *th, __u32 tid,
				     __u64 tstate, __u32 n, __u64 born)
{
	struct pyprof_thread *v = &sc->new_thread;
	__u64 now = sc->s.ts_ns;

	if (th) {
		if (th->tstate != tstate)
			th->walk_whole = 1;
		th->tstate = tstate;
		th->nstates = n;
		th->lookup_ns = now;
		th->misses = tstate ? 0 : th->misses + 1;
		if (tstate)
			th->had_state = 1;
		return;
	}
	__builtin_memset(v, 0, sizeof(*v));
	v->tstate = tstate;
	v->samples = 1;
	v->walk_whole = 1;
	v->nstates = n;
	v->lookup_ns = now;
	v->misses = tstate ? 0 : 1;
	v->had_state = !!tstate;
	v->born = born;
	bpf_map_update_elem(&threads, &tid, v, BPF_NOEXIST);
}

/*
 * Does the remembered @tstate stand? It must read and still belong to this
 * thread (its memory may be another thread's state now). Returns it, or 0
 * when stale. One that is not active (the thread switched interpreters, or
 * released the GIL) stands too, but another state of the thread may be the
 * active one: *relook asks for a lookup.
 */
static __always_inline __u64 check_tstate(struct scratch *sc, struct pyprof_thread *th,
					  __u64 tstate, __u64 self, struct tstate_view *tv,
					  bool *relook)
{
	struct pyprof_sample *s = &sc->s;
	__u64 head = 0;

	if (read_tstate(sc, tstate, tv, s) ||
	    (sc->cfg.thread_id_rel != PYPROF_REL_NONE && self && tv->thread_id != self)) {
		count(PYPROF_CNT_STALE_TSTATE);
		return 0;
	}
	if (sc->cfg.status_rel == PYPROF_REL_NONE || tv->active)
		return tstate;
	if (th->nstates == 1 &&
	    s->ts_ns - th->lookup_ns < (th->interps > 1 ? sc->cfg.lookup_retry_ns :
					PYPROF_INACTIVE_RETRY_NS))
		return tstate;
	/* With one state and one interpreter, only a new interpreter could
	 * hold another: its list's head tells, in one read. */
	*relook = true;
	if (th->nstates == 1 && th->interps <= 1 && th->interp_head &&
	    !bpf_probe_read_user(&head, sizeof(head), (const void *)sc->cfg.interpreters_head) &&
	    head == th->interp_head) {
		*relook = false;
		th->lookup_ns = s->ts_ns;
	}
	return tstate;
}

/*
 * Look the thread's states up and remember what was found (@tstate: the
 * remembered one that passed its check, or 0). Returns the state to
 * sample, read into *tv; 0: none.
 */
static __always_inline __u64 relook_tstate(struct scratch *sc, struct pyprof_thread *th,
					   __u32 tid, __u64 self, __u64 born, __u64 tstate,
					   struct tstate_view *tv)
{
	struct pyprof_sample *s = &sc->s;
	__u32 nstates = 0;
	__u64 got = lookup_tstate(sc, self, &nstates);

	if (got || !tstate)
		remember(sc, th, tid, got, nstates, born);
	else
		th->lookup_ns = s->ts_ns;	/* keep the one that passed */
	if (th) {
		th->interps = sc->l.ninterps;
		th->interp_head = sc->l.head;
	}
	if (got && got != tstate) {
		s->flags &= 0xffu << PYPROF_SF_EVENT_SHIFT;	/* the event stays */
		tstate = read_tstate(sc, got, tv, s) ? 0 : got;
	}
	return tstate;
}

/*
 * The state of the current thread (@th: its entry, if any; @self: its
 * pthread_self()): the remembered one while it passes its check (it still
 * belongs to this thread, and with several interpreters on the thread it is
 * the active one), else found now in the target's thread lists, so that a
 * thread is named from its first sample however short its life. A thread
 * with none is looked up again after lookup_retry_ns (at once for its
 * first PYPROF_LOOKUP_EAGER misses). Returns it, read into *tv; 0: none.
 */
static __always_inline __u64 find_tstate(struct scratch *sc, struct pyprof_thread *th, __u32 tid,
					 __u64 self, __u64 born, struct tstate_view *tv)
{
	struct pyprof_sample *s = &sc->s;
	__u64 tstate = 0;
	bool relook = false;

	if (th) {
		tstate = th->tstate;
		if (tstate)
			tstate = check_tstate(sc, th, tstate, self, tv, &relook);
	}
	if (!tstate)
		relook = !th || th->misses < PYPROF_LOOKUP_EAGER ||
			 s->ts_ns - th->lookup_ns >= sc->cfg.lookup_retry_ns;
	if (relook)
		tstate = relook_tstate(sc, th, tid, self, born, tstate, tv);
	return tstate;
}

/*
 * Why a thread has no state, when its life tells. One that had a state
 * (this very thread: see born), or is @exiting, is ending. A young one
 * whose state no sample saw is starting (its state not bound yet) or
 * already ending (a short thread): nothing seen from here tells which for
 * sure, so the status says both. A process's main thread (@leader) is born
 * at its fork, maybe long before its exec (a launched command waits for the
 * events; a worker forks, then execs): one that has run under
 * PYPROF_MAIN_START_CPU_NS on a CPU is an interpreter starting (loading,
 * before its first state: 13-15 ms after the first sample for pyenv's 3.11
 * at 10 kHz, whose cost the thread is charged, and a 20 ms bound was
 * crossed before it, pre-exec time counted).
 */
static __always_inline __u32 stateless_status(const struct pyprof_thread *th,
					      const struct task_struct *task, bool leader,
					      __u64 now, __u64 born, bool exiting)
{
	if (exiting || (th && th->had_state))
		return PYPROF_THREAD_EXIT;
	if (now - born < PYPROF_THREAD_YOUNG_NS ||
	    (leader && TASK_READ(task, se.sum_exec_runtime) < PYPROF_MAIN_START_CPU_NS))
		return PYPROF_THREAD_YOUNG;
	return PYPROF_NO_PYSTATE;
}

#endif
