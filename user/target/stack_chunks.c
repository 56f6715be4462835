// SPDX-License-Identifier: MIT
/*
 * stack_chunks.c - a thread's data stack copied in one read (stack_chunks.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "target/stack_chunks.h"

#define HEAD_MAX 4

static uint64_t get64(const unsigned char *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

static int reserve(struct stack_chunk *k, size_t len)
{
	unsigned char *nb;

	if (len <= k->cap)
		return 0;
	nb = realloc(k->buf, len);
	if (!nb)
		return -ENOMEM;
	k->buf = nb;
	k->cap = len;
	return 0;
}

static void predict(struct stack_chunks *s, size_t i, uint64_t addr)
{
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
		if (size > k->want)
			whole = 0;	/* bigger than copied: whole next time */
		k->len = size < k->want ? size : k->want;
		k->want = size;
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

int stack_chunks__copy(pid_t pid, uint64_t chunk_field, const struct remote_iov *head,
		       size_t nhead, struct stack_chunks *s, uint64_t *frame_after)
{
	struct remote_iov iov[HEAD_MAX + 2 + STACK_CHUNKS_MAX + STACK_APART_MAX];
	uint64_t first = 0, before;
	size_t k = 0, c0, a0, n = 0, done = 0, total = 0;
	int rc;

	s->whole = s->moved = 0;
	*frame_after = 0;
	if (!nhead || nhead > HEAD_MAX || head[nhead - 1].len != 8)
		return -EINVAL;
	for (size_t i = 0; i < nhead; i++)
		iov[k++] = head[i];
	iov[k++] = (struct remote_iov){ chunk_field, &first, 8 };
	c0 = k;
	for (; n < s->n; n++) {
		struct stack_chunk *ch = &s->c[n];

		if (ch->want <= STACK_CHUNK_HEADER || ch->want > STACK_CHUNK_MAX ||
		    total + ch->want > STACK_CHUNKS_BYTES || reserve(ch, ch->want))
			break;
		iov[k++] = (struct remote_iov){ ch->addr, ch->buf, ch->want };
		total += ch->want;
	}
	a0 = k;
	for (size_t i = 0; i < s->napart; i++)
		iov[k++] = (struct remote_iov){ s->apart[i], s->apart_buf[i], STACK_APART_BYTES };
	iov[k++] = (struct remote_iov){ head[nhead - 1].addr, frame_after, 8 };
	rc = remote_readv_prefix(pid, iov, k, &done);
	if (rc && rc != -EFAULT)
		return rc;
	s->apart_read = done > a0 ? done - a0 : 0;
	s->apart_read = s->apart_read < s->napart ? s->apart_read : s->napart;
	if (done < c0) {
		s->ncopied = 0;
		return -EFAULT;
	}
	memcpy(&before, head[nhead - 1].buf, 8);
	/* the apart frames may fault (a generator freed): not a torn copy */
	s->whole = learn(s, first, n, done - c0 < n ? done - c0 : n) && done >= a0;
	if (done < k) {
		/* the current frame after: read it alone */
		iov[0] = iov[k - 1];
		if (remote_readv(pid, iov, 1))
			s->whole = 0;
	}
	s->moved = s->whole && *frame_after != before;
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

void stack_chunks__free(struct stack_chunks *s)
{
	for (size_t i = 0; i < STACK_CHUNKS_MAX; i++)
		free(s->c[i].buf);
	memset(s, 0, sizeof(*s));
}
