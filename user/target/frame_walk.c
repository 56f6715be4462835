/* SPDX-License-Identifier: MIT */
/*
 * frame_walk.c - a thread's Python frames read from outside (pyproc.h): the
 * chain from the current frame, from a copy of the thread's stack chunks
 * when one is whole (stack_chunks.h), else frame by frame, with the last
 * walk's chain as the prediction of the next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "target/call_sites.h"
#include "target/chain_shape.h"
#include "target/frame_sizes.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "target/stack_chunks.h"
#include "util/bytes.h"


/* Interpreter-owned frames are skipped without spending the depth budget,
 * but the walk as a whole is bounded too. */
#define WALK_BUDGET(max) ((max) * 4 + 64)

/*
 * The co_version of every Python frame of @f, in as few reads as the kernel
 * allows. An interpreter's link (code 0, with keep_links) has none to read;
 * a code object that cannot be read leaves its frame's version at 0
 * ("unknown": the symbolizer then checks the object itself), and the frames
 * after it are still read (a fault ends a process_vm_readv at that iovec).
 */
static int read_versions(struct pyproc *p, struct py_rawframe *f, size_t n)
{
	struct remote_iov iov[256];
	uint64_t off = pyproc__offsets(p)->code_version;
	size_t i = 0;

	while (off && i < n) {
		size_t k = 0, done = 0;

		for (; i < n && k < 256; i++) {
			f[i].code_version = 0;
			if (f[i].code)
				iov[k++] = (struct remote_iov){ f[i].code + off, &f[i].code_version, 4 };
		}
		for (size_t at = 0; at < k; at += done + 1) {
			int rc = remote_readv_prefix(pyproc__pid(p), iov + at, k - at, &done);

			if (rc == -ESRCH)
				return rc;
			if (!rc)
				break;
		}
	}
	return 0;
}

static int current_frame(struct pyproc *p, uint64_t tstate, uint64_t *frame, uint64_t *cframe)
{
	const struct py_offsets *o = pyproc__offsets(p);
	int rc;

	*frame = 0;
	*cframe = 0;
	if (!o->tstate_cframe)
		return remote_read_u64(pyproc__pid(p), tstate + o->tstate_current_frame, frame);
	rc = remote_read_u64(pyproc__pid(p), tstate + o->tstate_cframe, cframe);
	if (rc || !*cframe)
		return rc;
	return remote_read_u64(pyproc__pid(p), *cframe + o->cframe_current_frame, frame);
}

int pyproc__current_frame(struct pyproc *p, uint64_t tstate, uint64_t *frame)
{
	uint64_t cframe;

	return current_frame(p, tstate, frame, &cframe);
}

void py_walk_cache__forget(struct py_walk_cache *c)
{
	c->n = 0;
	c->torn_share = 0;
	if (c->chunks) {
		c->chunks->n = 0;
		c->chunks->napart = 0;
	}
}

void py_walk_cache__free(struct py_walk_cache *c)
{
	if (!c)
		return;
	if (c->chunks)
		stack_chunks__free(c->chunks);
	free(c->chunks);
	free(c->frames);
	free(c->codes);
	free(c->foff);
	free(c->fiov);
	free(c->viov);
	free(c->versions);
	free(c->iov);
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static int cache_reserve(struct py_walk_cache *c, size_t need)
{
	size_t cap = c->cap;
	int ok = 1;

	if (need <= cap)
		return 0;
	while (cap < need)
		cap = cap ? cap * 2 : 64;
#define GROW(field, n) do { \
		void *np = realloc(c->field, (n) * sizeof(*c->field)); \
		if (np) \
			c->field = np; \
		else \
			ok = 0; \
	} while (0)
	GROW(frames, cap);
	GROW(codes, cap);
	GROW(foff, cap);
	GROW(fiov, cap);
	GROW(viov, cap);
	GROW(versions, cap);
	GROW(iov, 2 * cap + 2);
#undef GROW
	if (!ok)
		return -ENOMEM;
	c->cap = cap;
	return 0;
}

/* Frames of one chain sit close together in the thread's data stack: read
 * neighbours (closer than this) as one range, not one iovec each. */
#define SPAN_GAP 1024
#define SPAN_MAX (64u << 10)
/* Code objects looked up for co_version, deduplicated (recursion repeats one
 * code object a thousand times). */
#define VSLOTS 64

/*
 * Read ahead what the last walk of this thread saw, in one process_vm_readv:
 * the current frame pointer (3.11/3.12: through the C frame the last walk
 * found), every frame (neighbours merged into ranges) and the co_version of
 * every distinct code object. Sets *frame to the current frame when it is the
 * predicted one, and returns how many frames, from the innermost, were read
 * whole.
 */
static size_t prefetch(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c,
		       uint64_t *frame)
{
	const struct py_offsets *o = pyproc__offsets(p);
	struct remote_iov *iov = c->iov;
	uint64_t cframe = 0, lo = 0, hi = 0, vcode[VSLOTS] = { 0 };
	uint32_t vidx[VSLOTS];
	size_t k = 0, done = 0, head, spans, bytes = 0, ready;
	const size_t fs = o->frame_size;

	*frame = 0;
	if (o->tstate_cframe) {
		iov[k++] = (struct remote_iov){ tstate + o->tstate_cframe, &cframe, 8 };
		iov[k++] = (struct remote_iov){ c->cframe + o->cframe_current_frame, frame, 8 };
	} else {
		iov[k++] = (struct remote_iov){ tstate + o->tstate_current_frame, frame, 8 };
	}
	head = k;
	/* Pass 1: merge frames into ranges, in chain order. */
	for (size_t i = 0; i < c->n; i++) {
		uint64_t a = c->frames[i];
		uint64_t nlo = a < lo ? a : lo, nhi = a + fs > hi ? a + fs : hi;

		if (k == head || nhi - nlo > (hi - lo) + fs + SPAN_GAP || nhi - nlo > SPAN_MAX) {
			if (k > head)
				iov[k - 1] = (struct remote_iov){ lo, NULL, hi - lo };
			k++;
			nlo = a;
			nhi = a + fs;
		}
		lo = nlo;
		hi = nhi;
		c->fiov[i] = (uint32_t)(k - 1);
	}
	if (k > head)
		iov[k - 1] = (struct remote_iov){ lo, NULL, hi - lo };
	spans = k;
	/* Pass 2: place the ranges in the buffer. */
	for (size_t j = head; j < spans; j++)
		bytes += iov[j].len;
	if (bytes > c->bufcap) {
		unsigned char *nb = realloc(c->buf, bytes);

		if (!nb)
			return 0;
		c->buf = nb;
		c->bufcap = bytes;
	}
	bytes = 0;
	for (size_t j = head; j < spans; j++) {
		iov[j].buf = c->buf + bytes;
		bytes += iov[j].len;
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct remote_iov *v = &iov[c->fiov[i]];

		c->foff[i] = (uint32_t)((unsigned char *)v->buf - c->buf + (c->frames[i] - v->addr));
	}
	/* The versions, one read per distinct code object. */
	for (size_t i = 0; o->code_version && i < c->n; i++) {
		unsigned int h = (unsigned int)(c->codes[i] >> 4) % VSLOTS;

		/* No version to read at 0 (and an empty slot holds 0). */
		if (!c->codes[i]) {
			c->viov[i] = UINT32_MAX;
			continue;
		}
		if (vcode[h] != c->codes[i]) {
			vcode[h] = c->codes[i];
			vidx[h] = (uint32_t)k;
			iov[k] = (struct remote_iov){ c->codes[i] + o->code_version,
						      &c->versions[k - spans], 4 };
			k++;
		}
		c->viov[i] = vidx[h];
	}
	remote_readv_prefix(pyproc__pid(p), iov, k, &done);
	if (done < head || (o->tstate_cframe && cframe != c->cframe) || *frame != c->frames[0]) {
		*frame = 0;	/* the thread moved on: read it the slow way */
		return 0;
	}
	for (ready = 0; ready < c->n && c->fiov[ready] < done; ready++)
		;
	c->vdone = done;
	c->vbase = spans;
	return ready;
}

#define SNAPSHOT_TRIES 32

/* 3.15: where the copy reads base frame, anchor and sequence (the frame
 * cache's protocol needs the sequence right after the anchor). */
static void anchor_fields(const struct py_offsets *o, uint64_t tstate,
			  struct stack_anchor_fields *f)
{
	*f = (struct stack_anchor_fields){ 0 };
	if (o->tstate_base_frame && o->tstate_last_profiled_frame &&
	    o->tstate_last_profiled_frame_seq == o->tstate_last_profiled_frame + 8) {
		f->base = tstate + o->tstate_base_frame;
		f->anchor = tstate + o->tstate_last_profiled_frame;
	}
}

/* The copy shows the anchor the walk is to stop at, with its sequence. */
static bool anchor_holds(const struct py_walk_cache *c)
{
	const struct stack_chunks *s = c->chunks;

	return s->anchor_read && s->anchor == c->stop_at && s->seq == c->stop_seq;
}

/*
 * 3.11+: the current frame and the thread's stack chunks read at one instant
 * (stack_chunks.h). 1 with *frame set when the copy is whole; 0 when no copy
 * can be had (*frame 0: read the usual way); -EAGAIN when the thread moved
 * during every copy that c->copy_budget allowed; -ESRCH.
 */
static int snapshot(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c, uint64_t *frame)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t cframe = 0, after;
	int rc = 0, moving = 1;

	*frame = 0;
	if (!o->tstate_datastack_chunk)
		return 0;
	if (!c->chunks) {
		c->chunks = calloc(1, sizeof(*c->chunks));
		if (!c->chunks)
			return 0;
	}
	anchor_fields(o, tstate, &c->chunks->fields);
	/* A thread that calls and returns every microsecond often moves while
	 * its chunks are copied (3 us): rarely many times running. */
	for (int try = 0; try < SNAPSHOT_TRIES && c->copy_budget; try++) {
		struct remote_iov head[2];
		size_t k = 0;

		c->copy_budget--;
		c->chunks->floor = c->stop_at;
		if (o->tstate_cframe) {
			/* 3.11/3.12: through the C frame record the thread was
			 * last seen in (it changes as C code calls Python) */
			if (!c->cframe &&
			    remote_read_u64(pyproc__pid(p), tstate + o->tstate_cframe, &c->cframe))
				break;
			if (!c->cframe)
				break;
			head[k++] = (struct remote_iov){ tstate + o->tstate_cframe, &cframe, 8 };
			head[k++] = (struct remote_iov){ c->cframe + o->cframe_current_frame, frame,
							 8 };
		} else {
			head[k++] = (struct remote_iov){ tstate + o->tstate_current_frame, frame, 8 };
		}
		rc = stack_chunks__copy(pyproc__pid(p), tstate + o->tstate_datastack_chunk, head, k,
					c->chunks, &after);
		if (rc)
			break;
		if (o->tstate_cframe && cframe != c->cframe) {
			c->cframe = cframe;
			c->chunks->whole = 0;
			continue;
		}
		moving = c->chunks->moved || c->chunks->relearned;
		if (!moving && c->stop_at && !anchor_holds(c)) {
			/* not the anchor of last time: walk whole, copy whole */
			c->stop_at = 0;
			moving = c->chunks->floored;
		}
		if (!moving)
			break;
	}
	if (rc == -ESRCH)
		return rc;
	if (!rc && moving)
		return -EAGAIN;
	if (rc || !c->chunks->whole || !*frame) {
		*frame = 0;
		return 0;
	}
	return 1;
}

/*
 * The bytes of @frame: from the chunk copy (@snap), from the prefetch (the
 * walk's @visited-th frame as predicted; SIZE_MAX when off the prediction),
 * or read now into @fb. NULL with *rc set when it cannot be read.
 */
static const unsigned char *frame_bytes(struct pyproc *p, struct py_walk_cache *c, int snap,
					uint64_t frame, size_t visited, unsigned char *fb, int *rc)
{
	const unsigned char *b = NULL;
	int apart = 0;

	if (snap) {
		b = stack_chunks__find(c->chunks, frame, pyproc__offsets(p)->frame_size, &apart);
		/* an entry or generator frame: read it with the next copy */
		if (apart)
			stack_chunks__note_apart(c->chunks, frame);
		if (b)
			return b;
	}
	if (visited != SIZE_MAX && c->frames[visited] == frame)
		return c->buf + c->foff[visited];
	*rc = remote_read(pyproc__pid(p), frame, fb, pyproc__offsets(p)->frame_size);
	return *rc ? NULL : fb;
}

/* A Python frame of the walk into @f; 1 when its code's co_version came
 * with the prefetch (@visited: its place in the prediction, or SIZE_MAX). */
static int put_frame(const struct py_offsets *o, const struct py_walk_cache *c,
		     const unsigned char *b, uint64_t frame, uint64_t code, size_t visited,
		     struct py_rawframe *f)
{
	*f = (struct py_rawframe){ .frame = frame, .code = code,
				   .instr = get_u64(b, o->frame_instr_ptr) };
	if (visited == SIZE_MAX || c->codes[visited] != code || !o->code_version ||
	    c->viov[visited] >= c->vdone)
		return 0;
	f->code_version = c->versions[c->viov[visited] - c->vbase];
	return 1;
}

/*
 * A walk with cache @c starts from a copy of the thread's chunks when one
 * can be had (1, *frame its current frame, @shape set to check the chain in
 * it), else reads the usual way (0); -EAGAIN (moving), -ESRCH.
 */
static int walk_start(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c,
		      struct chain_shape *shape, uint64_t *frame)
{
	int snap;

	if (!c)
		return 0;
	c->bad_link = 0;
	c->anchor_read = c->at_anchor = c->seen = c->at_base = false;
	c->anchor = c->seq = c->anchor_prev = 0;
	snap = snapshot(p, tstate, c, frame);
	if (snap < 0)
		return snap;
	if (snap && c->chunks->anchor_read) {
		c->anchor_read = true;
		c->anchor = c->chunks->anchor;
		c->seq = c->chunks->seq;
	}
	/* Stop at the anchor only in a copy that shows it as last time. */
	if (!snap || !anchor_holds(c))
		c->stop_at = 0;
	/* A stopped thread's copy is of one instant: nothing to check (and
	 * a frame being pushed or popped would look torn). */
	if (snap && !c->stopped)
		shape->sizes = pyproc__frame_sizes(p);
	shape->current = *frame;
	c->exact = snap && (shape->sizes || c->stopped);
	c->top_frame = *frame;
	return snap;
}

/*
 * A chain that comes back to a frame loops (the target wrote it so): stop
 * there rather than go round it max times, which a slow reader (dump) would
 * do until the target changed it and then show as one long, made-up stack.
 * Brent's check: one comparison a frame, any loop found within twice its
 * length past its start.
 */
struct loop_check {
	uint64_t mark;
	size_t lam, power;
};

static bool loop_check__loops(struct loop_check *l, uint64_t frame)
{
	if (frame == l->mark)
		return true;
	if (++l->lam == l->power) {
		l->mark = frame;
		l->power <<= 1;
		l->lam = 0;
	}
	return false;
}

/*
 * Where the walk starts: the current frame (*frame; 0: no Python frame),
 * from a copy of the chunks (1), or read the usual way, with what the last
 * walk saw read ahead (*ready frames of it; 0). -errno when it cannot.
 */
static int walk_head(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c,
		     struct chain_shape *shape, uint64_t *frame, uint64_t *cframe, size_t *ready)
{
	int snap = walk_start(p, tstate, c, shape, frame);
	int rc;

	*ready = 0;
	*cframe = 0;
	if (snap < 0)
		return snap;
	/* Else a thread whose innermost frame is where it was last time most
	 * likely has the same chain under it: read it all at once. */
	if (!snap && c && c->n)
		*ready = prefetch(p, tstate, c, frame);
	if (*frame) {
		*cframe = c->cframe;
		return snap;
	}
	rc = current_frame(p, tstate, frame, cframe);
	if (rc || !*frame) {
		if (c)
			c->n = 0;
		*frame = 0;
		return rc;
	}
	return snap;
}

/*
 * A copy whose chain broke at @frame (1: at its end; @b the bytes of the
 * frame it broke at, or of its last frame): a sign of a corrupt chain for
 * stack_read.c (@sign) when the frame came from the copy and the two copies
 * agree there: the signature of its bytes must then be the same in the
 * copies that follow (the thread held still there). A break because the
 * thread moved, or at a frame read apart from the copy (at another
 * instant), is no sign.
 */
static void note_break(struct py_walk_cache *c, const struct py_offsets *o, uint64_t frame,
		       const unsigned char *b, bool sign)
{
	uint64_t h = 0xcbf29ce484222325ull;

	c->bad_link = sign && b ? frame : 0;
	for (size_t i = 0; c->bad_link && i < o->frame_size; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	c->bad_sig = c->bad_link ? h : 0;
}

/* A frame the walk of a copy could not read: a break with the same sign
 * each time it is met again (stack_read.c); -EAGAIN. */
static int note_fault(struct py_walk_cache *c, uint64_t frame)
{
	c->bad_link = frame;
	c->bad_sig = 1;
	return -EAGAIN;
}

/*
 * The walk of a copy ended (at @frame, 0 at the chain's end, after @last,
 * @lastb its bytes, @copied: from the copy; @truncated as the walk says;
 * @shape NULL sizes: a stopped thread's copy, not checked):
 * -EAGAIN when the chain broke there, else 0 (c->at_base: it ended at the
 * base frame). A chain that loops in a copy of a running thread is as
 * likely torn as corrupt: stack_read.c tells them apart.
 */
static int walk_end(struct py_walk_cache *c, const struct py_offsets *o,
		    const struct chain_shape *shape, uint64_t frame, uint64_t last,
		    const unsigned char *lastb, bool copied, int truncated)
{
	if (shape->sizes && truncated == PY_WALK_LOOPED) {
		note_break(c, o, frame, lastb, copied);
		return -EAGAIN;
	}
	if (chain_shape__end(shape, c->chunks, truncated || c->at_anchor)) {
		note_break(c, o, 1, lastb, copied);	/* the chain's end */
		return -EAGAIN;
	}
	c->at_base = !frame && !truncated && last && last == c->chunks->base;
	return 0;
}

/* What a walk puts out, as it goes. */
struct walk_out {
	struct py_rawframe *f;
	size_t count, npy;
	size_t missing;		/* Python frames without their co_version */
};

/*
 * Frame @frame (@b its bytes, of @code and @owner; @visited: its place in
 * the prediction, or SIZE_MAX) into @w: a Python frame, or with
 * c->keep_links an interpreter's link. Notes the anchor met.
 */
static void keep_frame(const struct py_offsets *o, struct py_walk_cache *c, struct walk_out *w,
		       const unsigned char *b, uint64_t frame, uint64_t code, uint8_t owner,
		       size_t visited)
{
	if (!o->frame_owner_interp_min || owner < o->frame_owner_interp_min) {
		w->missing += !put_frame(o, c, b, frame, code, visited, &w->f[w->count++]);
		w->npy++;
		if (c && c->anchor_read && frame == c->anchor)
			c->seen = true;
	} else if (c && c->keep_links) {
		/* a link of the chain the 3.15 anchor moves along */
		w->f[w->count++] = (struct py_rawframe){ .frame = frame,
							 .reserved = PY_RAWFRAME_LINK };
	}
}

/* The walk kept Python frame @frame last, whose caller is @prev: when it is
 * the anchor to stop at, it stops (its callers are the frame cache's). */
static bool stops_at_anchor(struct py_walk_cache *c, const struct walk_out *w, uint64_t frame,
			    uint64_t prev)
{
	if (!c || !c->stop_at || frame != c->stop_at || !w->count ||
	    w->f[w->count - 1].frame != frame || w->f[w->count - 1].reserved)
		return false;
	c->at_anchor = true;
	c->anchor_prev = prev;
	return true;
}

int pyproc__walk_cached(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c,
			struct py_rawframe *out, size_t max, size_t *n, int *truncated)
{
	const struct py_offsets *o = pyproc__offsets(p);
	unsigned char fb[PY_MAX_STRUCT_COPY];
	size_t visited = 0, budget = WALK_BUDGET(max), ready = 0;
	size_t max_py = c && c->max_py ? c->max_py : max;
	uint64_t frame = 0, cframe = 0, last = 0;
	const unsigned char *lastb = NULL;
	struct walk_out w = { .f = out };
	struct loop_check loop = { .power = 1 };
	struct chain_shape shape = { 0 };
	int rc = 0, snap;

	*n = 0;
	*truncated = 0;
	snap = walk_head(p, tstate, c, &shape, &frame, &cframe, &ready);
	if (snap < 0 || !frame)
		return snap < 0 ? snap : 0;
	while (frame) {
		const unsigned char *b;
		size_t at = visited < ready ? visited : SIZE_MAX;
		uint64_t code;
		uint8_t owner;

		if (budget-- == 0 || w.count == max || w.npy == max_py) {
			*truncated = 1;
			break;
		}
		if (loop_check__loops(&loop, frame)) {
			*truncated = PY_WALK_LOOPED;
			break;
		}
		b = frame_bytes(p, c, snap, frame, at, fb, &rc);
		if (!b) {
			/* a frame read apart from the copy of a running thread,
			 * gone since (a generator's), or a corrupt link */
			if (shape.sizes && rc == -EFAULT)
				rc = note_fault(c, frame);
			goto out;
		}
		if (b == fb)
			ready = 0;	/* off the predicted chain */
		owner = b[o->frame_owner];
		code = get_u64(b, o->frame_executable) & ~o->executable_tag_mask;
		if (snap && (rc = chain_shape__frame(&shape, p, c->chunks, frame, b, code, owner,
						     b != fb))) {
			note_break(c, o, frame, b, !shape.moving && b != fb);
			goto out;
		}
		keep_frame(o, c, &w, b, frame, code, owner, at);
		last = frame;
		lastb = b;
		/* What this walk saw is the next one's prediction; the buffers
		 * are only read above, before this overwrite moves past them. */
		if (c && cache_reserve(c, visited + 1) == 0) {
			c->frames[visited] = frame;
			c->codes[visited] = code;
		}
		visited++;
		frame = get_u64(b, o->frame_previous);
		if (stops_at_anchor(c, &w, last, frame))
			break;
	}
	rc = snap ? walk_end(c, o, &shape, frame, last, lastb, lastb != fb, *truncated) : 0;
out:
	if (c) {
		c->n = rc ? 0 : (visited <= c->cap ? visited : c->cap);
		c->cframe = cframe;
		if (c->chunks)
			stack_chunks__walked(c->chunks);
	}
	*n = w.count;
	if (rc)
		return rc;
	return w.missing ? read_versions(p, out, w.count) : 0;
}

int pyproc__walk(struct pyproc *p, uint64_t tstate, struct py_rawframe *out, size_t max,
		 size_t *n, int *truncated)
{
	return pyproc__walk_cached(p, tstate, NULL, out, max, n, truncated);
}
