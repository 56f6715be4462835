/* SPDX-License-Identifier: MIT */
/*
 * raw_sample.h - the records that travel from a sampler to its consumers:
 * a raw stack (struct raw_sample, its frames and tasks), a code object's
 * snapshot (struct raw_code), a process event, and the counts of what was
 * delivered. Plain data, named by no stage: the samplers (sampling/) fill
 * them, the target walker (target/pyproc.h) writes frames, and the stages
 * below the sampler (resolve/, symbols/, offcpu/, native/, asyncio/,
 * output/) read them without knowing a sampler. bpf/pyprof.h's records are
 * tied to these by _Static_asserts in sampling/bpf/records.c.
 */
#ifndef PYPROF_TYPES_RAW_SAMPLE_H
#define PYPROF_TYPES_RAW_SAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One frame of a raw stack: what the BPF side and the remote walker record. */
/* -e EVENT,EVENT...: at most this many at once (sampling/perf_events.h). */
#define SAMPLE_MAX_EVENTS 4

/* py_rawframe.reserved: the sampler took no snapshot of the frame's code
 * object at its first sighting (the BPF program could not read it). */
#define PY_RAWFRAME_NO_SNAPSHOT (1u << 2)

struct py_rawframe {
	uint64_t frame;		/* _PyInterpreterFrame address */
	uint64_t code;		/* code object address */
	uint64_t instr;		/* instruction pointer (instr_ptr / prev_instr) */
	uint32_t code_version;	/* co_version (3.12+), 0 when unknown */
	uint32_t reserved;
};

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
	/* The events it stands for (-e EVENT: its perf event's sample period,
	 * a tracepoint's hits); 0: a tick of the recording's rate. */
	uint64_t period;
	uint32_t event;		/* which of several -e events (their order, < SAMPLE_MAX_EVENTS) */
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
	 * --native (ticks): the user registers (SAMPLE_NREGS, in DWARF
	 * order: x86-64's rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip, AArch64's
	 * x0-x30 sp pc) and ustack_len bytes of user stack from
	 * sp - PYPROF_USTACK_REDZONE; uregs NULL:
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

/* The user registers of a --native tick: PYPROF_NREGS (bpf/pyprof.h) and
 * NATIVE_REG_COUNT (native/unwind.h), asserted where they meet. */
#if defined(__aarch64__)
#define SAMPLE_NREGS 33		/* x0-x30, sp, pc */
#else
#define SAMPLE_NREGS 17
#endif

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

/* What happened to a followed process. */
enum sampler_proc_event {
	SAMPLER_PROC_FORK = 1,	/* pid: a new child of ppid, followed */
	SAMPLER_PROC_EXEC = 2,	/* pid exec'd: not sampled until added again */
	SAMPLER_PROC_EXIT = 3,	/* pid ended */
	SAMPLER_PROC_SEEN = 4,	/* pid met on a CPU for the first time (all_procs) */
};

struct sampler_stats {
	uint64_t samples;	/* records delivered */
	uint64_t lost;		/* records the kernel could not deliver */
	uint64_t truncated;
	uint64_t errors;	/* no Python state + read faults */
	/* Of truncated: cut where the 3.15 frame cache could not splice
	 * their callers (frame_cache_out.cut), not for their depth. */
	uint64_t cut;
	/* Of errors: the remote backend's reads given up as torn, the
	 * thread having moved during every copy of its stack. */
	uint64_t torn;
	/* Remote backend, --blocking: ticks that stopped the target, and
	 * how long its threads were stopped in all. */
	uint64_t stops;
	uint64_t stopped_ns;
};

/* Count a sample of @status (enum sample_status): what both samplers count
 * of what they deliver, and what a consumer that leaves a sample out takes
 * off their counts. Starting, ending and eval-entry samples are no errors. */
static inline void sampler_stats__count(struct sampler_stats *st, uint32_t status)
{
	st->samples++;
	if (status == SAMPLE_TRUNCATED)
		st->truncated++;
	else if (status != SAMPLE_COMPLETE && status != SAMPLE_THREAD_YOUNG &&
		 status != SAMPLE_THREAD_EXIT && status != SAMPLE_EVAL_ENTRY)
		st->errors++;
}

#endif
