// SPDX-License-Identifier: MIT
/*
 * A task's coroutine chain (user/asyncio/coro.c) read from objects laid out
 * here, in this process (process_vm_readv on ourselves): coroutines awaiting
 * coroutines, async generators reached through the awaitables of anext() and
 * aclose() (their generator as first field), a task started from such an
 * awaitable, the rule without the two types' addresses, the future's loop
 * whose type ends a chain (remembered, and checked again by the verify), an
 * awaited slot beyond the first read, and hostile chains: a wrapper leading
 * back to its own generator, a cycle, a wrapper holding garbage. Under
 * ASan/UBSan.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "asyncio/asyncio.h"
#include "target/py_offsets.h"
#include "target/remote_mem.h"

/* Layout of the fake objects: header (refcount, type), then the first
 * field at 16; gi_frame_state at 48; the frame at 64: code, instruction,
 * stackpointer, owner. */
#define OBJ 4096
#define NOBJ 16
#define T_CORO 0x1000
#define T_AGEN 0x2000
#define T_WRAP 0x3000
#define T_FUT 0x4000
#define T_LOOP 0x5000
#define YIELD_FROM (-1)
#define SUSPENDED (-2)

static _Alignas(64) unsigned char heap[NOBJ][OBJ];
static struct py_offsets po;
static struct asyncio_offsets ao;

static uint64_t addr(int i)
{
	return (uint64_t)(uintptr_t)heap[i];
}

static void put(int i, size_t off, uint64_t v)
{
	memcpy(heap[i] + off, &v, 8);
}

static int setup(void **state)
{
	(void)state;
	memset(&po, 0, sizeof(po));
	memset(&ao, 0, sizeof(ao));
	po.ob_type = 8;
	po.frame_executable = 0;
	po.frame_instr_ptr = 8;
	po.frame_owner = 24;
	ao.gen_iframe = 64;
	ao.gen_frame_state = 48;
	ao.frame_stackpointer = 16;
	ao.state_created = -3;
	ao.state_yield_from = YIELD_FROM;
	ao.state_yield_from_locked = YIELD_FROM;
	ao.state_executing = 0;
	ao.state_cleared = 4;
	ao.awaited_slot = 1;
	ao.coro_type = T_CORO;
	ao.asyncgen_type = T_AGEN;
	memset(heap, 0, sizeof(heap));
	return 0;
}

/* Object @i: a generator of @type in @state, its code 0x100 + i, awaiting
 * @awaited (stackpointer[-1]) at @slot bytes into the object. */
static void gen(int i, uint64_t type, int8_t state, uint64_t awaited, size_t slot)
{
	put(i, 0, 1);
	put(i, 8, type);
	heap[i][48] = (unsigned char)state;
	put(i, 64, 0x100 + (uint64_t)i);
	put(i, 72, 0x200 + (uint64_t)i);
	put(i, 80, addr(i) + slot + 8);
	heap[i][88] = 1;	/* FRAME_OWNED_BY_GENERATOR */
	put(i, slot, awaited);
}

/* Object @i: an object of @type whose first field is @first. */
static void obj(int i, uint64_t type, uint64_t first)
{
	put(i, 0, 1);
	put(i, 8, type);
	put(i, 16, first);
}

static size_t chain(uint64_t start, struct coro_level *lv, size_t max, int *cut,
		    struct coro_cache *c)
{
	size_t n = 99;

	assert_int_equal(coro_chain__read(getpid(), &po, &ao, start, lv, max, &n, cut, c), 0);
	return n;
}

/* A coroutine awaiting an async generator through anext()'s awaitable, the
 * generator awaiting a coroutine that awaits a future of a loop. */
static void test_through_async_generator(void **state)
{
	struct coro_level lv[8];
	struct coro_cache c = { 0 };
	int cut;

	(void)state;
	gen(0, T_CORO, YIELD_FROM, addr(1), 200);	/* consumer awaits asend */
	obj(1, T_WRAP, addr(2));			/* asend -> agen */
	gen(2, T_AGEN, YIELD_FROM, addr(3) | 1, 300);	/* agen awaits sleep (tagged) */
	gen(3, T_CORO, YIELD_FROM, addr(4), 120);	/* sleep awaits the future */
	obj(4, T_FUT, addr(5));				/* future -> its loop */
	obj(5, T_LOOP, 0);
	assert_int_equal(chain(addr(0), lv, 8, &cut, &c), 3);
	assert_int_equal(cut, 0);
	assert_true(lv[0].gen == addr(0) && lv[0].awaited == addr(1));
	assert_true(lv[1].gen == addr(2) && lv[1].type == T_AGEN && lv[1].awaited == addr(3));
	assert_true(lv[2].gen == addr(3) && lv[2].awaited == addr(4));
	assert_true(lv[2].inner == addr(5) && lv[2].inner_type == T_LOOP);
	assert_int_equal(lv[1].code, 0x102);
	assert_int_equal(coro_chain__verify(getpid(), &po, &ao, lv, 3), 0);

	/* the loop's type, remembered, is checked again by the verify */
	assert_int_equal(chain(addr(0), lv, 8, &cut, &c), 3);
	assert_true(lv[2].inner == addr(5) && lv[2].inner_type == T_LOOP);
	put(5, 8, T_AGEN);
	assert_int_equal(coro_chain__verify(getpid(), &po, &ao, lv, 3), -ESTALE);
	put(5, 8, T_LOOP);
	/* so is each level and what it awaits */
	put(2, 300, addr(6));
	assert_int_equal(coro_chain__verify(getpid(), &po, &ao, lv, 3), -ESTALE);
	put(2, 300, addr(3));
	heap[3][48] = SUSPENDED;
	assert_int_equal(coro_chain__verify(getpid(), &po, &ao, lv, 3), -ESTALE);
}

/* A task made from anext(g) or g.aclose(): the chain starts at g. A
 * wrapper of something else, or of nothing, gives no level. */
static void test_task_of_an_awaitable(void **state)
{
	struct coro_level lv[4];
	int cut;

	(void)state;
	obj(0, T_WRAP, addr(1));
	gen(1, T_AGEN, SUSPENDED, 0, 200);
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 1);
	assert_true(lv[0].gen == addr(1) && lv[0].state == SUSPENDED);
	obj(0, T_WRAP, addr(2));
	gen(2, T_CORO, SUSPENDED, 0, 200);	/* a wrapper of a coroutine: not followed */
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 0);
	obj(0, T_WRAP, 0x1234567);		/* misaligned garbage */
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 0);
	obj(0, T_WRAP, 0x10);			/* unmapped */
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 0);
}

/* Without the two types' addresses: coroutines of the first level's type
 * only (the rule before async generators). */
static void test_types_unknown(void **state)
{
	struct coro_level lv[4];
	int cut;

	(void)state;
	ao.coro_type = ao.asyncgen_type = 0;
	gen(0, T_CORO, YIELD_FROM, addr(1), 200);
	gen(1, T_CORO, YIELD_FROM, addr(2), 200);
	obj(2, T_WRAP, addr(3));
	gen(3, T_AGEN, SUSPENDED, 0, 200);
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 2);
	assert_int_equal(lv[1].awaited, addr(2));
	gen(1, T_AGEN, SUSPENDED, 0, 200);
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 1);
}

/* The awaited slot past the first 512 bytes read: read on its own. */
static void test_deep_value_stack(void **state)
{
	struct coro_level lv[4];
	int cut;

	(void)state;
	gen(0, T_CORO, YIELD_FROM, addr(1), 3000);
	gen(1, T_CORO, SUSPENDED, 0, 200);
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 2);
	assert_int_equal(lv[0].awaited, addr(1));
}

/* Hostile chains end: a wrapper leading back to the generator awaiting
 * it, a cycle of two (cut at @max), a cleared frame, a frame not owned. */
static void test_hostile(void **state)
{
	struct coro_level lv[8];
	int cut;

	(void)state;
	gen(0, T_AGEN, YIELD_FROM, addr(1), 200);
	obj(1, T_WRAP, addr(0));
	assert_int_equal(chain(addr(0), lv, 8, &cut, NULL), 1);
	assert_int_equal(cut, 0);

	gen(0, T_CORO, YIELD_FROM, addr(2), 200);
	gen(2, T_CORO, YIELD_FROM, addr(0), 200);
	assert_int_equal(chain(addr(0), lv, 8, &cut, NULL), 8);
	assert_int_equal(cut, 1);

	gen(2, T_CORO, 4 /* cleared */, 0, 200);
	assert_int_equal(chain(addr(0), lv, 8, &cut, NULL), 1);
	gen(2, T_CORO, SUSPENDED, 0, 200);
	heap[2][88] = 0;			/* its frame is not its own */
	assert_int_equal(chain(addr(0), lv, 8, &cut, NULL), 1);
}

/* The caller's own reads ride along with the verify's. */
static void test_verify_along(void **state)
{
	struct coro_level lv[4];
	uint64_t a = 0, b = 0;
	struct remote_iov extra[2] = { { addr(7), &a, 8 }, { 0x10, &b, 8 } };
	size_t done = 9;
	int cut;

	(void)state;
	gen(0, T_CORO, SUSPENDED, 0, 200);
	put(7, 0, 42);
	assert_int_equal(chain(addr(0), lv, 4, &cut, NULL), 1);
	assert_int_equal(coro_chain__verify_along(getpid(), &po, &ao, lv, 1, extra, 1, &done), 0);
	assert_true(done == 1 && a == 42);
	assert_int_equal(coro_chain__verify_along(getpid(), &po, &ao, lv, 1, extra, 2, &done),
			 -EFAULT);
	assert_int_equal(done, 1);
	heap[0][48] = YIELD_FROM;
	assert_int_equal(coro_chain__verify_along(getpid(), &po, &ao, lv, 1, extra, 1, &done),
			 -ESTALE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_through_async_generator, setup),
		cmocka_unit_test_setup(test_task_of_an_awaitable, setup),
		cmocka_unit_test_setup(test_types_unknown, setup),
		cmocka_unit_test_setup(test_deep_value_stack, setup),
		cmocka_unit_test_setup(test_hostile, setup),
		cmocka_unit_test_setup(test_verify_along, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
