/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * frames.bpf.h - the frame walk: from the thread state's current frame
 * outwards, one frame per loop step (compat.bpf.h), read in windows of the data
 * stack; the 3.11/3.12 check that the chain passes the caller's frame; the
 * 3.15 frame cache's anchor.
 */
#ifndef PYPROF_FRAMES_BPF_H
#define PYPROF_FRAMES_BPF_H

#include "maps.bpf.h"
#include "codes.bpf.h"
#include "tstate.bpf.h"
#include "compat.bpf.h"

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
	/* Clamped again where it is used: a 6.1 verifier keeps no bounds for
	 * a value the compiler spilled before the clamp above. */
	barrier_var(fsize);
	if (fsize > PYPROF_FRAME_READ_MAX)
		fsize = PYPROF_FRAME_READ_MAX;
	if (bpf_probe_read_user(sc->win, fsize, (const void *)fp))
		return NULL;
	w->wbase = fp;
	w->wlen = fsize;
hit:
	off = (fp - w->wbase) & (PYPROF_WINDOW_MAX - 1);
	return sc->win + off;
}

/* Has the chain come back to @fp? Brent's check (see struct walk). */
static __always_inline bool cycled(struct walk *w, __u64 fp)
{
	if (fp == w->mark) {
		w->cycle = 1;
		return true;
	}
	if (++w->steps >= w->lap) {
		w->mark = fp;
		w->lap <<= 1;
		w->steps = 0;
	}
	return false;
}

/*
 * Python frame @f, whose bytes are @buf: its code object, instruction and
 * co_version, and (snapshots) whether its code object's snapshot went.
 */
static __always_inline void frame_code(struct scratch *sc, struct pyprof_frame *f,
				       const __u8 *buf)
{
	__u32 ident;
	bool fresh;

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
}

/* One bpf_loop iteration: visit frame w->fp. Returns 1 to stop the loop. */
static long walk_frame(__u32 i, void *arg)
{
	struct scratch *sc = ((struct loop_ctx *)arg)->sc;
	struct walk *w = &sc->w;
	struct pyprof_frame *f;
	const __u8 *buf;
	__u64 fp = w->fp, prev;
	__u32 n;
	__u8 owner;
	bool interp;

	if (!fp || cycled(w, fp))
		return 1;
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
		f->flags = PYPROF_FF_INTERP;
		if (sc->cfg.keep_entries && owner == sc->cfg.owner_cstack)
			f->flags |= PYPROF_FF_ENTRY;
		return 0;
	}
	frame_code(sc, f, buf);
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
DEFINE_LOOP(walk_frame)

/*
 * 3.15 frame cache: stop at the anchor only when anchor and sequence are
 * exactly what the thread's previous sample saw and that sample met the
 * anchor in a chain userspace could cache (last_anchor is 0 otherwise):
 * userspace then holds the callers (a frame anchored and unmoved has not
 * returned). Any change walks whole once, and userspace caches that walk.
 * Moves of the interpreter's could be followed further, but another writer
 * (a second pyprof-bpf, CPython's profiler writing the anchor alone)
 * followed by the interpreter's moves looks just like them, and a stop
 * userspace cannot splice costs the sample's callers, and those of every
 * sample taken before userspace can say so (a poll). Measured: anchors move
 * rarely once settled, the extra whole walks do not show.
 */
static __always_inline void set_anchor(struct scratch *sc, const struct pyprof_thread *th)
{
	struct pyprof_sample *s = &sc->s;
	bool same = s->cache_frame && s->cache_frame == th->last_anchor &&
		    s->cache_seq == th->last_seq;

	/* Userspace can splice onto the anchor unless it says otherwise. */
	if (!th->walk_whole && same)
		sc->w.anchor = s->cache_frame;
	sc->w.seek = s->cache_frame;
}

/*
 * 3.11/3.12, a chain that missed the caller's frame (or with no caller to
 * check and cyclic): the thread is entering an evaluation loop (see
 * read_tstate) and the record's frame is stale. The caller's stack is sound
 * when the link to it is (on the same stack, older): walk that, else say
 * PYPROF_EVAL_ENTRY, no frames.
 */
static __always_inline void walk_from_caller(struct scratch *sc, const struct tstate_view *tv)
{
	struct pyprof_sample *s = &sc->s;
	struct walk *w = &sc->w;
	bool eval_entry = w->cycle || w->must || tv->unfilled;

	if (w->must && tv->caller_ok) {
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
		RUN_LOOP(sc->cfg.max_walk, walk_frame, PYPROF_MAX_FRAMES * PYPROF_WALK_FACTOR);
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

/* How the walk ended, said in the sample: its status, flags and anchor's caller. */
static __always_inline void end_walk(struct scratch *sc, const struct tstate_view *tv)
{
	struct pyprof_sample *s = &sc->s;
	struct walk *w = &sc->w;

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
	if (w->status == PYPROF_COMPLETE && !w->fp && tv->base && w->last == tv->base)
		s->flags |= PYPROF_SF_BASE;
}

/* 3.15 frame cache: what the thread's next sample compares with (set_anchor()). */
static __always_inline void note_anchor(struct scratch *sc, struct pyprof_thread *th)
{
	struct pyprof_sample *s = &sc->s;
	struct walk *w = &sc->w;
	/* Cacheable: stopped at the anchor, or whole down to the base frame
	 * with the anchor in it. */
	bool usable = w->seen && ((w->flags & PYPROF_SF_AT_ANCHOR) || (s->flags & PYPROF_SF_BASE));

	th->last_anchor = usable ? s->cache_frame : 0;
	th->last_seq = s->cache_seq;
}

/*
 * Walk the thread's frames from its state's current frame (@tv) into the
 * sample (@th: the thread's entry, if any). w->status says how it ended.
 */
static __always_inline void walk_stack(struct scratch *sc, struct pyprof_thread *th,
				       const struct tstate_view *tv)
{
	struct walk *w = &sc->w;

	w->fp = tv->fp;
	if (sc->cfg.frame_cache && th)
		set_anchor(sc, th);
	w->must = tv->caller;
	RUN_LOOP(sc->cfg.max_walk, walk_frame, PYPROF_MAX_FRAMES * PYPROF_WALK_FACTOR);
	/* A truncated chain is let be: a deep one stops before the caller's frame. */
	if (sc->cfg.tstate_cframe && !w->met &&
	    (!w->must || w->cycle || w->status != PYPROF_TRUNCATED))
		walk_from_caller(sc, tv);
	end_walk(sc, tv);
	if (sc->cfg.frame_cache && th)
		note_anchor(sc, th);
}

#endif
