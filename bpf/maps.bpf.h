/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * maps.bpf.h - what every part of pyprof.bpf.c shares: the loader's
 * settings, the globals it reads and writes, the maps, and the per-CPU
 * scratch space a sample is built in. Included by the BPF side only.
 */
#ifndef PYPROF_MAPS_BPF_H
#define PYPROF_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "pyprof.h"

#ifndef EEXIST
#define EEXIST 17
#endif

#define PF_EXITING 0x00000004	/* include/linux/sched.h */

/* Set by the loader before load: follow the targets' children. */
const volatile __u32 follow_children = 0;
/* -a: every process met on a CPU is announced to the loader once (but the
 * loader's own), which configures the Pythons among them. */
const volatile __u32 all_procs = 0;
const volatile __u32 own_tgid = 0;
/* What an announced process's entry starts as: unconfigured. */
struct pyprof_proc unseen_proc;
/* Set by the loader before load (--kernel): a tick interrupting the kernel
 * sends its kernel stack (PYPROF_REC_KSTACK) before its sample. */
const volatile __u32 kernel_stacks = 0;
/* Set by the loader before load (--native): bytes of user stack a tick
 * copies (PYPROF_REC_USTACK), at most PYPROF_USTACK_MAX; 0: none. */
const volatile __u32 native_stack = 0;
/* Set by the loader before load (--async): samples read the running task
 * and its awaiters. Without it that code is dead at load, and the verifier
 * does not walk it (half the instructions it processed were the awaiter
 * set's scan). */
const volatile __u32 async_tasks = 0;
/* Set by the loader before load (-e SUBSYS:NAME -c N): a tracepoint's
 * program samples one event in this many on each CPU (its hits are not
 * perf's to count: the program runs before perf's sampling). */
const volatile __u32 tp_period = 1;
/* Set by the loader before load: several -e events at once, each perf
 * event's and tracepoint's link carrying its index as attach cookie. */
const volatile __u32 multi_event = 0;
/* Set by the loader before load: --filter's compiled expression (pyprof.h). */
const volatile struct pyprof_filter tp_filter = {};

/*
 * The only process sampled, while there is exactly one and none followed
 * (set by the loader; 0 otherwise): other tasks' ticks (per-CPU events) are
 * then dropped after one comparison, before the procs map is looked at.
 */
__u32 only_tgid = 0;

/*
 * Bumped by every change of the procs map that a CPU's copy could hold
 * (the loader's writes and deletes, the fork and exec tracepoints'; the
 * first tick's note of an address space needs none: a copy without one is
 * looked up again): a CPU's copy of an entry is current while it is
 * unchanged, and a tick of the process that CPU last
 * sampled looks nothing up (measured with 32 threads at 10 kHz: 80-100 ns
 * less before the thread lookup, of ~1.7 us a sample; the whole sample's
 * gain is within this machine's noise).
 */
__u64 procs_epoch = 0;

/* Set with PYPROF_CNT_EXECED: the loader checks it in place (the mmapped
 * .bss) ten times a second, where reading the per-CPU counter costs a
 * syscall. */
__u32 execed_seen = 0;

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))

/*
 * The walk in progress. It lives in the scratch map, not on the stack: the
 * verifier tracks stack values across bpf_loop iterations, refining them at
 * every comparison, and would explore the callback without converging;
 * map memory it does not track.
 */
struct walk {
	__u64 fp;		/* next frame to visit; 0: chain ended */
	__u64 last;		/* last frame visited */
	__u64 anchor;		/* stop at this Python frame; 0: never */
	__u64 wbase;		/* the window holds [wbase, wbase + wlen) */
	__u32 wlen;
	__u32 npy;		/* Python frames recorded (entries: s.nframes) */
	__u32 status;
	__u32 flags;		/* PYPROF_SF_AT_ANCHOR */
	__u32 gen;
	__u32 seen;		/* the thread's anchor met as a Python frame */
	__u64 seek;		/* the thread's anchor (stopped at or not) */
	/* 3.11/3.12: the caller's frame (the previous C frame record's
	 * current frame) that a sound chain passes; 0: none to check. */
	__u64 must;
	__u32 met;		/* @must was visited */
	/* Cycle check (Brent): @mark is compared with every frame and moved
	 * to the current one after @lap steps, @lap doubling each time. */
	__u32 steps;
	__u32 lap;
	__u32 cycle;
	__u64 mark;
};

/* The lookup in progress (in the scratch map, like the walk). */
struct lookup {
	__u64 want;		/* pthread_self() of the sampled thread */
	__u64 interp;		/* interpreter whose list is walked; 0: none yet */
	__u64 ts;		/* next thread state to visit; 0: next interpreter */
	__u64 first;		/* first match */
	__u64 active;		/* a match whose status says active */
	__u64 head;		/* the interpreters' list head read */
	__u32 nfound;
	__u32 started;		/* the interpreters' head was read */
	__u32 ninterps;		/* interpreters whose list was walked */
	__u32 pad;
};

/* A code object already sent, as the per-CPU table remembers it. */
struct seen {
	__u64 code;
	__u32 version;			/* note_code()'s tag: identity, snap_gen */
	__u32 tgid;			/* 0: empty; a forked child has its own */
};

/* Key of the shared table of code objects sent: an address in a process. */
struct code_key {
	__u64 code;
	__u32 tgid;
	__u32 pad;
};

struct memo {
	__u64 code;
	__u32 version;
	__u32 gen;			/* valid when it is the sample's */
	__u32 ident;			/* see code_version() */
	__u32 unsent;			/* its snapshot could not be sent */
};

/* What ident311() reads of a code object: its name, qualname, filename and
 * line table pointers, then the heads of those objects. */
struct ident_reads {
	__u64 q[4], qs[6], fs[6], ls[4];
};

/* What one read of a thread state gives. */
struct tstate_view {
	__u64 fp;		/* innermost frame; 0: none */
	__u64 caller;		/* 3.11/3.12: the previous C frame record's frame */
	bool caller_ok;		/* that record is older on the same stack */
	__u64 base;		/* 3.15: base frame */
	__u64 thread_id;	/* pthread_self() of its thread */
	bool active;		/* its thread's current state (false when unknown) */
	bool unfilled;		/* 3.11/3.12: an evaluation loop's record, no frame yet */
};

/*
 * Working space for one sample. A record of PYPROF_MAX_FRAMES frames is far
 * beyond the 512-byte BPF stack and beyond the 32 KB a per-CPU map value may
 * hold, so this is a plain array with one element per possible CPU, indexed
 * by bpf_get_smp_processor_id(). An element has one user at a time: the
 * tick's program runs in the cpu-clock timer's interrupt and does not nest
 * (the kernel's bpf_prog_active guard), and the switch's runs with
 * interrupts off, so neither interrupts the other on a CPU.
 */
struct scratch {
	/* The data-stack window, with room for a frame prefix beyond its
	 * last byte so that a masked offset is always in bounds. */
	__u8 win[PYPROF_WINDOW_MAX + PYPROF_FRAME_READ_MAX];
	__u8 tsb[PYPROF_TSTATE_BLOCK];	/* thread-state block (3.15) */
	/* co_version by code object, for this sample only: live frames
	 * hold their code objects, so no address is reused while the
	 * sampled thread is stopped. */
	struct memo memo[PYPROF_VERSION_MEMO];
	__u32 gen;			/* samples taken on this CPU */
	__u32 tp_hits[PYPROF_MAX_EVENTS];	/* each tracepoint's hits of the target, tp_period's count */
	/* Set while a sample is taken on this CPU: a program that
	 * interrupts another (a tick's hrtimer or NMI inside a tracepoint's
	 * hit) would overwrite the walk under it. */
	__u32 busy;
	/* The sampled process's configured entry, copied (its tgid and
	 * procs_epoch then say which): its configuration and address space. */
	struct pyprof_config cfg;
	__u32 cfg_tgid;
	__u32 pad2;
	__u64 cfg_epoch;
	__u64 cfg_mm;
	struct walk w;
	struct lookup l;
	struct seen seen[PYPROF_SEEN_L1];
	struct pyprof_code code;
	struct pyprof_tasks tk;
	__u64 task_next;		/* the next task of the chain being read */
	/* Brent's cycle check of the task chain: a task saved at each power
	 * of two of steps; meeting it again is a cycle. */
	__u64 task_saved;
	__u32 task_power, task_lam;
	/* The awaiters' frames being read: the task, the coroutine next, how
	 * deep in its chain, whether the task's frames are open. */
	struct pyprof_await_frames af;
	__u64 aw_gen;
	__u32 aw_task, aw_depth, aw_open, aw_pad;
	__u8 gen_buf[2 * PYPROF_GEN_READ_MAX];	/* a coroutine's head and frame */
	__u64 set_buf[2 * PYPROF_SET_SCAN];	/* a set's table: key, hash */
	__u64 set_best;				/* its lowest live key */
	__u64 exc_item, exc_found;		/* the exception stack's walk */
	char fstr[PYPROF_FILTER_STR];		/* --filter: a string field read */
	__u8 frec[PYPROF_FILTER_REC];		/* --filter: the hit's record, copied */
	/* Kept here, not on the stack: a bpf_loop callback's frame adds
	 * to its caller's, within the verifier's 512 bytes (6.18 kernels
	 * count the whole chain). */
	struct pyprof_thread new_thread;	/* a thread's first entry (remember()) */
	struct tstate_view tv;			/* the sampled thread's state */
	struct ident_reads id311;		/* 3.11's code identity (ident311()) */
	/* A thread's user registers, where the kernel has no bpf_task_pt_regs
	 * (compat.bpf.h's user_regs()). */
	struct pt_regs regs;
	struct pyprof_sample s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);		/* the loader sets: possible CPUs */
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* LRU: the program makes a thread's entry when it first looks its state
 * up, and threads come and go without the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);	/* the loader may change it */
	__type(key, __u32);		/* host tid */
	__type(value, struct pyprof_thread);
} threads SEC(".maps");

/* --native: how far each thread's stack copy needs to go (by host tid):
 * the end of its outermost frame, as userspace's unwinds of its samples
 * found it; a thread without one gets the whole native_stack. LRU: the
 * threads gone make room (the loader sizes it to 1 without --native). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);		/* host tid */
	__type(value, __u64);		/* the address the copy may stop at */
} ustack_end SEC(".maps");

/* The processes sampled, by host tgid: what walking each takes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PYPROF_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct pyprof_proc);
} procs SEC(".maps");

/* The last code object sent per address (its identity), shared by every
 * CPU: one sighting sends once, and an address whose object changed (even
 * back to an earlier one) sends again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PYPROF_SEEN_L2);
	__type(key, struct code_key);
	__type(value, __u32);
} codes_seen SEC(".maps");

/* Threads of the targets off the CPU (off-CPU modes), by host tid. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pyprof_offcpu);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYPROF_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);	/* the loader sizes it from the rate */
} samples SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		(*c)++;
}

/* bpf_loop's context: the scratch of this CPU. */
struct loop_ctx {
	struct scratch *sc;
};

#endif
