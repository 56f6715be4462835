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
	return lv->code ? 0 : -EINVAL;
}

/*
 * The level the object @x leads to (see coro_chain__read()): *gen = @x, or
 * the async generator it holds, or 0 for none; with *have, @b holds *gen's
 * first @span bytes. @type: the first level's type, for the rule without
 * the two type addresses (0: any, for the first level).
 */
static int follow(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		  uint64_t x, uint64_t type, unsigned char *b, uint64_t span, uint64_t *gen,
		  int *have)
{
	uint64_t head[2];	/* ob_type and the first field after the header */
	int rc;

	*gen = 0;
	*have = 0;
	/* Read it as the next level; a small object at the end of a mapping:
	 * its type and first field alone. */
	rc = remote_read(pid, x, b, span);
	if (!rc) {
		head[0] = get_u64(b, po->ob_type);
		head[1] = get_u64(b, po->ob_type + 8);
		*have = 1;
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
	if (!x || x % 8 || remote_read(pid, x, b, span))
		return 0;
	if (get_u64(b, po->ob_type) == ao->asyncgen_type) {
		*gen = x;
		*have = 1;
	}
	return 0;
}

int coro_chain__read(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		     uint64_t coro, struct coro_level *out, size_t max, size_t *n, int *cut)
{
	unsigned char b[PY_MAX_STRUCT_COPY];
	uint64_t span = span_of(po, ao), x = coro, gen, type = 0;
	int rc, have;

	*n = 0;
	*cut = 0;
	if (span > sizeof(b) || po->ob_type + 16 > span)
		return -EPROTO;
	while (x) {
		struct coro_level *lv;

		rc = follow(pid, po, ao, x, type, b, span, &gen, &have);
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
		/* The awaited object (the receiver of SEND) is on the value stack. */
		rc = remote_read_u64(pid, lv->sp - 8 * ao->awaited_slot, &x);
		if (rc)
			break;
		x &= ~STACKREF_TAGS;
		lv->awaited = x;
	}
	return 0;
}

int coro_chain__verify(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		       const struct coro_level *lv, size_t n)
{
	unsigned char local[PY_MAX_STRUCT_COPY], *buf = local;
	uint64_t span = span_of(po, ao), local_aw[8], *awaited = local_aw;
	struct remote_iov local_iov[16], *iov = local_iov;
	size_t k = 0;
	int rc = -ENOMEM;

	if (!n)
		return 0;
	if (span > PY_MAX_STRUCT_COPY)
		return -EPROTO;
	/* Every level and what it awaits, again, in one process_vm_readv. */
	if (n * span > sizeof(local) || n > 8) {
		buf = malloc(n * span);
		awaited = malloc(n * sizeof(*awaited));
		iov = malloc(2 * n * sizeof(*iov));
		if (!buf || !awaited || !iov)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		iov[k++] = (struct remote_iov){ lv[i].gen, buf + i * span, span };
		awaited[i] = 0;
		if (lv[i].awaited)
			iov[k++] = (struct remote_iov){ lv[i].sp - 8 * ao->awaited_slot,
							&awaited[i], 8 };
	}
	rc = remote_readv(pid, iov, k);
	if (rc) {
		rc = rc == -EFAULT ? -ESTALE : rc;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct coro_level now;

		if (decode(po, ao, buf + i * span, lv[i].gen, &now) || now.type != lv[i].type ||
		    now.state != lv[i].state || now.code != lv[i].code ||
		    now.instr != lv[i].instr || now.sp != lv[i].sp ||
		    (lv[i].awaited && (awaited[i] & ~STACKREF_TAGS) != lv[i].awaited)) {
			rc = -ESTALE;
			goto out;
		}
	}
	rc = 0;
out:
	if (buf != local)
		free(buf);
	if (awaited != local_aw)
		free(awaited);
	if (iov != local_iov)
		free(iov);
	return rc;
}
