// SPDX-License-Identifier: MIT
/*
 * records.c - the poll: every ring-buffer record the program wrote, turned
 * into what the caller's callbacks take. A sample of the main target has
 * its cached callers spliced back (user/sampling/frame_cache.h); the side
 * records a tick sends before its sample (kernel stack, user stack and
 * registers, task chain) wait in small tables until it comes; code
 * snapshots and process events go to their own callbacks; off-CPU records
 * go to intervals.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "sampling/frame_cache.h"
#include "target/exc_offsets.h"

_Static_assert(SAMPLE_NREGS == PYPROF_NREGS, "a sample carries the registers BPF copies");

_Static_assert(sizeof(struct pyprof_frame) == sizeof(struct py_rawframe) &&
	       offsetof(struct pyprof_frame, frame) == offsetof(struct py_rawframe, frame) &&
	       offsetof(struct pyprof_frame, code) == offsetof(struct py_rawframe, code) &&
	       offsetof(struct pyprof_frame, instr) == offsetof(struct py_rawframe, instr) &&
	       offsetof(struct pyprof_frame, code_version) ==
	       offsetof(struct py_rawframe, code_version) &&
	       offsetof(struct pyprof_frame, flags) == offsetof(struct py_rawframe, reserved),
	       "records are handed out without copying");
_Static_assert((int)PYPROF_FF_NO_SNAPSHOT == (int)SAMPLE_FF_NO_SNAPSHOT, "frame flags are the record's");
_Static_assert(PYPROF_OP_KNOWN == SAMPLE_OP_KNOWN, "one opcode word");
_Static_assert(PYPROF_MAX_EVENTS == SAMPLER_MAX_EVENTS && PYPROF_MAX_EVENTS == SAMPLE_MAX_EVENTS,
	       "one count of events");
_Static_assert(PYPROF_EXC_CHAIN == EXC_CHAIN_MAX && PYPROF_TPFLAGS_BASE_EXC == EXC_TPFLAGS_BASE_EXC &&
	       PYPROF_EXC_CHAIN_CUT == EXC_TYPE_CHAIN_CUT,
	       "one exception stack walk");
_Static_assert(PYPROF_FF_INTERP == FC_FRAME_INTERP &&
	       PYPROF_SF_ANCHOR_READ == FC_REC_ANCHOR_READ &&
	       PYPROF_SF_AT_ANCHOR == FC_REC_AT_ANCHOR && PYPROF_SF_BASE == FC_REC_BASE,
	       "frame cache flags are the record's");
_Static_assert((int)PYPROF_COMPLETE == (int)SAMPLE_COMPLETE &&
	       (int)PYPROF_TRUNCATED == (int)SAMPLE_TRUNCATED &&
	       (int)PYPROF_NO_PYSTATE == (int)SAMPLE_NO_PYSTATE &&
	       (int)PYPROF_READ_FAULT == (int)SAMPLE_READ_FAULT &&
	       (int)PYPROF_THREAD_YOUNG == (int)SAMPLE_THREAD_YOUNG &&
	       (int)PYPROF_THREAD_EXIT == (int)SAMPLE_THREAD_EXIT &&
	       (int)PYPROF_EVAL_ENTRY == (int)SAMPLE_EVAL_ENTRY,
	       "one status vocabulary");
_Static_assert((int)PYPROF_PROC_FORK == (int)SAMPLER_PROC_FORK &&
	       (int)PYPROF_PROC_EXEC == (int)SAMPLER_PROC_EXEC &&
	       (int)PYPROF_PROC_EXIT == (int)SAMPLER_PROC_EXIT &&
	       (int)PYPROF_PROC_SEEN == (int)SAMPLER_PROC_SEEN, "one process-event vocabulary");
_Static_assert((int)PYPROF_TF_CUT == (int)SAMPLE_TF_CUT &&
	       (int)PYPROF_TF_CYCLE == (int)SAMPLE_TF_CYCLE &&
	       (int)PYPROF_TF_FAULT == (int)SAMPLE_TF_FAULT &&
	       (int)PYPROF_TF_SET_CUT == (int)SAMPLE_TF_SET_CUT &&
	       (int)PYPROF_TF_FUTURE == (int)SAMPLE_TF_FUTURE &&
	       (int)PYPROF_TF_FRAMES_CUT == (int)SAMPLE_TF_FRAMES_CUT &&
	       (int)PYPROF_LF_READ == (int)SAMPLE_LF_READ &&
	       (int)PYPROF_LF_CUT == (int)SAMPLE_LF_CUT &&
	       (int)PYPROF_LF_FAULT == (int)SAMPLE_LF_FAULT &&
	       PYPROF_MAX_TASKS == SAMPLE_MAX_TASKS &&
	       PYPROF_MAX_AWAIT_FRAMES == SAMPLE_MAX_AWAIT_FRAMES &&
	       PYPROF_TASK_NAME_MAX == SAMPLE_TASK_NAME_MAX, "one task-chain vocabulary");

#define SLOT_OF(arr, tid) (&(arr)[(uint32_t)(tid) % (sizeof(arr) / sizeof((arr)[0]))])

void bpf_sampler__set_code_fn(struct bpf_sampler *s, code_fn fn, void *ctx)
{
	s->code_fn = fn;
	s->code_ctx = ctx;
}

void bpf_sampler__set_proc_fn(struct bpf_sampler *s, proc_fn fn, void *ctx)
{
	s->proc_fn = fn;
	s->proc_ctx = ctx;
}

uint32_t bpf_records__sample_flags(uint32_t rec_flags)
{
	return (rec_flags & PYPROF_SF_GIL_KNOWN ? SAMPLE_F_GIL_KNOWN : 0) |
	       (rec_flags & PYPROF_SF_GIL_HELD ? SAMPLE_F_GIL_HELD : 0) |
	       (rec_flags & PYPROF_SF_GC ? SAMPLE_F_GC : 0);
}

/* A code snapshot record: its parts, bounded by what arrived. */
static void on_code(struct bpf_sampler *s, const struct pyprof_code *c, size_t size)
{
	struct raw_code rc;

	if (!s->code_fn || size < PYPROF_CODE_HDR_SIZE || c->obj_len > PYPROF_CODE_OBJ_MAX ||
	    c->qual_len > PYPROF_CODE_QUAL_MAX || c->file_len > PYPROF_CODE_FILE_MAX ||
	    c->lt_len > PYPROF_CODE_LT_MAX || size < PYPROF_CODE_SIZE(c->lt_len))
		return;
	rc = (struct raw_code){
		.pid = (pid_t)c->pid, .code = c->code, .version = c->version,
		.obj = c->obj, .obj_len = c->obj_len,
		.qualname = c->qual, .qualname_len = c->qual_len,
		.filename = c->file, .filename_len = c->file_len,
		.linetable = c->lt, .linetable_len = c->lt_len, .linetable_size = c->lt_size,
		.qualname_cut = !!(c->flags & (PYPROF_CF_QUAL_CUT | PYPROF_CF_QUAL_FAULT)),
		.filename_cut = !!(c->flags & (PYPROF_CF_FILE_CUT | PYPROF_CF_FILE_FAULT)),
		.linetable_cut = !!(c->flags & (PYPROF_CF_LT_CUT | PYPROF_CF_LT_FAULT)),
	};
	s->code_fn(s->code_ctx, &rc);
}

static void on_proc_event(struct bpf_sampler *s, const struct pyprof_proc_event *e)
{
	if (s->proc_fn)
		s->proc_fn(s->proc_ctx, (enum sampler_proc_event)e->event, (pid_t)e->pid,
			   (pid_t)e->ppid, e->ts_ns);
}

/* --kernel: a tick's kernel stack, kept for its sample. A slot still held
 * by a sample that never came (its record lost) is reused. */
static void on_tick_kstack(struct bpf_sampler *s, const struct pyprof_switch *e)
{
	size_t nslots = sizeof(s->kst) / sizeof(s->kst[0]), k = e->tid % nslots;
	struct tick_kstack *t = &s->kst[k];

	if (!t->tid)
		s->kst_held++;
	t->tid = (pid_t)e->tid;
	t->n = e->nkstack < PYPROF_KSTACK_MAX ? e->nkstack : PYPROF_KSTACK_MAX;
	memcpy(t->addrs, e->kstack, t->n * sizeof(t->addrs[0]));
}

/* A tick's slot (kernel stack, user stack, tasks) holds @tid's: take it
 * (its data valid until the next record). */
static bool take_slot(pid_t *slot_tid, pid_t tid, uint32_t *held)
{
	if (*slot_tid != tid)
		return false;
	*slot_tid = 0;
	if (held)
		(*held)--;
	return true;
}

/* The kernel stack sent for @tid's tick, if any. */
static const struct tick_kstack *take_tick_kstack(struct bpf_sampler *s, pid_t tid)
{
	struct tick_kstack *t;

	if (!s->kst_held)
		return NULL;
	t = SLOT_OF(s->kst, tid);
	return take_slot(&t->tid, tid, &s->kst_held) ? t : NULL;
}

/* --async: a tick's task chain, kept for its sample (as kernel stacks are). */
static void on_tick_tasks(struct bpf_sampler *s, const struct pyprof_tasks *e, size_t size)
{
	size_t nslots = sizeof(s->tks) / sizeof(s->tks[0]);
	struct tick_tasks *t = &s->tks[e->tid % nslots];
	uint32_t n = e->ntasks < PYPROF_MAX_TASKS ? e->ntasks : PYPROF_MAX_TASKS;

	if (size < PYPROF_TASKS_SIZE(n)) {
		s->counts.errors++;
		return;
	}
	t->tid = (pid_t)e->tid;
	t->n = n;
	t->flags = e->flags;
	for (uint32_t i = 0; i < n; i++) {
		const struct pyprof_task_link *l = &e->tasks[i];
		bool mine = t->frames_tid == t->tid;

		t->t[i].task = l->task;
		t->t[i].coro = l->coro;
		t->t[i].gen = l->gen;
		/* Frames that are not in the copy are not kept: not read. */
		t->t[i].fflags = mine && l->frame_first <= t->nframes &&
				 l->nframes <= t->nframes - l->frame_first ? l->fflags : 0;
		t->t[i].frames = t->frames + (t->t[i].fflags ? l->frame_first : 0);
		t->t[i].nframes = t->t[i].fflags ? l->nframes : 0;
		t->t[i].nawaiters = l->nawaiters;
		t->t[i].name_len = e->tasks[i].name_len < SAMPLE_TASK_NAME_MAX ?
				   e->tasks[i].name_len : SAMPLE_TASK_NAME_MAX;
		t->t[i].name_type_flags = e->tasks[i].name_type_flags;
		memcpy(t->names[i], e->tasks[i].name, t->t[i].name_len);
		t->t[i].name = t->names[i];
	}
}

/* --async: the awaiters' frames of a tick, kept for its chain (next). */
static void on_tick_await_frames(struct bpf_sampler *s, const struct pyprof_await_frames *e,
				 size_t size)
{
	size_t nslots = sizeof(s->tks) / sizeof(s->tks[0]);
	struct tick_tasks *t = &s->tks[e->tid % nslots];
	uint32_t n = e->nframes;

	if (n > PYPROF_MAX_AWAIT_FRAMES || size < PYPROF_AWAIT_FRAMES_SIZE(n)) {
		s->counts.errors++;
		return;
	}
	t->frames_tid = (pid_t)e->tid;
	t->nframes = n;
	memcpy(t->frames, e->frames, n * sizeof(*t->frames));
}

static const struct tick_tasks *take_tick_tasks(struct bpf_sampler *s, pid_t tid)
{
	struct tick_tasks *t = SLOT_OF(s->tks, tid);

	return take_slot(&t->tid, tid, NULL) ? t : NULL;
}

static void on_tick_ustack(struct bpf_sampler *s, const struct pyprof_ustack *e)
{
	size_t nslots = sizeof(s->ust) / sizeof(s->ust[0]);
	struct tick_ustack *t = &s->ust[e->tid % nslots];
	uint32_t len = e->len < s->native_stack ? e->len : s->native_stack;

	if (!t->stack && !(t->stack = malloc(s->native_stack ? s->native_stack : 1)))
		return;
	if (!t->tid)
		s->ust_held++;
	t->tid = (pid_t)e->tid;
	t->len = len;
	memcpy(t->regs, e->regs, sizeof(t->regs));
	memcpy(t->stack, e->stack, len);
}

static const struct tick_ustack *take_tick_ustack(struct bpf_sampler *s, pid_t tid)
{
	struct tick_ustack *t;

	if (!s->ust_held)
		return NULL;
	t = SLOT_OF(s->ust, tid);
	return take_slot(&t->tid, tid, &s->ust_held) ? t : NULL;
}

/*
 * A record that is not a sample (code snapshot, process event, off-CPU
 * switch, a tick's side record): handled, with *@ret what the ring's
 * callback returns. False: a sample (or garbage) to check as one.
 */
static bool on_side_record(struct bpf_sampler *s, void *data, size_t size, int *ret)
{
	const struct pyprof_sample *r = data;

	*ret = 0;
	if (size < sizeof(__u32))
		return false;
	if (r->kind == PYPROF_REC_CODE)
		on_code(s, data, size);
	else if (size >= sizeof(struct pyprof_proc_event) && r->kind == PYPROF_REC_PROC)
		on_proc_event(s, data);
	else if (size >= sizeof(struct pyprof_switch) && r->kind == PYPROF_REC_SWITCH)
		bpf_intervals__on_switch(s, data);
	else if (size >= sizeof(struct pyprof_switch_in) && r->kind == PYPROF_REC_SWITCH_IN)
		*ret = bpf_intervals__on_switch_in(s, data);
	else if (size >= sizeof(struct pyprof_switch) && r->kind == PYPROF_REC_KSTACK)
		on_tick_kstack(s, data);
	/* As long as its copy (kernels that size records at run time), or
	 * the whole struct. */
	else if (size >= offsetof(struct pyprof_ustack, stack) && r->kind == PYPROF_REC_USTACK &&
		 ((const struct pyprof_ustack *)data)->len <=
		 size - offsetof(struct pyprof_ustack, stack))
		on_tick_ustack(s, data);
	else if (size >= PYPROF_TASKS_SIZE(0) && r->kind == PYPROF_REC_TASKS)
		on_tick_tasks(s, data, size);
	else if (size >= PYPROF_AWAIT_FRAMES_SIZE(0) && r->kind == PYPROF_REC_AWAIT_FRAMES)
		on_tick_await_frames(s, data, size);
	else
		return false;
	return true;
}

static void queue_reanchor(struct bpf_sampler *s, pid_t tid)
{
	for (size_t i = 0; i < s->nreanchor; i++)
		if (s->reanchor[i] == tid)
			return;
	if (s->nreanchor < REANCHOR_PER_POLL)
		s->reanchor[s->nreanchor++] = tid;
}

/* Sample @r's whole stack into @fo: the main target's through the frame
 * cache, another process's as it came (whole walks, Python frames only). */
static void resolve_stack(struct bpf_sampler *s, const struct pyprof_sample *r,
			  struct frame_cache_out *fo)
{
	struct frame_cache_rec fr;

	if ((pid_t)r->pid != s->pid) {
		*fo = (struct frame_cache_out){ .status = r->status, .nframes = r->nframes,
						.frames = (const struct py_rawframe *)r->frames };
		return;
	}
	fr = (struct frame_cache_rec){
		.tid = r->tid, .ts_ns = r->ts_ns, .tstate = r->tstate,
		.status = r->status, .flags = r->flags,
		.anchor = r->cache_frame, .seq = r->cache_seq, .anchor_prev = r->cache_prev,
		.nframes = r->nframes, .frames = (const struct py_rawframe *)r->frames,
	};
	/* On -ENOMEM the record is passed on as it is, marked truncated. */
	frame_cache__process(s->fc, &fr, fo);
	if (fo->set_walk_whole)
		bpf_threads__set_walk_whole(s, r->tid, fo->walk_whole);
	if (fo->reanchor)
		queue_reanchor(s, r->tid);
}

/* A tick's sample, with the side records it sent, to the poll's callback. */
static int deliver_tick(struct bpf_sampler *s, const struct pyprof_sample *r,
			const struct frame_cache_out *fo)
{
	const struct tick_kstack *kst;
	const struct tick_ustack *ust;
	const struct tick_tasks *tks;
	struct raw_sample rs;
	int ret;

	memset(&rs, 0, sizeof(rs));
	rs.kind = SAMPLE_KIND_CPU;
	rs.flags = bpf_records__sample_flags(r->flags);
	rs.period = s->event_periods ? r->period : 0;
	rs.event = (r->flags >> PYPROF_SF_EVENT_SHIFT) & (PYPROF_MAX_EVENTS - 1);
	kst = take_tick_kstack(s, (pid_t)r->tid);
	if (kst) {
		rs.nkstack = kst->n;
		rs.kstack = kst->addrs;
	}
	ust = take_tick_ustack(s, (pid_t)r->tid);
	if (ust) {
		rs.uregs = ust->regs;
		rs.ustack = ust->stack;
		rs.ustack_len = ust->len;
	}
	tks = r->flags & PYPROF_SF_TASKS ? take_tick_tasks(s, (pid_t)r->tid) : NULL;
	if (tks) {
		rs.ntasks = tks->n;
		rs.tasks_flags = tks->flags;	/* SAMPLE_TF_* are PYPROF_TF_* */
		rs.tasks = tks->t;
	}
	rs.pid = r->pid;
	rs.tid = r->tid;
	rs.cpu = r->cpu;
	rs.ts_ns = r->ts_ns;
	rs.status = fo->status;
	rs.nframes = fo->nframes;
	rs.frames = fo->frames;
	rs.unchanged = fo->unchanged;
	rs.opcode = r->opcode & (PYPROF_OP_KNOWN | 0xff);
	rs.exc_type = r->exc_type;
	ret = s->fn(s->fn_ctx, &rs);
	if (ret) {
		/* libbpf stops consuming on a negative return only. */
		s->fn_ret = ret;
		return -ECANCELED;
	}
	return 0;
}

int bpf_records__on_record(void *ctx, void *data, size_t size)
{
	struct bpf_sampler *s = ctx;
	const struct pyprof_sample *r = data;
	struct frame_cache_out fo;
	int ret;

	if (on_side_record(s, data, size, &ret))
		return ret;
	if (size < PYPROF_SAMPLE_HDR_SIZE || r->nframes > PYPROF_MAX_FRAMES ||
	    size < PYPROF_SAMPLE_SIZE(r->nframes)) {
		s->counts.errors++;
		return 0;
	}
	if (r->flags & PYPROF_SF_REUSE) {
		/* No stack in it: nothing for the frame cache. */
		bpf_intervals__open(s, r, NULL, NULL);
		return 0;
	}
	resolve_stack(s, r, &fo);
	if (r->status == PYPROF_NO_PYSTATE && (pid_t)r->pid == s->pid && !s->unknown_tid &&
	    !bpf_threads__find(s->th, s->nth, (pid_t)r->tid))
		s->unknown_tid = true;
	if (r->flags & PYPROF_SF_SWITCH_OUT) {
		/* Delivered when the thread runs again: its length known. */
		bpf_intervals__open(s, r, &fo, r->flags & PYPROF_SF_TASKS ?
				    take_tick_tasks(s, (pid_t)r->tid) : NULL);
		return 0;
	}
	sampler_stats__count(&s->counts, fo.status);
	s->counts.cut += fo.cut;
	if (s->ivs)
		bpf_intervals__keep_last_stack(s, r, &fo);
	return deliver_tick(s, r, &fo);
}

int bpf_sampler__poll(struct bpf_sampler *s, sample_fn fn, void *ctx)
{
	int n;

	s->fn = fn;
	s->fn_ctx = ctx;
	s->fn_ret = 0;
	n = ring_buffer__consume(s->rb);
	/* The samples of threads found gone that the ring held are handed
	 * on: their state can go. */
	if (s->ndying)
		bpf_threads__retire_due(s, bpf_lifecycle__ring_consumed(s));
	if (s->fn_ret)
		return s->fn_ret;
	if (s->stopped)
		s->nreanchor = 0;	/* the anchors are released: written no more */
	else if (s->nreanchor)
		bpf_threads__reanchor(s);
	return n;
}
