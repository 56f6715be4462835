/* SPDX-License-Identifier: MIT */
/*
 * pyprof.h - what the BPF programs (pyprof.bpf.c) and their loader
 * (user/sampling/bpf/) share: the walk's configuration, the maps'
 * values and the ring-buffer records.
 *
 * Included by both sides, so plain __u64/__u32 only: no pointers, no
 * bitfields, no types that differ between the BPF target and x86-64.
 */
#ifndef PYPROF_PYPROF_H
#define PYPROF_PYPROF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "pyprof_events.h"	/* -e: several events, --filter */
#include "pyprof_counters.h"	/* the per-CPU counter map's indices */

/*
 * Capacity of one record. The default recursion limit is 1,000, and the
 * issue asks for whole stacks of at least 2,048 frames; the runtime limit
 * (pyprof_config.max_frames) may be anything up to this.
 */
#define PYPROF_MAX_FRAMES	4096
/* Largest frame prefix decoded per frame. */
#define PYPROF_FRAME_READ_MAX	128
/*
 * Frames of one thread sit contiguously in its data-stack chunks, a caller
 * just below its callee. The walk reads the data stack in windows of up to
 * config.window bytes (one bpf_probe_read_user: ~130 ns for 4 KB here,
 * against ~90 ns for one 80-byte frame) and decodes every frame inside. A
 * window starts no lower than its frame's page: the memory under a chunk
 * may be unmapped, and a read that faults costs ~750 ns. A power of two.
 */
#define PYPROF_WINDOW_MAX	8192
#define PYPROF_PAGE		4096
/* Distinct code objects whose co_version one sample remembers. */
#define PYPROF_VERSION_MEMO	64
/*
 * Frames visited per sample, Python and interpreter-owned, as a multiple of
 * max_frames: interpreter frames are skipped without spending the depth
 * budget, but a corrupt or cyclic chain must still end.
 */
#define PYPROF_WALK_FACTOR	4
/* Steps of the in-kernel thread-state lookup, at most (config.lookup_steps). */
#define PYPROF_LOOKUP_STEPS_MAX	4096

/* Same values as enum sample_status in user/sampling/sampler.h. */
enum pyprof_status {
	PYPROF_COMPLETE = 0,
	PYPROF_TRUNCATED = 1,	/* deeper than max_frames: innermost kept */
	PYPROF_NO_PYSTATE = 2,	/* no thread state known for this tid */
	PYPROF_READ_FAULT = 3,	/* a read of the target failed mid-walk */
	/* No thread state because the thread is young (started less than
	 * PYPROF_THREAD_YOUNG_NS ago, no state seen: starting, or already
	 * ending) or ending (its state was found before and is gone, or the
	 * kernel is ending it): time a thread-per-task program really
	 * spends, said as what it is. */
	PYPROF_THREAD_YOUNG = 4,
	PYPROF_THREAD_EXIT = 5,
	/* 3.11/3.12: the thread was entering an evaluation loop from C, in
	 * the few instructions where its C frame record is published but not
	 * yet filled in (neither its frame nor its link to the caller's
	 * record is set), and that record's stale content led nowhere sound:
	 * no stack to read at this instant, said as what it is. */
	PYPROF_EVAL_ENTRY = 6,
};

#define PYPROF_THREAD_YOUNG_NS	(20 * 1000000ULL)
/* A main thread with no state that has run less than this on a CPU (since
 * its fork, exec included) is an interpreter starting: PYPROF_THREAD_YOUNG. */
#define PYPROF_MAIN_START_CPU_NS	(100 * 1000000ULL)

/* Bit of the thread state's _status word set while the thread state is the
 * current one of its OS thread (3.12 to 3.15 alike: initialized, bound,
 * unbound, bound_gilstate, active). */
#define PYPROF_TSTATE_ACTIVE_BIT	4

/* pyprof_sample.flags */
enum {
	/* Truncated because the walk budget ran out, not the depth limit:
	 * the chain is longer than max_frames * PYPROF_WALK_FACTOR frames,
	 * which only a corrupt (cyclic) chain or a pathological stack does. */
	PYPROF_SF_WALK_BUDGET = 1 << 0,
	/*
	 * 3.11/3.12: the thread was entering an evaluation loop called from
	 * C (see PYPROF_EVAL_ENTRY), and the chain from its record's stale
	 * frame did not lead to the caller's frame, which the record's link
	 * (as plausible: older on the same stack) holds. The record is the
	 * caller's stack, walked from there: what ran the moment before.
	 */
	PYPROF_SF_FROM_CALLER = 1 << 1,
	/* The chain came back to a frame it had passed (a cycle): only a
	 * chain read mid-update or a corrupt target does that. */
	PYPROF_SF_CYCLE = 1 << 2,
	/*
	 * 3.15 frame cache (config.frame_cache != 0); see user/sampling/frame_cache.h
	 * for the protocol.
	 *
	 * SF_ANCHOR_READ: cache_frame and cache_seq hold the thread state's
	 * last_profiled_frame and last_profiled_frame_seq, read in the same
	 * stopped moment as the frames.
	 */
	PYPROF_SF_ANCHOR_READ = 1 << 8,
	/* The walk stopped at the anchor: the last frame of the record is
	 * the Python frame at cache_frame; its callers are not in the record. */
	PYPROF_SF_AT_ANCHOR = 1 << 9,
	/* The chain ended at tstate->base_frame, the last frame of the
	 * record: the record is the whole chain (a stack that may be cached). */
	PYPROF_SF_BASE = 1 << 10,
	/* The GIL was read: SF_GIL_HELD says whether this thread held it. */
	PYPROF_SF_GIL_KNOWN = 1 << 11,
	PYPROF_SF_GIL_HELD = 1 << 12,
	/* The thread was running a garbage collection. */
	PYPROF_SF_GC = 1 << 13,
	/* Taken as the thread left the CPU (off-CPU modes), not at a tick:
	 * its interval's length comes in a PYPROF_REC_SWITCH_IN record. */
	PYPROF_SF_SWITCH_OUT = 1 << 14,
	/* A switch-out within config.offcpu_walk_ns of the thread's last walk
	 * (a tick or a switch-out): not walked, no frames; the thread's last
	 * stack stands for it (userspace keeps it). */
	PYPROF_SF_REUSE = 1 << 15,
	/* --async: a struct pyprof_tasks came before this sample (same CPU):
	 * the running task of the thread and the tasks awaiting it. */
	PYPROF_SF_TASKS = 1 << 16,
};

/* pyprof_frame.flags */
enum {
	/* config.keep_entries: the frame begins an evaluation loop's run
	 * (3.11: its is_entry flag; 3.12+: an interpreter frame owned by the
	 * C stack, PYPROF_FF_INTERP too): the boundary --native merges at. */
	PYPROF_FF_ENTRY = 1 << 1,
	/*
	 * An interpreter-owned frame (entry frame, base frame): not a Python
	 * frame, but a link of the chain the 3.15 anchor moves along. Sent
	 * only when config.frame_cache is set; code and instr are 0.
	 */
	PYPROF_FF_INTERP = 1 << 0,
	/* The frame's code object was met for the first time (in this
	 * process, with this version) and its snapshot could not be taken
	 * (its memory not readable here: a page not present; or the ring
	 * full): userspace reads the object instead, and on 3.11 trusts what
	 * it finds there over the identity the frame carries. */
	PYPROF_FF_NO_SNAPSHOT = 1 << 2,
};

/*
 * Everything the walk needs to know about the target. Filled by the loader
 * from the flat offsets table (user/target/py_offsets.h) and written at run
 * time into each process's procs entry (struct pyprof_proc); the BPF
 * program holds no CPython offset of its own. Offsets are byte offsets.
 */
struct pyprof_config {
	/*
	 * The thread state is read in one block of tstate_block_len bytes at
	 * tstate_block; the *_rel fields are offsets in that block (~0u:
	 * absent). 3.13+: current_frame_rel is the current frame; 3.11/3.12
	 * (tstate_cframe != 0): cframe_rel is the C frame record, and its
	 * current frame is at cframe_current_frame in it. thread_id_rel is
	 * pthread_self() of the thread the state belongs to (its check at
	 * every use), status_rel the _status word (3.12+; subinterpreters).
	 */
	__u64 tstate_block;
	__u32 tstate_block_len;		/* <= PYPROF_TSTATE_BLOCK */
	__u32 current_frame_rel;
	__u32 cframe_rel;
	__u32 thread_id_rel;
	__u32 status_rel;
	__u32 tstate_cframe;		/* non-zero: 3.11/3.12 */
	__u64 cframe_current_frame;
	__u64 cframe_previous;		/* the caller's C frame record */
	__u64 root_cframe;		/* the state's own record (offset); 0 unknown */
	/* 3.15 frame cache (frame_cache != 0), in the same block. */
	__u32 base_frame_rel;
	__u32 anchor_rel;
	__u32 anchor_seq_rel;
	__u32 frame_cache;

	/*
	 * Finding a thread's state in the kernel: the interpreters' list head
	 * (an absolute address: _PyRuntime + interpreters.head), each
	 * interpreter's next and threads.head, each thread state's next
	 * (inside the block). lookup_steps bounds the walk (thread states and
	 * interpreters visited, at most PYPROF_LOOKUP_STEPS_MAX); 0 disables
	 * the lookup.
	 */
	__u64 interpreters_head;
	__u64 interp_next;
	__u64 interp_threads_head;
	__u32 next_rel;
	__u32 lookup_steps;
	/* A thread state's thread_id (pthread_self()) is the thread pointer
	 * less this: 0 on x86-64, glibc's sizeof(struct pthread) on AArch64. */
	__u64 thread_id_below_tp;
	/* A thread with no thread state is looked up again this long after a
	 * lookup that found none. */
	__u64 lookup_retry_ns;

	__u64 frame_previous;
	__u64 frame_executable;		/* f_code before 3.13 */
	__u64 frame_instr_ptr;		/* prev_instr before 3.13 */
	__u64 frame_owner;		/* one byte */
	/* Bytes read per frame: covers every field above, at most
	 * PYPROF_FRAME_READ_MAX. */
	__u64 frame_size;
	/* Owner values >= this are interpreter frames; 0: there are none. */
	__u64 frame_owner_interp_min;
	/* Bits cleared from f_executable (a tagged _PyStackRef since 3.14). */
	__u64 executable_tag_mask;
	/* co_version in the code object (4 bytes); 0: not read (3.11). */
	__u64 code_version;

	/*
	 * Code-object snapshots (snapshots != 0): at the first sighting of a
	 * (code object, co_version) the program copies what naming it takes
	 * (struct pyprof_code), so that code freed before userspace reads it
	 * (module bodies, eval/exec, templates) is named all the same.
	 * code_size: bytes of the code object copied (its fields up to
	 * _co_firsttraceable), <= PYPROF_CODE_OBJ_MAX.
	 */
	__u32 snapshots;
	__u32 code_size;
	/* 3.11 (no co_version): co_filename, co_name, co_qualname and
	 * co_linetable at this offset, hashed with the heads of their
	 * contents into the code object's identity (codes.bpf.h ident311()). */
	__u64 code_ident;
	__u64 code_qualname;
	__u64 code_filename;
	__u64 code_linetable;
	/* str objects (compact, PEP 393): state word, length, where the
	 * payload starts (ascii and non-ascii compact strings) */
	__u64 unicode_state;
	__u64 unicode_length;
	__u64 unicode_ascii_data;
	__u64 unicode_compact_data;
	/* bytes objects: ob_size and the payload */
	__u64 bytes_size;
	__u64 bytes_sval;

	/* Data-stack window in bytes, above frame_size and at most
	 * PYPROF_WINDOW_MAX; 0 reads each frame on its own. */
	__u32 window;

	__u32 max_frames;		/* <= PYPROF_MAX_FRAMES */
	__u32 max_walk;			/* frames visited, Python or not */

	/*
	 * GIL and GC (absolute addresses in the target; 0: unknown). With
	 * read_gil, every sample reads the GIL's holder and locked word and
	 * says whether the sampled thread held it (PYPROF_SF_GIL_*). A sample
	 * taken while gc_collecting is non-zero is the collector's when its
	 * chain holds gc_frame (3.15), else when the thread holds the GIL.
	 */
	__u64 gil_holder;		/* PyThreadState * */
	__u64 gil_locked;		/* int */
	__u64 gc_collecting;		/* int */
	__u64 gc_frame;			/* _PyInterpreterFrame *, 3.15 */
	__u32 read_gil;
	/*
	 * --native: interpreter frames are sent even without the frame cache,
	 * and each evaluation loop's first frame is flagged PYPROF_FF_ENTRY:
	 * owned by the C stack (frame_owner == owner_cstack, 3.12+), or with
	 * its is_entry byte set (at frame_is_entry when non-zero, 3.11).
	 */
	__u32 keep_entries;
	__u32 owner_cstack;
	__u32 frame_is_entry;
	/* Off-CPU modes: a thread leaving the CPU within this many ns of its
	 * last walk is not walked again (PYPROF_SF_REUSE); 0: always walked.
	 * What a thread handing the GIL over thousands of times a second
	 * costs the scheduler's critical path. */
	__u64 offcpu_walk_ns;

	/*
	 * --async (3.14+, from the .AsyncioDebug table): every sample of a
	 * thread running a task also sends that task and the chain of tasks
	 * awaiting it (struct pyprof_tasks). running_task: offset in the
	 * thread state of its running task (0: off). Per task object: what
	 * awaits it (NULL, a task or future, or a set of them), the byte
	 * saying that is a set, the byte saying the object is a Task, its
	 * coroutine. Sets: used, mask, table (entries: key, hash).
	 */
	__u64 async_running_task;
	__u64 task_awaited_by;
	__u64 task_awaited_by_is_set;
	__u64 task_is_task;
	__u64 task_coro;
	__u64 set_used;
	__u64 set_mask;
	__u64 set_table;
	/* The task's name object (a str, or an int: "Task-N"), and where a
	 * type object keeps tp_flags. */
	__u64 task_name;
	__u64 type_flags;
	/*
	 * --async: each awaiting task's suspended frames, read at the sample
	 * (struct pyprof_await_frames). Its coroutine (a generator-like object:
	 * a coroutine or an async generator, of type coro_type or
	 * asyncgen_type) holds its frame at gen_iframe and its state at
	 * gen_frame_state; suspended in a yield-from (state_yield_from,
	 * state_yield_from_locked), it awaits the object at its frame's
	 * stackpointer[-awaited_slot]. gen_read: bytes of a coroutine read, up
	 * to its frame's last field (0: the frames are not read).
	 */
	__u64 coro_type;
	__u64 asyncgen_type;
	__u32 gen_iframe;
	__u32 gen_frame_state;
	__u32 frame_stackpointer;
	__u32 awaited_slot;
	__u32 gen_read;
	__u8 state_yield_from;
	__u8 state_yield_from_locked;
	__u8 state_cleared;
	__u8 pad_async;
	/* Changed by each configuration of a process (a -a process opened
	 * again after its image was evicted, with its code snapshots): the
	 * tables of code objects sent forget what was sent before it. */
	__u32 snap_gen;
	/*
	 * --opcodes: each sample reads the byte its innermost Python frame's
	 * instruction pointer points at (pyprof_sample.opcode), when that
	 * pointer lies at or after the code object's first instruction, at
	 * code_adaptive in the object (3.11/3.12's prev_instr is one before
	 * it as a frame starts).
	 */
	__u32 read_opcode;
	__u64 code_adaptive;
	/*
	 * --mode exception (exc_mode != 0): only threads with an exception
	 * in flight (at exc_current in the thread state) or being handled
	 * (the exception stack from the item at exc_info, each item's
	 * exc_value then previous_item, at most PYPROF_EXC_CHAIN) are sampled,
	 * an exception being an object whose type (at ob_type) has
	 * PYPROF_TPFLAGS_BASE_EXC in its flags (at tp_flags).
	 */
	__u32 exc_mode;
	__u32 pad_exc;
	__u64 exc_current;
	__u64 exc_info;
	__u64 ob_type;
	__u64 tp_flags;
};

/* Processes followed at once at most (the procs map). */
#define PYPROF_MAX_PROCS	4096

/*
 * Value of the procs map, keyed by host tgid: a process followed, whose
 * ticks are kept once it is configured. Written by the loader (configured:
 * cfg describes its interpreter), made unconfigured by the program for a
 * process -a meets on a CPU, copied by the fork tracepoint into followed
 * children, unconfigured by the exec tracepoint.
 */
struct pyprof_proc {
	struct pyprof_config cfg;
	__u64 mm;			/* its address space at its first tick (program) */
	__u32 configured;
	__u32 pad;
};

/* A process event (struct pyprof_proc_event.event). */
enum {
	PYPROF_PROC_FORK = 1,		/* pid is a new child of ppid, followed */
	PYPROF_PROC_EXEC = 2,		/* pid exec'd: unconfigured until told */
	PYPROF_PROC_EXIT = 3,		/* pid's leader exited */
	/* -a: pid was seen on a CPU for the first time; it has an entry now,
	 * unconfigured (its ticks dropped) until the loader says otherwise. */
	PYPROF_PROC_SEEN = 4,
};

struct pyprof_proc_event {
	__u32 kind;			/* PYPROF_REC_PROC */
	__u32 event;
	__u32 pid;
	__u32 ppid;
	__u64 ts_ns;
};

/* Largest thread-state block read at once (config.tstate_block_len). */
#define PYPROF_TSTATE_BLOCK	256
#define PYPROF_REL_NONE		0xffffffffu
/* Bytes of a 3.11/3.12 C frame record read at once (current frame and
 * previous record in it). */
#define PYPROF_CFRAME_READ	32
/* How far above a C frame record its caller's may be: a thread's stack. */
#define PYPROF_CSTACK_SPAN	(64ULL << 20)
#define PYPROF_LOOKUP_EAGER	8
#define PYPROF_INACTIVE_RETRY_NS	(200 * 1000000ULL)

/* Value of the tid -> thread map, keyed by host tid (__u32). */
struct pyprof_thread {
	/* PyThreadState address; 0: unknown (looked up by the program at
	 * the thread's next sample, or after lookup_retry_ns when its last
	 * lookup found none). Written by the loader's refresh and by the
	 * program's own lookup; checked at every use against the thread's
	 * pthread_self(), so a reused tid never lends an old state. */
	__u64 tstate;
	/* Bumped by every sample of the thread: tells the loader that a
	 * thread it opened no event for is sampled through inheritance. */
	__u64 samples;
	/* Frame cache: non-zero while userspace holds no cached stack it
	 * could splice onto this thread's anchor: the walk does not stop at
	 * the anchor, it goes down to the base frame. Set by userspace. */
	__u32 walk_whole;
	/* Thread states of this thread found by the last lookup (0: no
	 * lookup yet): more than one when it runs in several interpreters
	 * (subinterpreters). A remembered state that is not active (the
	 * thread switched interpreters, or released the GIL) is looked up
	 * again at every sample while this is not 1, else after
	 * config.lookup_retry_ns where the process has several interpreters,
	 * after PYPROF_INACTIVE_RETRY_NS where it had one (to see new ones). */
	__u32 nstates;
	/* When the last lookup ran (bpf_ktime_get_ns), and how many in a
	 * row found nothing: the first PYPROF_LOOKUP_EAGER misses are
	 * retried at the next sample (a new thread's state is bound moments
	 * after it starts), later ones after config.lookup_retry_ns (a C
	 * thread of the target). */
	__u64 lookup_ns;
	__u32 misses;
	/* A thread state was found for this thread once: if none is found
	 * now, the thread is past its Python life (PYPROF_THREAD_EXIT). */
	__u32 had_state;
	/* The thread's start time (task start_time), when the program made
	 * or met the entry: another value means the tid was reused. */
	__u64 born;
	/* The last lookup walked this many interpreters' lists. */
	__u32 interps;
	__u32 pad;
	/* Frame cache: the anchor and sequence the last sample saw (kept
	 * by the program); last_anchor is 0 unless that sample met the
	 * anchor in a chain userspace could cache. A sample stops at the
	 * anchor only when both are unchanged since: any change (a move of
	 * the interpreter's, a write by anyone) walks whole once. */
	__u64 last_anchor;
	__u64 last_seq;
	/* When the thread's stack was last walked (a tick or a switch-out),
	 * its innermost frame and that frame's instruction then. */
	__u64 last_walk_ns;
	__u64 last_fp;
	__u64 last_instr;
	/* The head of the interpreters' list the last lookup met: while it
	 * is unchanged no interpreter was made since, so a thread with one
	 * state has no other to find (one read instead of a lookup). */
	__u64 interp_head;
};

/* One frame, innermost first. Same layout as struct py_rawframe
 * (user/target/pyproc.h). */
struct pyprof_frame {
	__u64 frame;			/* _PyInterpreterFrame address */
	__u64 code;			/* code object address, tag cleared */
	__u64 instr;			/* instr_ptr (prev_instr before 3.13) */
	/* co_version of the code object (3.12+; 0 when unknown): with the
	 * address it identifies the object even after its address is reused. */
	__u32 code_version;
	__u32 flags;			/* PYPROF_FF_* */
};

/* The first word of every ring-buffer record. */
enum pyprof_rec_kind {
	PYPROF_REC_SAMPLE = 1,		/* struct pyprof_sample */
	PYPROF_REC_CODE = 2,		/* struct pyprof_code */
	PYPROF_REC_PROC = 3,		/* struct pyprof_proc_event */
	PYPROF_REC_SWITCH = 4,		/* struct pyprof_switch */
	PYPROF_REC_SWITCH_IN = 5,	/* struct pyprof_switch_in */
	/* --kernel: a tick's kernel stack, before its sample (struct
	 * pyprof_switch, no system call). */
	PYPROF_REC_KSTACK = 6,
	/* --native: a tick's user registers and the top of its user stack,
	 * before its sample (struct pyprof_ustack). */
	PYPROF_REC_USTACK = 7,
	/* --async: a sample's running task and its awaiters, before the
	 * sample (struct pyprof_tasks). */
	PYPROF_REC_TASKS = 8,
	/* --async: the awaiting tasks' suspended frames, before the sample's
	 * struct pyprof_tasks (struct pyprof_await_frames). */
	PYPROF_REC_AWAIT_FRAMES = 9,
};

/* Tasks of one chain at most (the running one, its awaiter, ...): CPython's
 * own MAX_TASK_WAITER_CHAIN_DEPTH. */
#define PYPROF_MAX_TASKS	256
/* Suspended frames of one sample's awaiting tasks at most, and coroutines
 * followed from one task (a coroutine awaiting a coroutine ...). */
#define PYPROF_MAX_AWAIT_FRAMES	1024
#define PYPROF_MAX_CORO_DEPTH	64
/* Bytes of a coroutine object read at most (its head and its frame's). */
#define PYPROF_GEN_READ_MAX	384
/* Entries of an awaited_by set scanned for its lowest awaiter. */
#define PYPROF_SET_SCAN		128

/* pyprof_tasks.flags */
enum {
	PYPROF_TF_CUT = 1 << 0,		/* longer than PYPROF_MAX_TASKS */
	PYPROF_TF_CYCLE = 1 << 1,	/* a task met again: not followed */
	PYPROF_TF_FAULT = 1 << 2,	/* a read failed: the chain ends there */
	PYPROF_TF_SET_CUT = 1 << 3,	/* a set larger than PYPROF_SET_SCAN: the
					 * lowest of the entries scanned */
	PYPROF_TF_FUTURE = 1 << 4,	/* the last awaits a future, not a task */
	PYPROF_TF_FRAMES_CUT = 1 << 5,	/* the awaiters' frames past
					 * PYPROF_MAX_AWAIT_FRAMES: the tasks after
					 * the cut have none read */
};

/* pyprof_task_link.fflags: how its suspended frames were read. */
enum {
	PYPROF_LF_READ = 1 << 0,	/* read at the sample (else: not tried) */
	PYPROF_LF_CUT = 1 << 1,		/* more than PYPROF_MAX_CORO_DEPTH, or no
					 * room left: the outermost are there */
	PYPROF_LF_FAULT = 1 << 2,	/* a read failed: the chain ends there */
};

/* Bytes of a task's name object copied (a str's header and payload, or an
 * int's): the name of a task that ends before userspace could read it. */
#define PYPROF_TASK_NAME_MAX	96

struct pyprof_task_link {
	__u64 task;			/* the task object (its id) */
	__u64 coro;			/* its coroutine */
	/* The generator whose frame is the task's outermost: its coroutine,
	 * or the async generator an anext()/aclose() awaitable drives; 0:
	 * unknown (the frames are not read). */
	__u64 gen;
	__u32 nawaiters;		/* tasks or futures awaiting it */
	__u32 name_len;			/* bytes in name; 0: not read */
	__u64 name_type_flags;		/* tp_flags of the name's type */
	/* Its suspended frames (awaiters only), outermost first: frames
	 * [frame_first, frame_first + nframes) of the struct
	 * pyprof_await_frames sent before this record. */
	__u16 frame_first;
	__u16 nframes;
	__u32 fflags;			/* PYPROF_LF_* */
	__u8 name[PYPROF_TASK_NAME_MAX];	/* the name object's first bytes */
};

struct pyprof_await_frames {
	__u32 kind;			/* PYPROF_REC_AWAIT_FRAMES */
	__u32 tid;			/* host tid of the sample it comes before */
	__u32 nframes;
	__u32 pad;
	struct pyprof_frame frames[PYPROF_MAX_AWAIT_FRAMES];
};

#define PYPROF_AWAIT_FRAMES_SIZE(n) (__builtin_offsetof(struct pyprof_await_frames, frames) + \
				     (unsigned long)(n) * sizeof(struct pyprof_frame))

struct pyprof_tasks {
	__u32 kind;			/* PYPROF_REC_TASKS */
	__u32 tid;			/* host tid of the sample it comes before */
	__u32 ntasks;			/* the running task first, then its awaiters */
	__u32 flags;			/* PYPROF_TF_* */
	struct pyprof_task_link tasks[PYPROF_MAX_TASKS];
};

#define PYPROF_TASKS_SIZE(n)	(__builtin_offsetof(struct pyprof_tasks, tasks) + \
				 (unsigned long)(n) * sizeof(struct pyprof_task_link))

/*
 * Off-CPU modes. A thread of a target leaving the CPU blocked (or
 * preempted) is sampled (PYPROF_SF_SWITCH_OUT), and when blocked, a
 * struct pyprof_switch follows its sample: the system call in progress and
 * the kernel stack. When it runs again, a struct pyprof_switch_in gives
 * the interval: left at off_ns, woken at wake_ns (== off_ns when it was
 * preempted, still runnable; 0 when no wake-up was seen), back at in_ns.
 */
#define PYPROF_KSTACK_MAX	32

struct pyprof_switch {
	__u32 kind;			/* PYPROF_REC_SWITCH */
	__u32 tid;
	__u32 pid;
	__u32 state;			/* prev_state */
	__s64 syscall_nr;		/* -1: not in a system call */
	__u64 syscall_arg0;
	__u32 nkstack;
	__u32 pad;
	__u64 kstack[PYPROF_KSTACK_MAX];	/* innermost first */
};

struct pyprof_switch_in {
	__u32 kind;			/* PYPROF_REC_SWITCH_IN */
	__u32 tid;
	__u32 pid;
	__u32 pad;
	__u64 off_ns;
	__u64 wake_ns;
	__u64 in_ns;
};

/*
 * --native: the user registers of a tick, in the architecture's DWARF order
 * (x86-64: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, rip; AArch64:
 * x0-x30, sp, pc), and the top of its user stack, len bytes from the stack
 * pointer (cut at the first unreadable page), starting the red zone below
 * it (x86-64's 128 bytes; AArch64 has none).
 */
#if defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define PYPROF_NREGS		33
#define PYPROF_USTACK_REDZONE	0
#else
#define PYPROF_NREGS		17
#define PYPROF_USTACK_REDZONE	128
#endif
#define PYPROF_USTACK_MAX	32768

struct pyprof_ustack {
	__u32 kind;			/* PYPROF_REC_USTACK */
	__u32 tid;
	__u32 pid;
	__u32 len;
	__u64 regs[PYPROF_NREGS];
	__u8 stack[PYPROF_USTACK_MAX];
};

/* Value of the offcpu map (by host tid): a thread off the CPU. Written by
 * the program, and by the loader at start for threads already off it. */
struct pyprof_offcpu {
	__u64 off_ns;			/* 0: on a CPU (or unknown) */
	__u64 wake_ns;
	__u64 exec_ns;			/* its se.sum_exec_runtime then */
};

/*
 * One sample. Only the header and the first nframes frames are submitted:
 * a record is PYPROF_SAMPLE_SIZE(nframes) bytes long. nframes counts the
 * PYPROF_FF_INTERP entries too; max_frames limits the Python frames.
 */
struct pyprof_sample {
	__u32 kind;			/* PYPROF_REC_SAMPLE */
	/* config.read_opcode: PYPROF_OP_KNOWN | the innermost Python frame's
	 * instruction byte; 0: not read. */
	__u32 opcode;
	__u64 ts_ns;			/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 tstate;			/* 0 when status is PYPROF_NO_PYSTATE */
	__u32 pid;			/* host tgid */
	__u32 tid;			/* host tid */
	__u32 cpu;
	__u32 status;			/* enum pyprof_status */
	__u32 nframes;
	__u32 flags;			/* PYPROF_SF_* */
	/* With PYPROF_SF_ANCHOR_READ: the thread's anchor and its sequence
	 * (tstate->last_profiled_frame, ->last_profiled_frame_seq). */
	__u64 cache_frame;
	__u64 cache_seq;
	/* With PYPROF_SF_AT_ANCHOR: the anchor frame's caller, as read now
	 * (a check userspace makes against its cached stack). */
	__u64 cache_prev;
	/* config.exc_mode: the type object of the thread's exception. */
	__u64 exc_type;
	/* A tick's weight in its event's units: the perf event's sample
	 * period (cpu-clock: ns; page-faults: faults), a tracepoint's events;
	 * 0 for a switch-out. */
	__u64 period;
	struct pyprof_frame frames[PYPROF_MAX_FRAMES];
};

#define PYPROF_OP_KNOWN		(1u << 16)
/* The exception stack's items walked, at most (CPython: to the chain's end;
 * 40 nested generators are 41 items): far above any real program's. */
#define PYPROF_EXC_CHAIN	4096
/* exc_type when the chain went on past PYPROF_EXC_CHAIN items without an
 * exception: said [exception-chain-cut], never "no exception". */
#define PYPROF_EXC_CHAIN_CUT	1ULL
#define PYPROF_TPFLAGS_BASE_EXC	(1ULL << 30)

#define PYPROF_SAMPLE_HDR_SIZE	__builtin_offsetof(struct pyprof_sample, frames)
#define PYPROF_SAMPLE_SIZE(n)	(PYPROF_SAMPLE_HDR_SIZE + \
				 (unsigned long)(n) * sizeof(struct pyprof_frame))

/*
 * A code object's snapshot, sent before the first sample that holds it
 * (same CPU, so the ring keeps the order). Bounded copies; a cut or a read
 * that faulted is flagged, and userspace then reads what is missing from
 * the target if the object is still alive.
 */
#define PYPROF_CODE_OBJ_MAX	256	/* code object prefix */
#define PYPROF_CODE_QUAL_MAX	512	/* co_qualname: str object, header included */
#define PYPROF_CODE_FILE_MAX	1024	/* co_filename: str object, header included */
#define PYPROF_CODE_LT_MAX	32768	/* co_linetable payload (whole for all but one
					 * of 3.14 stdlib's 630 module bodies) */
/* Per-CPU table of code objects already sent (a direct-mapped cache in
 * front of the shared one), a power of two. */
#define PYPROF_SEEN_L1		1024
#define PYPROF_SEEN_L2		65536

/* pyprof_code.flags */
enum {
	PYPROF_CF_QUAL_CUT = 1 << 0,	/* qualname longer than copied (or not compact) */
	PYPROF_CF_FILE_CUT = 1 << 1,
	PYPROF_CF_LT_CUT = 1 << 2,	/* linetable longer than copied */
	PYPROF_CF_QUAL_FAULT = 1 << 3,	/* a read faulted: nothing copied */
	PYPROF_CF_FILE_FAULT = 1 << 4,
	PYPROF_CF_LT_FAULT = 1 << 5,
};

struct pyprof_code {
	__u32 kind;			/* PYPROF_REC_CODE */
	__u32 flags;			/* PYPROF_CF_* */
	__u64 code;			/* address */
	__u32 version;			/* co_version (0 on 3.11) */
	__u32 pid;
	__u32 obj_len;			/* bytes in obj */
	__u32 qual_len;			/* bytes in qual (header and payload) */
	__u32 file_len;
	__u32 lt_len;			/* bytes in lt */
	__u64 lt_size;			/* the linetable's ob_size */
	__u8 obj[PYPROF_CODE_OBJ_MAX];
	__u8 qual[PYPROF_CODE_QUAL_MAX];
	__u8 file[PYPROF_CODE_FILE_MAX];
	__u8 lt[PYPROF_CODE_LT_MAX];
};

#define PYPROF_CODE_HDR_SIZE	__builtin_offsetof(struct pyprof_code, lt)
#define PYPROF_CODE_SIZE(n)	(PYPROF_CODE_HDR_SIZE + (unsigned long)(n))

/*
 * 3.11's identity of a code object (it has no co_version), computed alike
 * by the program at a sighting and by userspace to check what an address
 * holds: from @q, the four pointers from co_filename (co_filename, co_name,
 * co_qualname, co_linetable); @qs and @fs, 48 bytes of the qualname's and
 * filename's str from its length (length, hash, state, wstr, then a compact
 * ASCII string's first characters); @ls, 32 bytes of the table's bytes from
 * its size (size, hash, first bytes). A read that faulted is zeros. Only
 * what does not change while the object lives: not the cached hashes (-1
 * until first asked for), the interned bits of state (its low 2), nor
 * wstr. Never 0.
 */
static inline __attribute__((always_inline)) __u64 pyprof_mix64(__u64 h, __u64 x)
{
	h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static inline __attribute__((always_inline)) __u32
pyprof_ident311(const __u64 *q, const __u64 *qs, const __u64 *fs, const __u64 *ls)
{
	__u64 h = 0;
	int i;

	for (i = 0; i < 4; i++)
		h = pyprof_mix64(h, q[i]);
	h = pyprof_mix64(pyprof_mix64(h, qs[0]), fs[0]);
	h = pyprof_mix64(pyprof_mix64(h, qs[2] & ~3ULL), fs[2] & ~3ULL);
	for (i = 4; i < 6; i++)
		h = pyprof_mix64(pyprof_mix64(h, qs[i]), fs[i]);
	h = pyprof_mix64(h, ls[0]);
	for (i = 2; i < 4; i++)
		h = pyprof_mix64(h, ls[i]);
	return (__u32)(h ^ (h >> 32)) | 1;
}

#endif
