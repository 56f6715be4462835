/* SPDX-License-Identifier: MIT */
/*
 * bpf_sampler.h - the BPF sampling backend: the only module that talks to
 * libbpf.
 *
 * It loads bpf/pyprof.bpf.c, configures the target's offsets in its procs
 * map (per process: a target can be named after load, e.g. once a command
 * started before it is found to run Python), opens a software cpu-clock
 * perf event on every CPU or on every thread of the target, keeps the
 * kernel's tid -> thread-state map current, and hands the raw stacks the
 * kernel recorded to a callback. Names and lines are the caller's business.
 *
 * Threads created after attach: every event is opened with inherit=1 (and
 * inherit_thread=1), so the kernel gives a new thread a copy of its
 * creator's event, program included, from its first instruction. The
 * thread's thread state reaches the map at the next bpf_sampler__refresh()
 * (sooner when bpf_sampler__unknown_tid() says one was sampled); samples taken
 * before that say SAMPLE_NO_PYSTATE. A new thread that shows
 * CPU time but no samples (created while we were attaching) gets an event of
 * its own. Call bpf_sampler__refresh() about every 100 ms.
 *
 * CPython 3.15: the kernel stops each walk at the thread's anchor
 * (tstate->last_profiled_frame) and bpf_sampler__poll() splices the cached
 * callers back (user/frame_cache.h), so callbacks always get whole stacks;
 * a sample that cannot be spliced is delivered SAMPLE_TRUNCATED. Now and
 * then, when deep walks above the anchor pay for it, a poll moves a
 * thread's anchor up with one 16-byte write into the running target (no
 * stop), at most once per 100 ms per thread and backing off to once per
 * 6.4 s when it does not help. o->no_frame_cache turns all of this off
 * (every walk whole, nothing written).
 *
 * Not thread-safe: one thread drives a sampler.
 *
 * The code is in user/sampling/bpf/ (one file per job, see bpf/internal.h).
 */
#ifndef PYPROF_BPF_SAMPLER_H
#define PYPROF_BPF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "target/pyproc.h"
#include "sampling/sampler.h"
#include "sampling/frame_cache.h"

struct bpf_sampler;

/*
 * Can this process use the BPF backend here? 0 if so; otherwise -EPERM (no
 * CAP_BPF + CAP_PERFMON, nor CAP_SYS_ADMIN) or -ENOTSUP (no BTF, or a kernel
 * without perf_event programs, ring buffers or a helper both programs call),
 * with one line in @why that the CLI can print before falling back to the
 * remote backend. On 0, @why names the program the kernel would run, and why.
 */
int bpf_sampler__available(char *why, size_t len);

/*
 * Load the program and attach what needs no target: per-CPU events (when
 * they are picked; per-thread ones need the target's threads), the exec
 * tracepoint with o->exec_events, the fork and exit ones with
 * o->follow_children. No process is sampled yet: ticks of processes not
 * configured in the program's procs map are dropped in the kernel. Then
 * bpf_sampler__track_process() has a process's execs reported (a command
 * about to be started), and bpf_sampler__set_target() names the main
 * target. o->max_frames = 0 means the default (2,048), at most
 * PYPROF_MAX_FRAMES (4,096). On failure returns -errno with one line in
 * @err: -EPERM (privileges), -ENOTSUP (not in the host's PID namespace),
 * -EINVAL (options, or a rate above kernel.perf_event_max_sample_rate), or
 * the kernel's error when the verifier rejects the program (the line says
 * so; libbpf's log is printed only when o->verbose). o->verbose also shows
 * libbpf's warnings, and with o->verbose > 1 its debug output.
 */
int bpf_sampler__load(const struct sampler_opts *o, struct bpf_sampler **out, char *err,
		      size_t errlen);

/*
 * Sample @p from now on as the main target: its walk may use the 3.15
 * frame cache, its threads' states are kept in the kernel's map (and with
 * per-thread events, its threads get their events here). Once per sampler.
 * @p must outlive the sampler. Returns 0, or -errno with a line in @err:
 * -EPROTO (offsets the BPF walk cannot use), -ESRCH (the target is gone),
 * -EBUSY (a target was set already), -ENOMEM; after a failure the sampler
 * has no target and is only to be freed.
 */
int bpf_sampler__set_target(struct bpf_sampler *s, struct pyproc *p, char *err, size_t errlen);

/* bpf_sampler__load() then bpf_sampler__set_target() (-p PID). */
int bpf_sampler__open(struct pyproc *p, const struct sampler_opts *o,
		      struct bpf_sampler **out, char *err, size_t errlen);

/*
 * Rescan the target's threads: refresh the tid -> thread-state map, give an
 * event to threads that have none, forget exited ones (once the next poll
 * has handed on their samples still in the ring: a 3.15 thread's cached
 * callers are needed for them). Returns 0, -ESRCH when the target has
 * exited, or another -errno.
 */
int bpf_sampler__refresh(struct bpf_sampler *s);
/*
 * Has a thread the last refresh did not know been sampled since? Its
 * samples say SAMPLE_NO_PYSTATE until a refresh puts its thread state in the
 * map: refreshing sooner than the usual 100 ms shortens that.
 */
bool bpf_sampler__unknown_tid(const struct bpf_sampler *s);
/*
 * Did the last refresh find the target's threads and their states just as
 * the one before left them? The next can then wait longer: the program
 * finds a new thread's state itself, the refresh is its slow path.
 */
bool bpf_sampler__settled(const struct bpf_sampler *s);

/*
 * --native: thread @tid's stack copies may stop at @end (an address: the
 * end of its outermost frame, learnt from a complete unwind; the known
 * end only grows). @end 0: copy the whole --stack-size again (a copy came
 * out short). 0 or -errno.
 */
int bpf_sampler__set_stack_end(struct bpf_sampler *s, pid_t tid, uint64_t end);

/*
 * Hand every record the kernel has produced so far to @fn, without
 * blocking. Returns the number of records consumed, @fn's non-zero return
 * value (which stops the poll; the record it was given is consumed), or
 * -errno.
 */
int bpf_sampler__poll(struct bpf_sampler *s, sample_fn fn, void *ctx);

/*
 * Have code snapshots (struct raw_code) handed to @fn during polls, before
 * the samples that hold them. Without it they are dropped (and the
 * symbolizer reads code objects from the target, as it can).
 */
void bpf_sampler__set_code_fn(struct bpf_sampler *s, code_fn fn, void *ctx);

/* Have process events (forks, execs and exits of followed processes,
 * sampler_opts.follow_children) handed to @fn during polls. */
void bpf_sampler__set_proc_fn(struct bpf_sampler *s, proc_fn fn, void *ctx);

/*
 * Sample @p too (another -p target, or a followed child once it runs a
 * Python the caller opened), from now on, walking its stacks whole. @p must
 * outlive the sampler, or be forgotten first. Returns 0, -ENOSPC (too many
 * processes), -EPROTO (offsets the walk cannot use) or -errno, with a line
 * in @err.
 */
int bpf_sampler__add_process(struct bpf_sampler *s, struct pyproc *p, char *err, size_t errlen);
/* --async: @pid's samples (the main target's, or a process configured by
 * bpf_sampler__add_process()) carry its running task and the tasks awaiting
 * it from now on (raw_sample.tasks). 0 or -errno (-ENOENT: @pid is not
 * configured). */
int bpf_sampler__set_async(struct bpf_sampler *s, pid_t pid, const struct sampler_async *a);

/* Follow @pid's execs (sampler_opts.exec_events) and children
 * (sampler_opts.follow_children) without sampling it: a process that runs
 * no Python, or none yet. 0 or -errno. */
int bpf_sampler__track_process(struct bpf_sampler *s, pid_t pid);
/* Stop sampling @pid (not the main target); its samples still in the ring
 * are delivered. */
void bpf_sampler__forget_process(struct bpf_sampler *s, pid_t pid);

void bpf_sampler__stats(const struct bpf_sampler *s, struct sampler_stats *st);

/*
 * Has the target exec'd another program? Seen by per-CPU events (per-thread
 * ones are removed by the exec, and then sample nothing more).
 */
bool bpf_sampler__execed(const struct bpf_sampler *s);

/* Whether the events are per CPU (else per thread of the target). */
bool bpf_sampler__per_cpu(const struct bpf_sampler *s);
/* The program loaded, why, and what the kernel's verifier said of each of
 * its programs (instructions and stack against their limits): one line. */
const char *bpf_sampler__program(const struct bpf_sampler *s);

/*
 * Stop sampling (detach every event); what the ring holds can still be
 * polled, and is delivered whole (the frame cache holds its callers). The
 * duration ends here, not after the last drain. On 3.15 this is also where
 * the anchors we wrote into the target and that are still ours are zeroed
 * (frame_cache__release()); no poll writes one after it. Without it (a
 * sampler only freed) they stay in the target, which is harmless (an
 * anchor nobody stops at is never used) but untidy.
 */
void bpf_sampler__stop(struct bpf_sampler *s);
/*
 * Off-CPU modes: deliver the intervals still open (threads off the CPU now)
 * as ending at @end_ns (CLOCK_MONOTONIC). Call it once, after the last poll.
 * Returns 0 or @fn's non-zero return.
 */
int bpf_sampler__finish_intervals(struct bpf_sampler *s, uint64_t end_ns, sample_fn fn, void *ctx);
/* Off-CPU intervals whose stack never reached us (ring full), not delivered. */
uint64_t bpf_sampler__lost_intervals(const struct bpf_sampler *s);
/*
 * What -v shows of a recording's inner workings, for the caller to print:
 * best read after the last poll and bpf_sampler__finish_intervals() (and
 * after bpf_sampler__stop(), which sets the anchor counts).
 */
struct bpf_sampler_detail {
	/* The 3.15 frame cache was used: its counts (cache.anchors_cleared
	 * and cache.anchors_left are bpf_sampler__stop()'s). */
	bool frame_cache;
	struct frame_cache_stats cache;
	/* An off-CPU mode (off-CPU or wall): its counts. */
	bool offcpu;
	uint64_t reused;		/* switch-outs that stood on their thread's last walk */
	uint64_t inferred;		/* intervals closed by inference (the kernel's) */
	uint64_t lost_intervals;	/* as bpf_sampler__lost_intervals() */
	/* Samples not taken: they fired inside another sample's program on
	 * their CPU (PYPROF_CNT_NESTED). */
	uint64_t nested;
};
void bpf_sampler__detail(const struct bpf_sampler *s, struct bpf_sampler_detail *d);

/* Detach and unload; no program, map, link or event remains, and nothing
 * is printed nor written into the target. Accepts NULL. */
void bpf_sampler__free(struct bpf_sampler *s);

#endif
