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
		uint64_t prev = get64(k->buf), size = get64(k->buf + 8);

		if (size <= STACK_CHUNK_HEADER || size > STACK_CHUNK_MAX) {
			s->n = i;	/* not a chunk: nothing of it is trusted */
			return 0;
		}
		if (size > k->want && i)
			whole = 0;	/* bigger than copied: whole next time */
		k->len = size < k->want ? size : k->want;
		k->want = k->size = size;
		s->ncopied = i + 1;
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
	if (used > k->len) {
		s->relearned = 1;
		return 0;
	}
	return 1;
}

/*
 * Where to read the current frame pointer (@frame_field) and the thread's
 * datastack_chunk and datastack_top (@chunk_field): as one span of the
 * thread state when they are near each other (3.13+: one copy, so the
 * two agree), else as two.
 */
struct tstate_view {
	uint64_t base;
	size_t len;
	unsigned char buf[HEAD_SPAN_MAX];
};

static size_t view_iovs(struct tstate_view *v, uint64_t frame_field, uint64_t chunk_field,
			uint64_t *frame, uint64_t *chunk2, struct remote_iov *iov)
{
	uint64_t lo = frame_field < chunk_field ? frame_field : chunk_field;
	uint64_t hi = frame_field + 8 > chunk_field + 16 ? frame_field + 8 : chunk_field + 16;

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

int stack_chunks__copy(pid_t pid, uint64_t chunk_field, const struct remote_iov *head,
		       size_t nhead, struct stack_chunks *s, uint64_t *frame_after)
{
	struct remote_iov iov[HEAD_MAX + 7 + STACK_CHUNKS_MAX + STACK_APART_MAX];
	struct tstate_view v0, v1, v2;
	uint64_t first[2] = { 0, 0 }, top_after[2] = { 0, 0 }, top_last[2] = { 0, 0 };
	uint64_t before = 0, frame_last = 0, frame_field;
	size_t k = 0, c0, r0, a1, n = 0, done = 0, total = 0, again = 0;
	int rc;

	s->whole = s->moved = s->relearned = 0;
	*frame_after = 0;
	if (!nhead || nhead > HEAD_MAX || head[nhead - 1].len != 8)
		return -EINVAL;
	frame_field = head[nhead - 1].addr;
	for (size_t i = 0; i + 1 < nhead; i++)
		iov[k++] = head[i];
	/* the current frame, datastack_chunk, then datastack_top (next to
	 * it in 3.11 to 3.15) */
	k += view_iovs(&v0, frame_field, chunk_field, &before, first, iov + k);
	c0 = k;
	for (; n < s->n; n++) {
		struct stack_chunk *ch = &s->c[n];

		if (ch->want <= STACK_CHUNK_HEADER || ch->want > STACK_CHUNK_MAX ||
		    total + ch->want > STACK_CHUNKS_BYTES || reserve(&ch->buf, &ch->cap, ch->want))
			break;
		iov[k++] = (struct remote_iov){ ch->addr, ch->buf, ch->want };
		total += ch->want;
	}
	/* The current frame and the top again right after the chunks: the
	 * shorter the window between, the likelier the thread held still. */
	k += view_iovs(&v1, frame_field, chunk_field, frame_after, top_after, iov + k);
	/* The newest chunk again, and the thread state a third time: a thread
	 * that left the frames it was in and came back to the same depth
	 * during the first copy (same current frame, same top) shows other
	 * frames in one copy than in the other (frame_walk.c compares them). */
	r0 = k;
	if (n && !reserve(&s->again, &s->again_cap, s->c[0].want)) {
		again = s->c[0].want;
		iov[k++] = (struct remote_iov){ s->c[0].addr, s->again, again };
	}
	k += view_iovs(&v2, frame_field, chunk_field, &frame_last, top_last, iov + k);
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
	s->whole = learn(s, first[0], n, done - c0 < n ? done - c0 : n) && done >= a1;
	s->whole = fit_newest(s) && s->whole;
	s->moved = s->whole && (*frame_after != before || top_after[1] != s->top ||
				top_after[0] != first[0] || frame_last != before ||
				top_last[1] != s->top || top_last[0] != first[0]);
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

		if (addr >= k->addr + STACK_CHUNK_HEADER && addr - k->addr <= k->len &&
		    len <= k->len - (addr - k->addr))
			return k->buf + (addr - k->addr);
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

	if (!s->ncopied || addr < k->addr || addr - k->addr > s->again_len ||
	    len > s->again_len - (addr - k->addr))
		return NULL;
	return s->again + (addr - k->addr);
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
