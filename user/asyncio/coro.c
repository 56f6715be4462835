/* SPDX-License-Identifier: MIT */
/*
 * asyncio/coro.c - a task's coroutine chain: the coroutine, then what it is
 * suspended awaiting (the object on its frame's value stack while it is in a
 * yield-from), while that is a coroutine or an async generator, or an
 * awaitable of an async generator (then that generator). Iterative, at most
 * @max levels; a frame not owned by its generator, or a read that fails, ends
 * the chain. bpf/ follows the same rule in the kernel: keep them alike.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "target/py_offsets.h"
#include "target/remote_mem.h"
#include "util/bytes.h"

#define FRAME_OWNED_BY_GENERATOR 1
/* _PyStackRef tag bits (3.14+): objects are at least 8-byte aligned. */
#define STACKREF_TAGS 7ull

/* Bytes of a coroutine object we read: up to the last frame field we use. */
static uint64_t span_of(const struct py_offsets *po, const struct asyncio_offsets *ao)
{
	uint64_t end = ao->gen_frame_state + 1, f = ao->gen_iframe;
	uint64_t fields[] = { po->frame_executable + 8, po->frame_instr_ptr + 8,
			      po->frame_owner + 1, ao->frame_stackpointer + 8, po->ob_type + 8 };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t e = (i == 4 ? 0 : f) + fields[i];

		if (e > end)
			end = e;
	}
	return end;
}

static int is_yield_from(const struct asyncio_offsets *ao, int8_t state)
{
	return state == ao->state_yield_from || state == ao->state_yield_from_locked;
}

/* Decode one coroutine's copy; 0, or -EINVAL when it is not a coroutine with
 * its own frame. */
static int decode(const struct py_offsets *po, const struct asyncio_offsets *ao,
		  const unsigned char *b, uint64_t gen, struct coro_level *lv)
{
	uint64_t f = ao->gen_iframe;

	if (b[f + po->frame_owner] != FRAME_OWNED_BY_GENERATOR)
		return -EINVAL;
	lv->gen = gen;
	lv->type = get_u64(b, po->ob_type);
	lv->state = (int8_t)b[ao->gen_frame_state];
	lv->code = get_u64(b, f + po->frame_executable) & ~po->executable_tag_mask;
	lv->instr = get_u64(b, f + po->frame_instr_ptr);
	lv->sp = get_u64(b, f + ao->frame_stackpointer);
	lv->awaited = 0;
	lv->inner = lv->inner_type = 0;
	return lv->code ? 0 : -EINVAL;
}

/* A level's object and, most often, the value stack at the end of its
 * frame, whose awaited slot then needs no read of its own (a dump reads
 * ~10,000 tasks' chains). */
#define LEVEL_READ CORO_LEVEL_READ

/* @len bytes of @x into @b, as many as can be read: LEVEL_READ, else @span
 * (an object near the end of its mapping). 0 when not even @span. */
static size_t read_level(pid_t pid, uint64_t x, unsigned char *b, uint64_t span)
{
	if (span < LEVEL_READ && remote_read(pid, x, b, LEVEL_READ) == 0)
		return LEVEL_READ;
	return remote_read(pid, x, b, span) == 0 ? span : 0;
}

/*
 * The level the object @x leads to (see coro_chain__read()): *gen = @x, or
 * the async generator it holds, or 0 for none; *have bytes of *gen (at
 * least @span, or 0) are in @b. @type: the first level's type, for the rule
 * without the two type addresses (0: any, for the first level).
 */
static int follow(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		  uint64_t x, uint64_t type, unsigned char *b, uint64_t span, uint64_t *gen,
		  size_t *have, struct coro_cache *cache, struct coro_level *last)
{
	uint64_t head[2];	/* ob_type and the first field after the header */
	int rc;

	*gen = 0;
	/* Read it as the next level (unless the caller did); a small object
	 * at the end of a mapping: its type and first field alone. */
	if (cache && cache->pre_len >= span && cache->pre_addr == x) {
		memcpy(b, cache->pre, cache->pre_len);
		*have = cache->pre_len;
	} else {
		*have = read_level(pid, x, b, span);
	}
	if (cache)
		cache->pre_len = 0;
	if (*have) {
		head[0] = get_u64(b, po->ob_type);
		head[1] = get_u64(b, po->ob_type + 8);
	} else {
		rc = remote_read(pid, x + po->ob_type, head, sizeof(head));
		if (rc)
			return rc;
	}
	if (!ao->coro_type || !ao->asyncgen_type) {
		if (!type || head[0] == type)
			*gen = x;
		return 0;
	}
	if (head[0] == ao->coro_type || head[0] == ao->asyncgen_type) {
		*gen = x;
		return 0;
	}
	/* Any other object ends the chain (a future's iterator ...), unless
	 * it holds an async generator first: the awaitables of anext(),
	 * asend(), athrow(), aclose(). */
	*have = 0;
	x = head[1];
	if (!x || x % 8)
		return 0;
	for (unsigned int i = 0; cache && last && i < CORO_CACHE; i++)
		if (cache->addr[i] == x && cache->type[i] != ao->asyncgen_type) {
			last->inner = x;
			last->inner_type = cache->type[i];
			return 0;
		}
	*have = read_level(pid, x, b, span);
	if (!*have)
		return 0;
	if (get_u64(b, po->ob_type) == ao->asyncgen_type) {
		*gen = x;
		return 0;
	}
	*have = 0;
	if (cache && last) {
		/* the chain ends on this object's type: remembered, and read
		 * again with the level when the chain is verified */
		last->inner = x;
		last->inner_type = get_u64(b, po->ob_type);
		cache->addr[cache->next] = x;
		cache->type[cache->next] = last->inner_type;
		cache->next = (cache->next + 1) % CORO_CACHE;
	}
	return 0;
}

int coro_chain__read(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		     uint64_t coro, struct coro_level *out, size_t max, size_t *n, int *cut,
		     struct coro_cache *cache)
{
	unsigned char b[PY_MAX_STRUCT_COPY];
	uint64_t span = span_of(po, ao), x = coro, gen, type = 0, slot;
	size_t have;
	int rc;

	*n = 0;
	*cut = 0;
	if (span > sizeof(b) || LEVEL_READ > sizeof(b) || po->ob_type + 16 > span)
		return -EPROTO;
	while (x) {
		struct coro_level *lv;

		rc = follow(pid, po, ao, x, type, b, span, &gen, &have, cache,
			    *n ? &out[*n - 1] : NULL);
		if (rc)
			return *n ? 0 : rc;	/* the chain ends where it cannot be read */
		if (!gen || !have || (*n && gen == out[*n - 1].gen))
			break;
		if (*n == max) {
			*cut = 1;
			break;
		}
		lv = &out[*n];
		if (decode(po, ao, b, gen, lv) || lv->state == ao->state_cleared)
			break;
		type = lv->type;
		(*n)++;
		if (!is_yield_from(ao, lv->state) || !lv->sp)
			break;
		/* The awaited object (the receiver of SEND) is on the value
		 * stack: in the copy when the frame's stack is in it. */
		slot = lv->sp - 8 * ao->awaited_slot;
		if (slot >= gen && slot - gen <= have - 8)
			x = get_u64(b, slot - gen);
		else if (remote_read_u64(pid, slot, &x))
			break;
		x &= ~STACKREF_TAGS;
		lv->awaited = x;
	}
	return 0;
}

int coro_chain__verify(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		       const struct coro_level *lv, size_t n)
{
	size_t done;

	return coro_chain__verify_along(pid, po, ao, lv, n, NULL, 0, &done);
}

/* Did the levels @lv read again into @buf (@span bytes each), what they
 * await (@awaited) and the inner objects' types (@inner) stay the same? */
static int same_levels(const struct py_offsets *po, const struct asyncio_offsets *ao,
		       const struct coro_level *lv, size_t n, const unsigned char *buf,
		       uint64_t span, const uint64_t *awaited, const uint64_t *inner)
{
	for (size_t i = 0; i < n; i++) {
		struct coro_level now;

		if (decode(po, ao, buf + i * span, lv[i].gen, &now) || now.type != lv[i].type ||
		    now.state != lv[i].state || now.code != lv[i].code ||
		    now.instr != lv[i].instr || now.sp != lv[i].sp ||
		    (lv[i].awaited && (awaited[i] & ~STACKREF_TAGS) != lv[i].awaited) ||
		    (lv[i].inner && inner[i] != lv[i].inner_type))
			return 0;
	}
	return 1;
}

int coro_chain__verify_along(pid_t pid, const struct py_offsets *po,
			     const struct asyncio_offsets *ao, const struct coro_level *lv,
			     size_t n, const struct remote_iov *extra, size_t nextra,
			     size_t *extra_done)
{
	unsigned char local[PY_MAX_STRUCT_COPY], *buf = local;
	uint64_t span = span_of(po, ao), local_aw[16], *awaited = local_aw;
	struct remote_iov local_iov[32], *iov = local_iov;
	size_t k = 0, done = 0;
	int rc = -ENOMEM;

	*extra_done = 0;
	if (span > PY_MAX_STRUCT_COPY)
		return -EPROTO;
	if (nextra > 4)
		return -EINVAL;
	/* Every level, what it awaits and what ended the chain, again, with
	 * the caller's reads: one process_vm_readv. */
	if (n * span > sizeof(local) || n > 8) {
		buf = malloc(n * span);
		awaited = malloc(2 * n * sizeof(*awaited));
		iov = malloc((3 * n + nextra) * sizeof(*iov));
		if (!buf || !awaited || !iov)
			goto out;
	}
	for (size_t i = 0; i < nextra; i++)
		iov[k++] = extra[i];
	for (size_t i = 0; i < n; i++) {
		iov[k++] = (struct remote_iov){ lv[i].gen, buf + i * span, span };
		awaited[i] = awaited[n + i] = 0;
		if (lv[i].awaited)
			iov[k++] = (struct remote_iov){ lv[i].sp - 8 * ao->awaited_slot,
							&awaited[i], 8 };
		if (lv[i].inner)
			iov[k++] = (struct remote_iov){ lv[i].inner + po->ob_type,
							&awaited[n + i], 8 };
	}
	rc = remote_readv_prefix(pid, iov, k, &done);
	*extra_done = done < nextra ? done : nextra;
	if (rc == -EFAULT) {
		rc = done < nextra ? -EFAULT : -ESTALE;
		goto out;
	}
	if (rc)
		goto out;
	rc = same_levels(po, ao, lv, n, buf, span, awaited, awaited + n) ? 0 : -ESTALE;
out:
	if (buf != local)
		free(buf);
	if (awaited != local_aw)
		free(awaited);
	if (iov != local_iov)
		free(iov);
	return rc;
}
