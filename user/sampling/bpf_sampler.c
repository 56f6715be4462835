// SPDX-License-Identifier: MIT
/*
 * bpf_sampler.c - load bpf/pyprof.bpf.c, attach it to the target's threads
 * and turn its ring-buffer records into struct raw_sample.
 *
 * Lifecycle: open the skeleton, size the maps, load, attach per-CPU events
 * and tracepoints (bpf_sampler__load); then, once the target is known
 * (bpf_sampler__set_target: at once for -p, after the exec for a command
 * started), write its offsets into the procs map and, with per-thread
 * events, attach one software cpu-clock event per thread (perf_event_open +
 * a BPF perf link). Events are opened
 * with inherit=1 and inherit_thread=1: the kernel copies an event, with its
 * BPF program, into every thread its thread creates, so new threads are
 * sampled from their first tick without us racing to find them. Closing the
 * original event removes every inherited copy, which is why the events of
 * exited threads are kept until bpf_sampler__free().
 *
 * Per-CPU events (sampler_opts.events): one cpu-clock event per online CPU
 * instead, for every task; the program keeps the target's ticks (config.tgid)
 * and drops the others after one comparison. Per-thread events are stopped
 * and restarted at every context switch of the target, which costs the target
 * a timer reprogramming each way (VM exits on a VM) and leaves the switch
 * itself unsampled: measured here on 32 threads handing the GIL over ~7,700
 * times/s, per-thread events sample 94% of the target's CPU time and add ~5%
 * to it; per-CPU events 99.5%, and add nothing per switch. Their price is a
 * timer on every CPU at the sampling rate whatever runs there.
 *
 * The kernel swaps the perf contexts of a parent thread and its inherited
 * children at context switches, so an event's bpf_cookie does not say which
 * thread it runs on; the program attributes samples by the current tid only
 * and the loader never opens a second event on a thread that has one (that
 * would double its samples). A thread is known to have an event once the
 * program has counted a sample for it in the threads map.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pyprof.h"
#include "pyprof.skel.h"
#include "sampling/bpf_sampler.h"
#include "symbols/frame_cache.h"
#include "target/procfs.h"
#include "offcpu/intervals.h"
#include "util/clock.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
/* Inode number of the initial PID namespace (the kernel's PROC_PID_INIT_INO). */
#define INIT_PID_NS_INO 0xEFFFFFFCUL

#define DEFAULT_MAX_FRAMES	2048
#define THREADS_MAP_ENTRIES	16384
/*
 * The ring holds this much of records at the asked rate on every online CPU
 * at a typical depth: the record loop drains it every 10 ms, so a slow
 * round has slack before records are lost (and counted). Capped: the ring's
 * pages are mapped twice (for wrap-around reads), and both count in RSS.
 */
#define RING_SLACK_MS		200
#define RING_TYPICAL_FRAMES	128
#define RING_MIN		(4UL << 20)
#define RING_MAX		(16UL << 20)
/* --events auto: per-CPU events while CPUs x rate stays at most this many
 * ticks per second (200 CPUs at 1 kHz, 2,000 at 100 Hz) and the rate at most
 * AUTO_CPU_MAX_HZ. A per-CPU tick interrupts whatever runs on that CPU: the
 * bench's bystander cells (README, Benchmark) measured 14-16 us of another
 * process's time per tick in this VM: 0.05% of every CPU at 99 Hz, 1.3% at
 * 1 kHz, 13% at 10 kHz; per-thread events cost the others nothing measurable,
 * and delivered the same samples per CPU-second of a GIL-switching target. */
#define AUTO_CPU_TICKS		200000
#define AUTO_CPU_MAX_HZ		1000
/*
 * A thread that appeared after attach and ran this many sampling periods of
 * CPU time without a single sample has no inherited event (it was created
 * while we were attaching): it gets its own.
 */
#define UNCOVERED_PERIODS	5
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
#define LOOKUP_STEPS		4096
#define LOOKUP_RETRY_NS		(2 * 1000000ULL)
/* Threads re-anchored per poll at most (one write each, after one read of
 * the thread lists). */
#define REANCHOR_PER_POLL	4

_Static_assert(sizeof(struct pyprof_frame) == sizeof(struct py_rawframe) &&
	       offsetof(struct pyprof_frame, frame) == offsetof(struct py_rawframe, frame) &&
	       offsetof(struct pyprof_frame, code) == offsetof(struct py_rawframe, code) &&
	       offsetof(struct pyprof_frame, instr) == offsetof(struct py_rawframe, instr) &&
	       offsetof(struct pyprof_frame, code_version) ==
	       offsetof(struct py_rawframe, code_version) &&
	       offsetof(struct pyprof_frame, flags) == offsetof(struct py_rawframe, reserved),
	       "records are handed out without copying");
_Static_assert((int)PYPROF_FF_NO_SNAPSHOT == (int)SAMPLE_FF_NO_SNAPSHOT, "frame flags are the record's");
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
	       PYPROF_MAX_TASKS == SAMPLE_MAX_TASKS &&
	       PYPROF_TASK_NAME_MAX == SAMPLE_TASK_NAME_MAX, "one task-chain vocabulary");

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
};

struct bpf_sampler {
	struct pyproc *proc;
	pid_t pid;
	struct pyprof_bpf *skel;
	struct ring_buffer *rb;
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
	bool inherit;		/* new threads inherit their creator's event */
	bool per_cpu;		/* one event per CPU instead of per thread */
	struct bpf_link **cpu_links;
	int ncpu_links;
	bool no_frame_cache;	/* sampler_opts.no_frame_cache */
	struct bpf_link *tp_links[3];	/* exec; fork, exit (following children) */
	bool attached;		/* the first scan is done */
	/* A thread the last refresh did not know has been sampled (it has no
	 * thread state in the map yet): refresh soon. */
	bool unknown_tid;
	bool settled;		/* the last refresh changed nothing */

	struct bpf_thread *th;	/* live threads, sorted by tid */
	size_t nth;
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

	uint64_t samples, truncated, errors;

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
	} tks[64];
};

static int write_proc(struct bpf_sampler *s, pid_t pid, const struct pyprof_config *c);
static bool gil_config(struct bpf_sampler *s, struct pyproc *p, struct pyprof_config *c,
		       struct py_gil_gc *g);

static int print_nothing(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static int print_warnings(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int print_all(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return vfprintf(stderr, fmt, ap);
}

static bool has_cap(const struct __user_cap_data_struct data[2], unsigned int cap)
{
	return data[cap / 32].effective & (1U << (cap % 32));
}

/*
 * The BPF backend needs root, or CAP_BPF (load programs, maps) and
 * CAP_PERFMON (tracing programs, perf events), which CAP_SYS_ADMIN implies
 * too, and CAP_SYS_PTRACE: userspace reads the target's memory and, on
 * 3.15, writes its frame-cache anchor, whoever the target (or a child it
 * starts) runs as. Each one missing from the effective set is named.
 */
static int check_privileges(char *why, size_t len)
{
	static const struct {
		unsigned int cap;
		bool by_admin;		/* CAP_SYS_ADMIN grants it as well */
		const char *name;
	} needed[] = {
		{ CAP_BPF, true, "CAP_BPF" },
		{ CAP_PERFMON, true, "CAP_PERFMON" },
		{ CAP_SYS_PTRACE, false, "CAP_SYS_PTRACE" },
	};
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};
	char missing[64] = "";
	size_t n = 0, nmissing = 0;
	struct stat st;

	if (syscall(SYS_capget, &hdr, data)) {
		snprintf(why, len, "cannot read capabilities: %s", strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		if (has_cap(data, needed[i].cap) ||
		    (needed[i].by_admin && has_cap(data, CAP_SYS_ADMIN)))
			continue;
		n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s%s",
				      nmissing ? ", " : "", needed[i].name);
		nmissing++;
	}
	if (nmissing) {
		snprintf(why, len, "BPF needs root, or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE; "
			 "missing: %s", missing);
		return -EPERM;
	}
	/* The program sees host tids; ours must be the same numbers. */
	if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != INIT_PID_NS_INO) {
		snprintf(why, len, "BPF backend must run in the host's PID namespace");
		return -ENOTSUP;
	}
	return 0;
}

int bpf_sampler__available(char *why, size_t len)
{
	libbpf_print_fn_t old;
	const char *missing = NULL;
	int err;

	err = check_privileges(why, len);
	if (err)
		return err;
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		snprintf(why, len, "kernel has no BTF (/sys/kernel/btf/vmlinux)");
		return -ENOTSUP;
	}
	/* The probes load tiny programs: they also catch a seccomp filter or
	 * a lockdown that forbids bpf() despite the capabilities. */
	old = libbpf_set_print(print_nothing);
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) != 1)
		missing = "perf_event BPF programs";
	else if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
		missing = "BPF ring buffers (5.8+)";
	else if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) != 1)
		missing = "bpf_loop (5.17+)";
	libbpf_set_print(old);
	if (missing) {
		snprintf(why, len, "kernel cannot run the BPF sampler: no %s", missing);
		return -ENOTSUP;
	}
	return 0;
}

static long read_long(const char *path)
{
	char buf[32];
	FILE *f = fopen(path, "re");
	long v = -1;

	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 10);
	fclose(f);
	return v;
}

/* The walk's config from the flat offsets table, checked against what the
 * BPF program can read. */
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

static int fill_config(struct pyprof_config *c, const struct py_offsets *o, uint64_t runtime,
		       unsigned int max_frames, bool cache, char *err, size_t errlen)
{
	const struct { const char *name; uint64_t off, len; } fields[] = {
		{ "previous", o->frame_previous, 8 },
		{ "executable", o->frame_executable, 8 },
		{ "instr_ptr", o->frame_instr_ptr, 8 },
		{ "owner", o->frame_owner, o->frame_owner_interp_min ? 1 : 0 },
	};
	uint64_t need = 0, end;
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		end = fields[i].off + fields[i].len;
		if (fields[i].off > PYPROF_FRAME_READ_MAX || end > PYPROF_FRAME_READ_MAX) {
			snprintf(err, errlen, "frame field %s at offset %llu is beyond the "
				 "%d bytes the BPF walk reads", fields[i].name,
				 (unsigned long long)fields[i].off, PYPROF_FRAME_READ_MAX);
			return -EPROTO;
		}
		if (end > need)
			need = end;
	}
	if (o->frame_size < need) {
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
	/* Code snapshots: the code object's fields up to _co_firsttraceable. */
	if (o->code_size <= PYPROF_CODE_OBJ_MAX && o->code_qualname + 8 <= o->code_size &&
	    o->code_filename + 8 <= o->code_size && o->code_linetable + 8 <= o->code_size &&
	    o->unicode_state + 4 <= 64 && o->unicode_length + 8 <= 64 &&
	    o->unicode_ascii_data <= 64 && o->unicode_compact_data <= PYPROF_CODE_QUAL_MAX) {
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
	return 0;
}

static size_t ring_size(unsigned int freq_hz)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t want;
	size_t size = RING_MIN;

	if (cpus < 1)
		cpus = 1;
	want = (uint64_t)freq_hz * cpus * RING_SLACK_MS / 1000 *
	       PYPROF_SAMPLE_SIZE(RING_TYPICAL_FRAMES);
	while (size < want && size < RING_MAX)
		size <<= 1;
	return size;
}

/* An event on thread @tid (any CPU), or with @tid -1 on CPU @cpu (any task). */
static int open_event(struct bpf_sampler *s, pid_t tid, int cpu, struct bpf_link **out)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = s->freq_hz,
		.freq = 1,
		.inherit = s->inherit,
		/* Threads, not fork()ed children; and nothing survives an
		 * exec(), which replaces the interpreter we know. */
		.inherit_thread = s->inherit,
		.remove_on_exec = s->inherit,
	};
	struct bpf_link *link;
	int fd, err;

	fd = syscall(SYS_perf_event_open, &attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	link = bpf_program__attach_perf_event(s->skel->progs.pyprof_sample, fd);
	if (!link) {
		err = -errno;
		close(fd);
		return err;
	}
	*out = link;
	return 0;
}

static bool off_cpu(const struct bpf_sampler *s)
{
	return s->mode == SAMPLER_MODE_OFFCPU || s->mode == SAMPLER_MODE_WALL;
}

/* Off-CPU modes: the scheduler's switch and wake-up tracepoints. */
static int attach_sched(struct bpf_sampler *s, char *err, size_t errlen)
{
	struct bpf_program *progs[] = { s->skel->progs.pyprof_switch,
					s->skel->progs.pyprof_wakeup };

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		s->sched_links[i] = bpf_program__attach(progs[i]);
		if (!s->sched_links[i]) {
			int ret = -errno;

			snprintf(err, errlen, "cannot attach the %s tracepoint: %s",
				 bpf_program__name(progs[i]), strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/*
 * The exec tracepoint (a tracked process's execs: o->exec_events), and with
 * @children the fork and exit ones that follow child processes.
 */
static int attach_tracepoints(struct bpf_sampler *s, bool children, char *err, size_t errlen)
{
	struct bpf_program *progs[] = {
		s->skel->progs.pyprof_exec, s->skel->progs.pyprof_fork, s->skel->progs.pyprof_exit,
	};

	for (size_t i = 0; i < (children ? 3 : 1); i++) {
		s->tp_links[i] = bpf_program__attach(progs[i]);
		if (!s->tp_links[i]) {
			int ret = -errno;

			s->tp_links[i] = NULL;
			snprintf(err, errlen, "cannot attach the %s tracepoint: %s",
				 bpf_program__name(progs[i]), strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Nanoseconds @tid has spent on a CPU (needs CONFIG_SCHED_INFO). */
static int thread_runtime(pid_t pid, pid_t tid, uint64_t *ns)
{
	unsigned long long v;
	char path[64];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%llu", &v) == 1)
		*ns = v;
	else
		err = -EIO;
	fclose(f);
	return err;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static int cmp_thread(const void *key, const void *elem)
{
	pid_t x = *(const pid_t *)key, y = ((const struct bpf_thread *)elem)->tid;

	return (x > y) - (x < y);
}

static struct bpf_thread *find_thread(struct bpf_thread *th, size_t n, pid_t tid)
{
	return bsearch(&tid, th, n, sizeof(*th), cmp_thread);
}

static int grow(void *pp, size_t *cap, size_t want, size_t elem)
{
	void *p;
	size_t n = *cap ? *cap : 64;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	p = realloc(*(void **)pp, n * elem);
	if (!p)
		return -ENOMEM;
	*(void **)pp = p;
	*cap = n;
	return 0;
}

/* Sorted tids of the target's live threads into s->tids. */
static int scan_tasks(struct bpf_sampler *s, size_t *n)
{
	char path[64], state = 0, buf[512], *p;
	struct dirent *e;
	size_t cnt = 0;
	FILE *f;
	DIR *d;
	int err = 0;

	/* A zombie still lists its main thread: it is gone all the same. */
	snprintf(path, sizeof(path), "/proc/%d/stat", s->pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1])
		state = p[2];
	fclose(f);
	if (state == 'Z' || state == 'X')
		return -ESRCH;

	snprintf(path, sizeof(path), "/proc/%d/task", s->pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((e = readdir(d))) {
		long tid = strtol(e->d_name, &p, 10);

		if (*p || tid <= 0)
			continue;
		err = grow(&s->tids, &s->cap_tids, cnt + 1, sizeof(*s->tids));
		if (err)
			break;
		s->tids[cnt++] = tid;
	}
	closedir(d);
	if (err)
		return err;
	qsort(s->tids, cnt, sizeof(*s->tids), cmp_tid);
	*n = cnt;
	return 0;
}

/* The target's tid -> tstate pairs into s->pyth; -EFAULT when unreadable. */
static int scan_pythreads(struct bpf_sampler *s, size_t *n)
{
	size_t want = s->cap_pyth ? s->cap_pyth : 256;
	int err;

	for (;;) {
		err = grow(&s->pyth, &s->cap_pyth, want, sizeof(*s->pyth));
		if (err)
			return err;
		err = pyproc__threads(s->proc, s->pyth, s->cap_pyth, n);
		/* More threads than the map holds: the first ones will do. */
		if (err != -E2BIG || s->cap_pyth >= THREADS_MAP_ENTRIES)
			return err == -E2BIG ? 0 : err;
		want = s->cap_pyth * 2;
	}
}

static void retire_thread(struct bpf_sampler *s, struct bpf_thread *t)
{
	__u32 key = t->tid;

	frame_cache__forget(s->fc, t->tid);
	if (t->in_map)
		bpf_map_delete_elem(s->threads_fd, &key);
	if (s->native_stack)
		bpf_sampler__set_stack_end(s, t->tid, 0);
	if (!t->link)
		return;
	if (grow(&s->retired, &s->cap_retired, s->nretired + 1, sizeof(*s->retired))) {
		/* Out of memory: closing it may cost inherited copies their
		 * event for a refresh or two, leaking it would cost more. */
		bpf_link__destroy(t->link);
		return;
	}
	s->retired[s->nretired++] = t->link;
}

/*
 * Write @t's thread state to the map, keeping what the program keeps there.
 * The program finds thread states itself (a thread created since the last
 * scan, or one whose state changed): a state it found is not replaced by
 * "none" from a scan that predates it, as it checks its states at every use.
 */
static int update_map(struct bpf_sampler *s, struct bpf_thread *t, uint64_t tstate)
{
	struct pyprof_thread v = {};
	__u32 key = t->tid;
	bool had;

	/* The scan says what it said last time: nothing to reconcile (no
	 * syscall per thread per refresh). */
	if (t->in_map && t->scanned == tstate)
		return 0;
	had = !bpf_map_lookup_elem(s->threads_fd, &key, &v);
	t->scanned = tstate;
	if (had && (v.tstate == tstate || (!tstate && v.tstate))) {
		t->in_map = true;
		t->tstate = v.tstate;
		return 0;
	}
	v.tstate = tstate;
	v.lookup_ns = 0;
	v.misses = 0;
	v.nstates = 0;	/* unknown: the program looks when it is not active */
	if (tstate)
		v.had_state = 1;
	/* Nothing cached for this thread state: walk whole until there is. */
	v.walk_whole = 1;
	frame_cache__forget(s->fc, t->tid);
	if (bpf_map_update_elem(s->threads_fd, &key, &v, BPF_ANY))
		return -errno;
	t->in_map = true;
	t->tstate = tstate;
	return 0;
}

/* Does pending thread @t need an event of its own? */
static bool uncovered(struct bpf_sampler *s, struct bpf_thread *t)
{
	struct pyprof_thread v = {};
	__u32 key = t->tid;
	uint64_t now;

	if (t->in_map && !bpf_map_lookup_elem(s->threads_fd, &key, &v) && v.samples) {
		t->kind = THREAD_INHERITED;
		return false;
	}
	if (thread_runtime(s->pid, t->tid, &now))
		return false;
	if (!t->runtime_known) {
		t->runtime0 = now;
		t->runtime_known = true;
		return false;
	}
	return now - t->runtime0 >= UNCOVERED_PERIODS * (1000000000ULL / s->freq_hz);
}

int bpf_sampler__refresh(struct bpf_sampler *s)
{
	struct bpf_thread *next = NULL, *t;
	size_t ntids, npy = 0, i;
	bool have_py, changed = false;
	int err, first_err = 0;

	s->unknown_tid = false;
	s->settled = false;
	if (!s->proc)	/* no target yet (bpf_sampler__set_target) */
		return 0;
	/* A command started: its GIL comes a moment after its runtime. */
	if (!s->gil_known && gil_config(s, s->proc, &s->main_cfg, &s->gil)) {
		s->gil_known = true;
		write_proc(s, s->pid, &s->main_cfg);
	}
	/* The last stacks of the target's threads that are gone (as of the
	 * last scan); other processes' are kept. */
	for (size_t k = 0; s->ivs && k < offcpu_ivs__count(s->ivs);) {
		struct offcpu_iv *iv = offcpu_ivs__at(s->ivs, k);

		if (!iv->open && iv->pid == s->pid && !find_thread(s->th, s->nth, iv->tid))
			offcpu_ivs__remove(s->ivs, iv->tid);
		else
			k++;
	}
	err = scan_tasks(s, &ntids);
	if (err)
		return err;
	err = scan_pythreads(s, &npy);
	if (err == -ESRCH)
		return err;
	/* A torn read of the target's lists: keep the states we had. */
	have_py = !err;

	next = calloc(ntids ? ntids : 1, sizeof(*next));
	if (!next)
		return -ENOMEM;
	/* Carry known threads over (s->th stays sorted), add new ones. */
	for (i = 0; i < ntids; i++) {
		t = find_thread(s->th, s->nth, s->tids[i]);
		if (t) {
			next[i] = *t;
			t->tid = 0;	/* carried over */
			continue;
		}
		changed = true;
		next[i].tid = s->tids[i];
		if (!s->attached || !s->inherit) {
			next[i].kind = THREAD_OWN;
		} else {
			next[i].kind = THREAD_PENDING;
			next[i].runtime_known = !thread_runtime(s->pid, s->tids[i],
								&next[i].runtime0);
		}
	}
	for (i = 0; i < s->nth; i++)
		if (s->th[i].tid) {
			changed = true;
			retire_thread(s, &s->th[i]);
		}
	free(s->th);
	s->th = next;
	s->nth = ntids;

	/* Thread states before events, so the first samples find them. */
	for (i = 0; i < s->nth; i++)
		s->th[i].next_tstate = have_py ? 0 : s->th[i].tstate;
	for (i = 0; have_py && i < npy; i++) {
		t = find_thread(s->th, s->nth, s->pyth[i].host_tid);
		if (t)
			t->next_tstate = s->pyth[i].tstate;
	}
	for (i = 0; i < s->nth; i++) {
		if (!s->th[i].in_map || s->th[i].scanned != s->th[i].next_tstate)
			changed = true;
		err = update_map(s, &s->th[i], s->th[i].next_tstate);
		if (err && !first_err)
			first_err = err;
	}

	for (i = 0; !s->per_cpu && i < s->nth; i++) {
		t = &s->th[i];
		if (t->kind == THREAD_PENDING && uncovered(s, t))
			t->kind = THREAD_OWN;
		if (t->kind != THREAD_OWN || t->link)
			continue;
		err = open_event(s, t->tid, -1, &t->link);
		/* A thread that exited meanwhile goes at the next scan. */
		if (err && err != -ESRCH && !first_err)
			first_err = err;
	}
	s->attached = true;
	s->settled = have_py && !changed && !first_err;
	return first_err;
}

/* The kernel's walk_whole flag of @tid (read-modify-write: the program
 * counts samples in the same value). */
static int set_walk_whole(struct bpf_sampler *s, pid_t tid, bool on)
{
	struct pyprof_thread v;
	__u32 key = tid;

	if (bpf_map_lookup_elem(s->threads_fd, &key, &v))
		return -errno;
	v.walk_whole = on;
	if (bpf_map_update_elem(s->threads_fd, &key, &v, BPF_EXIST))
		return -errno;
	return 0;
}

static void queue_reanchor(struct bpf_sampler *s, pid_t tid)
{
	for (size_t i = 0; i < s->nreanchor; i++)
		if (s->reanchor[i] == tid)
			return;
	if (s->nreanchor < REANCHOR_PER_POLL)
		s->reanchor[s->nreanchor++] = tid;
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

void bpf_sampler__set_proc_fn(struct bpf_sampler *s, proc_fn fn, void *ctx)
{
	s->proc_fn = fn;
	s->proc_ctx = ctx;
}

/* Write @pid's entry of the procs map: configured with @c, or not. */
static int write_proc(struct bpf_sampler *s, pid_t pid, const struct pyprof_config *c)
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

/*
 * Off-CPU modes: a switch-out in the same innermost frame at the same
 * instruction as the thread's last walk, within OFFCPU_REUSE_NS of it,
 * stands on that walk's stack (32 threads handing the GIL over 8,000 times
 * a second leave the CPU every 4 ms each).
 */
#define OFFCPU_REUSE_NS (20 * 1000000ULL)

static void offcpu_config(const struct bpf_sampler *s, struct pyprof_config *c)
{
	c->offcpu_walk_ns = off_cpu(s) ? OFFCPU_REUSE_NS : 0;
}

/* --native: the entry frames the merge needs, sent and flagged. */
static void entries_config(const struct bpf_sampler *s, struct pyprof_config *c,
			   const struct py_offsets *o)
{
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
static bool gil_config(struct bpf_sampler *s, struct pyproc *p, struct pyprof_config *c,
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

	ret = fill_config(&c, pyproc__offsets(p), pyproc__runtime(p), s->max_frames, false,
			  err, errlen);
	if (ret)
		return ret;
	entries_config(s, &c, pyproc__offsets(p));
	offcpu_config(s, &c);
	gil_config(s, p, &c, &g);
	/* A new generation: its code objects' snapshots are sent again (a
	 * process configured anew may have dropped those it had). */
	c.snap_gen = ++s->snap_gen;
	ret = write_proc(s, pyproc__pid(p), &c);
	if (ret)
		snprintf(err, errlen, "cannot add process %d to the BPF map: %s",
			 (int)pyproc__pid(p), strerror(-ret));
	return ret;
}

int bpf_sampler__set_async(struct bpf_sampler *s, const struct sampler_async *a)
{
	struct pyprof_config *c = &s->main_cfg;

	if (!s->skel->rodata->async_tasks)
		return -EINVAL;		/* the program was loaded without it */
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
	return write_proc(s, s->pid, c);
}

int bpf_sampler__track_process(struct bpf_sampler *s, pid_t pid)
{
	return write_proc(s, pid, NULL);
}

void bpf_sampler__forget_process(struct bpf_sampler *s, pid_t pid)
{
	__u32 key = (__u32)pid;

	if (pid != s->pid && !bpf_map_delete_elem(s->procs_fd, &key))
		__atomic_fetch_add(&s->skel->bss->procs_epoch, 1, __ATOMIC_SEQ_CST);
}

void bpf_sampler__set_code_fn(struct bpf_sampler *s, code_fn fn, void *ctx)
{
	s->code_fn = fn;
	s->code_ctx = ctx;
}

static void count_status(struct bpf_sampler *s, uint32_t status)
{
	s->samples++;
	if (status == PYPROF_TRUNCATED)
		s->truncated++;
	else if (status != PYPROF_COMPLETE && status != PYPROF_THREAD_YOUNG &&
		 status != PYPROF_THREAD_EXIT && status != PYPROF_EVAL_ENTRY)
		s->errors++;
}

static uint32_t sample_flags(uint32_t rec_flags)
{
	return (rec_flags & PYPROF_SF_GIL_KNOWN ? SAMPLE_F_GIL_KNOWN : 0) |
	       (rec_flags & PYPROF_SF_GIL_HELD ? SAMPLE_F_GIL_HELD : 0) |
	       (rec_flags & PYPROF_SF_GC ? SAMPLE_F_GC : 0);
}

/* A thread left the CPU: its stack, kept until it is back. */
static void open_interval(struct bpf_sampler *s, const struct pyprof_sample *r,
			  const struct frame_cache_out *fo)
{
	struct offcpu_iv *iv;

	if (!s->ivs)
		return;
	iv = offcpu_ivs__get(s->ivs, (pid_t)r->tid, true);
	if (!iv) {
		s->lost_intervals++;
		return;
	}
	if (iv->open && !iv->seeded) {
		s->overwritten++;
		if (s->verbose)
			fprintf(stderr, "pyprof-bpf: tid %u left the CPU at %llu again, its interval "
				"from %llu never closed\n", r->tid, (unsigned long long)r->ts_ns,
				(unsigned long long)iv->out_ns);
	}
	iv->pid = (pid_t)r->pid;
	iv->cpu = r->cpu;
	iv->out_ns = r->ts_ns;
	iv->syscall_nr = -1;
	iv->syscall_arg0 = 0;
	iv->seeded = false;
	iv->open = true;
	/* Not walked: the thread's last stack stands (its kernel stack and
	 * system call, this wait's own, follow). */
	iv->nkstack = 0;
	if (r->flags & PYPROF_SF_REUSE) {
		if (!iv->nframes && iv->status == PYPROF_COMPLETE)
			iv->status = PYPROF_NO_PYSTATE;
		s->reused++;
		return;
	}
	iv->status = fo->status;
	iv->flags = sample_flags(r->flags);
	if (offcpu_iv__set_frames(iv, fo->frames, fo->nframes))
		iv->status = PYPROF_TRUNCATED;
}

/* Off-CPU modes: a tick's stack is its thread's last, for a switch-out
 * that is not walked. */
static void keep_last_stack(struct bpf_sampler *s, const struct pyprof_sample *r,
			    const struct frame_cache_out *fo)
{
	struct offcpu_iv *iv = offcpu_ivs__get(s->ivs, (pid_t)r->tid, true);

	if (!iv || iv->open)
		return;
	iv->pid = (pid_t)r->pid;
	iv->status = fo->status;
	iv->flags = sample_flags(r->flags) & ~(SAMPLE_F_GIL_KNOWN | SAMPLE_F_GIL_HELD);
	iv->nkstack = 0;
	if (offcpu_iv__set_frames(iv, fo->frames, fo->nframes))
		iv->status = PYPROF_TRUNCATED;
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

#define SLOT_OF(arr, tid) (&(arr)[(uint32_t)(tid) % (sizeof(arr) / sizeof((arr)[0]))])

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
		s->errors++;
		return;
	}
	t->tid = (pid_t)e->tid;
	t->n = n;
	t->flags = e->flags;
	for (uint32_t i = 0; i < n; i++) {
		t->t[i].task = e->tasks[i].task;
		t->t[i].coro = e->tasks[i].coro;
		t->t[i].nawaiters = e->tasks[i].nawaiters;
		t->t[i].name_len = e->tasks[i].name_len < SAMPLE_TASK_NAME_MAX ?
				   e->tasks[i].name_len : SAMPLE_TASK_NAME_MAX;
		t->t[i].name_type_flags = e->tasks[i].name_type_flags;
		memcpy(t->names[i], e->tasks[i].name, t->t[i].name_len);
		t->t[i].name = t->names[i];
	}
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

/* Why a blocked thread left the CPU: follows its sample. */
static void on_switch(struct bpf_sampler *s, const struct pyprof_switch *e)
{
	struct offcpu_iv *iv = s->ivs ? offcpu_ivs__get(s->ivs, (pid_t)e->tid, false) : NULL;
	uint32_t n = e->nkstack < OFFCPU_KSTACK_MAX ? e->nkstack : OFFCPU_KSTACK_MAX;

	if (!iv)
		return;
	iv->syscall_nr = e->syscall_nr;
	iv->syscall_arg0 = e->syscall_arg0;
	iv->nkstack = n;
	memcpy(iv->kstack, e->kstack, n * sizeof(iv->kstack[0]));
}

#define SYSCALL_FUTEX 202	/* x86-64 */

/*
 * Deliver @iv as one off-CPU sample: blocked from @off to @wake (to @in when
 * no wake-up was seen), runnable from @wake to @in, stamped @in. Returns 0
 * or the sample function's non-zero return.
 */
static int deliver_interval(struct bpf_sampler *s, const struct offcpu_iv *iv, uint64_t off,
			    uint64_t wake, uint64_t in)
{
	struct raw_sample rs = { 0 };

	if (in < off)
		in = off;
	if (wake && (wake < off || wake > in))
		wake = wake < off ? off : in;
	rs.pid = iv->pid;
	rs.tid = iv->tid;
	rs.cpu = iv->cpu;
	rs.ts_ns = in;
	rs.status = iv->status;
	rs.nframes = iv->nframes;
	rs.frames = iv->frames;
	rs.kind = SAMPLE_KIND_OFFCPU;
	rs.flags = iv->flags;
	rs.blocked_ns = (wake ? wake : in) - off;
	rs.runnable_ns = wake ? in - wake : 0;
	rs.syscall_nr = iv->syscall_nr;
	rs.syscall_arg0 = iv->syscall_arg0;
	rs.nkstack = iv->nkstack;
	rs.kstack = iv->kstack;
	/* Asleep on the GIL's condition or mutex: waiting to take it. */
	if (iv->pid == s->pid && s->gil_known && iv->syscall_nr == SYSCALL_FUTEX &&
	    iv->syscall_arg0 - s->gil.gil < s->gil.gil_size)
		rs.flags |= SAMPLE_F_GIL_WAIT;
	count_status(s, iv->status);
	return s->fn(s->fn_ctx, &rs);
}

/* A thread is back on a CPU: its interval, delivered. */
static int on_switch_in(struct bpf_sampler *s, const struct pyprof_switch_in *e)
{
	struct offcpu_iv *iv = s->ivs ? offcpu_ivs__get(s->ivs, (pid_t)e->tid, false) : NULL;
	int ret;

	if (!iv || !iv->open) {
		/* Its stack's record was lost (ring full), or it left
		 * before the target was configured. */
		s->lost_intervals++;
		return 0;
	}
	ret = deliver_interval(s, iv, e->off_ns, e->wake_ns, e->in_ns);
	iv->open = false;
	iv->seeded = false;
	if (ret) {
		s->fn_ret = ret;
		return -ECANCELED;
	}
	return 0;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct bpf_sampler *s = ctx;
	const struct pyprof_sample *r = data;
	struct frame_cache_rec fr;
	struct frame_cache_out fo;
	struct raw_sample rs;
	const struct tick_kstack *kst;
	const struct tick_ustack *ust;
	const struct tick_tasks *tks;
	int ret;

	if (size >= sizeof(__u32) && r->kind == PYPROF_REC_CODE) {
		on_code(s, data, size);
		return 0;
	}
	if (size >= sizeof(struct pyprof_proc_event) && r->kind == PYPROF_REC_PROC) {
		const struct pyprof_proc_event *e = data;

		if (s->proc_fn)
			s->proc_fn(s->proc_ctx, (enum sampler_proc_event)e->event, (pid_t)e->pid,
				   (pid_t)e->ppid, e->ts_ns);
		return 0;
	}
	if (size >= sizeof(struct pyprof_switch) && r->kind == PYPROF_REC_SWITCH) {
		on_switch(s, data);
		return 0;
	}
	if (size >= sizeof(struct pyprof_switch_in) && r->kind == PYPROF_REC_SWITCH_IN)
		return on_switch_in(s, data);
	if (size >= sizeof(struct pyprof_switch) && r->kind == PYPROF_REC_KSTACK) {
		on_tick_kstack(s, data);
		return 0;
	}
	/* As long as its copy (kernels that size records at run time), or
	 * the whole struct. */
	if (size >= offsetof(struct pyprof_ustack, stack) && r->kind == PYPROF_REC_USTACK &&
	    ((const struct pyprof_ustack *)data)->len <= size - offsetof(struct pyprof_ustack, stack)) {
		on_tick_ustack(s, data);
		return 0;
	}
	if (size >= PYPROF_TASKS_SIZE(0) && r->kind == PYPROF_REC_TASKS) {
		on_tick_tasks(s, data, size);
		return 0;
	}
	if (size < PYPROF_SAMPLE_HDR_SIZE || r->nframes > PYPROF_MAX_FRAMES ||
	    size < PYPROF_SAMPLE_SIZE(r->nframes)) {
		s->errors++;
		return 0;
	}
	if (r->flags & PYPROF_SF_REUSE) {
		/* No stack in it: nothing for the frame cache. */
		open_interval(s, r, NULL);
		return 0;
	}
	if ((pid_t)r->pid != s->pid) {
		/* Another process: whole walks, Python frames only. */
		fo = (struct frame_cache_out){ .status = r->status, .nframes = r->nframes,
					       .frames = (const struct py_rawframe *)r->frames };
		goto deliver;
	}
	fr = (struct frame_cache_rec){
		.tid = r->tid, .ts_ns = r->ts_ns, .tstate = r->tstate,
		.status = r->status, .flags = r->flags,
		.anchor = r->cache_frame, .seq = r->cache_seq, .anchor_prev = r->cache_prev,
		.nframes = r->nframes, .frames = (const struct py_rawframe *)r->frames,
	};
	/* On -ENOMEM the record is passed on as it is, marked truncated. */
	frame_cache__process(s->fc, &fr, &fo);
	if (fo.set_walk_whole)
		set_walk_whole(s, r->tid, fo.walk_whole);
	if (fo.reanchor)
		queue_reanchor(s, r->tid);

deliver:
	if (r->status == PYPROF_NO_PYSTATE && (pid_t)r->pid == s->pid && !s->unknown_tid &&
	    !find_thread(s->th, s->nth, (pid_t)r->tid))
		s->unknown_tid = true;
	if (r->flags & PYPROF_SF_SWITCH_OUT) {
		/* Delivered when the thread runs again: its length known. */
		open_interval(s, r, &fo);
		return 0;
	}
	count_status(s, fo.status);
	if (s->ivs)
		keep_last_stack(s, r, &fo);

	memset(&rs, 0, sizeof(rs));
	rs.kind = SAMPLE_KIND_CPU;
	rs.flags = sample_flags(r->flags);
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
	rs.status = fo.status;
	rs.nframes = fo.nframes;
	rs.frames = fo.frames;
	rs.unchanged = fo.unchanged;
	ret = s->fn(s->fn_ctx, &rs);
	if (ret) {
		/* libbpf stops consuming on a negative return only. */
		s->fn_ret = ret;
		return -ECANCELED;
	}
	return 0;
}

/* Is (@tid, @tstate) among the @n threads the target lists right now? */
static bool still_linked(const struct py_thread *pyth, size_t n, pid_t tid, uint64_t tstate)
{
	for (size_t i = 0; i < n; i++)
		if (pyth[i].tstate == tstate && pyth[i].host_tid == tid)
			return true;
	return false;
}

/*
 * Move the anchors the frame cache asked for (one write each, no stop).
 * The map's thread states may be up to a refresh old, and a write into a
 * thread state freed meanwhile would land in whatever the target allocated
 * there since: each is first found again, linked in its interpreter's list,
 * by a fresh read of the lists just before the writes.
 */
static void reanchor(struct bpf_sampler *s)
{
	size_t npy = 0;

	if (scan_pythreads(s, &npy))
		npy = 0;	/* unreadable now: write nothing */
	for (size_t i = 0; i < s->nreanchor; i++) {
		pid_t tid = s->reanchor[i];
		struct bpf_thread *t = find_thread(s->th, s->nth, tid);

		if (!t || !t->tstate || !still_linked(s->pyth, npy, tid, t->tstate) ||
		    set_walk_whole(s, tid, true))
			continue;
		frame_cache__reanchor(s->fc, tid, t->tstate);
	}
	s->nreanchor = 0;
}

/*
 * On exit, zero the anchors we wrote that are still ours (anchor only, the
 * sequence kept: frame_cache__release()), in thread states found again,
 * linked in their interpreter's list, by a fresh read of the lists just
 * before, as reanchor() does. The target gone, or its lists unreadable:
 * nothing is written.
 */
static void release_anchors(struct bpf_sampler *s)
{
	struct frame_cache_stats st;
	size_t npy = 0;

	if (!s->fc || !s->cache)
		return;
	if (!scan_pythreads(s, &npy))
		frame_cache__release(s->fc, s->pyth, npy);
	if (s->verbose) {
		frame_cache__stats(s->fc, &st);
		fprintf(stderr, "pyprof-bpf: frame cache: %llu anchors cleared on exit, %llu left "
			"(written since by someone else)\n",
			(unsigned long long)st.anchors_cleared,
			(unsigned long long)st.anchors_left);
	}
}

int bpf_sampler__poll(struct bpf_sampler *s, sample_fn fn, void *ctx)
{
	int n;

	s->fn = fn;
	s->fn_ctx = ctx;
	s->fn_ret = 0;
	n = ring_buffer__consume(s->rb);
	if (s->fn_ret)
		return s->fn_ret;
	if (s->nreanchor)
		reanchor(s);
	return n;
}

int bpf_sampler__set_stack_end(struct bpf_sampler *s, pid_t tid, uint64_t end)
{
	size_t nslots = sizeof(s->ustack_ends) / sizeof(s->ustack_ends[0]);
	struct stack_end *slot = &s->ustack_ends[(uint32_t)tid % nslots];
	__u32 key = (__u32)tid;
	__u64 had = 0;
	int err;

	if (!end) {
		if (slot->tid == tid)
			slot->tid = 0;
		err = bpf_map_delete_elem(s->ustack_end_fd, &key);
		return err && errno != ENOENT ? -errno : 0;
	}
	if (slot->tid == tid && slot->end >= end)
		return 0;
	/* not ours to lower: another slot's thread may have set it higher */
	if (slot->tid != tid && !bpf_map_lookup_elem(s->ustack_end_fd, &key, &had) && had >= end) {
		*slot = (struct stack_end){ tid, had };
		return 0;
	}
	if (bpf_map_update_elem(s->ustack_end_fd, &key, &end, BPF_ANY))
		return -errno;
	*slot = (struct stack_end){ tid, end };
	return 0;
}

/* A per-CPU counter of the program, summed (0 when unreadable). */
static uint64_t counter(const struct bpf_sampler *s, __u32 key)
{
	uint64_t sum = 0;
	__u64 *v = calloc(s->ncpus, sizeof(*v));

	if (v && !bpf_map_lookup_elem(s->counters_fd, &key, v))
		for (int i = 0; i < s->ncpus; i++)
			sum += v[i];
	free(v);
	return sum;
}

void bpf_sampler__stats(const struct bpf_sampler *s, struct sampler_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->samples = s->samples;
	st->truncated = s->truncated;
	st->errors = s->errors;
	st->lost = counter(s, PYPROF_CNT_LOST);
}

bool bpf_sampler__execed(const struct bpf_sampler *s)
{
	return __atomic_load_n(&s->skel->bss->execed_seen, __ATOMIC_RELAXED) != 0;
}

bool bpf_sampler__settled(const struct bpf_sampler *s)
{
	return s->settled;
}

bool bpf_sampler__unknown_tid(const struct bpf_sampler *s)
{
	return s->unknown_tid;
}

bool bpf_sampler__per_cpu(const struct bpf_sampler *s)
{
	return s->per_cpu;
}

void bpf_sampler__stop(struct bpf_sampler *s)
{
	/* Closing an original event also removes its inherited copies. */
	for (size_t i = 0; i < s->nth; i++) {
		bpf_link__destroy(s->th[i].link);
		s->th[i].link = NULL;
	}
	for (size_t i = 0; i < s->nretired; i++)
		bpf_link__destroy(s->retired[i]);
	s->nretired = 0;
	for (int i = 0; i < s->ncpu_links; i++) {
		bpf_link__destroy(s->cpu_links[i]);
		s->cpu_links[i] = NULL;
	}
	for (size_t i = 0; i < sizeof(s->tp_links) / sizeof(s->tp_links[0]); i++) {
		bpf_link__destroy(s->tp_links[i]);
		s->tp_links[i] = NULL;
	}
	for (size_t i = 0; i < sizeof(s->sched_links) / sizeof(s->sched_links[0]); i++) {
		bpf_link__destroy(s->sched_links[i]);
		s->sched_links[i] = NULL;
	}
}

int bpf_sampler__finish_intervals(struct bpf_sampler *s, uint64_t end_ns, sample_fn fn, void *ctx)
{
	int ret = 0;

	if (!s->ivs)
		return 0;
	s->fn = fn;
	s->fn_ctx = ctx;
	while (offcpu_ivs__count(s->ivs)) {
		struct offcpu_iv *iv = offcpu_ivs__at(s->ivs, 0);
		struct pyprof_offcpu o = { 0 };
		__u32 key = (__u32)iv->tid;
		pid_t tid = iv->tid;

		if (!iv->open) {
			offcpu_ivs__remove(s->ivs, tid);
			continue;
		}

		/* The wake-up, if any, is only in the map. */
		if (bpf_map_lookup_elem(s->offcpu_fd, &key, &o) || !o.off_ns)
			o.off_ns = iv->out_ns, o.wake_ns = 0;
		if (!ret && o.off_ns < end_ns)
			ret = deliver_interval(s, iv, o.off_ns, o.wake_ns < end_ns ? o.wake_ns : 0,
					       end_ns);
		offcpu_ivs__remove(s->ivs, tid);
	}
	return ret;
}

uint64_t bpf_sampler__lost_intervals(const struct bpf_sampler *s)
{
	return s->lost_intervals;
}

void bpf_sampler__detail(const struct bpf_sampler *s, struct bpf_sampler_detail *d)
{
	*d = (struct bpf_sampler_detail){ 0 };
	if (s->verbose && s->cache && s->fc) {
		d->frame_cache = true;
		frame_cache__stats(s->fc, &d->fc);
	}
	if (s->ivs) {
		d->offcpu = true;
		d->reused_walks = s->reused;
		d->inferred = counter(s, PYPROF_CNT_SWITCH_IN_INFERRED);
		d->lost_intervals = s->lost_intervals;
	}
}

void bpf_sampler__free(struct bpf_sampler *s)
{
	if (!s)
		return;
	bpf_sampler__stop(s);
	release_anchors(s);
	ring_buffer__free(s->rb);
	pyprof_bpf__destroy(s->skel);
	frame_cache__free(s->fc);
	offcpu_ivs__free(s->ivs);
	for (size_t i = 0; i < sizeof(s->ust) / sizeof(s->ust[0]); i++)
		free(s->ust[i].stack);
	free(s->th);
	free(s->retired);
	free(s->cpu_links);
	free(s->tids);
	free(s->pyth);
	free(s);
}

static int load(struct bpf_sampler *s, const struct sampler_opts *o, char *err, size_t errlen)
{
	unsigned int max_frames = o->max_frames ? o->max_frames : DEFAULT_MAX_FRAMES;
	struct pyprof_bpf *skel;
	int ret;

	skel = pyprof_bpf__open();
	if (!skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(-ret));
		return ret;
	}
	s->skel = skel;
	s->max_frames = max_frames;
	skel->rodata->follow_children = !!o->follow_children;
	skel->rodata->all_procs = !!o->all_procs;
	skel->rodata->own_tgid = (__u32)getpid();
	skel->rodata->kernel_stacks = !!o->kernel_stacks;
	skel->rodata->native_stack = s->native_stack;
	skel->rodata->async_tasks = !!o->async_tasks;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus < 1) {
		snprintf(err, errlen, "cannot count possible CPUs");
		return -EINVAL;
	}
	if (bpf_map__set_max_entries(skel->maps.scratch, s->ncpus) ||
	    bpf_map__set_max_entries(skel->maps.threads, THREADS_MAP_ENTRIES) ||
	    bpf_map__set_max_entries(skel->maps.ustack_end,
				     s->native_stack ? THREADS_MAP_ENTRIES : 1) ||
	    /* Off-CPU modes: records at the target's switch rate too (tens
	     * of thousands a second): the largest ring. */
	    bpf_map__set_max_entries(skel->maps.samples,
				     o->mode == SAMPLER_MODE_OFFCPU || o->mode == SAMPLER_MODE_WALL ||
				     o->native_stack ? RING_MAX : ring_size(o->freq_hz))) {
		ret = -errno;
		snprintf(err, errlen, "cannot size the BPF maps: %s", strerror(-ret));
		return ret;
	}

	/* Only the programs this recording attaches are verified (the
	 * verifier's time is most of a short recording's kernel CPU): the
	 * scheduler's in off-CPU modes, the process tracepoints when
	 * processes are followed or a command's execs watched. */
	bpf_program__set_autoload(skel->progs.pyprof_sample, o->mode != SAMPLER_MODE_OFFCPU);
	bpf_program__set_autoload(skel->progs.pyprof_switch, off_cpu(s));
	bpf_program__set_autoload(skel->progs.pyprof_wakeup, off_cpu(s));
	bpf_program__set_autoload(skel->progs.pyprof_fork, !!o->follow_children);
	bpf_program__set_autoload(skel->progs.pyprof_exit, !!o->follow_children);
	bpf_program__set_autoload(skel->progs.pyprof_exec, o->follow_children || o->exec_events);
	ret = pyprof_bpf__load(skel);
	if (ret == -EPERM) {
		snprintf(err, errlen, "loading the BPF program: permission denied "
			 "(needs root, or CAP_BPF and CAP_PERFMON)");
		return ret;
	}
	if (ret) {
		snprintf(err, errlen, "the kernel's BPF verifier rejected the program (%s)%s",
			 strerror(-ret), o->verbose ? "" : "; rerun with -v for its log");
		return ret;
	}
	s->threads_fd = bpf_map__fd(skel->maps.threads);
	s->ustack_end_fd = bpf_map__fd(skel->maps.ustack_end);
	s->procs_fd = bpf_map__fd(skel->maps.procs);
	s->counters_fd = bpf_map__fd(skel->maps.counters);
	s->offcpu_fd = bpf_map__fd(skel->maps.offcpu);
	s->rb = ring_buffer__new(bpf_map__fd(skel->maps.samples), on_record, s, NULL);
	if (!s->rb) {
		ret = -errno;
		snprintf(err, errlen, "cannot map the BPF ring buffer: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* The first event decides whether this kernel lets new threads inherit. */
static int probe_inherit(struct bpf_sampler *s, char *err, size_t errlen)
{
	struct bpf_link *link = NULL;
	int ret;

	s->inherit = true;
	ret = open_event(s, s->pid, -1, &link);
	if (ret == -EINVAL) {
		s->inherit = false;
		ret = open_event(s, s->pid, -1, &link);
	}
	bpf_link__destroy(link);
	if (ret == -ESRCH)
		snprintf(err, errlen, "process %d is gone", s->pid);
	else if (ret == -EACCES || ret == -EPERM)
		snprintf(err, errlen, "perf_event_open: permission denied (needs CAP_PERFMON)");
	else if (ret)
		snprintf(err, errlen, "cannot attach a cpu-clock event: %s", strerror(-ret));
	return ret;
}

/* Per-CPU scope: an event on every online CPU (offline ones are skipped). */
static int attach_cpus(struct bpf_sampler *s, char *err, size_t errlen)
{
	int ret = 0, n = 0;

	s->cpu_links = calloc(s->ncpus, sizeof(*s->cpu_links));
	if (!s->cpu_links) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->ncpu_links = s->ncpus;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		ret = open_event(s, -1, cpu, &s->cpu_links[cpu]);
		if (ret == -ENODEV || ret == -EINVAL)
			continue;	/* not online */
		if (ret)
			break;
		n++;
	}
	if (!ret && !n)
		ret = -ENODEV;
	if (ret == -EACCES || ret == -EPERM)
		snprintf(err, errlen, "perf_event_open on a CPU: permission denied "
			 "(needs CAP_PERFMON)");
	else if (ret)
		snprintf(err, errlen, "cannot attach a cpu-clock event to a CPU: %s",
			 strerror(-ret));
	return ret;
}

int bpf_sampler__load(const struct sampler_opts *o, struct bpf_sampler **out, char *err,
		      size_t errlen)
{
	struct bpf_sampler *s;
	long max_rate;
	int ret;

	*out = NULL;
	libbpf_set_print(o->verbose > 1 ? print_all : o->verbose ? print_warnings : print_nothing);
	ret = check_privileges(err, errlen);
	if (ret)
		return ret;
	max_rate = read_long("/proc/sys/kernel/perf_event_max_sample_rate");
	if (!o->freq_hz || (max_rate > 0 && o->freq_hz > max_rate)) {
		snprintf(err, errlen, "sampling rate %u Hz outside 1..%ld "
			 "(kernel.perf_event_max_sample_rate)", o->freq_hz, max_rate);
		return -EINVAL;
	}
	if (o->max_frames > PYPROF_MAX_FRAMES) {
		snprintf(err, errlen, "max frames %u above the BPF record's %d",
			 o->max_frames, PYPROF_MAX_FRAMES);
		return -EINVAL;
	}
	if (o->follow_children && o->events == SAMPLER_EVENTS_THREAD) {
		snprintf(err, errlen, "following child processes needs per-CPU events "
			 "(--events cpu or auto)");
		return -EINVAL;
	}

	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->freq_hz = o->freq_hz;
	s->verbose = o->verbose;
	s->no_frame_cache = o->no_frame_cache;
	s->mode = o->mode;
	/* Native stacks merge at the entry frames, which the frame cache's
	 * splices leave out: off with --native. */
	s->native_stack = o->native_stack > PYPROF_USTACK_MAX ? PYPROF_USTACK_MAX : o->native_stack;
	if (s->native_stack)
		s->no_frame_cache = true;
	if (off_cpu(s)) {
		ret = offcpu_ivs__new(&s->ivs);
		if (ret) {
			snprintf(err, errlen, "out of memory");
			goto err_free;
		}
	}
	if (o->mode == SAMPLER_MODE_OFFCPU) {
		/* No ticks at all: per-CPU mode with no CPU event attached
		 * (no per-thread events either). */
		s->per_cpu = true;
	} else if (o->follow_children) {
		s->per_cpu = true;
	} else if (o->events == SAMPLER_EVENTS_AUTO) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);

		s->per_cpu = online > 0 && o->freq_hz <= AUTO_CPU_MAX_HZ &&
			     (uint64_t)online * o->freq_hz <= AUTO_CPU_TICKS;
	} else {
		s->per_cpu = o->events == SAMPLER_EVENTS_CPU;
	}

	ret = load(s, o, err, errlen);
	if (ret)
		goto err_free;
	/* Per-CPU events sample whatever runs: until a process is configured
	 * in the procs map, its ticks cost one lookup each and are dropped.
	 * Per-thread events need the target's threads (set_target). */
	ret = s->per_cpu && o->mode != SAMPLER_MODE_OFFCPU ? attach_cpus(s, err, errlen) : 0;
	if (ret)
		goto err_free;
	ret = off_cpu(s) ? attach_sched(s, err, errlen) : 0;
	if (ret)
		goto err_free;
	if (o->follow_children || o->exec_events) {
		ret = attach_tracepoints(s, o->follow_children, err, errlen);
		if (ret)
			goto err_free;
	}
	*out = s;
	return 0;

err_free:
	bpf_sampler__free(s);
	return ret;
}

/* /proc/PID/task/TID/syscall: the call a blocked task is in, and its first
 * argument. -1 when it is in none (or running, or unreadable). */
static void task_syscall(pid_t pid, pid_t tid, int64_t *nr, uint64_t *arg0)
{
	char path[64], buf[256];
	long long n;
	unsigned long long a;
	FILE *f;

	*nr = -1;
	*arg0 = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%lld 0x%llx", &n, &a) == 2 && n >= 0) {
		*nr = n;
		*arg0 = a;
	}
	fclose(f);
}

/* The state letter of a task, read once (procfs parses the stat line). */
static int task_state(pid_t pid, pid_t tid, char *state)
{
	int fd = procfs__task_stat_open(pid, tid), err;

	if (fd < 0)
		return fd;
	err = procfs__stat_fd_state(fd, state);
	close(fd);
	return err;
}

/*
 * The Python stack of a seeded interval's thread, read from userspace. One
 * waiting for a CPU is read as one asleep is: it does not run meanwhile
 * (one that does is on a CPU already, and its switch-out drops the seed).
 */
static void seed_frames(struct bpf_sampler *s, struct offcpu_iv *iv, size_t npy)
{
	struct py_rawframe fr[256];
	size_t nf = 0;
	int truncated = 0;

	for (size_t k = 0; k < npy; k++) {
		if (s->pyth[k].host_tid != iv->tid)
			continue;
		if (!pyproc__walk(s->proc, s->pyth[k].tstate, fr, 256, &nf, &truncated)) {
			offcpu_iv__set_frames(iv, fr, (uint32_t)nf);
			iv->status = truncated ? PYPROF_TRUNCATED : PYPROF_COMPLETE;
		}
		return;
	}
}

/*
 * Off-CPU modes: a thread already off the CPU when the recording starts has
 * its interval opened now (the program saw it leave before it was loaded),
 * with its stack read from userspace (it is not running, so the read is
 * consistent) and its system call from /proc. A thread found running is
 * opened as runnable; either is dropped when the thread's first switch-out
 * shows it was on a CPU after all.
 */
static void seed_intervals(struct bpf_sampler *s)
{
	size_t npy = 0;
	uint64_t now;

	if (scan_pythreads(s, &npy))
		npy = 0;
	now = mono_ns();
	for (size_t i = 0; i < s->nth; i++) {
		pid_t tid = s->th[i].tid;
		struct pyprof_offcpu o = { .off_ns = now }, cur;
		struct offcpu_iv *iv;
		char state = 0;
		__u32 key = (__u32)tid;

		/*
		 * The interval and its map entry first, the state after: a
		 * thread that runs again from then on closes the interval
		 * through the program (its target is configured already). An
		 * entry there already is the program's own: it saw the thread
		 * leave, and the seed is not needed.
		 */
		iv = offcpu_ivs__get(s->ivs, tid, true);
		if (!iv)
			return;
		iv->pid = s->pid;
		iv->out_ns = now;
		iv->seeded = true;
		iv->open = true;
		iv->status = PYPROF_NO_PYSTATE;
		iv->nframes = 0;
		/* Its system call first: a thread still asleep after it is read
		 * was in it (read after, it may say the thread is running). */
		task_syscall(s->pid, tid, &iv->syscall_nr, &iv->syscall_arg0);
		if (bpf_map_update_elem(s->offcpu_fd, &key, &o, BPF_NOEXIST) ||
		    task_state(s->pid, tid, &state) || (state != 'S' && state != 'D')) {
			/* Running (its next switch-out says so), gone, or ours
			 * to take back: a runnable thread's time till it runs
			 * is runnable. */
			if (state == 'R' && !bpf_map_lookup_elem(s->offcpu_fd, &key, &cur) &&
			    cur.off_ns == now) {
				cur.wake_ns = now;
				bpf_map_update_elem(s->offcpu_fd, &key, &cur, BPF_EXIST);
				seed_frames(s, iv, npy);
				continue;
			}
			if (!bpf_map_lookup_elem(s->offcpu_fd, &key, &cur) && cur.off_ns == now)
				bpf_map_delete_elem(s->offcpu_fd, &key);
			offcpu_ivs__remove(s->ivs, tid);
			continue;
		}
		/* Running as its call was read, asleep since: in the call
		 * /proc says now (unless it woke again). */
		if (iv->syscall_nr < 0)
			task_syscall(s->pid, tid, &iv->syscall_nr, &iv->syscall_arg0);
		seed_frames(s, iv, npy);
	}
}

int bpf_sampler__set_target(struct bpf_sampler *s, struct pyproc *p, char *err, size_t errlen)
{
	int ret;

	if (s->proc) {
		snprintf(err, errlen, "the BPF sampler has a target already");
		return -EBUSY;
	}
	ret = fill_config(&s->main_cfg, pyproc__offsets(p), pyproc__runtime(p), s->max_frames,
			  !s->no_frame_cache, err, errlen);
	if (ret)
		return ret;
	entries_config(s, &s->main_cfg, pyproc__offsets(p));
	offcpu_config(s, &s->main_cfg);
	s->cache = s->main_cfg.frame_cache;
	s->gil_known = gil_config(s, p, &s->main_cfg, &s->gil);
	ret = frame_cache__new(pyproc__pid(p), pyproc__offsets(p), s->max_frames, s->cache,
			       &s->fc);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	frame_cache__set_reanchor(s->fc, true);
	/* From here on the sampler's functions treat @p as the main target
	 * (refresh, the frame cache, the records of its pid). */
	s->proc = p;
	s->pid = pyproc__pid(p);
	ret = s->per_cpu ? 0 : probe_inherit(s, err, errlen);
	if (ret)
		goto err_untarget;
	/* Thread states first (the refresh), then the configuration, so that
	 * the first ticks find them. */
	ret = bpf_sampler__refresh(s);
	if (ret == -ESRCH) {
		snprintf(err, errlen, "process %d is gone", s->pid);
		goto err_untarget;
	}
	if (ret) {
		snprintf(err, errlen, "cannot attach to the threads of %d: %s", s->pid,
			 strerror(-ret));
		goto err_untarget;
	}
	ret = write_proc(s, s->pid, &s->main_cfg);
	if (ret) {
		snprintf(err, errlen, "cannot write the BPF process map: %s", strerror(-ret));
		goto err_untarget;
	}
	if (off_cpu(s))
		seed_intervals(s);
	/* The only process (a command tracked before its exec is this one):
	 * other tasks' ticks cost one comparison. */
	if (!s->skel->rodata->follow_children && !s->many_pids &&
	    (!s->other_pid || s->other_pid == s->pid))
		s->skel->bss->only_tgid = (__u32)s->pid;
	return 0;

err_untarget:
	/* Back to no target: the events and threads map entries the refresh
	 * made are released with the sampler, which can still be freed. */
	frame_cache__free(s->fc);
	s->fc = NULL;
	s->cache = false;
	s->proc = NULL;
	s->pid = 0;
	return ret;
}

int bpf_sampler__open(struct pyproc *p, const struct sampler_opts *o,
		      struct bpf_sampler **out, char *err, size_t errlen)
{
	struct bpf_sampler *s;
	int ret;

	*out = NULL;
	ret = bpf_sampler__load(o, &s, err, errlen);
	if (ret)
		return ret;
	ret = bpf_sampler__set_target(s, p, err, errlen);
	if (ret) {
		bpf_sampler__free(s);
		return ret;
	}
	*out = s;
	return 0;
}
