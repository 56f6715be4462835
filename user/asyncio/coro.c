/* SPDX-License-Identifier: MIT */
/*
 * asyncio/coro.c - a task's coroutine chain: the coroutine, then what it is
 * suspended awaiting (the object on its frame's value stack while it is in a
 * yield-from), while that is a coroutine of the same type. Iterative, at most
 * @max levels; a frame not owned by its generator, or a read that fails, ends
 * the chain.
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

int coro_chain__read(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		     uint64_t coro, struct coro_level *out, size_t max, size_t *n, int *cut)
{
	unsigned char b[PY_MAX_STRUCT_COPY];
	uint64_t span = span_of(po, ao), gen = coro;
	int rc, have = 0;	/* have: b holds gen already */

	*n = 0;
	*cut = 0;
	if (span > sizeof(b))
		return -EPROTO;
	while (gen) {
		struct coro_level *lv;
		uint64_t awaited = 0, type = 0;

		if (*n == max) {
			*cut = 1;
			break;
		}
		if (!have) {
			rc = remote_read(pid, gen, b, span);
			if (rc)
				return *n ? 0 : rc;	/* the chain ends where it cannot be read */
		}
		have = 0;
		lv = &out[*n];
		if (decode(po, ao, b, gen, lv) || lv->state == ao->state_cleared)
			break;
		(*n)++;
		if (!is_yield_from(ao, lv->state) || !lv->sp)
			break;
		/* The awaited object (the receiver of SEND) is on the value stack. */
		rc = remote_read_u64(pid, lv->sp - 8 * ao->awaited_slot, &awaited);
		if (rc)
			break;
		awaited &= ~STACKREF_TAGS;
		if (!awaited)
			break;
		/* Read it as the next level (its type is in there); a small object
		 * at the end of a mapping: its type alone. */
		if (remote_read(pid, awaited, b, span) == 0) {
			type = get_u64(b, po->ob_type);
			have = 1;
		} else if (remote_read_u64(pid, awaited + po->ob_type, &type)) {
			break;
		}
		lv->awaited = awaited;
		/* Only a coroutine of the same type is followed: an iterator (a
		 * future's) ends the chain. */
		if (type != lv->type || awaited == gen)
			break;
		gen = awaited;
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
