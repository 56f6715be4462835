/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - the one way commands use a sampler: what every sampling
 * backend (BPF: sampling/bpf/, remote: remote_sampler.c; the table in
 * sampler.c) is asked and delivers: raw stacks (types/raw_sample.h),
 * symbolized later by the caller. A backend implements sampling/backend.h.
 */
#ifndef PYPROF_SAMPLER_H
#define PYPROF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sampling/frame_cache.h"
#include "target/pyproc.h"
#include "types/raw_sample.h"

/* Called for every sample; a non-zero return stops the poll and is returned. */
typedef int (*sample_fn)(void *ctx, const struct raw_sample *s);

/* Called for every code snapshot, before the samples that hold it. */
typedef void (*code_fn)(void *ctx, const struct raw_code *c);

/* Called for every process event, in order with the samples; @ts_ns is
 * when it happened (CLOCK_MONOTONIC). */
typedef void (*proc_fn)(void *ctx, enum sampler_proc_event ev, pid_t pid, pid_t ppid,
			uint64_t ts_ns);

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
	 * sampler__add_process); needs follow_children. */
	int all_procs;
	/* BPF backend: report the execs of tracked processes
	 * (sampler__track_process) as SAMPLER_PROC_EXEC, without
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
	 * sampler__set_async() is refused. */
	int async_tasks;
	/* Both backends: samples carry the instruction byte their innermost
	 * Python frame was executing (raw_sample.opcode). */
	int opcodes;
	/* Remote backend: every thread of the target stopped (ptrace) while
	 * a tick reads it, so that no stack is torn (--blocking). */
	int blocking;
	/* BPF backend, cpu mode: the events ticks are taken at (-e;
	 * perf_events.h), @nevents of them (up to SAMPLER_MAX_EVENTS; a
	 * sample's raw_sample.event says which); NULL: cpu-clock. A tracepoint
	 * is attached once for the machine (its program runs at every hit);
	 * tracepoints and several events need per-CPU scope. */
	const struct sampler_event *event;
	unsigned int nevents;
	/* --filter EXPR of the first tracepoint among them (tp_filter.h); NULL: none. */
	const char *filter;
	/* -c N: one tick every N events (freq_hz unused); 0: each event's
	 * default (sampler_event__default_period: every event for tracepoints
	 * and the software events but the clocks, else frequency mode). */
	uint64_t period;
};

/*
 * ---- One interface over every backend ----
 *
 * A struct sampler is one of the backends of sampler.c's table: the BPF
 * one (sampling/bpf_sampler.h: ticks and switches snapshotted in the
 * kernel, read from a ring buffer) or the remote one
 * (sampling/remote_sampler.h: every thread read from outside at each tick).
 * Commands drive any of them the same way, through this header only:
 * poll() delivers what is due to a tool's callbacks, next_poll() says when
 * to call it again, refresh() keeps the thread list current, finish()
 * delivers what is left once sampling stops. What a backend cannot do it
 * refuses (-EOPNOTSUPP) or answers neutrally (no detail, never exec'd); a
 * command asks sampler__has() before relying on it.
 */
struct sampler;
struct sampler_event;

/* What a poll hands on, one callback per kind of record (as perf's
 * struct perf_tool): sample is required; code or proc NULL drops those
 * records. Process events come in order with the samples. */
struct sampler_tool {
	sample_fn sample;
	code_fn code;
	proc_fn proc;
	void *ctx;
};

/* What a backend can do besides sampling one target (sampler__has). */
enum sampler_cap {
	/* Several processes: add_process, track_process, forget_process,
	 * process events (sampler_opts.follow_children, all_procs,
	 * exec_events), a target set after open (a command started). */
	SAMPLER_CAP_PROCESSES = 1 << 0,
	SAMPLER_CAP_ASYNC = 1 << 1,	/* set_async: samples carry tasks */
	SAMPLER_CAP_STACK_END = 1 << 2,	/* set_stack_end (--native) */
	/* Off-CPU intervals (SAMPLER_MODE_OFFCPU, and WALL counts one
	 * interval as one sample). */
	SAMPLER_CAP_OFFCPU = 1 << 3,
	/* Samples come from perf events, per CPU or per thread
	 * (sampler_detail.per_cpu says which). */
	SAMPLER_CAP_PERF_EVENTS = 1 << 4,
};

/* What -v and the end summary show of a backend's inner workings; all
 * zero for a backend that has none of it. */
struct sampler_detail {
	bool per_cpu;			/* events per CPU (else per thread) */
	/* The 3.15 frame cache was used: its counts (cache.anchors_cleared
	 * and cache.anchors_left are set once sampling stopped). */
	bool frame_cache;
	struct frame_cache_stats cache;
	/* An off-CPU mode (off-CPU or wall): its counts. */
	bool offcpu;
	uint64_t reused;		/* switch-outs that stood on their thread's last walk */
	uint64_t inferred;		/* intervals closed by inference (the kernel's) */
	/* Off-CPU intervals whose stack never reached us (ring full), not delivered. */
	uint64_t lost_intervals;
	/* Samples not taken: they fired while the same CPU was taking another
	 * (a tick's interrupt inside a tracepoint's program). */
	uint64_t nested;
	/* The BPF backend: the program it loaded and the verifier's figures
	 * (one line, the sampler's; NULL for other backends). */
	const char *program;
};

/*
 * Can backend @backend ("bpf", "remote": sampler_ops.id) be used here? 0 if
 * so, else -errno with one line in @why (-ENOENT: no such backend). On 0,
 * @why may say how (the BPF backend: the program it would load, and why).
 */
int sampler__available(const char *backend, char *why, size_t len);
/*
 * Open backend @backend: its availability checked, then loaded, sampling
 * @p as the main target; @p NULL (backends with SAMPLER_CAP_PROCESSES):
 * no target yet, sampler__set_target() or sampler__add_process() name them
 * later. @p must outlive the sampler. 0, or -errno with one line in @err
 * (may be empty: the caller says what failed with strerror).
 */
int sampler__open(const char *backend, struct pyproc *p, const struct sampler_opts *o,
		  struct sampler **out, char *err, size_t errlen);
/* "BPF" or "remote": as said to the user. */
const char *sampler__name(const struct sampler *s);
/* "bpf" or "remote": as written in the raw recording. */
const char *sampler__id(const struct sampler *s);
/* Can @s do @cap (enum sampler_cap)? False for a NULL sampler. */
bool sampler__has(const struct sampler *s, unsigned int cap);

/* The backend's calls for several processes (SAMPLER_CAP_PROCESSES), as
 * bpf_sampler.h describes them; -EOPNOTSUPP without the capability. */
int sampler__set_target(struct sampler *s, struct pyproc *p, char *err, size_t errlen);
int sampler__add_process(struct sampler *s, struct pyproc *p, char *err, size_t errlen);
int sampler__track_process(struct sampler *s, pid_t pid);
void sampler__forget_process(struct sampler *s, pid_t pid);
/* --async (SAMPLER_CAP_ASYNC): @pid's samples carry its tasks from now on.
 * 0 or -errno (-ENOENT: @pid is not configured). */
int sampler__set_async(struct sampler *s, pid_t pid, const struct sampler_async *a);
/* --native (SAMPLER_CAP_STACK_END): @tid's stack copies may stop at @end. */
int sampler__set_stack_end(struct sampler *s, pid_t tid, uint64_t end);

/* Deliver what is due to @t's callbacks: >= 0, the sample callback's
 * non-zero return, or -errno (-ESRCH: the one target is gone). */
int sampler__poll(struct sampler *s, const struct sampler_tool *t);
/* When (CLOCK_MONOTONIC s) to poll next, the last poll having begun at @started. */
double sampler__next_poll(struct sampler *s, double started);
/* Keep the target's thread list current; call once a loop, at @now. */
void sampler__refresh(struct sampler *s, double now);
void sampler__stats(const struct sampler *s, struct sampler_stats *st);
void sampler__detail(const struct sampler *s, struct sampler_detail *d);
/* Has the main target exec'd another program (seen by per-CPU events)? */
bool sampler__execed(const struct sampler *s);
/* Stop sampling, then deliver what is left to @t: the samples taken before
 * the stop, and the intervals of threads off the CPU now (ended at @end_ns). */
int sampler__finish(struct sampler *s, uint64_t end_ns, const struct sampler_tool *t);
/* Stop and unload; accepts NULL. */
void sampler__close(struct sampler *s);

#endif
