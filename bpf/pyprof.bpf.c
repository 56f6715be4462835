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
 * and whenever anchor or sequence changed since the thread's last sample
 * (moved, or written by anyone). In this mode interpreter-owned frames are
 * recorded too, flagged, as links of the chain the anchor moves along.
 * This program never writes the target: bpf_probe_write_user is refused
 * under kernel lockdown, and would fail in the interrupt context of a
 * perf_event program anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "pyprof.h"

#ifndef EEXIST
#define EEXIST 17
#endif

#define PF_EXITING 0x00000004	/* include/linux/sched.h */

char LICENSE[] SEC("license") = "Dual MIT/GPL";

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

/*
 * The only process sampled, while there is exactly one and none followed
 * (set by the loader; 0 otherwise): other tasks' ticks (per-CPU events) are
 * then dropped after one comparison, before the procs map is looked at.
 */
__u32 only_tgid = 0;

/*
 * Bumped by every change of the procs map (the loader's writes and deletes,
 * this program's own changes of an entry): a CPU's copy of an entry is
 * current while it is unchanged, and a tick of the process that CPU last
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
	__u32 version;
	__u32 tgid;			/* 0: empty; a forked child has its own */
};

/* Key of the shared table of code objects sent: an address. */
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
	__u64 set_buf[2 * PYPROF_SET_SCAN];	/* a set's table: key, hash */
	__u64 set_best;				/* its lowest live key */
	struct pyprof_sample s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);		/* the loader sets: possible CPUs */
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* LRU: threads of followed children come and go without the loader. */
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
	__u64 fsize = sc->cfg.frame_size, win = sc->cfg.window, start, len, off;

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

/*
 * 3.11 has no co_version. What tells a code object from the one freed before
 * at its address: the objects it owns (co_filename, co_name, co_qualname,
 * co_linetable), which a new object may get at the same addresses too, and
 * their contents' heads (the qualname's and filename's length, kind and
 * first characters; the table's length and first bytes), which differ
 * between generated functions and between modules (pyprof_ident311(),
 * which userspace computes alike). Nothing that changes while the object
 * lives: a str's cached hash is -1 until first asked for, so a class body's
 * qualname hashed between two samples gave its frames two identities.
 */
static __always_inline __u32 ident311(struct scratch *sc, __u64 code)
{
	__u64 q[4] = {}, qs[6] = {}, fs[6] = {}, ls[4] = {};

	bpf_probe_read_user(q, sizeof(q), (const void *)(code + sc->cfg.code_ident));
	if (q[2])
		bpf_probe_read_user(qs, sizeof(qs), (const void *)(q[2] + sc->cfg.unicode_length));
	if (q[0])
		bpf_probe_read_user(fs, sizeof(fs), (const void *)(q[0] + sc->cfg.unicode_length));
	if (q[3])
		bpf_probe_read_user(ls, sizeof(ls), (const void *)(q[3] + sc->cfg.bytes_size));
	return pyprof_ident311(q, qs, fs, ls);
}

/*
 * co_version of @code, read once per sample and code object. *ident is what
 * tells this code object from an earlier one at the same address, for the
 * tables of code objects sent: co_version itself on 3.12+; on 3.11, which
 * has none, ident311(), computed only when snapshots are on, and then also
 * what the frame carries as its version (userspace names the frame from the
 * snapshot of that identity, never from what the address holds later).
 * *fresh is false when this sample met @code before: its snapshot is
 * settled (a recursion's frames check it once).
 */
static __always_inline __u32 code_version(struct scratch *sc, __u64 code, __u32 *ident,
					   bool *fresh)
{
	struct walk *w = &sc->w;
	struct memo *m = &sc->memo[(code >> 4) & (PYPROF_VERSION_MEMO - 1)];
	__u32 v = 0;

	*ident = 0;
	*fresh = true;
	if (!sc->cfg.code_version && !(sc->cfg.snapshots && sc->cfg.code_ident))
		return 0;
	if (m->gen == w->gen && m->code == code) {
		*ident = m->ident;
		*fresh = false;
		return m->version;
	}
	count(PYPROF_CNT_VERSION_READS);
	/* A fault leaves 0: "unknown". */
	if (sc->cfg.code_version) {
		bpf_probe_read_user(&v, sizeof(v), (const void *)(code + sc->cfg.code_version));
		*ident = v;
	} else {
		*ident = ident311(sc, code);
		v = *ident;	/* the frame carries it: userspace matches on it */
	}
	m->code = code;
	m->version = v;
	m->ident = *ident;
	m->gen = w->gen;
	return v;
}

/*
 * Copy the str object at @addr (header and payload, compact strings only)
 * into @dst, at most @max bytes. Returns the bytes copied; *cut says the
 * string is longer (or not compact), *fault that nothing could be read.
 */
static __always_inline __u32 copy_str(struct scratch *sc, __u8 *dst, __u32 max, __u64 addr,
				      bool *cut, bool *fault)
{
	__u64 hdr = sc->cfg.unicode_ascii_data, length, total;
	__u32 state, kind;

	*cut = false;
	*fault = false;
	if (hdr > 64)
		hdr = 64;
	if (!addr || bpf_probe_read_user(dst, hdr, (const void *)addr)) {
		*fault = true;
		return 0;
	}
	/* PEP 393 state: kind in bits 2-4, compact bit 5, ascii bit 6. */
	state = *(const __u32 *)(dst + (sc->cfg.unicode_state & 63));
	length = *(const __u64 *)(dst + (sc->cfg.unicode_length & 63));
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || length > max) {
		*cut = true;
		return hdr;
	}
	total = ((state & (1u << 6)) ? sc->cfg.unicode_ascii_data : sc->cfg.unicode_compact_data) +
		length * kind;
	if (total > max) {
		*cut = true;
		total = max;
	}
	if (total <= hdr)
		return total;
	if (bpf_probe_read_user(dst + hdr, (total - hdr) & (PYPROF_CODE_FILE_MAX - 1),
				(const void *)(addr + hdr))) {
		*fault = true;
		return 0;
	}
	return total;
}

/* Send what naming code object @code takes. Returns 0 when sent. */
static __always_inline long send_code(struct scratch *sc, __u64 code, __u32 version)
{
	struct pyprof_code *c = &sc->code;
	__u32 len = sc->cfg.code_size;
	__u64 lt, size;
	bool cut, fault;

	if (len > PYPROF_CODE_OBJ_MAX)
		len = PYPROF_CODE_OBJ_MAX;
	if (bpf_probe_read_user(c->obj, len, (const void *)code))
		return -1;
	c->kind = PYPROF_REC_CODE;
	c->flags = 0;
	c->code = code;
	c->version = version;
	c->pid = sc->s.pid;
	c->obj_len = len;
	c->qual_len = copy_str(sc, c->qual, PYPROF_CODE_QUAL_MAX,
			       *(const __u64 *)(c->obj + (sc->cfg.code_qualname & (PYPROF_CODE_OBJ_MAX - 8))),
			       &cut, &fault);
	c->flags |= (cut ? PYPROF_CF_QUAL_CUT : 0) | (fault ? PYPROF_CF_QUAL_FAULT : 0);
	c->file_len = copy_str(sc, c->file, PYPROF_CODE_FILE_MAX,
			       *(const __u64 *)(c->obj + (sc->cfg.code_filename & (PYPROF_CODE_OBJ_MAX - 8))),
			       &cut, &fault);
	c->flags |= (cut ? PYPROF_CF_FILE_CUT : 0) | (fault ? PYPROF_CF_FILE_FAULT : 0);

	c->lt_len = 0;
	c->lt_size = 0;
	lt = *(const __u64 *)(c->obj + (sc->cfg.code_linetable & (PYPROF_CODE_OBJ_MAX - 8)));
	if (!lt || bpf_probe_read_user(&size, sizeof(size), (const void *)(lt + sc->cfg.bytes_size))) {
		c->flags |= PYPROF_CF_LT_FAULT;
	} else {
		c->lt_size = size;
		if (size > PYPROF_CODE_LT_MAX) {
			size = PYPROF_CODE_LT_MAX;
			c->flags |= PYPROF_CF_LT_CUT;
		}
		if (bpf_probe_read_user(c->lt, size, (const void *)(lt + sc->cfg.bytes_sval)))
			c->flags |= PYPROF_CF_LT_FAULT;
		else
			c->lt_len = size;
	}
	len = c->lt_len;
	if (len > PYPROF_CODE_LT_MAX)
		len = PYPROF_CODE_LT_MAX;
	if (bpf_ringbuf_output(&samples, c, PYPROF_CODE_SIZE(len), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_CODES_LOST);
		return -1;
	}
	count(PYPROF_CNT_CODES_SENT);
	return 0;
}

/*
 * First sighting of (@code, @version)? Then send its snapshot; false when
 * it could not be sent (tried again at the next sighting). A per-CPU
 * direct-mapped table answers most frames with one comparison; the shared
 * LRU table makes one sighting send once across CPUs.
 */
static __always_inline bool note_code(struct scratch *sc, __u64 code, __u32 version,
				      __u32 ident)
{
	struct seen *e = &sc->seen[((code >> 4) ^ (code >> 14)) & (PYPROF_SEEN_L1 - 1)];
	struct code_key key = { .code = code, .tgid = sc->s.pid };
	/* What was sent under an earlier configuration counts as unsent. */
	__u32 tag = ident ^ (sc->cfg.snap_gen * 0x9e3779b1u);
	__u32 *last;

	if (e->tgid == sc->s.pid && e->code == code && e->version == tag)
		return true;
	last = bpf_map_lookup_elem(&codes_seen, &key);
	if (!last || *last != tag) {
		if (send_code(sc, code, version))
			return false;
		bpf_map_update_elem(&codes_seen, &key, &tag, BPF_ANY);
	}
	e->code = code;
	e->version = tag;
	e->tgid = sc->s.pid;
	return true;
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
	__u32 n, ident;
	__u8 owner;
	bool interp, fresh;

	if (!fp)
		return 1;
	if (fp == w->mark) {
		w->cycle = 1;
		return 1;
	}
	if (++w->steps >= w->lap) {
		w->mark = fp;
		w->lap <<= 1;
		w->steps = 0;
	}
	if (fp == w->must)
		w->met = 1;
	buf = frame_bytes(sc, fp);
	if (!buf) {
		w->status = PYPROF_READ_FAULT;
		return 1;
	}
	prev = field64(buf, sc->cfg.frame_previous);
	/* Entry and shim frames are the interpreter's, not the program's:
	 * they do not spend the depth budget. */
	owner = buf[sc->cfg.frame_owner & (PYPROF_FRAME_READ_MAX - 1)];
	interp = sc->cfg.frame_owner_interp_min && owner >= sc->cfg.frame_owner_interp_min;
	if (interp && !sc->cfg.frame_cache && !sc->cfg.keep_entries) {
		w->last = fp;
		w->fp = prev;
		return 0;
	}

	n = sc->s.nframes;
	if (n >= PYPROF_MAX_FRAMES || (!interp && w->npy >= sc->cfg.max_frames)) {
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
		f->flags = PYPROF_FF_INTERP |
			   (sc->cfg.keep_entries && owner == sc->cfg.owner_cstack ? PYPROF_FF_ENTRY : 0);
		return 0;
	}
	f->code = field64(buf, sc->cfg.frame_executable) & ~sc->cfg.executable_tag_mask;
	f->instr = field64(buf, sc->cfg.frame_instr_ptr);
	f->code_version = code_version(sc, f->code, &ident, &fresh);
	f->flags = sc->cfg.frame_is_entry &&
		   buf[sc->cfg.frame_is_entry & (PYPROF_FRAME_READ_MAX - 1)] ? PYPROF_FF_ENTRY : 0;
	if (sc->cfg.snapshots && f->code) {
		/* The memo entry code_version() just used: a second walk of
		 * the sample (3.11/3.12 from the caller) meets the code again
		 * and must say again that no snapshot went. */
		struct memo *m = &sc->memo[(f->code >> 4) & (PYPROF_VERSION_MEMO - 1)];
		bool unsent;

		if (fresh) {
			unsent = !note_code(sc, f->code, f->code_version, ident);
			m->unsent = unsent;
		} else {
			unsent = m->unsent;	/* not fresh: m is this code's */
		}
		if (unsent)
			f->flags |= PYPROF_FF_NO_SNAPSHOT;
	}
	w->npy++;
	if (fp == w->seek)
		w->seen = 1;
	if (fp == w->anchor) {
		/* Its callers are what userspace has cached. */
		w->flags |= PYPROF_SF_AT_ANCHOR;
		return 1;
	}
	return 0;
}

/* A thread-state field from the block read in one go; 0 when absent. */
static __always_inline __u64 block64(const __u8 *tsb, __u32 rel)
{
	if (rel > PYPROF_TSTATE_BLOCK - sizeof(__u64))
		return 0;
	return *(const __u64 *)(tsb + rel);
}

/* Read the thread-state block of @tstate into sc->tsb. 0 or a read fault. */
static __always_inline long read_tsb(struct scratch *sc, __u64 tstate)
{
	__u32 len = sc->cfg.tstate_block_len;

	if (len > PYPROF_TSTATE_BLOCK)
		len = PYPROF_TSTATE_BLOCK;
	return bpf_probe_read_user(sc->tsb, len, (const void *)(tstate + sc->cfg.tstate_block));
}

/* The block's _status word says the thread state is its thread's current one. */
static __always_inline bool tsb_active(const struct scratch *sc)
{
	__u32 rel = sc->cfg.status_rel;

	return rel < PYPROF_TSTATE_BLOCK - sizeof(__u32) &&
	       (*(const __u32 *)(sc->tsb + (rel & (PYPROF_TSTATE_BLOCK - 1))) &
		(1u << PYPROF_TSTATE_ACTIVE_BIT));
}

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
 * Read @tstate's block: current frame (through the C frame record on
 * 3.11/3.12), thread id, status and, on 3.15, base frame and anchor with its
 * sequence. Returns 0 or -1 on a read fault.
 */
static __always_inline long read_tstate(struct scratch *sc, __u64 tstate, struct tstate_view *v,
					struct pyprof_sample *s)
{
	__u64 cframe, prev, rec[PYPROF_CFRAME_READ / 8];

	if (read_tsb(sc, tstate))
		return -1;
	v->thread_id = block64(sc->tsb, sc->cfg.thread_id_rel);
	v->active = tsb_active(sc);
	v->base = 0;
	if (sc->cfg.frame_cache) {
		v->base = block64(sc->tsb, sc->cfg.base_frame_rel);
		s->cache_frame = block64(sc->tsb, sc->cfg.anchor_rel);
		s->cache_seq = block64(sc->tsb, sc->cfg.anchor_seq_rel);
		s->flags |= PYPROF_SF_ANCHOR_READ;
	}
	if (!sc->cfg.tstate_cframe) {
		v->fp = block64(sc->tsb, sc->cfg.current_frame_rel);
		return 0;
	}
	/*
	 * 3.11/3.12: the frame pointer lives in the C frame record, and the
	 * record before it holds the caller's frame, which a sound chain
	 * passes: an evaluation loop publishes its record before it sets
	 * the record's frame (a few instructions in which the frame is what
	 * that stack slot held before).
	 */
	v->fp = 0;
	v->caller = 0;
	v->caller_ok = false;
	v->unfilled = false;
	cframe = block64(sc->tsb, sc->cfg.cframe_rel);
	if (!cframe)
		return 0;
	if (bpf_probe_read_user(rec, sizeof(rec), (const void *)cframe))
		return -1;
	v->fp = rec[(sc->cfg.cframe_current_frame / 8) & (PYPROF_CFRAME_READ / 8 - 1)];
	prev = rec[(sc->cfg.cframe_previous / 8) & (PYPROF_CFRAME_READ / 8 - 1)];
	if (prev && bpf_probe_read_user(&v->caller, sizeof(v->caller),
					(const void *)(prev + sc->cfg.cframe_current_frame)))
		v->caller = 0;
	/* The thread's records live on its C stack, callers' at higher
	 * addresses (the first in the thread state, its frame NULL). */
	v->caller_ok = prev > cframe && prev - cframe < PYPROF_CSTACK_SPAN;
	/* A frame-less record that is not the state's own is a loop's on the
	 * C stack before it set its frame: a filled one always has one (its
	 * slot held 0: a fresh stack; a request thread 0.3 ms into its
	 * handler was said to run no Python). */
	v->unfilled = !v->fp && sc->cfg.root_cframe && cframe != tstate + sc->cfg.root_cframe;
	return 0;
}

/* pthread_self() of the current thread: its TCB, which is its fs base on
 * x86-64 (glibc and musl alike), what CPython stores as thread_id. */
static __always_inline __u64 thread_id_of(const struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	return task->thread.fsbase;
#else
	return 0;
#endif
}

/* One step of the lookup: one thread state, or the move to an interpreter. */
static long lookup_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct lookup *l = &sc->l;
	__u64 next = 0;

	if (!l->ts) {
		/* The next interpreter, and the head of its thread list. */
		if (!l->started) {
			l->started = 1;
			if (bpf_probe_read_user(&next, sizeof(next),
						(const void *)sc->cfg.interpreters_head))
				return 1;
			l->head = next;
		} else if (!l->interp ||
			   bpf_probe_read_user(&next, sizeof(next),
					       (const void *)(l->interp + sc->cfg.interp_next))) {
			return 1;
		}
		l->interp = next;
		if (!next)
			return 1;
		l->ninterps++;
		if (bpf_probe_read_user(&l->ts, sizeof(l->ts),
					(const void *)(next + sc->cfg.interp_threads_head)))
			return 1;
		return 0;
	}
	if (read_tsb(sc, l->ts))
		return 1;
	if (block64(sc->tsb, sc->cfg.thread_id_rel) == l->want) {
		l->nfound++;
		if (!l->first)
			l->first = l->ts;
		if (tsb_active(sc))
			l->active = l->ts;
	}
	l->ts = block64(sc->tsb, sc->cfg.next_rel);
	return 0;
}

/*
 * Find the thread state of the current thread by walking every
 * interpreter's thread list (bounded by lookup_steps). With several (the
 * thread runs in subinterpreters), the active one, else the first. Returns
 * it, 0 when none; *n is how many matched.
 */
static __always_inline __u64 lookup_tstate(struct scratch *sc, __u64 want, __u32 *n)
{
	struct lookup *l = &sc->l;
	struct loop_ctx lc = { .sc = sc };

	__builtin_memset(l, 0, sizeof(*l));
	*n = 0;
	if (!want || !sc->cfg.lookup_steps)
		return 0;
	l->want = want;
	count(PYPROF_CNT_LOOKUPS);
	bpf_loop(sc->cfg.lookup_steps, lookup_step, &lc, 0);
	*n = l->nfound;
	if (!l->nfound) {
		count(PYPROF_CNT_LOOKUP_MISSES);
		return 0;
	}
	count(PYPROF_CNT_LOOKUP_FOUND);
	return l->active ? l->active : l->first;
}

/*
 * Remember what a lookup found for @tid (or that it found nothing, and
 * when). A new thread state means nothing cached for it: walk whole.
 */
static __always_inline void remember(struct pyprof_thread *th, __u32 tid, __u64 tstate, __u32 n,
				     __u64 now, __u64 born)
{
	struct pyprof_thread v = {};

	if (th) {
		if (th->tstate != tstate)
			th->walk_whole = 1;
		th->tstate = tstate;
		th->nstates = n;
		th->lookup_ns = now;
		th->misses = tstate ? 0 : th->misses + 1;
		if (tstate)
			th->had_state = 1;
		return;
	}
	v.tstate = tstate;
	v.samples = 1;
	v.walk_whole = 1;
	v.nstates = n;
	v.lookup_ns = now;
	v.misses = tstate ? 0 : 1;
	v.had_state = !!tstate;
	v.born = born;
	bpf_map_update_elem(&threads, &tid, &v, BPF_NOEXIST);
}

/*
 * GIL and GC: whether the sampled thread held the GIL (with read_gil), and
 * whether it was running a collection: the one whose chain holds gc_frame
 * (3.15), else the GIL's holder while a collection runs.
 */
static __always_inline void gil_gc(struct scratch *sc, struct pyprof_sample *s, __u64 tstate)
{
	__u64 holder = 0, gcf = 0;
	__u32 locked = 0, collecting = 0;
	bool gil_read = false, held = false;

	if (sc->cfg.gc_collecting &&
	    !bpf_probe_read_user(&collecting, sizeof(collecting), (const void *)sc->cfg.gc_collecting) &&
	    collecting && sc->cfg.gc_frame &&
	    !bpf_probe_read_user(&gcf, sizeof(gcf), (const void *)sc->cfg.gc_frame) && gcf) {
		/* The collector's frame is its innermost, or close to it
		 * when finalizers run Python code. */
		__u32 n = s->nframes;

		for (__u32 i = 0; i < 8; i++) {
			if (i >= n || i >= PYPROF_MAX_FRAMES)
				break;
			if (s->frames[i].frame == gcf) {
				s->flags |= PYPROF_SF_GC;
				break;
			}
		}
		collecting = 0;		/* decided */
	}
	if ((sc->cfg.read_gil || collecting) && sc->cfg.gil_holder && sc->cfg.gil_locked &&
	    !bpf_probe_read_user(&holder, sizeof(holder), (const void *)sc->cfg.gil_holder) &&
	    !bpf_probe_read_user(&locked, sizeof(locked), (const void *)sc->cfg.gil_locked)) {
		gil_read = true;
		held = locked && holder == tstate;
	}
	if (gil_read && sc->cfg.read_gil) {
		s->flags |= PYPROF_SF_GIL_KNOWN;
		if (held)
			s->flags |= PYPROF_SF_GIL_HELD;
	}
	if (collecting && held)
		s->flags |= PYPROF_SF_GC;
}

/*
 * One step of the awaiter chain (--async): record task sc->task_next, then
 * move to what awaits it: the one awaiter, or the lowest of a set's (the
 * order a reader can reproduce). Returns 1 to stop.
 */
/* One entry of an awaiter set's table: the lowest live key so far. */
static long set_scan_step(__u32 k, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	__u64 key, hash;

	if (k >= PYPROF_SET_SCAN)
		return 1;
	key = sc->set_buf[(2 * k) & (2 * PYPROF_SET_SCAN - 1)];
	hash = sc->set_buf[(2 * k + 1) & (2 * PYPROF_SET_SCAN - 1)];
	/* Empty (NULL) and deleted (dummy key, hash -1) entries. */
	if (!key || hash == (__u64)-1)
		return 0;
	if (!sc->set_best || key < sc->set_best)
		sc->set_best = key;
	return 0;
}

static long task_step(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct loop_ctx slc = { .sc = sc };
	struct pyprof_tasks *tk = &sc->tk;
	struct pyprof_task_link *link;
	__u64 task = sc->task_next, aw = 0, coro = 0, best = 0, used = 0, mask = 0, table = 0;
	__u64 name = 0;
	__u32 n = tk->ntasks, cnt, len;
	__u8 is_task = 0, is_set = 0;

	if (!task)
		return 1;
	if (n >= PYPROF_MAX_TASKS) {
		tk->flags |= PYPROF_TF_CUT;
		return 1;
	}
	for (__u32 j = 0; j < PYPROF_MAX_TASKS; j++) {
		if (j >= n)
			break;
		if (tk->tasks[j].task == task) {
			tk->flags |= PYPROF_TF_CYCLE;
			return 1;
		}
	}
	if (bpf_probe_read_user(&is_task, 1, (const void *)(task + sc->cfg.task_is_task)) ||
	    bpf_probe_read_user(&coro, sizeof(coro), (const void *)(task + sc->cfg.task_coro)) ||
	    bpf_probe_read_user(&aw, sizeof(aw), (const void *)(task + sc->cfg.task_awaited_by)) ||
	    bpf_probe_read_user(&is_set, 1, (const void *)(task + sc->cfg.task_awaited_by_is_set))) {
		tk->flags |= PYPROF_TF_FAULT;
		return 1;
	}
	if (!is_task) {
		/* A future (or a task of another kind): the chain ends. */
		if (n)
			tk->flags |= PYPROF_TF_FUTURE;
		return 1;
	}
	link = &tk->tasks[n & (PYPROF_MAX_TASKS - 1)];
	link->task = task;
	link->coro = coro;
	link->nawaiters = aw ? 1 : 0;
	/* Its name, copied now: a task may end before userspace reads it. */
	link->name_len = 0;
	link->name_type_flags = 0;
	if (sc->cfg.task_name &&
	    !bpf_probe_read_user(&name, sizeof(name), (const void *)(task + sc->cfg.task_name)) &&
	    name && !bpf_probe_read_user(link->name, sizeof(link->name), (const void *)name)) {
		__u64 type = *(const __u64 *)(link->name + 8);	/* ob_type */

		if (!bpf_probe_read_user(&link->name_type_flags, sizeof(link->name_type_flags),
					 (const void *)(type + sc->cfg.type_flags)))
			link->name_len = sizeof(link->name);
	}
	tk->ntasks = n + 1;
	sc->task_next = 0;
	if (!aw)
		return 1;
	if (!is_set) {
		sc->task_next = aw;
		return 0;
	}
	if (bpf_probe_read_user(&used, sizeof(used), (const void *)(aw + sc->cfg.set_used)) ||
	    bpf_probe_read_user(&mask, sizeof(mask), (const void *)(aw + sc->cfg.set_mask)) ||
	    bpf_probe_read_user(&table, sizeof(table), (const void *)(aw + sc->cfg.set_table)) ||
	    !table) {
		tk->flags |= PYPROF_TF_FAULT;
		return 1;
	}
	link->nawaiters = (__u32)used;
	cnt = mask + 1 > PYPROF_SET_SCAN ? PYPROF_SET_SCAN : (__u32)mask + 1;
	if (mask + 1 > PYPROF_SET_SCAN)
		tk->flags |= PYPROF_TF_SET_CUT;
	len = cnt * 16;
	if (len > sizeof(sc->set_buf))
		len = sizeof(sc->set_buf);
	if (!len || bpf_probe_read_user(sc->set_buf, len, (const void *)table)) {
		tk->flags |= PYPROF_TF_FAULT;
		return 1;
	}
	sc->set_best = 0;
	/* bpf_loop: an unrolled scan was half of what the verifier walked */
	bpf_loop(cnt, set_scan_step, &slc, 0);
	best = sc->set_best;
	sc->task_next = best;
	return best ? 0 : 1;
}

/* --async: send the running task of @tstate's thread and its awaiters
 * before the sample. */
static __always_inline void send_tasks(struct scratch *sc, struct pyprof_sample *s, __u64 tstate)
{
	struct pyprof_tasks *tk = &sc->tk;
	struct loop_ctx lc = { .sc = sc };
	__u64 task = 0;
	__u32 n;

	if (bpf_probe_read_user(&task, sizeof(task),
				(const void *)(tstate + sc->cfg.async_running_task)) || !task)
		return;
	tk->kind = PYPROF_REC_TASKS;
	tk->tid = s->tid;
	tk->ntasks = 0;
	tk->flags = 0;
	sc->task_next = task;
	bpf_loop(PYPROF_MAX_TASKS + 1, task_step, &lc, 0);
	n = tk->ntasks;
	if (!n)
		return;
	if (n > PYPROF_MAX_TASKS)
		n = PYPROF_MAX_TASKS;
	if (bpf_ringbuf_output(&samples, tk, PYPROF_TASKS_SIZE(n), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return;
	}
	s->flags |= PYPROF_SF_TASKS;
}

static __always_inline void proc_event(__u32 event, __u32 pid, __u32 ppid);

/*
 * -a: a process with no entry met on a CPU: give it one (unconfigured, so
 * its next ticks cost one lookup) and tell the loader. Kernel threads and
 * the idle task have no address space to read.
 */
static __always_inline void note_new_proc(__u32 tgid)
{
	struct task_struct *task;
	long err;

	if (!tgid || tgid == own_tgid)
		return;
	task = bpf_get_current_task_btf();
	if (!task->mm)
		return;
	err = bpf_map_update_elem(&procs, &tgid, &unseen_proc, BPF_NOEXIST);
	if (err) {
		if (err != -EEXIST)
			count(PYPROF_CNT_PROCS_FULL);
		return;
	}
	count(PYPROF_CNT_PROCS_SEEN);
	proc_event(PYPROF_PROC_SEEN, tgid, 0);
}

/*
 * Sample the current thread: a tick (@switch_out false), or its leaving the
 * CPU (off-CPU modes; the thread is prev of a sched_switch, still current).
 * Returns 1 when a sample record was sent, 2 when a switch-out's record
 * was sent without a walk (PYPROF_SF_REUSE), else 0.
 */
static __always_inline int take_sample(bool switch_out)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u32 cpu = bpf_get_smp_processor_id();
	struct tstate_view tv = {};
	struct pyprof_thread *th;
	struct pyprof_sample *s;
	struct loop_ctx lc;
	struct scratch *sc;
	struct walk *w;
	struct task_struct *task;
	struct pyprof_proc *pc;
	__u64 mm, self, tstate, born, epoch;
	__u32 n, nstates = 0;
	bool relook = false, exiting;

	if (only_tgid && tgid != only_tgid) {
		count(PYPROF_CNT_FOREIGN);
		return 0;
	}
	sc = bpf_map_lookup_elem(&scratch, &cpu);
	if (!sc)
		return 0;
	/* A thread past exit_mm() has no address space: nothing to read. */
	task = bpf_get_current_task_btf();
	mm = (__u64)task->mm;
	/* The epoch is read before the entry: a change made after the read
	 * bumps it past the copy. */
	epoch = READ_ONCE(procs_epoch);
	if (!sc->cfg_mm || sc->cfg_tgid != tgid || sc->cfg_epoch != epoch) {
		pc = bpf_map_lookup_elem(&procs, &tgid);
		if (!pc) {
			if (all_procs && !switch_out)
				note_new_proc(tgid);
			count(PYPROF_CNT_FOREIGN);
			return 0;
		}
		/* Followed, but not (yet) a Python the loader has
		 * configured: a child that exec'd something else, or whose
		 * interpreter is not yet found. */
		if (!pc->configured) {
			count(PYPROF_CNT_UNCONFIGURED);
			return 0;
		}
		/* The first tick notes the address space; ticks in another
		 * one (an exec the exec tracepoint has not reported yet) are
		 * dropped. */
		if (!pc->mm)
			pc->mm = mm;	/* 0 (no address space) stays unnoted */
		sc->cfg = pc->cfg;
		sc->cfg_mm = pc->mm;
		sc->cfg_tgid = tgid;
		sc->cfg_epoch = epoch;
	}
	if (!mm) {
		count(PYPROF_CNT_NO_MM);
		return 0;
	}
	if (mm != sc->cfg_mm) {
		count(PYPROF_CNT_EXECED);
		if (!execed_seen)
			execed_seen = 1;
		return 0;
	}
	born = task->start_time;
	th = bpf_map_lookup_elem(&threads, &tid);
	if (th) {
		th->samples++;
		if (th->born != born) {
			/* Another thread with this tid (or an entry the loader
			 * made): nothing known of this one's past. */
			if (th->born)
				th->had_state = 0;
			th->born = born;
		}
	}

	s = &sc->s;
	w = &sc->w;
	__builtin_memset(w, 0, sizeof(*w));
	w->gen = ++sc->gen;
	w->lap = 1;
	s->kind = PYPROF_REC_SAMPLE;
	s->ts_ns = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->flags = 0;
	s->nframes = 0;
	s->cache_frame = 0;
	s->cache_seq = 0;
	s->cache_prev = 0;

	/*
	 * The thread's state: the remembered one while it passes its check
	 * (it still belongs to this thread, and with several interpreters on
	 * the thread it is the active one), else found now in the target's
	 * thread lists, so that a thread is named from its first sample
	 * however short its life. A thread with none is looked up again
	 * after lookup_retry_ns.
	 */
	self = thread_id_of(task);
	tstate = th ? th->tstate : 0;
	/*
	 * An exiting thread runs no Python, and its state may be gone: once it
	 * is freed, a new thread (on the stack, so the thread id, this one
	 * left to glibc's cache) may hold its memory and pass the check, and
	 * lend its stack to this one (a request's thread sampled 2.3 ms after
	 * join() showed the next request's handler).
	 */
	exiting = task->flags & PF_EXITING;
	if (exiting) {
		tstate = 0;
	} else if (tstate) {
		if (read_tstate(sc, tstate, &tv, s) ||
		    (sc->cfg.thread_id_rel != PYPROF_REL_NONE && self && tv.thread_id != self)) {
			count(PYPROF_CNT_STALE_TSTATE);
			tstate = 0;
		} else if (sc->cfg.status_rel != PYPROF_REL_NONE && !tv.active &&
			   (th->nstates != 1 ||
			    s->ts_ns - th->lookup_ns >= (th->interps > 1 ? sc->cfg.lookup_retry_ns :
							 PYPROF_INACTIVE_RETRY_NS))) {
			/* Not active: switched interpreters, or released the
			 * GIL. Another state of the thread may be the active
			 * one; this one stands if none is. With one state and
			 * one interpreter, only a new interpreter could hold
			 * another: its list's head tells, in one read. */
			__u64 head = 0;

			relook = true;
			if (th->nstates == 1 && th->interps <= 1 && th->interp_head &&
			    !bpf_probe_read_user(&head, sizeof(head),
						 (const void *)sc->cfg.interpreters_head) &&
			    head == th->interp_head) {
				relook = false;
				th->lookup_ns = s->ts_ns;
			}
		}
	}
	if (!tstate && !exiting)
		relook = !th || th->misses < PYPROF_LOOKUP_EAGER ||
			 s->ts_ns - th->lookup_ns >= sc->cfg.lookup_retry_ns;
	if (relook) {
		__u64 got = lookup_tstate(sc, self, &nstates);

		if (got || !tstate)
			remember(th, tid, got, nstates, s->ts_ns, born);
		else
			th->lookup_ns = s->ts_ns;	/* keep the one that passed */
		if (th) {
			th->interps = sc->l.ninterps;
			th->interp_head = sc->l.head;
		}
		if (got && got != tstate) {
			s->flags = 0;
			tstate = read_tstate(sc, got, &tv, s) ? 0 : got;
		}
	}
	s->tstate = tstate;
	if (!tstate) {
		/* Stateless: say why when the thread's life tells. One that
		 * had a state (this very thread: see born), or is exiting,
		 * is ending. A young one whose state no sample saw is
		 * starting (its state not bound yet) or already ending (a
		 * short thread): nothing seen from here tells which for
		 * sure, so the marker says both. A process's main thread is
		 * born at its fork, maybe long before its exec (a launched
		 * command waits for the events; a worker forks, then
		 * execs): one that has run under PYPROF_MAIN_START_CPU_NS
		 * on a CPU is an interpreter starting (loading, before its
		 * first state: 13-15 ms after the first sample for pyenv's
		 * 3.11 at 10 kHz, whose cost the thread is charged, and a
		 * 20 ms bound was crossed before it, pre-exec time counted). */
		w->status = PYPROF_NO_PYSTATE;
		if (exiting || (th && th->had_state))
			w->status = PYPROF_THREAD_EXIT;
		else if (s->ts_ns - born < PYPROF_THREAD_YOUNG_NS ||
			 (tid == tgid && task->se.sum_exec_runtime < PYPROF_MAIN_START_CPU_NS))
			w->status = PYPROF_THREAD_YOUNG;
		goto out;
	}
	/*
	 * Off-CPU modes: a thread leaving the CPU again within offcpu_walk_ns
	 * of its last walk, in the same innermost frame at the same
	 * instruction (a loop handing the GIL over at its back edge), has
	 * the stack that walk found: not walked again (PYPROF_SF_REUSE).
	 */
	if (switch_out && th && sc->cfg.offcpu_walk_ns && tv.fp && tv.fp == th->last_fp &&
	    s->ts_ns - th->last_walk_ns < sc->cfg.offcpu_walk_ns) {
		const __u8 *buf = frame_bytes(sc, tv.fp);

		if (buf && field64(buf, sc->cfg.frame_instr_ptr) == th->last_instr) {
			s->flags |= PYPROF_SF_SWITCH_OUT | PYPROF_SF_REUSE;
			s->status = PYPROF_COMPLETE;
			s->tstate = tstate;
			s->nframes = 0;
			if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_HDR_SIZE,
					       BPF_RB_NO_WAKEUP)) {
				count(PYPROF_CNT_LOST);
				return 0;
			}
			return 2;
		}
	}
	w->fp = tv.fp;
	if (sc->cfg.frame_cache && th) {
		/*
		 * Stop at the anchor only when anchor and sequence are exactly
		 * what the thread's previous sample saw and that sample met
		 * the anchor in a chain userspace could cache (last_anchor is
		 * 0 otherwise): userspace then holds the callers (a frame
		 * anchored and unmoved has not returned). Any change walks
		 * whole once, and userspace caches that walk. Moves of the
		 * interpreter's could be followed further, but another writer
		 * (a second pyprof-bpf, CPython's profiler writing the anchor
		 * alone) followed by the interpreter's moves looks just like
		 * them, and a stop userspace cannot splice costs the sample's
		 * callers, and those of every sample taken before userspace
		 * can say so (a poll). Measured: anchors move rarely once
		 * settled, the extra whole walks do not show.
		 */
		bool same = s->cache_frame && s->cache_frame == th->last_anchor &&
			    s->cache_seq == th->last_seq;

		/* Userspace can splice onto the anchor unless it says otherwise. */
		if (!th->walk_whole && same)
			w->anchor = s->cache_frame;
		w->seek = s->cache_frame;
	}
	w->must = tv.caller;
	lc.sc = sc;
	bpf_loop(sc->cfg.max_walk, walk_frame, &lc, 0);
	if (sc->cfg.tstate_cframe && !w->met &&
	    (!w->must || w->cycle || w->status != PYPROF_TRUNCATED)) {
		/*
		 * 3.11/3.12, a chain that missed the caller's frame (or with
		 * no caller to check and cyclic): the thread is entering an
		 * evaluation loop (see read_tstate) and the record's frame is
		 * stale. The caller's stack is sound when the link to it is
		 * (on the same stack, older): walk that. A truncated chain is
		 * let be: a deep one stops before it.
		 */
		bool eval_entry = w->cycle || w->must || tv.unfilled;

		if (w->must && tv.caller_ok) {
			s->nframes = 0;
			w->fp = w->must;
			w->must = 0;
			w->last = 0;
			w->npy = 0;
			w->status = PYPROF_COMPLETE;
			w->cycle = 0;
			w->mark = 0;
			w->steps = 0;
			w->lap = 1;
			bpf_loop(sc->cfg.max_walk, walk_frame, &lc, 0);
			eval_entry = w->cycle || w->fp ||
				     (w->status != PYPROF_COMPLETE && w->status != PYPROF_TRUNCATED);
			if (!eval_entry) {
				count(PYPROF_CNT_FROM_CALLER);
				s->flags |= PYPROF_SF_FROM_CALLER;
			}
		}
		if (eval_entry) {
			count(PYPROF_CNT_EVAL_ENTRY);
			s->nframes = 0;
			w->status = PYPROF_EVAL_ENTRY;
			w->fp = 0;
			w->cycle = 0;
		}
	}
	if (w->cycle) {
		/* Not a stack: said as a read fault, no frames. */
		count(PYPROF_CNT_CYCLES);
		s->flags |= PYPROF_SF_CYCLE;
		s->nframes = 0;
		w->status = PYPROF_READ_FAULT;
		w->fp = 0;
		w->flags &= ~PYPROF_SF_AT_ANCHOR;
	}
	if (w->status == PYPROF_COMPLETE && w->fp && !(w->flags & PYPROF_SF_AT_ANCHOR)) {
		w->status = PYPROF_TRUNCATED;
		s->flags |= PYPROF_SF_WALK_BUDGET;
	}
	s->flags |= w->flags;
	if (w->flags & PYPROF_SF_AT_ANCHOR)
		s->cache_prev = w->fp;
	if (w->status == PYPROF_COMPLETE && !w->fp && tv.base && w->last == tv.base)
		s->flags |= PYPROF_SF_BASE;
	if (sc->cfg.frame_cache && th) {
		/* Cacheable: stopped at the anchor, or whole down to the base
		 * frame with the anchor in it. */
		bool usable = w->seen && ((w->flags & PYPROF_SF_AT_ANCHOR) ||
					  (s->flags & PYPROF_SF_BASE));

		th->last_anchor = usable ? s->cache_frame : 0;
		th->last_seq = s->cache_seq;
	}
	gil_gc(sc, s, tstate);
	if (async_tasks && sc->cfg.async_running_task && !switch_out)
		send_tasks(sc, s, tstate);
	if (th) {
		/* What the next switch-out compares with (see above). */
		th->last_walk_ns = s->ts_ns;
		th->last_fp = tv.fp;
		th->last_instr = s->nframes && s->frames[0].frame == tv.fp ? s->frames[0].instr : 0;
	}
out:
	s->status = w->status;
	if (switch_out)
		s->flags |= PYPROF_SF_SWITCH_OUT;
	n = s->nframes;
	if (n > PYPROF_MAX_FRAMES)
		n = PYPROF_MAX_FRAMES;
	s->nframes = n;

	/* No wake-up: the consumer drains the ring on its own timer. A
	 * wake-up per record throttled sampling to about once per poll. */
	if (bpf_ringbuf_output(&samples, s, PYPROF_SAMPLE_SIZE(n), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_LOST);
		return 0;
	}
	return 1;
}

/* --kernel: the kernel stack of a tick that interrupted the kernel, sent
 * before its sample (same CPU: the ring keeps the order). */
static __always_inline void tick_kstack(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct pyprof_switch *r;
	long got;

	if (only_tgid && (id >> 32) != only_tgid)
		return;
	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	got = bpf_get_stack(ctx, r->kstack, sizeof(r->kstack), 0);
	if (got <= 0) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		return;
	}
	r->kind = PYPROF_REC_KSTACK;
	r->tid = (__u32)id;
	r->pid = id >> 32;
	r->state = 0;
	r->syscall_nr = -1;
	r->syscall_arg0 = 0;
	r->nkstack = (__u32)(got / sizeof(__u64));
	r->pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* Newer kernels (6.17+): a user read straight into a ring record sized at
 * run time. Elsewhere the record has the fixed, largest size. */
extern int bpf_probe_read_user_dynptr(struct bpf_dynptr *dptr, __u64 off, __u64 size,
				      const void *unsafe_ptr__ign) __weak __ksym;

#define USTACK_HDR	offsetof(struct pyprof_ustack, stack)

/* @r's header but its length: the thread, and the user registers of its
 * interrupted context. */
static __always_inline void ustack_header(struct pyprof_ustack *r, __u64 id,
					  const struct pt_regs *regs)
{
	r->kind = PYPROF_REC_USTACK;
	r->tid = (__u32)id;
	r->pid = id >> 32;
	r->regs[0] = regs->ax;
	r->regs[1] = regs->dx;
	r->regs[2] = regs->cx;
	r->regs[3] = regs->bx;
	r->regs[4] = regs->si;
	r->regs[5] = regs->di;
	r->regs[6] = regs->bp;
	r->regs[7] = regs->sp;
	r->regs[8] = regs->r8;
	r->regs[9] = regs->r9;
	r->regs[10] = regs->r10;
	r->regs[11] = regs->r11;
	r->regs[12] = regs->r12;
	r->regs[13] = regs->r13;
	r->regs[14] = regs->r14;
	r->regs[15] = regs->r15;
	r->regs[16] = regs->ip;
}

/* Bytes of the next copy from @at, @len in: to the page's end, at most @want. */
static __always_inline __u32 ustack_chunk(__u64 at, __u32 len, __u32 want)
{
	__u32 n = PYPROF_PAGE - (at & (PYPROF_PAGE - 1)), room = want - len;

	if (n > room)
		n = room;
	/* Bounds the verifier can follow: 1 to a page. */
	asm volatile("" : "+r"(n));
	n &= 2 * PYPROF_PAGE - 1;
	return n > PYPROF_PAGE ? 0 : n;
}

/*
 * --native: the user registers of the tick's thread (those saved at its
 * last entry into the kernel: this interrupt's, when it came in user mode)
 * and the top of its user stack, page by page from rsp until native_stack
 * bytes or an unreadable page. Sent before the sample. Where the kernel
 * can read user memory into a ring record sized at run time, the record is
 * as long as what the copy may take (~5 KB on most threads, see ustack_end)
 * instead of 32 KB: the ring's memory a second of samples runs through,
 * and the cache misses of writing and reading it, shrink with it.
 */
static __always_inline void tick_ustack(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task;
	struct pyprof_ustack *r;
	struct pt_regs *regs;
	__u32 len = 0, want = native_stack, tid = (__u32)id;
	__u64 sp, *end;

	if (only_tgid && (id >> 32) != only_tgid)
		return;
	task = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return;
	/* From 128 bytes below sp: the red zone, where an epilogue's
	 * popped registers still are. */
	sp = regs->sp - PYPROF_USTACK_REDZONE;
	if (want > PYPROF_USTACK_MAX)
		want = PYPROF_USTACK_MAX;
	/* No further than the thread's outermost frame: a pthread's stack
	 * goes on into its TLS, readable, and a shallow C stack is copied
	 * whole in a few KB instead of the 32 the deepest need. */
	end = bpf_map_lookup_elem(&ustack_end, &tid);
	if (end && *end > sp && *end - sp < want)
		want = *end - sp;
	if (bpf_probe_read_user_dynptr) {	/* resolved: 0 when absent */
		struct pyprof_ustack *h;
		struct bpf_dynptr dp;

		if (bpf_ringbuf_reserve_dynptr(&samples, USTACK_HDR + want, 0, &dp)) {
			bpf_ringbuf_discard_dynptr(&dp, BPF_RB_NO_WAKEUP);
			count(PYPROF_CNT_LOST);
			return;
		}
		for (int i = 0; i < PYPROF_USTACK_MAX / PYPROF_PAGE + 1; i++) {
			__u32 n;

			if (len >= want)
				break;
			n = ustack_chunk(sp + len, len, want);
			if (!n || bpf_probe_read_user_dynptr(&dp, USTACK_HDR + len, n,
							     (const void *)(sp + len)))
				break;
			len += n;
		}
		h = bpf_dynptr_data(&dp, 0, USTACK_HDR);
		if (!h) {
			bpf_ringbuf_discard_dynptr(&dp, BPF_RB_NO_WAKEUP);
			return;
		}
		ustack_header(h, id, regs);
		h->len = len;
		bpf_ringbuf_submit_dynptr(&dp, BPF_RB_NO_WAKEUP);
		return;
	}
	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	ustack_header(r, id, regs);
	for (int i = 0; i < PYPROF_USTACK_MAX / PYPROF_PAGE + 1; i++) {
		__u32 n;

		if (len >= want)
			break;
		n = ustack_chunk(sp + len, len, want);
		/* The bound on the register the read uses. */
		asm volatile("" : "+r"(len));
		if (!n || len > PYPROF_USTACK_MAX - PYPROF_PAGE ||
		    bpf_probe_read_user(&r->stack[len], n, (const void *)(sp + len)))
			break;
		len += n;
	}
	r->len = len;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("perf_event")
int pyprof_sample(struct bpf_perf_event_data *ctx)
{
	if (native_stack)
		tick_ustack();
	if (kernel_stacks)
		tick_kstack(ctx);
	take_sample(false);
	return 0;
}

/* Is @tgid a process sampled? One comparison while there is one. */
static __always_inline bool is_target(__u32 tgid)
{
	if (!tgid)
		return false;
	if (only_tgid)
		return tgid == only_tgid;
	return bpf_map_lookup_elem(&procs, &tgid) != NULL;
}

/*
 * A thread leaving the CPU whose last interval is still open: its switch-in
 * was never seen (rare; see PYPROF_CNT_SWITCH_IN_INFERRED). It has run
 * since, without a switch-out, so it came back its CPU time since ago: the
 * interval is closed with that end, before the new one opens.
 */
static __always_inline void close_missed(struct task_struct *prev)
{
	__u32 tid = prev->pid;
	struct pyprof_offcpu *o = bpf_map_lookup_elem(&offcpu, &tid);
	struct pyprof_switch_in r = { .kind = PYPROF_REC_SWITCH_IN };
	__u64 now, ran;

	if (!o || !o->off_ns)
		return;
	now = bpf_ktime_get_ns();
	ran = prev->se.sum_exec_runtime - o->exec_ns;
	r.tid = tid;
	r.pid = prev->tgid;
	r.off_ns = o->off_ns;
	r.in_ns = now - ran > o->off_ns && ran < now ? now - ran : o->off_ns;
	r.wake_ns = o->wake_ns && o->wake_ns <= r.in_ns ? o->wake_ns : 0;
	o->off_ns = 0;
	o->wake_ns = 0;
	count(PYPROF_CNT_SWITCH_IN_INFERRED);
	if (bpf_ringbuf_output(&samples, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

#define TASK_INTERRUPTIBLE	0x1
#define TASK_UNINTERRUPTIBLE	0x2

/*
 * A thread of a target leaves the CPU: blocked (interruptible or not), or
 * preempted while runnable. Its stack is sampled now (it is current), the
 * time noted; a blocked one's system call and kernel stack follow.
 */
static __always_inline void switch_out(void *ctx, struct task_struct *prev, __u32 state,
				       bool preempt)
{
	/* Preempted while setting up a wait (its state says sleeping, but it
	 * stays on the run queue): runnable, not blocked. */
	bool blocked = !preempt && (state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE));
	struct pyprof_offcpu v = {};
	struct pyprof_switch *r;
	struct pt_regs *regs;
	__u32 tid = prev->pid;
	long got;

	/* Stopped, traced, dead: not waiting for anything of its own. */
	if ((!blocked && state && !preempt) || (prev->flags & PF_EXITING))
		return;
	close_missed(prev);
	if (!take_sample(true))
		return;
	v.off_ns = bpf_ktime_get_ns();
	v.wake_ns = blocked ? 0 : v.off_ns;
	v.exec_ns = prev->se.sum_exec_runtime;
	if (bpf_map_update_elem(&offcpu, &tid, &v, BPF_ANY))
		count(PYPROF_CNT_OFFCPU_NOTE_FAILED);
	if (!blocked)
		return;
	r = bpf_ringbuf_reserve(&samples, sizeof(*r), 0);
	if (!r) {
		count(PYPROF_CNT_LOST);
		return;
	}
	r->kind = PYPROF_REC_SWITCH;
	r->tid = tid;
	r->pid = prev->tgid;
	r->state = state;
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	r->syscall_nr = -1;
	r->syscall_arg0 = 0;
	if (regs) {
		r->syscall_nr = (__s64)regs->orig_ax;
		r->syscall_arg0 = regs->di;
	}
	/* Always taken, walked or not: what it sleeps in is this very wait's. */
	r->pad = 0;
	got = bpf_get_stack(ctx, r->kstack, sizeof(r->kstack), 0);
	r->nkstack = got > 0 ? (__u32)(got / sizeof(__u64)) : 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* A thread of a target back on a CPU after an interval noted off it. */
static __always_inline void switch_in(struct task_struct *next)
{
	__u32 tid = next->pid;
	struct pyprof_offcpu *o = bpf_map_lookup_elem(&offcpu, &tid);
	struct pyprof_switch_in r = { .kind = PYPROF_REC_SWITCH_IN };

	if (!o || !o->off_ns) {
		count(PYPROF_CNT_SWITCH_IN_UNNOTED);
		return;
	}
	r.tid = tid;
	r.pid = next->tgid;
	r.off_ns = o->off_ns;
	r.wake_ns = o->wake_ns;
	r.in_ns = bpf_ktime_get_ns();
	o->off_ns = 0;
	o->wake_ns = 0;
	if (bpf_ringbuf_output(&samples, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

/*
 * Off-CPU modes (attached only then): every context switch of the machine
 * comes here; a task of no target costs one comparison (two lookups with
 * several targets).
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(pyprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (is_target(prev->tgid))
		switch_out(ctx, prev, prev_state, preempt);
	if (is_target(next->tgid))
		switch_in(next);
	return 0;
}

/* A thread off the CPU is woken: the rest of its interval is runnable. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(pyprof_wakeup, struct task_struct *p)
{
	__u32 tid;
	struct pyprof_offcpu *o;

	if (!is_target(p->tgid))
		return 0;
	tid = p->pid;
	o = bpf_map_lookup_elem(&offcpu, &tid);
	if (o && o->off_ns && !o->wake_ns)
		o->wake_ns = bpf_ktime_get_ns();
	return 0;
}

/* A process event for the loader (struct pyprof_proc_event). */
static __always_inline void proc_event(__u32 event, __u32 pid, __u32 ppid)
{
	struct pyprof_proc_event e = {
		.kind = PYPROF_REC_PROC, .event = event, .pid = pid, .ppid = ppid,
		.ts_ns = bpf_ktime_get_ns(),
	};

	if (bpf_ringbuf_output(&samples, &e, sizeof(e), BPF_RB_NO_WAKEUP))
		count(PYPROF_CNT_LOST);
}

/*
 * A followed process forked (follow_children): the child is followed too,
 * with its parent's configuration, which describes the child's copy of the
 * address space as well; its address space is noted at its first tick.
 * New threads are not processes: they are found at their first sample.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(pyprof_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct pyprof_proc *pp, *cp;

	if (!follow_children || ptgid == ctgid)
		return 0;
	pp = bpf_map_lookup_elem(&procs, &ptgid);
	if (!pp)
		return 0;
	if (bpf_map_update_elem(&procs, &ctgid, pp, BPF_NOEXIST)) {
		count(PYPROF_CNT_PROCS_FULL);
		return 0;
	}
	cp = bpf_map_lookup_elem(&procs, &ctgid);
	if (cp) {
		cp->mm = 0;
		/* Only the main target's samples go through userspace's
		 * frame cache: a child walks whole, Python frames only. */
		cp->cfg.frame_cache = 0;
		/* A child that shares its parent's address space (vfork(),
		 * posix_spawn(): subprocess, multiprocessing's spawn) runs
		 * no Python of its own before it execs: its stack would be
		 * the parent's, and by the time userspace reads the child
		 * the image is the new one. Followed for its exec only. */
		if (child->mm == parent->mm)
			cp->configured = 0;
		__sync_fetch_and_add(&procs_epoch, 1);
	}
	proc_event(PYPROF_PROC_FORK, ctgid, ptgid);
	return 0;
}

/*
 * A followed process exec'd: its configuration described the old image.
 * Its ticks are dropped until the loader configures the new one (if it is
 * a Python).
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(pyprof_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct pyprof_proc *pc = bpf_map_lookup_elem(&procs, &tgid);

	if (!pc)
		return 0;
	pc->configured = 0;
	pc->mm = 0;
	__sync_fetch_and_add(&procs_epoch, 1);
	proc_event(PYPROF_PROC_EXEC, tgid, 0);
	return 0;
}

/* A followed process ended (its leader exits last but for the rare
 * pthread_exit() of main; the loader checks /proc for those). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(pyprof_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (p->pid != p->tgid || !bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	proc_event(PYPROF_PROC_EXIT, tgid, 0);
	return 0;
}
