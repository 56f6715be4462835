// SPDX-License-Identifier: MIT
/*
 * stack_chunks.c - a thread's data stack copied in one read (stack_chunks.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "target/stack_chunks.h"

#define HEAD_MAX 4
#define HEAD_SPAN_MAX 512

static uint64_t get64(const unsigned char *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

/* @buf (of @cap bytes) made to hold @len */
static int reserve(unsigned char **buf, size_t *cap, size_t len)
{
	unsigned char *nb;

	if (len <= *cap)
		return 0;
	nb = realloc(*buf, len);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = len;
	return 0;
}

static void predict(struct stack_chunks *s, size_t i, uint64_t addr)
{
	s->relearned = 1;
	s->c[i].addr = addr;
	s->c[i].want = STACK_CHUNK_DEFAULT;
	s->c[i].len = 0;
	s->n = i + 1;
}

/*
 * What the copy of @copied chunks (of the @n asked) says: the valid bytes of
 * each, and the chunks to copy next time. 1 when every chunk of the thread
 * was copied whole, 0 when the prediction failed somewhere.
 */
static int learn(struct stack_chunks *s, uint64_t first, size_t n, size_t copied)
{
	int whole = copied == n;

	s->ncopied = 0;
	if (!first) {
		s->n = 0;
		return 0;
	}
	if (!n || s->c[0].addr != first) {
		predict(s, 0, first);
		return 0;
	}
	for (size_t i = 0; i < copied; i++) {
		struct stack_chunk *k = &s->c[i];
		const unsigned char *h = k->from ? k->hdr : k->buf;
		uint64_t prev = get64(h), size = get64(h + 8), end;

		if (size <= STACK_CHUNK_HEADER || size > STACK_CHUNK_MAX) {
			s->n = i;	/* not a chunk: nothing of it is trusted */
			return 0;
		}
		if (size > k->want && i)
			whole = 0;	/* bigger than copied: whole next time */
		end = size < k->want ? size : k->want;
		if (end <= k->from) {
			whole = 0;	/* the floor is past its end */
			end = k->from;
		}
		k->len = end - k->from;
		k->want = k->size = size;
		s->ncopied = i + 1;
		/* The floor's chunk: the older ones are the frame cache's,
		 * and stay predicted for a whole copy. */
		if (s->floored && i + 1 == copied)
			return whole && copied == n;
		if (i + 1 < s->n && s->c[i + 1].addr == prev && prev)
			continue;
		if (!prev) {
			s->n = i + 1;	/* the oldest chunk: the chain ends */
			return whole && i + 1 == n;
		}
		if (i + 1 >= STACK_CHUNKS_MAX) {
			s->n = i + 1;
			return 0;
		}
		predict(s, i + 1, prev);
		return 0;
	}
	s->n = copied;
	return 0;
}

/* How many of the @n chunks (a floor's header first) the @done iovecs
 * read whole. */
static size_t chunks_done(const struct stack_chunks *s, size_t n, size_t done)
{
	size_t k = 0, i;

	for (i = 0; i < n; i++) {
		k += s->c[i].from ? 2 : 1;
		if (k > done)
			break;
	}
	return i;
}

/*
 * The newest chunk is copied up to its top (datastack_top, with room for
 * what the thread may push by the next copy): the less copied, the shorter
 * the window in which the thread can move. 0 when the copy did not reach
 * the top read with it.
 */
static int fit_newest(struct stack_chunks *s)
{
	struct stack_chunk *k = &s->c[0];
	uint64_t used;
	size_t want;

	if (!s->ncopied || s->top <= k->addr || s->top - k->addr > k->want)
		return 0;
	used = s->top - k->addr;
	want = (used + STACK_TOP_SLACK + 255) & ~(size_t)255;
	if (want < k->want)
		k->want = want;
	if (used > k->from + k->len) {
		s->relearned = 1;
		return 0;
	}
	return 1;
}

/*
 * Where to read the current frame pointer (@frame_field), the thread's
 * datastack_chunk and datastack_top (@chunk_field) and, 3.15, its base
 * frame, anchor and sequence (s->fields): as one span of the thread state
 * when they are near each other (3.13+: one copy, so they all agree), else
 * the first two as two reads and no anchor.
 */
struct tstate_view {
	uint64_t base;
	size_t len;
	int anchor;		/* the span holds the anchor fields */
	unsigned char buf[HEAD_SPAN_MAX];
};

static void span_add(uint64_t *lo, uint64_t *hi, uint64_t addr, size_t len)
{
	if (addr < *lo)
		*lo = addr;
	if (addr + len > *hi)
		*hi = addr + len;
}

static size_t view_iovs(struct tstate_view *v, const struct stack_anchor_fields *f,
			uint64_t frame_field, uint64_t chunk_field, uint64_t *frame,
			uint64_t *chunk2, struct remote_iov *iov)
{
	uint64_t lo = frame_field, hi = frame_field + 8, alo, ahi;

	span_add(&lo, &hi, chunk_field, 16);
	alo = lo;
	ahi = hi;
	if (f->anchor && f->base) {
		span_add(&alo, &ahi, f->anchor, 16);
		span_add(&alo, &ahi, f->base, 8);
	}
	v->anchor = f->anchor && f->base && ahi - alo <= HEAD_SPAN_MAX;
	if (v->anchor) {
		lo = alo;
		hi = ahi;
	}
	if (hi - lo <= HEAD_SPAN_MAX) {
		v->base = lo;
		v->len = hi - lo;
		iov[0] = (struct remote_iov){ lo, v->buf, v->len };
		return 1;
	}
	v->len = 0;
	iov[0] = (struct remote_iov){ frame_field, frame, 8 };
	iov[1] = (struct remote_iov){ chunk_field, chunk2, 16 };
	return 2;
}

static void view_get(const struct tstate_view *v, uint64_t addr, void *out, size_t len)
{
	if (v->len)
		memcpy(out, v->buf + (addr - v->base), len);
}

/* The anchor, sequence and base frame of a view; 0 when it has none. */
static int view_anchor(const struct tstate_view *v, const struct stack_anchor_fields *f,
		       uint64_t out[3])
{
	if (!v->anchor)
		return 0;
	view_get(v, f->anchor, out, 16);
	view_get(v, f->base, out + 2, 8);
	return 1;
}

/*
 * The chunks to copy, from the newest, into @iov: each whole (the newest up
 * to its top), down to the floor's chunk, copied from the floor up (its
 * header apart). Returns the iovecs; *n: chunks, *floored.
 */
static size_t chunk_iovs(struct stack_chunks *s, struct remote_iov *iov, size_t *n)
{
	size_t k = 0, total = 0;

	s->floored = 0;
	for (*n = 0; *n < s->n; (*n)++) {
		struct stack_chunk *ch = &s->c[*n];
		uint64_t from = 0;

		if (s->floor && s->floor >= ch->addr + STACK_CHUNK_HEADER &&
		    s->floor - ch->addr < ch->want)
			from = (s->floor - ch->addr) & ~(uint64_t)7;
		if (ch->want <= STACK_CHUNK_HEADER || ch->want > STACK_CHUNK_MAX ||
		    total + ch->want - from > STACK_CHUNKS_BYTES ||
		    reserve(&ch->buf, &ch->cap, ch->want - from))
			break;
		ch->from = from;
		if (from)
			iov[k++] = (struct remote_iov){ ch->addr, ch->hdr, STACK_CHUNK_HEADER };
		iov[k++] = (struct remote_iov){ ch->addr + from, ch->buf, ch->want - from };
		total += ch->want - from;
		if (from) {
			(*n)++;
			s->floored = 1;
			break;
		}
	}
	return k;
}

int stack_chunks__copy(pid_t pid, uint64_t chunk_field, const struct remote_iov *head,
		       size_t nhead, struct stack_chunks *s, uint64_t *frame_after)
{
	struct remote_iov iov[HEAD_MAX + 8 + STACK_CHUNKS_MAX + STACK_APART_MAX];
	struct tstate_view v0, v1, v2;
	const struct stack_anchor_fields *f = &s->fields;
	uint64_t first[2] = { 0, 0 }, top_after[2] = { 0, 0 }, top_last[2] = { 0, 0 };
	uint64_t before = 0, frame_last = 0, frame_field, a0[3], a1v[3], a2[3];
	size_t k = 0, c0, r0, a1, n = 0, done = 0, again = 0, from0;
	int rc;

	s->whole = s->moved = s->relearned = s->anchor_read = 0;
	*frame_after = 0;
	if (!nhead || nhead > HEAD_MAX || head[nhead - 1].len != 8)
		return -EINVAL;
	frame_field = head[nhead - 1].addr;
	for (size_t i = 0; i + 1 < nhead; i++)
		iov[k++] = head[i];
	/* the current frame, datastack_chunk, then datastack_top (next to
	 * it in 3.11 to 3.15) */
	k += view_iovs(&v0, f, frame_field, chunk_field, &before, first, iov + k);
	c0 = k;
	k += chunk_iovs(s, iov + k, &n);
	/* The current frame and the top again right after the chunks: the
	 * shorter the window between, the likelier the thread held still. */
	k += view_iovs(&v1, f, frame_field, chunk_field, frame_after, top_after, iov + k);
	/* The newest chunk again, and the thread state a third time: a thread
	 * that left the frames it was in and came back to the same depth
	 * during the first copy (same current frame, same top) shows other
	 * frames in one copy than in the other (frame_walk.c compares them). */
	r0 = k;
	from0 = n ? s->c[0].from : 0;
	if (n && !reserve(&s->again, &s->again_cap, s->c[0].want - from0)) {
		again = s->c[0].want - from0;
		iov[k++] = (struct remote_iov){ s->c[0].addr + from0, s->again, again };
	}
	k += view_iovs(&v2, f, frame_field, chunk_field, &frame_last, top_last, iov + k);
	a1 = k;
	/* Then the frames apart from the chunks (checked through their
	 * neighbours by the walk: frame_walk.c). */
	for (size_t i = 0; i < s->napart; i++)
		iov[k++] = (struct remote_iov){ s->apart[i], s->apart_buf[i], STACK_APART_BYTES };
	rc = remote_readv_prefix(pid, iov, k, &done);
	if (rc && rc != -EFAULT)
		return rc;
	s->apart_read = done > a1 ? done - a1 : 0;
	s->apart_read = s->apart_read < s->napart ? s->apart_read : s->napart;
	if (done < c0) {
		s->ncopied = 0;
		return -EFAULT;
	}
	view_get(&v0, frame_field, &before, 8);
	view_get(&v0, chunk_field, first, 16);
	view_get(&v1, frame_field, frame_after, 8);
	view_get(&v1, chunk_field, top_after, 16);
	view_get(&v2, frame_field, &frame_last, 8);
	view_get(&v2, chunk_field, top_last, 16);
	s->again_len = again && done > r0 ? again : 0;
	/* what the caller's head asked for */
	memcpy(head[nhead - 1].buf, &before, 8);
	s->top = first[1];
	s->whole = learn(s, first[0], n, chunks_done(s, n, done - c0)) && done >= a1;
	s->whole = fit_newest(s) && s->whole;
	s->moved = s->whole && (*frame_after != before || top_after[1] != s->top ||
				top_after[0] != first[0] || frame_last != before ||
				top_last[1] != s->top || top_last[0] != first[0]);
	/* The anchor as of the copy: the same in all three readings (the
	 * interpreter moves it only as it pops a frame, which moves the
	 * current frame too; another profiler may write it any time). */
	if (done >= a1 && view_anchor(&v0, f, a0) && view_anchor(&v1, f, a1v) &&
	    view_anchor(&v2, f, a2) && !memcmp(a0, a1v, sizeof(a0)) && !memcmp(a0, a2, sizeof(a0))) {
		s->anchor_read = 1;
		s->anchor = a0[0];
		s->seq = a0[1];
		s->base = a0[2];
	}
	s->whole &= !s->moved;
	return 0;
}

void stack_chunks__note_apart(struct stack_chunks *s, uint64_t addr)
{
	if (s->apart_next < STACK_APART_MAX)
		s->apart_new[s->apart_next++] = addr;
}

void stack_chunks__walked(struct stack_chunks *s)
{
	memcpy(s->apart, s->apart_new, s->apart_next * sizeof(*s->apart));
	s->napart = s->apart_next;
	s->apart_next = 0;
	s->apart_read = 0;
}

const unsigned char *stack_chunks__find(const struct stack_chunks *s, uint64_t addr, size_t len,
					int *apart)
{
	*apart = 0;
	for (size_t i = 0; i < s->ncopied; i++) {
		const struct stack_chunk *k = &s->c[i];

		uint64_t lo = k->addr + (k->from > STACK_CHUNK_HEADER ? k->from : STACK_CHUNK_HEADER);
		uint64_t hi = k->addr + k->from + k->len;

		if (addr >= lo && addr <= hi && len <= hi - addr)
			return k->buf + (addr - k->addr - k->from);
	}
	*apart = 1;
	if (len <= STACK_APART_BYTES) {
		for (size_t i = 0; i < s->apart_read; i++)
			if (s->apart[i] == addr)
				return s->apart_buf[i];
	}
	return NULL;
}

const unsigned char *stack_chunks__again(const struct stack_chunks *s, uint64_t addr, size_t len)
{
	const struct stack_chunk *k = &s->c[0];

	uint64_t lo = k->addr + k->from;

	if (!s->ncopied || addr < lo || addr - lo > s->again_len || len > s->again_len - (addr - lo))
		return NULL;
	return s->again + (addr - lo);
}

int stack_chunks__chunk_of(const struct stack_chunks *s, uint64_t addr)
{
	for (size_t i = 0; i < s->ncopied; i++) {
		const struct stack_chunk *k = &s->c[i];

		if (addr >= k->addr + STACK_CHUNK_HEADER && addr - k->addr < k->size)
			return (int)i;
	}
	return -1;
}

int stack_chunks__is_first_frame(const struct stack_chunks *s, int i, uint64_t addr)
{
	/* data[0], or data[1] in the oldest chunk (CPython skips its first
	 * word so that the chunk is never freed) */
	if (i < 0 || (size_t)i >= s->ncopied)
		return 0;
	return addr == s->c[i].addr + STACK_CHUNK_HEADER ||
	       (addr == s->c[i].addr + STACK_CHUNK_HEADER + 8 && (size_t)i + 1 == s->n);
}

void stack_chunks__free(struct stack_chunks *s)
{
	for (size_t i = 0; i < STACK_CHUNKS_MAX; i++)
		free(s->c[i].buf);
	free(s->again);
	memset(s, 0, sizeof(*s));
}
