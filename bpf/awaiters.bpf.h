/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * awaiters.bpf.h - --async (3.14+): the suspended frames of each task awaiting
 * the running one, read at the sample (struct pyprof_await_frames, sent before
 * the struct pyprof_tasks that points into it). A handler task that lives a
 * millisecond is gone before userspace could read it; the thread is stopped
 * here, so the chain is read as it stands.
 *
 * A task's chain: its coroutine's frame, then, while that frame is suspended
 * in a yield-from, the object it awaits: a coroutine or an async generator is
 * followed; so is the async generator an anext(), asend(), athrow() or
 * aclose() awaitable drives (the first pointer after its object header); a
 * task or future ends it. One explicit limit per walk: PYPROF_MAX_CORO_DEPTH
 * levels per task, PYPROF_MAX_AWAIT_FRAMES frames per sample; a read that
 * fails or a frame not owned by its generator ends that task's chain, flagged.
 */
#ifndef PYPROF_AWAITERS_BPF_H
#define PYPROF_AWAITERS_BPF_H

#include "maps.bpf.h"
#include "frames.bpf.h"
#include "compat.bpf.h"

/* _PyInterpreterFrame.owner of a generator's own frame (3.11-3.15). */
#define FRAME_OWNED_BY_GENERATOR 1
/* Where every build here keeps ob_type, and the first field after it. */
#define OB_TYPE 8
#define OB_FIRST_FIELD 16

/*
 * What awaiting @x runs as a chain level: @x itself when it is a coroutine or
 * an async generator, the async generator an awaitable of one drives, or 0
 * (a future, a task, another iterator: the chain ends). Without the two
 * types (not found in the target), a coroutine of @cur_type only.
 */
static __always_inline __u64 await_target(struct scratch *sc, __u64 x, __u64 cur_type)
{
	__u64 type = 0, inner = 0;

	if (!x || bpf_probe_read_user(&type, sizeof(type), (const void *)(x + OB_TYPE)))
		return 0;
	if (!sc->cfg.coro_type || !sc->cfg.asyncgen_type)
		return type == cur_type ? x : 0;
	if (type == sc->cfg.coro_type || type == sc->cfg.asyncgen_type)
		return x;
	if (bpf_probe_read_user(&inner, sizeof(inner), (const void *)(x + OB_FIRST_FIELD)) ||
	    !inner ||
	    bpf_probe_read_user(&type, sizeof(type), (const void *)(inner + OB_TYPE)))
		return 0;
	return type == sc->cfg.asyncgen_type ? inner : 0;
}

/* Close task sc->aw_task's frames: how many its chain gave. */
static __always_inline void close_task(struct scratch *sc)
{
	struct pyprof_task_link *link = &sc->tk.tasks[sc->aw_task & (PYPROF_MAX_TASKS - 1)];

	link->nframes = (__u16)(sc->af.nframes - link->frame_first);
	sc->aw_open = 0;
	sc->aw_gen = 0;
	sc->aw_task++;
}

/* Open task sc->aw_task: where its chain starts. Returns 1 when none is left. */
static __always_inline long open_task(struct scratch *sc)
{
	__u32 t = sc->aw_task;
	struct pyprof_task_link *link;

	if (t >= sc->tk.ntasks || t >= PYPROF_MAX_TASKS)
		return 1;
	link = &sc->tk.tasks[t & (PYPROF_MAX_TASKS - 1)];
	link->gen = await_target(sc, link->coro, 0);
	link->frame_first = (__u16)sc->af.nframes;
	link->nframes = 0;
	if (!t) {
		/* The running task: its frames are the thread's own. */
		sc->aw_task = 1;
		return 0;
	}
	link->fflags |= PYPROF_LF_READ;
	sc->aw_gen = link->gen;
	sc->aw_depth = 0;
	sc->aw_open = 1;
	return 0;
}

/* One coroutine of the open task's chain: its frame, then what it awaits. */
static __always_inline void read_level(struct scratch *sc, struct pyprof_task_link *link)
{
	__u64 gen = sc->aw_gen, sp, x = 0, len = sc->cfg.gen_read;
	__u32 n = sc->af.nframes, fo = sc->cfg.gen_iframe;
	struct pyprof_frame *f;
	const __u8 *fb;
	__s8 state;

	sc->aw_gen = 0;
	if (sc->aw_depth >= PYPROF_MAX_CORO_DEPTH) {
		link->fflags |= PYPROF_LF_CUT;
		return;
	}
	if (len > PYPROF_GEN_READ_MAX)
		len = PYPROF_GEN_READ_MAX;
	if (fo > PYPROF_GEN_READ_MAX - PYPROF_FRAME_READ_MAX)
		return;
	if (!len || bpf_probe_read_user(sc->gen_buf, len, (const void *)gen)) {
		link->fflags |= PYPROF_LF_FAULT;
		return;
	}
	fb = sc->gen_buf + (fo & (PYPROF_GEN_READ_MAX - 1));
	state = (__s8)sc->gen_buf[sc->cfg.gen_frame_state & (PYPROF_GEN_READ_MAX - 1)];
	/* A finished coroutine, or a frame it does not own: nothing to show. */
	if (fb[sc->cfg.frame_owner & (PYPROF_FRAME_READ_MAX - 1)] != FRAME_OWNED_BY_GENERATOR ||
	    state == (__s8)sc->cfg.state_cleared)
		return;
	f = &sc->af.frames[n & (PYPROF_MAX_AWAIT_FRAMES - 1)];
	f->frame = gen + fo;
	frame_code(sc, f, fb);
	if (!f->code)
		return;
	sc->af.nframes = n + 1;
	sc->aw_depth++;
	if (state != (__s8)sc->cfg.state_yield_from &&
	    state != (__s8)sc->cfg.state_yield_from_locked)
		return;
	sp = field64(fb, sc->cfg.frame_stackpointer);
	if (!sp || bpf_probe_read_user(&x, sizeof(x),
				       (const void *)(sp - 8 * (__u64)sc->cfg.awaited_slot))) {
		link->fflags |= PYPROF_LF_FAULT;
		return;
	}
	x &= ~7ull;		/* _PyStackRef tag bits */
	x = await_target(sc, x, *(const __u64 *)(sc->gen_buf + OB_TYPE));
	sc->aw_gen = x != gen ? x : 0;
}

/* One step of the awaiters' frames: open a task, or read one level of it. */
static long await_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct pyprof_task_link *link;

	if (!sc->aw_open)
		return open_task(sc);
	link = &sc->tk.tasks[sc->aw_task & (PYPROF_MAX_TASKS - 1)];
	if (!sc->aw_gen) {
		close_task(sc);
		return 0;
	}
	if (sc->af.nframes >= PYPROF_MAX_AWAIT_FRAMES) {
		link->fflags |= PYPROF_LF_CUT;
		sc->tk.flags |= PYPROF_TF_FRAMES_CUT;
		close_task(sc);
		return 1;
	}
	read_level(sc, link);
	return 0;
}
DEFINE_LOOP(await_step)

/*
 * Read the awaiters' frames of the chain in sc->tk and send them (before the
 * chain, which points into them). Returns 0, or -1 when the ring is full
 * (counted: the sample then goes without its tasks).
 */
static __always_inline long send_await_frames(struct scratch *sc, struct pyprof_sample *s)
{
	__u32 n;

	sc->af.kind = PYPROF_REC_AWAIT_FRAMES;
	sc->af.tid = s->tid;
	sc->af.nframes = 0;
	sc->aw_task = 0;
	sc->aw_open = 0;
	sc->aw_gen = 0;
	/* Each task: an open step, its levels (each one a frame, but for the
	 * last), a close step. */
	RUN_LOOP(3 * PYPROF_MAX_TASKS + PYPROF_MAX_AWAIT_FRAMES + 2, await_step,
		 3 * PYPROF_MAX_TASKS + PYPROF_MAX_AWAIT_FRAMES + 2);
	if (sc->aw_open)
		close_task(sc);
	n = sc->af.nframes;
	if (n > PYPROF_MAX_AWAIT_FRAMES)
		n = PYPROF_MAX_AWAIT_FRAMES;
	if (bpf_ringbuf_output(&samples, &sc->af, PYPROF_AWAIT_FRAMES_SIZE(n),
			       BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return -1;
	}
	return 0;
}

#endif
