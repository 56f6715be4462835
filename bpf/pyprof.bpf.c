// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * pyprof.bpf.c - snapshot the Python frame chain of the thread a cpu-clock
 * perf event interrupted.
 *
 * The loader (user/bpf_sampler.c) opens one software cpu-clock event per
 * thread of the target and attaches this program to each. On every tick the
 * program looks the interrupted thread's PyThreadState up in a map the loader
 * keeps (tid -> tstate), reads the current frame pointer and copies, for each
 * Python frame from the innermost outwards, the frame address, the code
 * object address and the instruction pointer. Names and lines are resolved
 * later in userspace. Every CPython offset comes from the read-only config
 * filled before load.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pyprof.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before load; frozen, so the verifier sees constants. */
const volatile struct pyprof_config cfg = {};

/*
 * Working space for one sample. A record of PYPROF_MAX_FRAMES frames is far
 * beyond the 512-byte BPF stack and beyond the 32 KB a per-CPU map value may
 * hold, so this is a plain array with one element per possible CPU, indexed
 * by bpf_get_smp_processor_id(). perf_event programs do not nest on a CPU
 * (the kernel's bpf_prog_active guard), so an element has one user at a time.
 */
struct scratch {
	__u8 fbuf[PYPROF_FRAME_READ_MAX];	/* the frame being decoded */
	struct pyprof_sample s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);		/* the loader sets: possible CPUs */
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);	/* the loader may change it */
	__type(key, __u32);		/* host tid */
	__type(value, struct pyprof_thread);
} threads SEC(".maps");

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

/* A field of the frame copy; the loader checked it lies inside frame_size. */
static __always_inline __u64 field64(const __u8 *buf, __u64 off)
{
	if (off > PYPROF_FRAME_READ_MAX - sizeof(__u64))
		return 0;
	return *(const __u64 *)(buf + off);
}

struct walk {
	struct scratch *sc;
	__u64 fp;		/* next frame to visit; 0: chain ended */
	__u32 n;		/* Python frames recorded */
	__u32 status;
};

/* One bpf_loop iteration: visit frame w->fp. Returns 1 to stop the loop. */
static long walk_frame(__u32 i, void *arg)
{
	struct walk *w = arg;
	struct scratch *sc = w->sc;
	struct pyprof_frame *f;
	__u64 size = cfg.frame_size;
	__u64 fp = w->fp, prev;
	__u32 n;

	if (!fp)
		return 1;
	if (size > PYPROF_FRAME_READ_MAX)
		size = PYPROF_FRAME_READ_MAX;
	if (bpf_probe_read_user(sc->fbuf, size, (const void *)fp)) {
		w->status = PYPROF_READ_FAULT;
		return 1;
	}
	prev = field64(sc->fbuf, cfg.frame_previous);

	/* Entry and shim frames are the interpreter's, not the program's:
	 * step over them without spending the depth budget. */
	if (cfg.frame_owner_interp_min &&
	    sc->fbuf[cfg.frame_owner & (PYPROF_FRAME_READ_MAX - 1)] >=
	    cfg.frame_owner_interp_min) {
		w->fp = prev;
		return 0;
	}

	n = w->n;
	if (n >= cfg.max_frames || n >= PYPROF_MAX_FRAMES) {
		/* A Python frame beyond the limit: the innermost are kept. */
		w->status = PYPROF_TRUNCATED;
		return 1;
	}
	f = &sc->s.frames[n];
	f->frame = fp;
	f->code = field64(sc->fbuf, cfg.frame_executable) & ~cfg.executable_tag_mask;
	f->instr = field64(sc->fbuf, cfg.frame_instr_ptr);
	f->code_version = 0;
	if (cfg.code_version)	/* a fault leaves 0: "unknown" */
		bpf_probe_read_user(&f->code_version, sizeof(f->code_version),
				    (const void *)(f->code + cfg.code_version));
	w->n = n + 1;
	w->fp = prev;
	return 0;
}

/* The innermost frame of @tstate, 0 when it runs none, -1 on a read fault. */
static __always_inline long current_frame(__u64 tstate, __u64 *fp)
{
	__u64 cframe = 0;

	if (!cfg.tstate_cframe)
		return bpf_probe_read_user(fp, sizeof(*fp),
					   (const void *)(tstate + cfg.tstate_current_frame));
	/* 3.11/3.12: the frame pointer lives in the C frame record. */
	if (bpf_probe_read_user(&cframe, sizeof(cframe),
				(const void *)(tstate + cfg.tstate_cframe)))
		return -1;
	*fp = 0;
	if (!cframe)
		return 0;
	return bpf_probe_read_user(fp, sizeof(*fp),
				   (const void *)(cframe + cfg.cframe_current_frame));
}

SEC("perf_event")
int pyprof_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 cpu = bpf_get_smp_processor_id();
	struct pyprof_thread *th;
	struct pyprof_sample *s;
	struct scratch *sc;
	struct walk w = {};
	__u32 n;

	if (cfg.tgid && tgid != cfg.tgid) {
		count(PYPROF_CNT_FOREIGN);
		return 0;
	}
	th = bpf_map_lookup_elem(&threads, &tid);
	if (th)
		th->samples++;

	sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return 0;
	s = &sc->s;
	s->ts_ns = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->flags = 0;
	s->cache_frame = 0;
	s->cache_seq = 0;
	s->tstate = th ? th->tstate : 0;

	if (!s->tstate) {
		w.status = PYPROF_NO_PYSTATE;
	} else if (current_frame(s->tstate, &w.fp)) {
		w.status = PYPROF_READ_FAULT;
	} else {
		w.sc = sc;
		bpf_loop(cfg.max_walk, walk_frame, &w, 0);
		if (w.status == PYPROF_COMPLETE && w.fp) {
			w.status = PYPROF_TRUNCATED;
			s->flags |= PYPROF_SF_WALK_BUDGET;
		}
	}
	s->status = w.status;
	n = w.n;
	if (n > PYPROF_MAX_FRAMES)
		n = PYPROF_MAX_FRAMES;
	s->nframes = n;

	/* No wake-up: the consumer drains the ring on its own timer. A
	 * wake-up per record throttled sampling to about once per poll. */
	if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_SIZE(n), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
	return 0;
}
