/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the files of the BPF sampler (user/sampling/bpf/) share:
 * struct bpf_sampler and the functions one file calls in another. Callers
 * outside this folder use user/sampling/bpf_sampler.h.
 *
 *   lifecycle.c  open, load and attach the program; stop, free, counters
 *   threads.c    the target's threads: scans, the kernel's thread-state
 *                map, events of new threads, retiring exited ones, anchors
 *   records.c    ring-buffer records into struct raw_sample (the poll)
 *   intervals.c  off-CPU intervals: opened, delivered, seeded
 *   config.c     the walk's configuration and the procs map
 *   target.c     the main target named: configured, its threads found
 *   verifier.c   what the kernel's verifier said of each program loaded
 *   programs.c   which BPF object this kernel runs; what each mode needs
 *   load.c       that object opened and loaded, the verifier's logs read
 *
 * This header names libbpf's and the skeleton's types without including
 * them (only the .c files here do), so unit tests can build a sampler by
 * hand.
 */
#ifndef PYPROF_BPF_SAMPLER_INTERNAL_H
#define PYPROF_BPF_SAMPLER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyprof.h"
#include "sampling/bpf_sampler.h"
#include "sampling/perf_events.h"
#include "target/pyproc.h"

struct bpf_link;
struct ring_buffer;
struct pyprof_bpf;
struct frame_cache;
struct frame_cache_out;
struct offcpu_ivs;

#define THREADS_MAP_ENTRIES	16384
/* Threads re-anchored per poll at most (one write each, after one read of
 * the thread lists). */
#define REANCHOR_PER_POLL	4

enum thread_kind {
	THREAD_OWN,		/* has (or is to get) an event we opened */
	THREAD_PENDING,		/* appeared after attach, no sample seen yet */
	THREAD_INHERITED,	/* sampled through an inherited event */
};

struct bpf_thread {
	pid_t tid;
	enum thread_kind kind;
	bool in_map;		/* has an entry in the threads map */
	uint64_t tstate;	/* in the map, as last read or written */
	uint64_t scanned;	/* what the last scan found, the map reconciled with it */
	uint64_t next_tstate;	/* what this refresh found */
	uint64_t runtime0;	/* CPU ns when first seen (THREAD_PENDING) */
	bool runtime_known;	/* runtime0 could be read */
	struct bpf_link *link;	/* THREAD_OWN: owns the perf event fd */
	/* Found gone by a scan: the ring's producer position then. Its
	 * samples all lie before it (a thread's ticks are written before it
	 * runs on, let alone exits). */
	uint64_t gone_pos;
};

struct bpf_sampler {
	struct pyproc *proc;
	pid_t pid;
	struct pyprof_bpf *skel;
	struct ring_buffer *rb;
	/* The ring's consumer and producer positions (read-only mappings
	 * of their pages): which records a poll has consumed. */
	const unsigned long *ring_cons, *ring_prod;
	size_t page_size;
	int threads_fd;
	int ustack_end_fd;
	/* --native: the stack ends told to the program, by tid (one per slot) */
	struct stack_end {
		pid_t tid;
		uint64_t end;
	} ustack_ends[1024];
	int procs_fd;
	int counters_fd;
	unsigned int max_frames;
	uint32_t snap_gen;	/* configurations of other processes so far */
	pid_t other_pid;	/* the first process written that was not the target */
	bool many_pids;		/* more than one such */
	/* The main target's walk (its frame cache may be on); other
	 * processes (bpf_sampler__add_process, followed children) walk whole. */
	struct pyprof_config main_cfg;
	int ncpus;		/* possible CPUs: per-CPU map values */
	unsigned int freq_hz;
	uint64_t period;	/* sampler_opts.period: -c N, 0: each event's default */
	/* What ticks are taken at (cpu-clock by default; -e: up to
	 * PYPROF_MAX_EVENTS, each link's cookie its index with several), and
	 * each one's period (0: freq_hz, frequency mode). */
	struct sampler_event events[PYPROF_MAX_EVENTS];
	uint64_t periods[PYPROF_MAX_EVENTS];
	unsigned int nevents;
	struct bpf_link *event_tp_links[PYPROF_MAX_EVENTS];	/* tracepoints', attached once */
	bool event_periods;	/* ticks weigh their event counts (-e, not a clock) */
	bool inherit;		/* new threads inherit their creator's event */
	bool per_cpu;		/* one event per CPU instead of per thread */
	struct bpf_link **cpu_links;	/* per CPU, each of its events: cpu * nevents + event */
	int ncpu_links;
	bool no_frame_cache;	/* sampler_opts.no_frame_cache */
	struct bpf_link *tp_links[3];	/* exec; fork, exit (following children) */
	bool attached;		/* the first scan is done */
	bool stopped;		/* bpf_sampler__stop(): no sample comes any more */
	bool released;		/* the anchors were released */
	/* A thread the last refresh did not know has been sampled (it has no
	 * thread state in the map yet): refresh soon. */
	bool unknown_tid;
	bool settled;		/* the last refresh changed nothing */

	struct bpf_thread *th;	/* live threads, sorted by tid */
	size_t nth;
	/* Threads found gone whose samples may still be in the ring: retired
	 * once a poll has consumed it past their gone_pos. */
	struct bpf_thread *dying;
	size_t ndying, cap_dying;
	/* Events of exited threads: inherited copies in threads they created
	 * live only as long as these. */
	struct bpf_link **retired;
	size_t nretired, cap_retired;

	/* Scratch reused by every refresh. */
	pid_t *tids;
	size_t cap_tids;
	struct py_thread *pyth;
	size_t cap_pyth;

	/* Where code snapshots and process events go. */
	code_fn code_fn;
	void *code_ctx;
	proc_fn proc_fn;
	void *proc_ctx;

	/* The poll in progress. */
	sample_fn fn;
	void *fn_ctx;
	int fn_ret;

	/* The 3.15 frame cache (a pass-through on other versions). */
	struct frame_cache *fc;
	bool cache;			/* the kernel walks to anchors */
	pid_t reanchor[REANCHOR_PER_POLL];
	size_t nreanchor;
	int verbose;

	struct sampler_stats counts;	/* lost: read from the program's counter */

	/* Off-CPU modes: the intervals in progress, the programs on the
	 * scheduler's tracepoints, the main target's GIL (where a thread
	 * waiting for it sleeps), and intervals whose stack never came. */
	enum sampler_mode mode;
	struct offcpu_ivs *ivs;
	struct bpf_link *sched_links[2];
	int offcpu_fd;
	struct py_gil_gc gil;
	bool gil_known;
	uint64_t lost_intervals;
	uint64_t overwritten;	/* intervals opened again before they closed */
	uint64_t reused;	/* switch-outs not walked (PYPROF_SF_REUSE) */

	/* --kernel: ticks' kernel stacks, each until its sample comes (one
	 * per CPU at most is in flight: a small table will do). */
	struct tick_kstack {
		pid_t tid;		/* 0: free */
		uint32_t n;
		uint64_t addrs[PYPROF_KSTACK_MAX];
	} kst[64];
	/* Slots held (kst, ust): none, and a sample's lookups are skipped
	 * (each touches a cold line of a table of several pages). */
	uint32_t kst_held, ust_held;
	/* --native: ticks' user registers and stacks, the same way. */
	unsigned int native_stack;
	/* --opcodes: samples read their innermost instruction byte. */
	int opcodes;
	struct tick_ustack {
		pid_t tid;		/* 0: free */
		uint32_t len;
		uint64_t regs[PYPROF_NREGS];
		uint8_t *stack;		/* native_stack bytes, made at first use */
	} ust[64];
	/* --async: ticks' task chains, the same way. */
	struct tick_tasks {
		pid_t tid;		/* 0: free */
		uint32_t n, flags;
		struct sample_task t[SAMPLE_MAX_TASKS];
		uint8_t names[SAMPLE_MAX_TASKS][SAMPLE_TASK_NAME_MAX];
		/* The awaiters' frames sent just before the chain (frames_tid:
		 * whose; the chain of another tick finds them not its own). */
		pid_t frames_tid;
		uint32_t nframes;
		struct py_rawframe frames[SAMPLE_MAX_AWAIT_FRAMES];
	} tks[64];

	/* -v: the program loaded and what the verifier said of each of its
	 * programs (verifier.c), one line. */
	char program_note[1024];
};

/* programs.c: the BPF object to load. */
struct bpf_program_choice {
	bool noloop;			/* pyprof_noloop.bpf.o */
	const void *bytes;		/* its ELF bytes; NULL: the skeleton's own */
	size_t size;
	const char *name;		/* the object's file name */
	char why[128];			/* why this one */
};

/* What both programs need that the kernel lacks, named; NULL: nothing. */
const char *bpf_programs__base_missing(void);
/* What the modes of @o need that the kernel lacks, named; NULL: nothing. */
const char *bpf_programs__mode_missing(const struct sampler_opts *o, bool off_cpu);
/* The object for this kernel (or PYPROF_BPF_PROGRAM's), @off_cpu: with the
 * off-CPU programs. 0 or -EINVAL. */
int bpf_programs__choose(struct bpf_program_choice *c, bool off_cpu, char *err, size_t errlen);

/* load.c: the object @c names opened into s->skel (the modes of @o checked
 * first), then loaded. 0, or -errno with @err. */
int bpf_load__open(struct bpf_sampler *s, const struct sampler_opts *o,
		   struct bpf_program_choice *c, char *err, size_t errlen);
int bpf_load__load(struct bpf_sampler *s, const struct sampler_opts *o,
		   const struct bpf_program_choice *c, char *err, size_t errlen);

/* verifier.c: the figures of a verifier's statistics log (BPF_LOG_STATS). */
struct verifier_figures {
	bool known;			/* the log had them */
	unsigned long insns, limit;	/* instructions processed, the kernel's limit */
	unsigned long stack;		/* the largest stack frame: the program's or a subprogram's */
	unsigned int subprogs;
	unsigned int stack_limit;
};
/* 0, or -ENOENT when @log holds no figures (a rejection, an old kernel). */
int verifier__parse(const char *log, struct verifier_figures *f);
/* The verdict of a rejection's @log: its last line that is not a figure. */
void verifier__reason(const char *log, char *out, size_t len);
/* Within @pct percent of the instruction or the stack limit. */
bool verifier__near_limit(const struct verifier_figures *f, unsigned int pct);
/* "PROG N insns of LIMIT (P%), stack S of 512 bytes" (S: the largest
 * frame); snprintf's count. */
int verifier__describe(const char *prog, const struct verifier_figures *f, char *out, size_t len);

/* lifecycle.c */
bool bpf_lifecycle__off_cpu(const struct bpf_sampler *s);
/* An event on thread @tid (any CPU), or with @tid -1 on CPU @cpu (any task). */
int bpf_lifecycle__open_event(struct bpf_sampler *s, unsigned int event, pid_t tid, int cpu,
			      struct bpf_link **out);
/* The program's per-CPU counter @key, summed (0 when unreadable). */
uint64_t bpf_lifecycle__counter(const struct bpf_sampler *s, uint32_t key);
/* The ring's producer position now, and how far polls have consumed it. */
uint64_t bpf_lifecycle__ring_produced(const struct bpf_sampler *s);
uint64_t bpf_lifecycle__ring_consumed(const struct bpf_sampler *s);

/* threads.c */
struct bpf_thread *bpf_threads__find(struct bpf_thread *th, size_t n, pid_t tid);
/* Grow the array at *@pp of *@cap elements of @elem bytes to hold @want. */
int bpf_threads__grow(void *pp, size_t *cap, size_t want, size_t elem);
/* The target's tid -> tstate pairs into s->pyth; -EFAULT when unreadable. */
int bpf_threads__scan_py(struct bpf_sampler *s, size_t *n);
/*
 * The scan's s->tids[0..@ntids) (sorted) become s->th: known threads carried
 * over, new ones added, gone ones queued to retire once the ring is consumed
 * past @pos (bpf_threads__retire_due). Sets *@changed when the set changed.
 * 0 or -ENOMEM.
 */
int bpf_threads__carry_over(struct bpf_sampler *s, size_t ntids, uint64_t pos, bool *changed);
/* Retire the gone threads whose samples the ring no longer holds: those
 * found gone when the producer was at or before @consumed. */
void bpf_threads__retire_due(struct bpf_sampler *s, uint64_t consumed);
/* The kernel's walk_whole flag of @tid. 0 or -errno. */
int bpf_threads__set_walk_whole(struct bpf_sampler *s, pid_t tid, bool on);
/* Move the anchors the frame cache asked for during the poll. */
void bpf_threads__reanchor(struct bpf_sampler *s);
/* Zero the anchors we wrote that are still ours (once, at stop). */
void bpf_threads__release_anchors(struct bpf_sampler *s);

/* records.c */
int bpf_records__on_record(void *ctx, void *data, size_t size);
uint32_t bpf_records__sample_flags(uint32_t rec_flags);

/* intervals.c */
void bpf_intervals__open(struct bpf_sampler *s, const struct pyprof_sample *r,
			 const struct frame_cache_out *fo,
			 const struct tick_tasks *tasks);
void bpf_intervals__keep_last_stack(struct bpf_sampler *s, const struct pyprof_sample *r,
				    const struct frame_cache_out *fo);
void bpf_intervals__on_switch(struct bpf_sampler *s, const struct pyprof_switch *e);
int bpf_intervals__on_switch_in(struct bpf_sampler *s, const struct pyprof_switch_in *e);
/* Drop the closed intervals (last stacks) of the target's threads gone
 * as of the last scan. */
void bpf_intervals__prune(struct bpf_sampler *s);
void bpf_intervals__seed(struct bpf_sampler *s);

/* config.c */
int bpf_config__fill(struct pyprof_config *c, const struct pyproc *p,
		     unsigned int max_frames, bool cache, char *err, size_t errlen);
void bpf_config__entries(const struct bpf_sampler *s, struct pyprof_config *c,
			 const struct py_offsets *o);
void bpf_config__offcpu(const struct bpf_sampler *s, struct pyprof_config *c);
bool bpf_config__gil(struct bpf_sampler *s, struct pyproc *p, struct pyprof_config *c,
		     struct py_gil_gc *g);
/* Write @pid's entry of the procs map: configured with @c, or not. */
int bpf_config__write_proc(struct bpf_sampler *s, pid_t pid, const struct pyprof_config *c);

#endif
