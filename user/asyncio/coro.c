/* SPDX-License-Identifier: MIT */
/*
 * asyncio/coro.c - a task's coroutine chain: the coroutine, then what it is
 * suspended awaiting (the object on its frame's value stack while it is in a
 * yield-from), while that is a coroutine of the same type. Iterative, at most
 * @max levels; a frame not owned by its generator, or a read that fails, ends
 * the chain.
 */
#include <errno.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "py_offsets.h"
#include "remote_mem.h"

#define FRAME_OWNED_BY_GENERATOR 1
/* _PyStackRef tag bits (3.14+): objects are at least 8-byte aligned. */
#define STACKREF_TAGS 7ull

static uint64_t get_u64(const unsigned char *b, uint64_t off)
{
	uint64_t v;

	memcpy(&v, b + off, 8);
	return v;
}

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
	int rc;

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
		rc = remote_read(pid, gen, b, span);
		if (rc)
			return *n ? 0 : rc;	/* the chain ends where it cannot be read */
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
		if (!awaited || remote_read_u64(pid, awaited + po->ob_type, &type))
			break;
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
	unsigned char b[PY_MAX_STRUCT_COPY];
	uint64_t span = span_of(po, ao);
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct coro_level now;
		uint64_t awaited = 0;

		rc = remote_read(pid, lv[i].gen, b, span);
		if (rc)
			return rc == -EFAULT ? -ESTALE : rc;
		if (decode(po, ao, b, lv[i].gen, &now) || now.type != lv[i].type ||
		    now.state != lv[i].state || now.code != lv[i].code ||
		    now.instr != lv[i].instr || now.sp != lv[i].sp)
			return -ESTALE;
		if (lv[i].awaited) {
			rc = remote_read_u64(pid, lv[i].sp - 8 * ao->awaited_slot, &awaited);
			if (rc || (awaited & ~STACKREF_TAGS) != lv[i].awaited)
				return -ESTALE;
		}
	}
	return 0;
}
