// SPDX-License-Identifier: MIT
/*
 * config.c - what the BPF walk is told about a process: its offsets checked
 * against what the program can read (struct pyprof_config), its GIL, its
 * --native and --async fields, written into the program's procs map.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>

#include "sampling/bpf/internal.h"
#include "pyprof.skel.h"		/* after pyprof.h, whose types it uses */

/*
 * Data-stack window of the BPF walk (see PYPROF_WINDOW_MAX): a page and a
 * frame, as windows start at their frame's page. 4 KB holds some 30 small
 * frames and costs about 1.5 frame reads.
 */
#define WINDOW_BYTES		(PYPROF_PAGE + PYPROF_FRAME_READ_MAX)
/*
 * The in-kernel thread-state lookup: thread states and interpreters visited
 * at most (a walk of ~20 ns a step; the thread lists of a process with a
 * thousand threads), and how long a thread that had none waits before the
 * next lookup (a C thread of the target costs one walk per interval).
 */
#define LOOKUP_STEPS		PYPROF_LOOKUP_STEPS_MAX
#define LOOKUP_RETRY_NS		(2 * 1000000ULL)
/*
 * Off-CPU modes: a switch-out in the same innermost frame at the same
 * instruction as the thread's last walk, within OFFCPU_REUSE_NS of it,
 * stands on that walk's stack (32 threads handing the GIL over 8,000 times
 * a second leave the CPU every 4 ms each).
 */
#define OFFCPU_REUSE_NS (20 * 1000000ULL)

/*
 * The thread-state block the program reads at every sample: the current
 * frame (or 3.11/3.12's C frame record), the thread id that checks the
 * state still belongs to the thread, the next link and the status word (for
 * the in-kernel lookup), and with @cache the 3.15 frame-cache fields. Fields
 * that do not fit one block of PYPROF_TSTATE_BLOCK bytes are left out, least
 * needed first: the frame cache, then the status (subinterpreters). Returns
 * -EPROTO when even the frame pointer and the thread id do not fit.
 */
static int fill_tstate_block(struct pyprof_config *c, const struct py_offsets *o, bool cache)
{
	enum { CUR, TID, NEXT, STATUS, BASE, ANCHOR, SEQ, NF };
	uint64_t off[NF] = {
		[CUR] = o->tstate_cframe ? o->tstate_cframe : o->tstate_current_frame,
		[TID] = o->tstate_thread_id, [NEXT] = o->tstate_next,
		[STATUS] = o->tstate_status, [BASE] = o->tstate_base_frame,
		[ANCHOR] = o->tstate_last_profiled_frame,
		[SEQ] = o->tstate_last_profiled_frame_seq,
	};
	/* 8 bytes each but the status word (4). */
	bool use[NF] = { true, true, true, o->tstate_status != 0,
			 cache && o->tstate_base_frame && o->tstate_last_profiled_frame &&
			 o->tstate_last_profiled_frame_seq };
	uint64_t lo, hi;
	int drop;

	use[ANCHOR] = use[SEQ] = use[BASE];
	for (drop = NF; drop >= STATUS; drop = drop == NF ? BASE : drop - 1) {
		/* drop: fields from here on are left out (BASE: the cache trio). */
		lo = UINT64_MAX;
		hi = 0;
		for (int i = 0; i < NF; i++) {
			if (!use[i] || (i >= drop && drop != NF))
				continue;
			if (off[i] < lo)
				lo = off[i];
			if (off[i] + 8 > hi)
				hi = off[i] + 8;
		}
		if (hi - lo <= PYPROF_TSTATE_BLOCK && hi <= PY_MAX_STRUCT_COPY)
			break;
	}
	if (drop < STATUS)
		return -EPROTO;
	for (int i = drop == NF ? NF : drop; i < NF; i++)
		use[i] = false;
	c->tstate_block = lo;
	c->tstate_block_len = (__u32)(hi - lo);
	c->current_frame_rel = c->cframe_rel = PYPROF_REL_NONE;
	if (o->tstate_cframe) {
		c->tstate_cframe = 1;
		c->cframe_rel = (__u32)(off[CUR] - lo);
	} else {
		c->current_frame_rel = (__u32)(off[CUR] - lo);
	}
	c->thread_id_rel = (__u32)(off[TID] - lo);
	c->next_rel = (__u32)(off[NEXT] - lo);
	c->status_rel = use[STATUS] ? (__u32)(off[STATUS] - lo) : PYPROF_REL_NONE;
	c->base_frame_rel = c->anchor_rel = c->anchor_seq_rel = PYPROF_REL_NONE;
	if (use[BASE]) {
		c->base_frame_rel = (__u32)(off[BASE] - lo);
		c->anchor_rel = (__u32)(off[ANCHOR] - lo);
		c->anchor_seq_rel = (__u32)(off[SEQ] - lo);
		c->frame_cache = 1;
	}
	return 0;
}

/*
 * The offsets the walk reads, checked against what it can read: @need, the
 * bytes of a frame that hold its fields. 0 or -EPROTO with a line in @err.
 */
static int check_offsets(const struct py_offsets *o, uint64_t *need, char *err, size_t errlen)
{
	const struct { const char *name; uint64_t off, len; } fields[] = {
		{ "previous", o->frame_previous, 8 },
		{ "executable", o->frame_executable, 8 },
		{ "instr_ptr", o->frame_instr_ptr, 8 },
		{ "owner", o->frame_owner, o->frame_owner_interp_min ? 1 : 0 },
	};
	uint64_t end;

	*need = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		end = fields[i].off + fields[i].len;
		if (fields[i].off > PYPROF_FRAME_READ_MAX || end > PYPROF_FRAME_READ_MAX) {
			snprintf(err, errlen, "frame field %s at offset %llu is beyond the "
				 "%d bytes the BPF walk reads", fields[i].name,
				 (unsigned long long)fields[i].off, PYPROF_FRAME_READ_MAX);
			return -EPROTO;
		}
		if (end > *need)
			*need = end;
	}
	if (o->frame_size < *need) {
		snprintf(err, errlen, "interpreter frame size %llu smaller than its fields",
			 (unsigned long long)o->frame_size);
		return -EPROTO;
	}
	if (o->tstate_current_frame >= PY_MAX_STRUCT_COPY ||
	    o->tstate_cframe >= PY_MAX_STRUCT_COPY ||
	    o->cframe_current_frame >= PY_MAX_STRUCT_COPY ||
	    o->cframe_previous > PYPROF_CFRAME_READ - 8 ||
	    o->cframe_current_frame > PYPROF_CFRAME_READ - 8) {
		snprintf(err, errlen, "thread state offsets out of range");
		return -EPROTO;
	}
	return 0;
}

/* Code snapshots: the code object's fields up to _co_firsttraceable, when
 * the program's copy holds them. */
static void fill_snapshots(struct pyprof_config *c, const struct py_offsets *o)
{
	if (o->code_size > PYPROF_CODE_OBJ_MAX || o->code_qualname + 8 > o->code_size ||
	    o->code_filename + 8 > o->code_size || o->code_linetable + 8 > o->code_size ||
	    o->unicode_state + 4 > 64 || o->unicode_length + 8 > 64 ||
	    o->unicode_ascii_data > 64 || o->unicode_compact_data > PYPROF_CODE_QUAL_MAX)
		return;
	c->snapshots = 1;
	c->code_size = (__u32)o->code_size;
	c->code_qualname = o->code_qualname;
	c->code_filename = o->code_filename;
	c->code_linetable = o->code_linetable;
	if (!o->code_version && o->code_linetable == o->code_filename + 24)
		c->code_ident = o->code_filename;
	c->unicode_state = o->unicode_state;
	c->unicode_length = o->unicode_length;
	c->unicode_ascii_data = o->unicode_ascii_data;
	c->unicode_compact_data = o->unicode_compact_data;
	c->bytes_size = o->bytes_size;
	c->bytes_sval = o->bytes_sval;
}

/* The walk's config from the flat offsets table, checked against what the
 * BPF program can read. */
int bpf_config__fill(struct pyprof_config *c, const struct pyproc *p,
		     unsigned int max_frames, bool cache, char *err, size_t errlen)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t need, runtime = pyproc__runtime(p);
	int ret;

	ret = check_offsets(o, &need, err, errlen);
	if (ret)
		return ret;
	memset(c, 0, sizeof(*c));
	if (fill_tstate_block(c, o, cache)) {
		snprintf(err, errlen, "thread state fields too far apart for one read");
		return -EPROTO;
	}
	c->cframe_current_frame = o->cframe_current_frame;
	c->cframe_previous = o->cframe_previous;
	c->root_cframe = o->tstate_root_cframe;
	c->interpreters_head = runtime + o->runtime_interpreters_head;
	c->interp_next = o->interp_next;
	c->interp_threads_head = o->interp_threads_head;
	c->lookup_steps = LOOKUP_STEPS;
	c->thread_id_below_tp = pyproc__thread_id_below_tp(p);
	c->lookup_retry_ns = LOOKUP_RETRY_NS;
	c->frame_previous = o->frame_previous;
	c->frame_executable = o->frame_executable;
	c->frame_instr_ptr = o->frame_instr_ptr;
	c->frame_owner = o->frame_owner;
	/* Only the prefix holding the fields: one read per frame. */
	c->frame_size = (need + 7) & ~7ULL;
	c->frame_owner_interp_min = o->frame_owner_interp_min;
	c->executable_tag_mask = o->executable_tag_mask;
	c->code_version = o->code_version;
	c->max_frames = max_frames;
	c->max_walk = max_frames * PYPROF_WALK_FACTOR;
	c->window = WINDOW_BYTES;
	fill_snapshots(c, o);
	return 0;
}

int bpf_config__write_proc(struct bpf_sampler *s, pid_t pid, const struct pyprof_config *c)
{
	struct pyprof_proc v = {};
	__u32 key = (__u32)pid;

	if (c) {
		v.cfg = *c;
		v.configured = 1;
	}
	/* Another process: the program's one-comparison filter is off. */
	if (pid != s->pid) {
		s->skel->bss->only_tgid = 0;
		if (!s->other_pid)
			s->other_pid = pid;
		else if (s->other_pid != pid)
			s->many_pids = true;
	}
	if (bpf_map_update_elem(s->procs_fd, &key, &v, BPF_ANY))
		return errno == E2BIG ? -ENOSPC : -errno;
	/* After the write: the CPUs' copies of the entry are stale now. */
	__atomic_fetch_add(&s->skel->bss->procs_epoch, 1, __ATOMIC_SEQ_CST);
	return 0;
}

void bpf_config__offcpu(const struct bpf_sampler *s, struct pyprof_config *c)
{
	c->offcpu_walk_ns = bpf_lifecycle__off_cpu(s) ? OFFCPU_REUSE_NS : 0;
}

/* What a sample carries besides its frames: --opcodes' instruction byte,
 * exception mode's exception (and only such threads sampled); --native: the
 * entry frames the merge needs, sent and flagged. */
void bpf_config__entries(const struct bpf_sampler *s, struct pyprof_config *c,
			 const struct py_offsets *o)
{
	c->read_opcode = s->opcodes && o->code_adaptive;
	c->code_adaptive = o->code_adaptive;
	c->exc_mode = s->mode == SAMPLER_MODE_EXCEPTION;
	c->exc_current = o->tstate_exc_current;
	c->exc_info = o->tstate_exc_info;
	c->ob_type = o->ob_type;
	c->tp_flags = o->type_tp_flags;
	if (!s->native_stack)
		return;
	c->keep_entries = 1;
	c->owner_cstack = o->frame_owner_cstack;
	c->frame_is_entry = o->frame_is_entry < c->frame_size ? (__u32)o->frame_is_entry : 0;
}

/*
 * The GIL's and the collector's addresses into @c (left 0 while the target
 * has none yet, or for a version whose fields are unknown): the GIL's
 * holder is read at every sample in gil mode, the collector's flag at every
 * sample in all. Returns true when they are known.
 */
bool bpf_config__gil(struct bpf_sampler *s, struct pyproc *p, struct pyprof_config *c,
		     struct py_gil_gc *g)
{
	if (pyproc__gil_gc(p, g))
		return false;
	c->gil_holder = g->gil_holder;
	c->gil_locked = g->gil_locked;
	c->gc_collecting = g->gc_collecting_size == 4 ? g->gc_collecting : 0;
	c->gc_frame = g->gc_frame;
	c->read_gil = s->mode == SAMPLER_MODE_GIL;
	return true;
}

int bpf_sampler__add_process(struct bpf_sampler *s, struct pyproc *p, char *err, size_t errlen)
{
	struct pyprof_config c;
	struct py_gil_gc g;
	int ret;

	ret = bpf_config__fill(&c, p, s->max_frames, false, err, errlen);
	if (ret)
		return ret;
	bpf_config__entries(s, &c, pyproc__offsets(p));
	bpf_config__offcpu(s, &c);
	bpf_config__gil(s, p, &c, &g);
	/* A new generation: its code objects' snapshots are sent again (a
	 * process configured anew may have dropped those it had). */
	c.snap_gen = ++s->snap_gen;
	ret = bpf_config__write_proc(s, pyproc__pid(p), &c);
	if (ret)
		snprintf(err, errlen, "cannot add process %d to the BPF map: %s",
			 (int)pyproc__pid(p), strerror(-ret));
	return ret;
}

/* --async's fields of @a into process configuration @c. */
static void fill_async(struct pyprof_config *c, const struct sampler_async *a)
{
	uint64_t gen_read;

	c->async_running_task = a->running_task;
	c->task_awaited_by = a->task_awaited_by;
	c->task_awaited_by_is_set = a->task_awaited_by_is_set;
	c->task_is_task = a->task_is_task;
	c->task_coro = a->task_coro;
	c->set_used = a->set_used;
	c->set_mask = a->set_mask;
	c->set_table = a->set_table;
	c->task_name = a->task_name;
	c->type_flags = a->type_flags;
	c->coro_type = a->coro_type;
	c->asyncgen_type = a->asyncgen_type;
	c->gen_iframe = a->gen_iframe;
	c->gen_frame_state = a->gen_frame_state;
	c->frame_stackpointer = a->frame_stackpointer;
	c->awaited_slot = a->awaited_slot;
	c->state_yield_from = (__u8)a->state_yield_from;
	c->state_yield_from_locked = (__u8)a->state_yield_from_locked;
	c->state_cleared = (__u8)a->state_cleared;
	/* A switch-out is walked every time: one not walked would stand on
	 * the last tick's stack, whose tasks are not kept. */
	c->offcpu_walk_ns = 0;
	/* A coroutine's head and its frame's fields, read in one copy the
	 * program indexes within bounds; else not read (snapshots instead). */
	gen_read = (uint64_t)a->gen_iframe +
		   (c->frame_size > a->frame_stackpointer + 8 ? c->frame_size :
		    a->frame_stackpointer + 8);
	c->gen_read = a->gen_iframe && a->gen_iframe <= PYPROF_GEN_READ_MAX - PYPROF_FRAME_READ_MAX &&
		      a->gen_frame_state < a->gen_iframe &&
		      a->frame_stackpointer <= PYPROF_FRAME_READ_MAX - 8 &&
		      gen_read <= PYPROF_GEN_READ_MAX ? (__u32)gen_read : 0;
}

int bpf_sampler__set_async(struct bpf_sampler *s, pid_t pid, const struct sampler_async *a)
{
	struct pyprof_proc v;
	__u32 key = (__u32)pid;

	if (!s->skel->rodata->async_tasks)
		return -EINVAL;		/* the program was loaded without it */
	if (pid == s->pid) {
		fill_async(&s->main_cfg, a);
		return bpf_config__write_proc(s, pid, &s->main_cfg);
	}
	/* Another process: its configuration as written, with these. */
	if (bpf_map_lookup_elem(s->procs_fd, &key, &v))
		return -errno;
	if (!v.configured)
		return -ENOENT;
	fill_async(&v.cfg, a);
	return bpf_config__write_proc(s, pid, &v.cfg);
}

int bpf_sampler__track_process(struct bpf_sampler *s, pid_t pid)
{
	return bpf_config__write_proc(s, pid, NULL);
}

void bpf_sampler__forget_process(struct bpf_sampler *s, pid_t pid)
{
	__u32 key = (__u32)pid;

	if (pid != s->pid && !bpf_map_delete_elem(s->procs_fd, &key))
		__atomic_fetch_add(&s->skel->bss->procs_epoch, 1, __ATOMIC_SEQ_CST);
}
