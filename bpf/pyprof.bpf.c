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
 * object address, the instruction pointer and the code object's co_version.
 * Names and lines are resolved later in userspace. Every CPython offset
 * comes from the read-only config filled before load.
 *
 * The interrupted thread is stopped while this runs, so what it reads is one
 * consistent moment. Frames are read in windows of the data stack (a caller
 * lies just below its callee), each co_version once per sample.
 *
 * CPython 3.15 (config.frame_cache): the walk also reads the thread's
 * anchor, tstate->last_profiled_frame, and its sequence, and stops at the
 * anchor when it is a Python frame: userspace (user/frame_cache.c) splices
 * the callers it cached. It walks whole while userspace asks (walk_whole),
 * and when the anchor changed under an unchanged sequence (someone wrote
 * it). In this mode interpreter-owned frames are recorded too, flagged, as
 * links of the chain the anchor moves along. This program never writes the
 * target: bpf_probe_write_user is refused under kernel lockdown, and would
 * fail in the interrupt context of a perf_event program anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pyprof.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before load; frozen, so the verifier sees constants. */
const volatile struct pyprof_config cfg = {};

/* The target's mm_struct, as its first tick saw it (0: none yet). */
__u64 target_mm = 0;

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
};

struct memo {
	__u64 code;
	__u32 version;
	__u32 gen;			/* valid when it is the sample's */
};

/*
 * Working space for one sample. A record of PYPROF_MAX_FRAMES frames is far
 * beyond the 512-byte BPF stack and beyond the 32 KB a per-CPU map value may
 * hold, so this is a plain array with one element per possible CPU, indexed
 * by bpf_get_smp_processor_id(). perf_event programs do not nest on a CPU
 * (the kernel's bpf_prog_active guard), so an element has one user at a time.
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
	__u32 pad;
	struct walk w;
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

/* A field of a frame copy; the loader checked it lies inside frame_size. */
static __always_inline __u64 field64(const __u8 *buf, __u64 off)
{
	if (off > PYPROF_FRAME_READ_MAX - sizeof(__u64))
		return 0;
	return *(const __u64 *)(buf + off);
}


/*
 * Bring frame @fp into the window: one read from the start of the frame's
 * page (never below: the page under a data-stack chunk may be unmapped, and
 * a faulting read costs ~750 ns here) up to the frame's end. Its callers in
 * the same page come with it. Returns the frame's bytes, or NULL.
 */
static __always_inline const __u8 *frame_bytes(struct scratch *sc, __u64 fp)
{
	struct walk *w = &sc->w;
	__u64 fsize = cfg.frame_size, win = cfg.window, start, len, off;

	if (fsize > PYPROF_FRAME_READ_MAX)
		fsize = PYPROF_FRAME_READ_MAX;
	if (win > PYPROF_WINDOW_MAX)
		win = PYPROF_WINDOW_MAX;
	if (fp >= w->wbase && fp - w->wbase <= w->wlen && w->wlen - (fp - w->wbase) >= fsize)
		goto hit;
	if (win > fsize) {
		start = fp & ~(PYPROF_PAGE - 1);
		if (fp + fsize - start > win)
			start = fp + fsize - win;
		len = fp + fsize - start;
		if (len > PYPROF_WINDOW_MAX)
			len = PYPROF_WINDOW_MAX;
		if (!bpf_probe_read_user(sc->win, len, (const void *)start)) {
			count(PYPROF_CNT_WINDOWS);
			w->wbase = start;
			w->wlen = len;
			goto hit;
		}
		count(PYPROF_CNT_WINDOW_FAULTS);
	}
	count(PYPROF_CNT_FRAME_READS);
	if (bpf_probe_read_user(sc->win, fsize, (const void *)fp))
		return NULL;
	w->wbase = fp;
	w->wlen = fsize;
hit:
	off = (fp - w->wbase) & (PYPROF_WINDOW_MAX - 1);
	return sc->win + off;
}

/* co_version of @code, read once per sample and code object. */
static __always_inline __u32 code_version(struct scratch *sc, __u64 code)
{
	struct walk *w = &sc->w;
	struct memo *m = &sc->memo[(code >> 4) & (PYPROF_VERSION_MEMO - 1)];
	__u32 v = 0;

	if (!cfg.code_version)
		return 0;
	if (m->gen == w->gen && m->code == code)
		return m->version;
	count(PYPROF_CNT_VERSION_READS);
	/* A fault leaves 0: "unknown". */
	bpf_probe_read_user(&v, sizeof(v), (const void *)(code + cfg.code_version));
	m->code = code;
	m->version = v;
	m->gen = w->gen;
	return v;
}

/* bpf_loop's context: the scratch of this CPU. */
struct loop_ctx {
	struct scratch *sc;
};

/* One bpf_loop iteration: visit frame w->fp. Returns 1 to stop the loop. */
static long walk_frame(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct walk *w = &sc->w;
	struct pyprof_frame *f;
	const __u8 *buf;
	__u64 fp = w->fp, prev;
	bool interp;
	__u32 n;

	if (!fp)
		return 1;
	buf = frame_bytes(sc, fp);
	if (!buf) {
		w->status = PYPROF_READ_FAULT;
		return 1;
	}
	prev = field64(buf, cfg.frame_previous);
	/* Entry and shim frames are the interpreter's, not the program's:
	 * they do not spend the depth budget. */
	interp = cfg.frame_owner_interp_min &&
		 buf[cfg.frame_owner & (PYPROF_FRAME_READ_MAX - 1)] >= cfg.frame_owner_interp_min;
	if (interp && !cfg.frame_cache) {
		w->last = fp;
		w->fp = prev;
		return 0;
	}

	n = sc->s.nframes;
	if (n >= PYPROF_MAX_FRAMES || (!interp && w->npy >= cfg.max_frames)) {
		/* A frame beyond the limit: the innermost are kept. */
		w->status = PYPROF_TRUNCATED;
		return 1;
	}
	f = &sc->s.frames[n];
	f->frame = fp;
	sc->s.nframes = n + 1;
	w->last = fp;
	w->fp = prev;
	if (interp) {
		/* A link of the chain the 3.15 anchor moves along. */
		f->code = 0;
		f->instr = 0;
		f->code_version = 0;
		f->flags = PYPROF_FF_INTERP;
		return 0;
	}
	f->code = field64(buf, cfg.frame_executable) & ~cfg.executable_tag_mask;
	f->instr = field64(buf, cfg.frame_instr_ptr);
	f->code_version = code_version(sc, f->code);
	f->flags = 0;
	w->npy++;
	if (fp == w->anchor) {
		/* Its callers are what userspace has cached. */
		w->flags |= PYPROF_SF_AT_ANCHOR;
		return 1;
	}
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

/* A thread-state field from the block read in one go. */
static __always_inline __u64 block64(const __u8 *tsb, __u32 rel)
{
	if (rel > PYPROF_TSTATE_BLOCK - sizeof(__u64))
		return 0;
	return *(const __u64 *)(tsb + rel);
}

/*
 * 3.15: the current frame, the base frame and the anchor with its sequence,
 * all from one read of the thread state. Returns 0 or -1 on a read fault.
 */
static __always_inline long read_tstate_block(struct scratch *sc, __u64 tstate, __u64 *fp,
					      __u64 *base, struct pyprof_sample *s)
{
	__u32 len = cfg.tstate_block_len;

	if (len > PYPROF_TSTATE_BLOCK)
		len = PYPROF_TSTATE_BLOCK;
	if (bpf_probe_read_user(sc->tsb, len, (const void *)(tstate + cfg.tstate_block)))
		return -1;
	*fp = block64(sc->tsb, cfg.current_frame_rel);
	*base = block64(sc->tsb, cfg.base_frame_rel);
	s->cache_frame = block64(sc->tsb, cfg.anchor_rel);
	s->cache_seq = block64(sc->tsb, cfg.anchor_seq_rel);
	s->flags |= PYPROF_SF_ANCHOR_READ;
	return 0;
}

SEC("perf_event")
int pyprof_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 cpu = bpf_get_smp_processor_id();
	struct pyprof_thread *th;
	struct pyprof_sample *s;
	struct loop_ctx lc;
	struct scratch *sc;
	struct walk *w;
	__u64 base = 0, fp = 0, mm;
	long err;
	__u32 n;

	if (cfg.tgid && tgid != cfg.tgid) {
		count(PYPROF_CNT_FOREIGN);
		return 0;
	}
	/* Per-CPU events outlive an exec() of the target (per-thread ones are
	 * removed on exec): the first tick notes the address space, ticks in
	 * another one (the new image, from the moment exec switches to it)
	 * are dropped. A thread past exit_mm() has none: nothing to read. */
	mm = (__u64)bpf_get_current_task_btf()->mm;
	if (!mm) {
		count(PYPROF_CNT_NO_MM);
		return 0;
	}
	if (!target_mm)
		target_mm = mm;
	if (mm != target_mm) {
		count(PYPROF_CNT_EXECED);
		return 0;
	}
	th = bpf_map_lookup_elem(&threads, &tid);
	if (th)
		th->samples++;

	sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return 0;
	s = &sc->s;
	w = &sc->w;
	__builtin_memset(w, 0, sizeof(*w));
	w->gen = ++sc->gen;
	s->ts_ns = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->flags = 0;
	s->nframes = 0;
	s->cache_frame = 0;
	s->cache_seq = 0;
	s->cache_prev = 0;
	s->tstate = th ? th->tstate : 0;

	if (!s->tstate) {
		w->status = PYPROF_NO_PYSTATE;
		goto out;
	}
	if (cfg.frame_cache)
		err = read_tstate_block(sc, s->tstate, &fp, &base, s);
	else
		err = current_frame(s->tstate, &fp);
	if (err) {
		w->status = PYPROF_READ_FAULT;
		goto out;
	}
	w->fp = fp;
	if (cfg.frame_cache && th) {
		/* The interpreter only moves the anchor with the sequence: an
		 * anchor that changed under the same (or an older) sequence
		 * was written, and no cached stack can know where it points. */
		bool written = s->cache_seq < th->last_seq ||
			       (s->cache_seq == th->last_seq && s->cache_frame != th->last_anchor);

		/* Userspace can splice onto the anchor unless it says otherwise. */
		if (!th->walk_whole && !written)
			w->anchor = s->cache_frame;
		th->last_anchor = s->cache_frame;
		th->last_seq = s->cache_seq;
	}
	lc.sc = sc;
	bpf_loop(cfg.max_walk, walk_frame, &lc, 0);
	if (w->status == PYPROF_COMPLETE && w->fp && !(w->flags & PYPROF_SF_AT_ANCHOR)) {
		w->status = PYPROF_TRUNCATED;
		s->flags |= PYPROF_SF_WALK_BUDGET;
	}
	s->flags |= w->flags;
	if (w->flags & PYPROF_SF_AT_ANCHOR)
		s->cache_prev = w->fp;
	if (w->status == PYPROF_COMPLETE && !w->fp && base && w->last == base)
		s->flags |= PYPROF_SF_BASE;
out:
	s->status = w->status;
	n = s->nframes;
	if (n > PYPROF_MAX_FRAMES)
		n = PYPROF_MAX_FRAMES;
	s->nframes = n;

	/* No wake-up: the consumer drains the ring on its own timer. A
	 * wake-up per record throttled sampling to about once per poll. */
	if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_SIZE(n), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
	return 0;
}
