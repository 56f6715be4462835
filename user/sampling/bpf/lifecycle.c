// SPDX-License-Identifier: MIT
/*
 * lifecycle.c - load bpf/pyprof.bpf.c, attach it, stop
 * and unload it.
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
 * exited threads are kept until bpf_sampler__stop().
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
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "pyprof.skel.h"		/* after pyprof.h, whose types it uses */
#include "sampling/frame_cache.h"
#include "sampling/tp_filter.h"
#include "offcpu/intervals.h"
#include "sampling/perf_events.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
/* Inode number of the initial PID namespace (the kernel's PROC_PID_INIT_INO). */
#define INIT_PID_NS_INO 0xEFFFFFFCUL

#define DEFAULT_MAX_FRAMES	2048
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
 * bench's bystander cells (docs/benchmarks.md) measured 14-16 us of another
 * process's time per tick in this VM: 0.05% of every CPU at 99 Hz, 1.3% at
 * 1 kHz, 13% at 10 kHz; per-thread events cost the others nothing measurable,
 * and delivered the same samples per CPU-second of a GIL-switching target. */
#define AUTO_CPU_TICKS		200000
#define AUTO_CPU_MAX_HZ		1000

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
	struct bpf_program_choice choice;
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
	libbpf_set_print(old);
	if (!missing)
		missing = bpf_programs__base_missing();
	if (missing) {
		snprintf(why, len, "kernel cannot run the BPF sampler: no %s", missing);
		return -ENOTSUP;
	}
	err = bpf_programs__choose(&choice, false, why, len);
	if (!err)
		snprintf(why, len, "%s (%s)", choice.name, choice.why);
	return err;
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

int bpf_lifecycle__open_event(struct bpf_sampler *s, unsigned int event, pid_t tid, int cpu,
			      struct bpf_link **out)
{
	const struct sampler_event *ev = &s->events[event];
	uint64_t period = s->periods[event];
	struct perf_event_attr attr = {
		.type = ev->type,
		.size = sizeof(attr),
		.config = ev->config,
		/* -c N: a tick every N events; else N a second */
		.sample_period = period ? period : s->freq_hz,
		.freq = !period,
		.inherit = s->inherit,
		/* Threads, not fork()ed children; and nothing survives an
		 * exec(), which replaces the interpreter we know. */
		.inherit_thread = s->inherit,
		.remove_on_exec = s->inherit,
	};
	/* Several events: the program tells them by the link's cookie. */
	LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = event);
	struct bpf_link *link;
	int fd, err;

	fd = syscall(SYS_perf_event_open, &attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	link = bpf_program__attach_perf_event_opts(s->skel->progs.pyprof_sample, fd, &opts);
	if (!link) {
		err = -errno;
		close(fd);
		return err;
	}
	*out = link;
	return 0;
}

bool bpf_lifecycle__off_cpu(const struct bpf_sampler *s)
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

/* Read-only views of the ring's consumer and producer positions (the
 * pages libbpf maps too): how far the polls have consumed. */
static int map_ring_positions(struct bpf_sampler *s, int fd)
{
	void *p;

	s->page_size = (size_t)sysconf(_SC_PAGESIZE);
	p = mmap(NULL, s->page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	s->ring_cons = p;
	p = mmap(NULL, s->page_size, PROT_READ, MAP_SHARED, fd, (off_t)s->page_size);
	if (p == MAP_FAILED)
		return -errno;
	s->ring_prod = p;
	return 0;
}

uint64_t bpf_lifecycle__ring_produced(const struct bpf_sampler *s)
{
	return s->ring_prod ? __atomic_load_n(s->ring_prod, __ATOMIC_ACQUIRE) : 0;
}

uint64_t bpf_lifecycle__ring_consumed(const struct bpf_sampler *s)
{
	return s->ring_cons ? __atomic_load_n(s->ring_cons, __ATOMIC_ACQUIRE) : UINT64_MAX;
}

/* The maps' sizes, before the load. */
static int size_maps(struct bpf_sampler *s, const struct sampler_opts *o, char *err,
		     size_t errlen)
{
	struct pyprof_bpf *skel = s->skel;
	int ret;

	if (bpf_map__set_max_entries(skel->maps.scratch, s->ncpus) ||
	    bpf_map__set_max_entries(skel->maps.threads, THREADS_MAP_ENTRIES) ||
	    bpf_map__set_max_entries(skel->maps.ustack_end,
				     s->native_stack ? THREADS_MAP_ENTRIES : 1) ||
	    /* Off-CPU modes: records at the target's switch rate too (tens
	     * of thousands a second): the largest ring. */
	    bpf_map__set_max_entries(skel->maps.samples,
				     o->mode == SAMPLER_MODE_OFFCPU || o->mode == SAMPLER_MODE_WALL ||
				     o->native_stack || s->periods[0] || s->periods[s->nevents - 1] ?
				     RING_MAX :
				     ring_size(o->freq_hz))) {
		ret = -errno;
		snprintf(err, errlen, "cannot size the BPF maps: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * Only the programs this recording attaches are verified (the verifier's
 * time is most of a short recording's kernel CPU): the scheduler's in
 * off-CPU modes, the process tracepoints when processes are followed or a
 * command's execs watched.
 */
static void choose_programs(struct bpf_sampler *s, const struct sampler_opts *o)
{
	struct pyprof_bpf *skel = s->skel;

	unsigned int tracepoints = 0;

	for (unsigned int i = 0; i < s->nevents; i++)
		tracepoints += sampler_event__is_tracepoint(&s->events[i]);
	bpf_program__set_autoload(skel->progs.pyprof_sample,
				  o->mode != SAMPLER_MODE_OFFCPU && tracepoints < s->nevents);
	bpf_program__set_autoload(skel->progs.pyprof_tracepoint, tracepoints > 0);
	bpf_program__set_autoload(skel->progs.pyprof_switch, bpf_lifecycle__off_cpu(s));
	bpf_program__set_autoload(skel->progs.pyprof_wakeup, bpf_lifecycle__off_cpu(s));
	bpf_program__set_autoload(skel->progs.pyprof_fork, !!o->follow_children);
	bpf_program__set_autoload(skel->progs.pyprof_exit, !!o->follow_children);
	bpf_program__set_autoload(skel->progs.pyprof_exec, o->follow_children || o->exec_events);
}

/* --filter: compiled into the tracepoint program's rodata, for the first
 * tracepoint among the events. 0 or -errno with @err. */
static int set_filter(struct bpf_sampler *s, const struct sampler_opts *o, char *err,
		      size_t errlen)
{
	struct pyprof_filter f;
	int ret;

	if (!o->filter)
		return 0;
	for (unsigned int i = 0; i < s->nevents; i++) {
		if (!sampler_event__is_tracepoint(&s->events[i]))
			continue;
		ret = tp_filter__compile(&s->events[i], o->filter, &f, err, errlen);
		if (ret)
			return ret;
		f.event = i;
		memcpy((void *)&s->skel->rodata->tp_filter, &f, sizeof(f));
		return 0;
	}
	snprintf(err, errlen, "--filter is for a tracepoint's hits: -e SUBSYS:NAME");
	return -EINVAL;
}

/* The maps' descriptors and the ring, once loaded. */
static int open_maps(struct bpf_sampler *s, char *err, size_t errlen)
{
	struct pyprof_bpf *skel = s->skel;
	int ret;

	s->threads_fd = bpf_map__fd(skel->maps.threads);
	s->ustack_end_fd = bpf_map__fd(skel->maps.ustack_end);
	s->procs_fd = bpf_map__fd(skel->maps.procs);
	s->counters_fd = bpf_map__fd(skel->maps.counters);
	s->offcpu_fd = bpf_map__fd(skel->maps.offcpu);
	s->rb = ring_buffer__new(bpf_map__fd(skel->maps.samples), bpf_records__on_record, s, NULL);
	ret = s->rb ? map_ring_positions(s, bpf_map__fd(skel->maps.samples)) : -errno;
	if (ret)
		snprintf(err, errlen, "cannot map the BPF ring buffer: %s", strerror(-ret));
	return ret;
}

static int load(struct bpf_sampler *s, const struct sampler_opts *o, char *err, size_t errlen)
{
	struct bpf_program_choice choice;
	struct pyprof_bpf *skel;
	int ret;

	ret = bpf_load__open(s, o, &choice, err, errlen);
	if (ret)
		return ret;
	skel = s->skel;
	s->max_frames = o->max_frames ? o->max_frames : DEFAULT_MAX_FRAMES;
	skel->rodata->follow_children = !!o->follow_children;
	skel->rodata->all_procs = !!o->all_procs;
	skel->rodata->own_tgid = (__u32)getpid();
	skel->rodata->kernel_stacks = !!o->kernel_stacks;
	skel->rodata->native_stack = s->native_stack;
	skel->rodata->async_tasks = !!o->async_tasks;
	skel->rodata->tp_period = (__u32)(s->period ? s->period : 1);
	skel->rodata->multi_event = s->nevents > 1;
	ret = set_filter(s, o, err, errlen);
	if (ret)
		return ret;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus < 1) {
		snprintf(err, errlen, "cannot count possible CPUs");
		return -EINVAL;
	}
	ret = size_maps(s, o, err, errlen);
	if (ret)
		return ret;
	choose_programs(s, o);
	ret = bpf_load__load(s, o, &choice, err, errlen);
	if (ret)
		return ret;
	return open_maps(s, err, errlen);
}

const char *bpf_sampler__program(const struct bpf_sampler *s)
{
	return s->program_note;
}

/* Per-CPU scope: event @event on every online CPU (offline ones are skipped). */
static int attach_cpus(struct bpf_sampler *s, unsigned int event, char *err, size_t errlen)
{
	int ret = 0, n = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		ret = bpf_lifecycle__open_event(s, event, -1, cpu,
						&s->cpu_links[cpu * s->nevents + event]);
		if (ret == -ENOENT || ret == -EOPNOTSUPP)
			break;	/* the event itself (a PMU that counts no user code...) */
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
		snprintf(err, errlen, "cannot attach a %s event to a CPU: %s",
			 s->events[event].name, strerror(-ret));
	return ret;
}

/*
 * -e SUBSYS:NAME: its program attached once (perf_event_open on the
 * tracepoint, one CPU, every task): a tracepoint's programs run at each of
 * its hits on every CPU whichever event attached them, so one per CPU
 * would sample each hit as many times. Its cookie is its index.
 */
static int attach_event_tracepoint(struct bpf_sampler *s, unsigned int event, char *err,
				   size_t errlen)
{
	const struct sampler_event *ev = &s->events[event];
	LIBBPF_OPTS(bpf_tracepoint_opts, opts, .bpf_cookie = event);

	s->event_tp_links[event] = bpf_program__attach_tracepoint_opts(
		s->skel->progs.pyprof_tracepoint, ev->subsys, ev->tracepoint, &opts);
	if (!s->event_tp_links[event]) {
		int ret = -errno;

		snprintf(err, errlen, "cannot attach to tracepoint %s: %s", ev->name,
			 ret == -EACCES || ret == -EPERM ? "permission denied (needs CAP_PERFMON "
			 "and CAP_BPF)" : strerror(-ret));
		return ret;
	}
	return 0;
}

/* Each event: a tracepoint once, a perf event on every CPU (per-CPU scope). */
static int attach_events(struct bpf_sampler *s, const struct sampler_opts *o, char *err,
			 size_t errlen)
{
	int ret = 0;

	if (o->mode == SAMPLER_MODE_OFFCPU)
		return 0;	/* no ticks at all */
	if (s->per_cpu) {
		s->cpu_links = calloc((size_t)s->ncpus * s->nevents, sizeof(*s->cpu_links));
		if (!s->cpu_links) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		s->ncpu_links = s->ncpus * (int)s->nevents;
	}
	for (unsigned int i = 0; i < s->nevents && !ret; i++) {
		if (sampler_event__is_tracepoint(&s->events[i]))
			ret = attach_event_tracepoint(s, i, err, errlen);
		else if (s->per_cpu)
			ret = attach_cpus(s, i, err, errlen);
	}
	return ret;
}

/* The options this backend cannot take, said in @err. 0 or -errno. */
static int check_opts(const struct sampler_opts *o, char *err, size_t errlen)
{
	long max_rate;
	int ret;

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
	return 0;
}

/* Per-CPU events, or per-thread ones. */
static bool pick_per_cpu(const struct sampler_opts *o)
{
	long online;

	/* Off-CPU: no ticks at all: per-CPU mode with no CPU event attached
	 * (no per-thread events either). A tracepoint: one attachment for the
	 * machine, none per thread. Several events: on every CPU each (a
	 * thread's own would need as many links per thread). */
	if (o->mode == SAMPLER_MODE_OFFCPU || o->follow_children ||
	    (o->event && (o->nevents > 1 || sampler_event__is_tracepoint(o->event))))
		return true;
	if (o->events != SAMPLER_EVENTS_AUTO)
		return o->events == SAMPLER_EVENTS_CPU;
	/* -e page-faults and the like: the target's own events, as perf -p
	 * counts them (a CPU's count holds every task's: at -F's rate, the
	 * target's share of the CPU's samples only) */
	if (o->event && !sampler_event__is_clock(o->event))
		return false;
	online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 && o->freq_hz <= AUTO_CPU_MAX_HZ &&
	       (uint64_t)online * o->freq_hz <= AUTO_CPU_TICKS;
}

/*
 * Per-CPU events sample whatever runs: until a process is configured in the
 * procs map, its ticks cost one lookup each and are dropped. Per-thread
 * events need the target's threads (set_target).
 */
static int attach(struct bpf_sampler *s, const struct sampler_opts *o, char *err, size_t errlen)
{
	int ret;

	ret = attach_events(s, o, err, errlen);
	if (ret)
		return ret;
	ret = bpf_lifecycle__off_cpu(s) ? attach_sched(s, err, errlen) : 0;
	if (ret)
		return ret;
	if (o->follow_children || o->exec_events)
		return attach_tracepoints(s, o->follow_children, err, errlen);
	return 0;
}

int bpf_sampler__load(const struct sampler_opts *o, struct bpf_sampler **out, char *err,
		      size_t errlen)
{
	struct bpf_sampler *s;
	int ret;

	*out = NULL;
	libbpf_set_print(o->verbose > 1 ? print_all : o->verbose ? print_warnings : print_nothing);
	ret = check_opts(o, err, errlen);
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->freq_hz = o->freq_hz;
	s->period = o->period;
	s->nevents = o->event ? o->nevents : 1;
	for (unsigned int i = 0; i < s->nevents; i++) {
		if (o->event)
			s->events[i] = o->event[i];
		else
			sampler_event__parse("cpu-clock", &s->events[i], err, errlen);
		s->periods[i] = o->event ? (o->period ? o->period :
				sampler_event__default_period(&s->events[i])) : 0;
	}
	/* -e: each tick weighs its perf event's period (or tracepoint hits);
	 * the default clock's keep the recording's fixed weight (1 s / rate) */
	s->event_periods = o->event != NULL;
	s->verbose = o->verbose;
	s->no_frame_cache = o->no_frame_cache;
	s->mode = o->mode;
	s->opcodes = o->opcodes;
	/* Native stacks merge at the entry frames, which the frame cache's
	 * splices leave out: off with --native. */
	s->native_stack = o->native_stack > PYPROF_USTACK_MAX ? PYPROF_USTACK_MAX : o->native_stack;
	if (s->native_stack)
		s->no_frame_cache = true;
	if (bpf_lifecycle__off_cpu(s)) {
		ret = offcpu_ivs__new(&s->ivs);
		if (ret) {
			snprintf(err, errlen, "out of memory");
			goto err_free;
		}
	}
	s->per_cpu = pick_per_cpu(o);
	ret = load(s, o, err, errlen);
	if (!ret)
		ret = attach(s, o, err, errlen);
	if (ret)
		goto err_free;
	*out = s;
	return 0;

err_free:
	bpf_sampler__free(s);
	return ret;
}

uint64_t bpf_lifecycle__counter(const struct bpf_sampler *s, uint32_t key)
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
	*st = s->counts;
	st->lost = bpf_lifecycle__counter(s, PYPROF_CNT_LOST);
}

void bpf_sampler__detail(const struct bpf_sampler *s, struct bpf_sampler_detail *d)
{
	memset(d, 0, sizeof(*d));
	d->frame_cache = s->cache && s->fc;
	if (d->frame_cache)
		frame_cache__stats(s->fc, &d->cache);
	d->offcpu = s->ivs != NULL;
	if (d->offcpu) {
		d->reused = s->reused;
		d->inferred = bpf_lifecycle__counter(s, PYPROF_CNT_SWITCH_IN_INFERRED);
		d->lost_intervals = s->lost_intervals;
	}
	d->nested = bpf_lifecycle__counter(s, PYPROF_CNT_NESTED);
}

bool bpf_sampler__execed(const struct bpf_sampler *s)
{
	return __atomic_load_n(&s->skel->bss->execed_seen, __ATOMIC_RELAXED) != 0;
}

bool bpf_sampler__per_cpu(const struct bpf_sampler *s)
{
	return s->per_cpu;
}

/* Every event and tracepoint detached: nothing is sampled any more. */
static void detach(struct bpf_sampler *s)
{
	/* Closing an original event also removes its inherited copies. */
	for (size_t i = 0; i < s->nth; i++) {
		bpf_link__destroy(s->th[i].link);
		s->th[i].link = NULL;
	}
	for (size_t i = 0; i < s->ndying; i++) {
		bpf_link__destroy(s->dying[i].link);
		s->dying[i].link = NULL;
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
	for (unsigned int i = 0; i < s->nevents; i++) {
		bpf_link__destroy(s->event_tp_links[i]);
		s->event_tp_links[i] = NULL;
	}
	for (size_t i = 0; i < sizeof(s->sched_links) / sizeof(s->sched_links[0]); i++) {
		bpf_link__destroy(s->sched_links[i]);
		s->sched_links[i] = NULL;
	}
}

void bpf_sampler__stop(struct bpf_sampler *s)
{
	detach(s);
	s->stopped = true;
	/* No walk stops at an anchor any more: ours go now, and no poll
	 * writes one again (the ring's records have their walks done, and
	 * the frame cache holds their callers). */
	if (s->fc)
		frame_cache__set_reanchor(s->fc, false);
	bpf_threads__release_anchors(s);
}

void bpf_sampler__free(struct bpf_sampler *s)
{
	if (!s)
		return;
	detach(s);
	ring_buffer__free(s->rb);
	if (s->ring_cons)
		munmap((void *)s->ring_cons, s->page_size);
	if (s->ring_prod)
		munmap((void *)s->ring_prod, s->page_size);
	pyprof_bpf__destroy(s->skel);
	frame_cache__free(s->fc);
	offcpu_ivs__free(s->ivs);
	for (size_t i = 0; i < sizeof(s->ust) / sizeof(s->ust[0]); i++)
		free(s->ust[i].stack);
	free(s->th);
	free(s->dying);
	free(s->retired);
	free(s->cpu_links);
	free(s->tids);
	free(s->pyth);
	free(s);
}
