/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - what both sampling backends (BPF: sampling/bpf/, remote:
 * remote_sampler.c) deliver: raw stacks, symbolized later by the caller.
 */
#ifndef PYPROF_SAMPLER_H
#define PYPROF_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/pyproc.h"

enum sample_status {
	SAMPLE_COMPLETE = 0,
	SAMPLE_TRUNCATED = 1,	/* deeper than the limit: innermost frames kept */
	SAMPLE_NO_PYSTATE = 2,	/* thread has no Python thread state (yet) */
	SAMPLE_READ_FAULT = 3,	/* a read of the target failed mid-walk */
	/* No thread state: the thread started moments ago, and is starting
	 * or (a short thread) already ending. */
	SAMPLE_THREAD_YOUNG = 4,
	/* No thread state any more: the thread is ending. */
	SAMPLE_THREAD_EXIT = 5,
	/* 3.11/3.12: entering the interpreter from C, the instant its frame
	 * record is half set up: no stack to read. */
	SAMPLE_EVAL_ENTRY = 6,
};

struct raw_sample {
	pid_t pid;		/* host pid of the process */
	pid_t tid;		/* host tid */
	uint32_t cpu;
	uint64_t ts_ns;		/* CLOCK_MONOTONIC, as bpf_ktime_get_ns() */
	uint32_t status;	/* enum sample_status */
	uint32_t nframes;
	const struct py_rawframe *frames;	/* innermost first */
	/* A hint, 0 when unknown: the outermost `unchanged` frames are the
	 * outermost frames of this thread's previous sample, frame for frame
	 * (same addresses, code objects, instructions), as the BPF backend
	 * knows from the 3.15 frame cache. Their symbols can be reused. */
	uint32_t unchanged;

	/*
	 * What the sample stands for (enum sample_kind). SAMPLE_KIND_CPU: a
	 * tick of a thread (on a CPU for the BPF backend; any thread the
	 * remote backend polled), weighing the sampling period.
	 * SAMPLE_KIND_OFFCPU: an interval off the CPU, weighing
	 * blocked_ns + runnable_ns, its stack read when the thread left the
	 * CPU (ts_ns: then).
	 */
	uint32_t kind;
	uint32_t flags;			/* SAMPLE_F_* */
	/* SAMPLE_KIND_OFFCPU: time blocked (switch-out to wake-up) and time
	 * runnable waiting for a CPU (wake-up, or preemption, to switch-in). */
	uint64_t blocked_ns;
	uint64_t runnable_ns;
	/* SAMPLE_KIND_OFFCPU: the system call in progress when it left the
	 * CPU (-1: none, a preemption or a fault) and its first argument. */
	int64_t syscall_nr;
	uint64_t syscall_arg0;
	/* Kernel return addresses, innermost first: where an off-CPU thread
	 * slept, or (--kernel) what a tick interrupted in the kernel. */
	uint32_t nkstack;
	const uint64_t *kstack;
	/*
	 * --native (ticks): the user registers (SAMPLE_NREGS, x86-64 DWARF
	 * order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip) and ustack_len
	 * bytes of user stack from rsp - PYPROF_USTACK_REDZONE; uregs NULL:
	 * none. Frames then include
	 * the interpreter's entry frames (py_rawframe.reserved, SAMPLE_FF_*).
	 */
	const uint64_t *uregs;
	const uint8_t *ustack;
	uint32_t ustack_len;
	/* --async (BPF): the task the thread was running, then the task
	 * awaiting it, and so on, read with the stack (ntasks 0: none). */
	uint32_t ntasks;
	uint32_t tasks_flags;		/* SAMPLE_TF_* */
	const struct sample_task *tasks;
	/* --opcodes: SAMPLE_OP_KNOWN | the instruction byte the innermost
	 * Python frame was executing, read from its code's adaptive bytecode
	 * at the sample (its name: target/opcodes/opnames.h); 0: not read. */
	uint32_t opcode;
	/* SAMPLER_MODE_EXCEPTION: the type object of the thread's exception
	 * (the one in flight, else the topmost being handled). */
	uint64_t exc_type;
};

#define SAMPLE_OP_KNOWN (1u << 16)

/* Tasks of one chain at most (PYPROF_MAX_TASKS), and the awaiting tasks'
 * suspended frames of one sample (PYPROF_MAX_AWAIT_FRAMES). */
#define SAMPLE_MAX_TASKS 256
#define SAMPLE_MAX_AWAIT_FRAMES 1024

/* One task of raw_sample.tasks. */
struct sample_task {
	uint64_t task;			/* the task object: its id */
	uint64_t coro;			/* its coroutine */
	/* The generator whose frame is its outermost (its coroutine, or the
	 * async generator an anext()/aclose() awaitable drives); 0: unknown. */
	uint64_t gen;
	/* An awaiter's suspended frames read with the sample, outermost
	 * first (fflags SAMPLE_LF_READ; else not read: a snapshot's). */
	const struct py_rawframe *frames;
	uint32_t nframes;
	uint32_t fflags;		/* SAMPLE_LF_* */
	uint32_t nawaiters;		/* tasks or futures awaiting it */
	/* The first bytes of its name object (a str, or an int for
	 * "Task-N") and the tp_flags of its type, copied with the sample;
	 * name_len 0: not read. */
	uint32_t name_len;
	uint64_t name_type_flags;
	const uint8_t *name;
};

/* Bytes of a task's name object a sample carries at most. */
#define SAMPLE_TASK_NAME_MAX 96

/* raw_sample.tasks_flags: how the chain of tasks ended early. */
enum {
	SAMPLE_TF_CUT = 1 << 0,		/* longer than the limit */
	SAMPLE_TF_CYCLE = 1 << 1,	/* a task met again */
	SAMPLE_TF_FAULT = 1 << 2,	/* a read failed */
	SAMPLE_TF_SET_CUT = 1 << 3,	/* a big awaiter set, partly scanned */
	SAMPLE_TF_FUTURE = 1 << 4,	/* the last task awaits a future */
	SAMPLE_TF_FRAMES_CUT = 1 << 5,	/* no room for later awaiters' frames */
};

/* sample_task.fflags */
enum {
	SAMPLE_LF_READ = 1 << 0,	/* frames read with the sample */
	SAMPLE_LF_CUT = 1 << 1,		/* its chain went on past what was read */
	SAMPLE_LF_FAULT = 1 << 2,	/* a read failed: the chain ends there */
};

/* --async: where a thread's running task and a task's awaiters are
 * (offsets, from the 3.14+ .AsyncioDebug and _Py_DebugOffsets tables). */
struct sampler_async {
	uint64_t running_task;		/* in the thread state */
	uint64_t task_awaited_by, task_awaited_by_is_set, task_is_task, task_coro;
	uint64_t set_used, set_mask, set_table;
	uint64_t task_name, type_flags;		/* 0: names not copied */
	/* The awaiters' suspended frames (pyprof_config's fields of the same
	 * names); gen_iframe 0: not read. */
	uint64_t coro_type, asyncgen_type;
	uint32_t gen_iframe, gen_frame_state, frame_stackpointer, awaited_slot;
	int8_t state_yield_from, state_yield_from_locked, state_cleared;
};

#define SAMPLE_NREGS 17

/* py_rawframe.reserved with --native */
enum {
	SAMPLE_FF_INTERP = 1 << 0,	/* an interpreter frame, not Python code */
	SAMPLE_FF_ENTRY = 1 << 1,	/* first frame of an evaluation loop's run */
	SAMPLE_FF_NO_SNAPSHOT = PY_RAWFRAME_NO_SNAPSHOT,
};

enum sample_kind {
	SAMPLE_KIND_CPU = 0,
	SAMPLE_KIND_OFFCPU = 1,
};

/* raw_sample.flags */
enum {
	/* SAMPLE_F_GIL_HELD is meaningful: the GIL's holder was read. */
	SAMPLE_F_GIL_KNOWN = 1 << 0,
	SAMPLE_F_GIL_HELD = 1 << 1,	/* this thread held the GIL */
	SAMPLE_F_GC = 1 << 2,		/* this thread was running a collection */
	SAMPLE_F_GIL_WAIT = 1 << 3,	/* off-CPU: waiting to take the GIL */
};

/* Called for every sample; a non-zero return stops the poll and is returned. */
typedef int (*sample_fn)(void *ctx, const struct raw_sample *s);

/*
 * What naming a code object takes, copied from the target at the moment a
 * sample first held it (BPF backend), so that it can be named after it is
 * freed. Each part is a bounded copy; a part marked cut or missing is read
 * from the target instead, if the object still lives.
 */
struct raw_code {
	pid_t pid;			/* the process it belongs to */
	uint64_t code;			/* address */
	uint32_t version;		/* co_version (0 on 3.11) */
	const uint8_t *obj;		/* the code object's first obj_len bytes */
	size_t obj_len;
	const uint8_t *qualname;	/* co_qualname's str object: header, payload */
	size_t qualname_len;		/* 0: not copied */
	const uint8_t *filename;
	size_t filename_len;
	const uint8_t *linetable;	/* co_linetable's payload */
	size_t linetable_len;
	uint64_t linetable_size;	/* its whole length */
	/* cut: longer than copied (or not a compact str) */
	int qualname_cut, filename_cut, linetable_cut;
};

/* Called for every code snapshot, before the samples that hold it. */
typedef void (*code_fn)(void *ctx, const struct raw_code *c);

/* What happened to a followed process. */
enum sampler_proc_event {
	SAMPLER_PROC_FORK = 1,	/* pid: a new child of ppid, followed */
	SAMPLER_PROC_EXEC = 2,	/* pid exec'd: not sampled until added again */
	SAMPLER_PROC_EXIT = 3,	/* pid ended */
	SAMPLER_PROC_SEEN = 4,	/* pid met on a CPU for the first time (all_procs) */
};

/* Called for every process event, in order with the samples; @ts_ns is
 * when it happened (CLOCK_MONOTONIC). */
typedef void (*proc_fn)(void *ctx, enum sampler_proc_event ev, pid_t pid, pid_t ppid,
			uint64_t ts_ns);

struct sampler_stats {
	uint64_t samples;	/* records delivered */
	uint64_t lost;		/* records the kernel could not deliver */
	uint64_t truncated;
	uint64_t errors;	/* no Python state + read faults */
	/* Remote backend, --blocking: ticks that stopped the target, and
	 * how long its threads were stopped in all. */
	uint64_t stops;
	uint64_t stopped_ns;
};

/* Count a sample of @status (enum sample_status): what both samplers count
 * of what they deliver, and what a consumer that leaves a sample out takes
 * off their counts. Starting, ending and eval-entry samples are no errors. */
void sampler_stats__count(struct sampler_stats *st, uint32_t status);

/* What is sampled (--mode). */
enum sampler_mode {
	SAMPLER_MODE_CPU = 0,	/* threads on a CPU (remote: in state R) */
	SAMPLER_MODE_OFFCPU,	/* intervals off the CPU, with why (BPF only) */
	SAMPLER_MODE_WALL,	/* both: every thread's whole time */
	SAMPLER_MODE_GIL,	/* CPU ticks, marked by whether the GIL was held */
	/* CPU ticks of threads with an exception in flight or being handled
	 * (target/exc_offsets.h), raw_sample.exc_type its type */
	SAMPLER_MODE_EXCEPTION,
};

enum sampler_events {
	SAMPLER_EVENTS_AUTO = 0,
	SAMPLER_EVENTS_THREAD,
	SAMPLER_EVENTS_CPU,
};

struct sampler_opts {
	unsigned int freq_hz;
	unsigned int max_frames;	/* depth limit per sample */
	int verbose;
	/* BPF backend, CPython 3.15: walk every sample whole instead of
	 * stopping at the thread's anchor (last_profiled_frame) and splicing
	 * cached callers, and never write the anchor; for measuring what the
	 * frame cache saves, or to leave the target's memory untouched. */
	int no_frame_cache;
	/* BPF backend: one cpu-clock event per thread of the target, or one
	 * per CPU (every task, the target's ticks kept); auto picks per CPU
	 * while CPUs x rate stays small. See user/sampling/bpf/lifecycle.c. */
	enum sampler_events events;
	/* BPF backend: follow the processes the targets start (fork, exec),
	 * from their first instruction; needs per-CPU events. */
	int follow_children;
	/* BPF backend: every process met on a CPU is reported once
	 * (SAMPLER_PROC_SEEN; configure the Pythons with
	 * bpf_sampler__add_process); needs follow_children. */
	int all_procs;
	/* BPF backend: report the execs of tracked processes
	 * (bpf_sampler__track_process) as SAMPLER_PROC_EXEC, without
	 * follow_children: a command started is looked at as soon as it
	 * execs, the sampler loaded before. */
	int exec_events;
	enum sampler_mode mode;
	/* BPF backend: a tick that interrupted the kernel carries its
	 * kernel stack (raw_sample.kstack). */
	int kernel_stacks;
	/* BPF backend: bytes of user stack (and the registers) a tick sends
	 * for native unwinding; 0: none. Turns the frame cache off. */
	unsigned int native_stack;
	/* BPF backend: samples may carry asyncio tasks (--async); without it
	 * bpf_sampler__set_async() is refused. */
	int async_tasks;
	/* Both backends: samples carry the instruction byte their innermost
	 * Python frame was executing (raw_sample.opcode). */
	int opcodes;
	/* Remote backend: every thread of the target stopped (ptrace) while
	 * a tick reads it, so that no stack is torn (--blocking). */
	int blocking;
};

/*
 * ---- One interface over both backends ----
 *
 * A struct sampler is the BPF backend (sampling/bpf_sampler.h: ticks and
 * switches snapshotted in the kernel, read from a ring buffer) or the
 * remote backend (sampling/remote_sampler.h: every thread read from
 * outside at each tick). The recording loop drives either the same way:
 * poll() delivers what is due, next_poll() says when to call it again,
 * refresh() keeps the thread list current, finish() delivers what is left
 * once sampling stops.
 */
struct sampler;
struct bpf_sampler;
struct remote_sampler;

/* Wrap an opened backend; the sampler owns it from then on. */
int sampler__from_bpf(struct bpf_sampler *bs, const struct sampler_opts *o,
		      struct sampler **out);
int sampler__from_remote(struct remote_sampler *rs, const struct sampler_opts *o,
			 struct sampler **out);
/* "BPF" or "remote". */
const char *sampler__name(const struct sampler *s);
/* The BPF backend, for what only it does (processes, asyncio, stack
 * ends); NULL for the remote one. */
struct bpf_sampler *sampler__bpf(struct sampler *s);
/* Deliver what is due to @fn: >= 0, the callback's non-zero return, or
 * -errno (-ESRCH: the one target is gone). */
int sampler__poll(struct sampler *s, sample_fn fn, void *ctx);
/* When (CLOCK_MONOTONIC s) to poll next, the last poll having begun at @started. */
double sampler__next_poll(struct sampler *s, double started);
/* Keep the target's thread list current; call once a loop, at @now. */
void sampler__refresh(struct sampler *s, double now);
void sampler__stats(const struct sampler *s, struct sampler_stats *st);
/* Stop sampling, then deliver what is left: the samples taken before the
 * stop, and the intervals of threads off the CPU now (ended at @end_ns). */
int sampler__finish(struct sampler *s, uint64_t end_ns, sample_fn fn, void *ctx);
void sampler__close(struct sampler *s);

#endif
