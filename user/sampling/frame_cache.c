// SPDX-License-Identifier: MIT
/*
 * frame_cache.c - splice cached callers onto the BPF walk's short records
 * (CPython 3.15's last_profiled_frame protocol; see frame_cache.h), and
 * judge when moving a thread's anchor up pays (the writes themselves:
 * frame_cache_anchor.c).
 *
 * Per thread: the last whole chain observed (interpreter links included,
 * innermost first), the index of the anchor in it and the sequence seen
 * with it. Threads live in an open-addressing table keyed by tid; a chain
 * buffer grows to the deepest stack seen and is then reused, so the steady
 * state allocates nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sampling/frame_cache_internal.h"

static uint32_t slot_of(pid_t tid)
{
	uint32_t h = (uint32_t)tid * 2654435761u;

	return h & (FC_SLOTS - 1);
}

struct fc_thread *fc_find(struct frame_cache *fc, pid_t tid)
{
	for (uint32_t i = slot_of(tid), k = 0; k < FC_SLOTS; i = (i + 1) & (FC_SLOTS - 1), k++) {
		if (fc->slots[i].tid == tid)
			return &fc->slots[i];
		if (!fc->slots[i].tid)
			return NULL;
	}
	return NULL;
}

static struct fc_thread *find_or_add(struct frame_cache *fc, pid_t tid)
{
	struct fc_thread *t = fc_find(fc, tid);
	uint32_t i;

	if (t || fc->nthreads >= FC_MAX_THREADS || tid <= 0)
		return t;
	for (i = slot_of(tid); fc->slots[i].tid; i = (i + 1) & (FC_SLOTS - 1))
		;
	t = &fc->slots[i];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->anchor_idx = -1;
	/* As the loader creates the kernel's entry: walk whole. */
	t->walk_whole = true;
	t->interval_ns = FC_INTERVAL_MIN;
	fc->nthreads++;
	return t;
}

/*
 * Keep what frame_cache__release() needs of @t's anchor, if we wrote one:
 * its thread state may still be linked (a thread whose state changed) and
 * hold it. Its chain goes, so only the value itself can tell it is ours.
 * At most FC_MAX_THREADS are kept, the oldest overwritten first (exited
 * threads' states are unlinked anyway); out of memory, it is lost.
 */
static void keep_owned(struct frame_cache *fc, const struct fc_thread *t)
{
	struct fc_owned *o;

	if (!t->wrote)
		return;
	if (!fc->gone) {
		fc->gone = calloc(FC_MAX_THREADS, sizeof(*fc->gone));
		if (!fc->gone)
			return;
	}
	o = &fc->gone[fc->ngone++ % FC_MAX_THREADS];
	*o = (struct fc_owned){ .tid = t->tid, .own = t->own, .tstate = t->own_tstate,
				.anchor = t->own_anchor, .seq = t->own_seq };
}

void frame_cache__forget(struct frame_cache *fc, pid_t tid)
{
	struct fc_thread *t;
	uint32_t i, j, home;

	if (!fc || !fc->enabled || !(t = fc_find(fc, tid)))
		return;
	keep_owned(fc, t);
	free(t->chain);
	free(t->py);
	free(t->pyc);
	/* Backward-shift deletion keeps every probe sequence unbroken. */
	i = (uint32_t)(t - fc->slots);
	j = i;
	for (;;) {
		fc->slots[i].tid = 0;
		for (;;) {
			j = (j + 1) & (FC_SLOTS - 1);
			if (!fc->slots[j].tid)
				goto done;
			home = slot_of(fc->slots[j].tid);
			/* Stays unless its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		fc->slots[i] = fc->slots[j];
		i = j;
	}
done:
	fc->nthreads--;
}

int frame_cache__new(pid_t pid, const struct py_offsets *o, unsigned int max_frames,
		     bool enabled, struct frame_cache **out)
{
	struct frame_cache *fc = calloc(1, sizeof(*fc));

	if (!fc)
		return -ENOMEM;
	fc->pid = pid;
	fc->enabled = enabled && o->tstate_last_profiled_frame;
	fc->reanchor_ok = false;	/* frame_cache__set_reanchor() */
	fc->max_frames = max_frames;
	fc->off_anchor = o->tstate_last_profiled_frame;
	fc->seq_follows = o->tstate_last_profiled_frame_seq == fc->off_anchor + 8;
	if (fc->enabled) {
		fc->slots = calloc(FC_SLOTS, sizeof(*fc->slots));
		fc->out = calloc(max_frames ? max_frames : 1, sizeof(*fc->out));
		if (!fc->slots || !fc->out) {
			frame_cache__free(fc);
			return -ENOMEM;
		}
	}
	*out = fc;
	return 0;
}

void frame_cache__free(struct frame_cache *fc)
{
	if (!fc)
		return;
	for (size_t i = 0; fc->slots && i < FC_SLOTS; i++)
		if (fc->slots[i].tid) {
			free(fc->slots[i].chain);
			free(fc->slots[i].py);
			free(fc->slots[i].pyc);
		}
	free(fc->slots);
	free(fc->out);
	free(fc->gone);
	free(fc);
}

void frame_cache__stats(const struct frame_cache *fc, struct frame_cache_stats *st)
{
	*st = fc->st;
}

void frame_cache_stats__print(const struct frame_cache_stats *st, const char *frames_from,
			      FILE *out)
{
	fprintf(out, "pyprof-bpf: frame cache: %llu samples spliced, %llu walked whole, "
		"%llu mismatched (delivered truncated); %llu frames %s, %llu reused; "
		"%llu anchors written (%llu failed)\n"
		"pyprof-bpf: frame cache: %llu anchors cleared on exit, %llu left "
		"(written since by someone else)\n",
		(unsigned long long)st->spliced, (unsigned long long)st->whole,
		(unsigned long long)st->mismatches, (unsigned long long)st->frames_sent, frames_from,
		(unsigned long long)st->frames_reused, (unsigned long long)st->reanchors,
		(unsigned long long)st->reanchor_failures, (unsigned long long)st->anchors_cleared,
		(unsigned long long)st->anchors_left);
}

bool fc_is_interp(const struct py_rawframe *f)
{
	return f->reserved & FC_FRAME_INTERP;
}

/* The Python frames of @f[0..n) into fc->out, at most max_frames; false
 * when some did not fit. */
static bool emit(struct frame_cache *fc, const struct py_rawframe *f, uint32_t n,
		 struct frame_cache_out *out)
{
	uint32_t k = 0;
	bool whole = true;

	for (uint32_t i = 0; i < n; i++) {
		if (fc_is_interp(&f[i]))
			continue;
		if (k == fc->max_frames) {
			out->status = SAMPLE_TRUNCATED;
			whole = false;
			break;
		}
		fc->out[k] = f[i];
		fc->out[k].reserved = 0;
		k++;
	}
	out->frames = fc->out;
	out->nframes = k;
	return whole;
}

static uint32_t python_frames(const struct py_rawframe *f, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		k += !fc_is_interp(&f[i]);
	return k;
}

static int reserve(struct fc_thread *t, uint32_t n)
{
	uint32_t cap = t->cap ? t->cap : 64;
	void *p;

	/* The first call allocates even for n = 0: a whole walk of no frames
	 * still writes pyc[0] (index_new) and copies into chain. */
	if (n <= t->cap && t->chain)
		return 0;
	while (cap < n)
		cap *= 2;
	if (!(p = realloc(t->chain, (size_t)cap * sizeof(*t->chain))))
		return -ENOMEM;
	t->chain = p;
	if (!(p = realloc(t->py, (size_t)cap * sizeof(*t->py))))
		return -ENOMEM;
	t->py = p;
	if (!(p = realloc(t->pyc, ((size_t)cap + 1) * sizeof(*t->pyc))))
		return -ENOMEM;
	t->pyc = p;
	t->cap = cap;
	return 0;
}

/*
 * chain[0..nf) is new and chain[nf..n) with pyc[nf..n] is in place (no
 * older frame when nf == n): count and list the new Python frames, which
 * come before the @kept already at py[0..kept) (moved there by the caller).
 */
static void index_new(struct fc_thread *t, uint32_t nf, uint32_t kept)
{
	uint32_t m = 0;

	if (nf == t->n)
		t->pyc[nf] = 0;
	for (uint32_t i = nf; i-- > 0;)
		t->pyc[i] = t->pyc[i + 1] + !fc_is_interp(&t->chain[i]);
	for (uint32_t i = 0; i < nf; i++) {
		if (fc_is_interp(&t->chain[i]))
			continue;
		t->py[m] = t->chain[i];
		t->py[m].reserved = 0;
		m++;
	}
	t->npy = m + kept;
}

/* Index of Python frame @addr in @t's chain, -1 if absent. */
static int32_t index_of(const struct fc_thread *t, uint64_t addr)
{
	for (uint32_t i = 0; addr && i < t->n; i++)
		if (t->chain[i].frame == addr)
			return fc_is_interp(&t->chain[i]) ? -1 : (int32_t)i;
	return -1;
}

/* Nothing cached any more. */
static void drop_chain(struct fc_thread *t)
{
	t->n = 0;
	t->anchor_idx = -1;
	t->gen++;
}

/* A whole walk: the chain to cache, the anchor found in it or not. */
static int store(struct fc_thread *t, const struct frame_cache_rec *r)
{
	if (r->nframes > FC_CHAIN_MAX || reserve(t, r->nframes)) {
		drop_chain(t);
		return -ENOMEM;
	}
	t->gen++;
	memcpy(t->chain, r->frames, (size_t)r->nframes * sizeof(*t->chain));
	t->n = r->nframes;
	index_new(t, t->n, 0);
	t->tstate = r->tstate;
	t->seq = r->seq;
	t->anchor_idx = index_of(t, r->anchor);
	return 0;
}

/*
 * The cached index of anchor (@anchor, @seq), -1 on any mismatch: it moved
 * d = seq - t->seq times, over Python frames only, to where it is.
 */
static int32_t locate(const struct fc_thread *t, const struct frame_cache_rec *r)
{
	const struct py_rawframe *a = &r->frames[r->nframes - 1];
	uint64_t d, k;

	if (t->anchor_idx < 0 || t->tstate != r->tstate || r->seq < t->seq)
		return -1;
	d = r->seq - t->seq;
	if (d >= t->n || (uint64_t)t->anchor_idx + d >= t->n)
		return -1;
	k = (uint64_t)t->anchor_idx + d;
	for (uint64_t i = (uint64_t)t->anchor_idx; i <= k; i++)
		if (fc_is_interp(&t->chain[i]))
			return -1;
	if (t->chain[k].frame != r->anchor || a->frame != r->anchor)
		return -1;
	/* Checks the protocol makes redundant; a frame's code object and
	 * caller do not change while it lives. */
	if (a->code != t->chain[k].code || a->code_version != t->chain[k].code_version)
		return -1;
	if (k + 1 < t->n ? t->chain[k + 1].frame != r->anchor_prev : r->anchor_prev != 0)
		return -1;
	return (int32_t)k;
}

/* Record + cached callers of chain[k], stored as the new chain. */
static int splice(struct fc_thread *t, const struct frame_cache_rec *r, uint32_t k)
{
	uint32_t tail = t->n - k - 1, n = r->nframes + tail, nf = r->nframes;
	uint32_t kept = t->pyc[k + 1], m;
	int err;

	if (n > FC_CHAIN_MAX)
		return -E2BIG;
	err = reserve(t, n);
	if (err)
		return err;
	m = python_frames(r->frames, nf);
	if (nf != k + 1) {
		memmove(t->chain + nf, t->chain + k + 1, (size_t)tail * sizeof(*t->chain));
		memmove(t->pyc + nf, t->pyc + k + 1, ((size_t)tail + 1) * sizeof(*t->pyc));
	}
	if (m != t->npy - kept)
		memmove(t->py + m, t->py + (t->npy - kept), (size_t)kept * sizeof(*t->py));
	memcpy(t->chain, r->frames, (size_t)nf * sizeof(*t->chain));
	t->n = n;
	t->gen++;
	index_new(t, nf, kept);
	t->anchor_idx = (int32_t)nf - 1;
	t->seq = r->seq;
	return 0;
}

/* The chain's Python frames, at most max_frames (the innermost); false
 * when some did not fit. */
static bool emit_chain(struct frame_cache *fc, const struct fc_thread *t,
		       struct frame_cache_out *out)
{
	out->frames = t->py;
	out->nframes = t->npy;
	if (t->npy <= fc->max_frames)
		return true;
	out->nframes = fc->max_frames;
	out->status = SAMPLE_TRUNCATED;
	return false;
}

/* Walk whole until a usable anchor is cached; say so when it changes. */
static void want_whole(struct fc_thread *t, const struct frame_cache_rec *r, bool whole,
		       struct frame_cache_out *out)
{
	if (t->walk_whole == whole ||
	    (!whole && (r->ts_ns < t->barrier_ns || r->ts_ns < t->whole_until_ns)))
		return;
	t->walk_whole = whole;
	out->set_walk_whole = true;
	out->walk_whole = whole;
}

/*
 * Should the anchor move up? @above: frames the kernel walked above it.
 * A re-anchor pays when the anchor then stays high; the interval doubles
 * each time the last one stayed good for less than the interval (the
 * thread's callers change too fast: the anchor slides back down), and
 * returns to the minimum when one lasted.
 */
static void judge(struct fc_thread *t, uint64_t now, uint32_t above, bool deep,
		  struct frame_cache_out *out)
{
	bool poor = t->anchor_idx < 0 ? deep : above > FC_ABOVE;

	if (now < t->barrier_ns || now < t->whole_until_ns)
		return;
	if (!poor) {
		t->good_ns = now;
		return;
	}
	if (now < t->next_reanchor_ns)
		return;
	if (t->reanchored_ns) {
		bool lasted = t->good_ns > t->reanchored_ns &&
			      t->good_ns - t->reanchored_ns >= t->interval_ns;

		if (lasted)
			t->interval_ns = FC_INTERVAL_MIN;
		else if (t->interval_ns < FC_INTERVAL_MAX)
			t->interval_ns *= 2;
	}
	out->reanchor = true;
}

/*
 * Is anchor (@a, @s), as read from the thread state, still ours: the one
 * we wrote, or where the interpreter's own moves took it from there? Each
 * pop of the anchored frame moves the anchor to that frame's caller and
 * adds 1 to the sequence (popping an interpreter-owned frame moves
 * nothing), so d = s - own_seq moves put it d frames further along the
 * chain it was last seen in. Anything else was written since by someone
 * else: another pyprof-bpf (its write jumps the sequence by FC_SEQ_JUMP:
 * d >= 2^32), CPython's own profiler (it writes the anchor alone: the
 * anchor is not where d moves lead; with d == 0, not the value we know).
 * Without the chain (own_idx < 0) only an unmoved anchor is known to be
 * ours. @moved: d.
 */
bool fc_follows(const struct fc_thread *t, uint64_t a, uint64_t s, uint64_t *moved)
{
	uint64_t d = s - t->own_seq, k;

	*moved = d;
	if (d >= FC_SEQ_JUMP)
		return false;
	if (!d)
		return a == t->own_anchor;
	if (t->own_idx < 0 || (uint64_t)t->own_idx >= t->n || d >= t->n - (uint64_t)t->own_idx)
		return false;
	k = (uint64_t)t->own_idx + d;
	for (uint64_t i = (uint64_t)t->own_idx; i < k; i++)
		if (fc_is_interp(&t->chain[i]))
			return false;
	return t->chain[k].frame == a;
}

static int process(struct frame_cache *fc, struct fc_thread *t, const struct frame_cache_rec *r,
		   struct frame_cache_out *out);

int frame_cache__process(struct frame_cache *fc, const struct frame_cache_rec *r,
			 struct frame_cache_out *out)
{
	struct fc_thread *t;
	uint64_t d = 0;
	uint32_t gen;
	bool track;
	int err;

	memset(out, 0, sizeof(*out));
	out->status = r->status;
	if (!fc->enabled) {
		out->frames = r->frames;
		out->nframes = r->nframes;
		return 0;
	}
	fc->st.frames_sent += r->nframes;
	t = find_or_add(fc, r->tid);
	/*
	 * Our anchor, seen by this sample of the stopped thread: still ours,
	 * or not any more (for good: nothing makes it ours again but a write
	 * of ours). A sample taken before our write, handed on after it,
	 * shows the older sequence: it says nothing of the write.
	 */
	track = t && t->own && (r->flags & FC_REC_ANCHOR_READ) && r->tstate == t->own_tstate &&
		!(r->ts_ns < t->barrier_ns && (int64_t)(r->seq - t->own_seq) < 0);
	if (track && !fc_follows(t, r->anchor, r->seq, &d)) {
		t->own = false;
		track = false;
	}
	gen = t ? t->gen : 0;
	err = process(fc, t, r, out);
	if (t && t->own && !track && t->gen != gen)
		t->own_idx = -1;	/* a chain it says nothing of */
	if (track) {
		t->own_anchor = r->anchor;
		t->own_seq = r->seq;
		/* A new chain holds the anchor where the cache says (it was
		 * stored or spliced with this very anchor and sequence); the
		 * same chain, d frames further along. */
		if (t->gen != gen)
			t->own_idx = t->seq == r->seq && t->anchor_idx >= 0 &&
						     t->chain[t->anchor_idx].frame == r->anchor ?
				     t->anchor_idx : -1;
		else if (t->own_idx >= 0)
			t->own_idx += (int32_t)d;
	}
	return err;
}

static int process(struct frame_cache *fc, struct fc_thread *t, const struct frame_cache_rec *r,
		   struct frame_cache_out *out)
{
	int32_t k;
	int err = 0;

	if (t && t->tstate != r->tstate)
		drop_chain(t);

	if (r->flags & FC_REC_AT_ANCHOR && r->nframes) {
		k = t ? locate(t, r) : -1;
		if (k >= 0) {
			uint32_t tail = t->n - (uint32_t)k - 1;
			uint32_t same = t->pyc[k + 1];
			bool was_chain = t->out_is_chain;

			err = splice(t, r, (uint32_t)k);
			if (!err) {
				/* Long clean: forget past mismatches. */
				if (t->cooldown_ns && r->ts_ns > t->whole_until_ns + 10 * t->cooldown_ns)
					t->cooldown_ns = 0;
				fc->st.spliced++;
				fc->st.frames_reused += tail;
				t->out_is_chain = emit_chain(fc, t, out);
				if (was_chain && t->out_is_chain)
					out->unchanged = same;
				judge(t, r->ts_ns, r->nframes - 1, true, out);
				return 0;
			}
		}
		/* The callers are unknown: deliver what is known, honestly,
		 * and have the kernel walk this thread whole. */
		fc->st.mismatches++;
		emit(fc, r->frames, r->nframes, out);
		out->status = SAMPLE_TRUNCATED;
		out->cut = true;
		if (t) {
			t->out_is_chain = false;
			drop_chain(t);
			t->cooldown_ns = t->cooldown_ns ? t->cooldown_ns * 2 : FC_COOLDOWN_MIN;
			if (t->cooldown_ns > FC_COOLDOWN_MAX)
				t->cooldown_ns = FC_COOLDOWN_MAX;
			t->whole_until_ns = r->ts_ns + t->cooldown_ns;
			want_whole(t, r, true, out);
		}
		return err == -ENOMEM ? err : 0;
	}

	fc->st.whole++;
	if (t)
		t->out_is_chain = false;
	if (!t || r->status != SAMPLE_COMPLETE || !(r->flags & FC_REC_BASE) ||
	    !(r->flags & FC_REC_ANCHOR_READ)) {
		emit(fc, r->frames, r->nframes, out);
		return 0;
	}
	err = store(t, r);
	if (err) {
		emit(fc, r->frames, r->nframes, out);
		return err;
	}
	/* The stored chain's Python view is what emit() would copy out. */
	t->out_is_chain = emit_chain(fc, t, out);
	fc->st.stored++;
	want_whole(t, r, t->anchor_idx < 0, out);
	judge(t, r->ts_ns, t->anchor_idx < 0 ? t->n : (uint32_t)t->anchor_idx,
	      t->n > FC_ABOVE, out);
	return 0;
}
