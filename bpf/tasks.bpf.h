/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * tasks.bpf.h - --async (3.14+): the asyncio task a sampled thread runs and
 * the chain of tasks awaiting it, sent before the sample (struct
 * pyprof_tasks) while the tasks are alive to be read.
 */
#ifndef PYPROF_TASKS_BPF_H
#define PYPROF_TASKS_BPF_H

#include "maps.bpf.h"
#include "compat.bpf.h"
#include "awaiters.bpf.h"

/* One entry of an awaiter set's table: the lowest live key so far. */
static long set_scan_step(__u32 k, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	__u64 key, hash;

	if (k >= PYPROF_SET_SCAN)
		return 1;
	key = sc->set_buf[(2 * k) & (2 * PYPROF_SET_SCAN - 1)];
	hash = sc->set_buf[(2 * k + 1) & (2 * PYPROF_SET_SCAN - 1)];
	/* Empty (NULL) and deleted (dummy key, hash -1) entries. */
	if (!key || hash == (__u64)-1)
		return 0;
	if (!sc->set_best || key < sc->set_best)
		sc->set_best = key;
	return 0;
}
DEFINE_LOOP(set_scan_step)

/*
 * Has the chain come back to @task? Brent's check: one task saved at each
 * power of two of steps, so a cycle is seen within twice its length plus
 * its lead-in, at one comparison a step. A longer cycle reaches the limit
 * first; userspace then finds the repeat in the links and cuts it there.
 */
static __always_inline bool task_met(struct scratch *sc, __u64 task)
{
	if (task == sc->task_saved)
		return true;
	if (++sc->task_lam >= sc->task_power) {
		sc->task_saved = task;
		sc->task_power <<= 1;
		sc->task_lam = 0;
	}
	return false;
}

/* Copy @task's name object now: a task may end before userspace reads it. */
static __always_inline void copy_task_name(struct scratch *sc, struct pyprof_task_link *link,
					   __u64 task)
{
	__u64 name = 0;

	link->name_len = 0;
	link->name_type_flags = 0;
	if (sc->cfg.task_name &&
	    !bpf_probe_read_user(&name, sizeof(name), (const void *)(task + sc->cfg.task_name)) &&
	    name && !bpf_probe_read_user(link->name, sizeof(link->name), (const void *)name)) {
		__u64 type = *(const __u64 *)(link->name + 8);	/* ob_type */

		if (!bpf_probe_read_user(&link->name_type_flags, sizeof(link->name_type_flags),
					 (const void *)(type + sc->cfg.type_flags)))
			link->name_len = sizeof(link->name);
	}
}

/*
 * The lowest live task of awaiter set @aw (the order a reader can
 * reproduce); @link's count of awaiters is the set's. 0: none, or a read
 * failed (flagged).
 */
_Static_assert((PYPROF_SET_SCAN & (PYPROF_SET_SCAN - 1)) == 0, "PYPROF_SET_SCAN masks a length");

static __always_inline __u64 lowest_awaiter(struct scratch *sc, struct pyprof_task_link *link,
					    __u64 aw)
{
	struct pyprof_tasks *tk = &sc->tk;
	__u64 used = 0, mask = 0, table = 0, len;
	__u32 cnt;

	if (bpf_probe_read_user(&used, sizeof(used), (const void *)(aw + sc->cfg.set_used)) ||
	    bpf_probe_read_user(&mask, sizeof(mask), (const void *)(aw + sc->cfg.set_mask)) ||
	    bpf_probe_read_user(&table, sizeof(table), (const void *)(aw + sc->cfg.set_table)) ||
	    !table) {
		tk->flags |= PYPROF_TF_FAULT;
		return 0;
	}
	link->nawaiters = (__u32)used;
	cnt = mask + 1 > PYPROF_SET_SCAN ? PYPROF_SET_SCAN : (__u32)mask + 1;
	if (mask + 1 > PYPROF_SET_SCAN)
		tk->flags |= PYPROF_TF_SET_CUT;
	/* cnt is 1 to PYPROF_SET_SCAN (a power of two) or 0: the length is
	 * masked, not compared, so that every verifier sees its bound (6.1's
	 * lost it where clang compared a copy of it; 6.12's did not). */
	len = ((((__u64)cnt - 1) & (PYPROF_SET_SCAN - 1)) + 1) * 16;
	if (!cnt || bpf_probe_read_user(sc->set_buf, len, (const void *)table)) {
		tk->flags |= PYPROF_TF_FAULT;
		return 0;
	}
	sc->set_best = 0;
	/* bpf_loop: an unrolled scan was half of what the verifier walked */
	RUN_LOOP(cnt, set_scan_step, PYPROF_SET_SCAN);
	return sc->set_best;
}

/*
 * One step of the awaiter chain (--async): record task sc->task_next, then
 * move to what awaits it: the one awaiter, or the lowest of a set's.
 * Returns 1 to stop.
 */
static long task_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct pyprof_tasks *tk = &sc->tk;
	struct pyprof_task_link *link;
	__u64 task = sc->task_next, aw = 0, coro = 0, best;
	__u32 n = tk->ntasks;
	__u8 is_task = 0, is_set = 0;

	if (!task)
		return 1;
	if (n >= PYPROF_MAX_TASKS) {
		tk->flags |= PYPROF_TF_CUT;
		return 1;
	}
	if (task_met(sc, task)) {
		tk->flags |= PYPROF_TF_CYCLE;
		return 1;
	}
	if (bpf_probe_read_user(&is_task, 1, (const void *)(task + sc->cfg.task_is_task)) ||
	    bpf_probe_read_user(&coro, sizeof(coro), (const void *)(task + sc->cfg.task_coro)) ||
	    bpf_probe_read_user(&aw, sizeof(aw), (const void *)(task + sc->cfg.task_awaited_by)) ||
	    bpf_probe_read_user(&is_set, 1,
				(const void *)(task + sc->cfg.task_awaited_by_is_set))) {
		tk->flags |= PYPROF_TF_FAULT;
		return 1;
	}
	if (!is_task) {
		/* A future (or a task of another kind): the chain ends. */
		if (n)
			tk->flags |= PYPROF_TF_FUTURE;
		return 1;
	}
	link = &tk->tasks[n & (PYPROF_MAX_TASKS - 1)];
	link->task = task;
	link->coro = coro;
	link->gen = 0;
	link->frame_first = 0;
	link->nframes = 0;
	link->fflags = 0;
	link->nawaiters = aw ? 1 : 0;
	copy_task_name(sc, link, task);
	tk->ntasks = n + 1;
	sc->task_next = 0;
	if (!aw)
		return 1;
	if (!is_set) {
		sc->task_next = aw;
		return 0;
	}
	best = lowest_awaiter(sc, link, aw);
	sc->task_next = best;
	return best ? 0 : 1;
}
DEFINE_LOOP(task_step)

/* --async: send the running task of @tstate's thread and its awaiters
 * before the sample. */
static __always_inline void send_tasks(struct scratch *sc, struct pyprof_sample *s, __u64 tstate)
{
	struct pyprof_tasks *tk = &sc->tk;
	__u64 task = 0;
	__u32 n;

	if (bpf_probe_read_user(&task, sizeof(task),
				(const void *)(tstate + sc->cfg.async_running_task)) || !task)
		return;
	tk->kind = PYPROF_REC_TASKS;
	tk->tid = s->tid;
	tk->ntasks = 0;
	tk->flags = 0;
	sc->task_next = task;
	sc->task_saved = 0;
	sc->task_power = 1;
	sc->task_lam = 0;
	RUN_LOOP(PYPROF_MAX_TASKS + 1, task_step, PYPROF_MAX_TASKS + 1);
	n = tk->ntasks;
	if (!n)
		return;
	if (n > PYPROF_MAX_TASKS)
		n = PYPROF_MAX_TASKS;
	if (sc->cfg.gen_read && send_await_frames(sc, s))
		return;
	if (bpf_ringbuf_output(&samples, tk, PYPROF_TASKS_SIZE(n), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return;
	}
	s->flags |= PYPROF_SF_TASKS;
}

#endif
