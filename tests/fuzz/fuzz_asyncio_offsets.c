/* SPDX-License-Identifier: MIT */
/*
 * fuzz_asyncio_offsets.c - the .AsyncioDebug table and the _Py_DebugOffsets
 * fields the asyncio walks take (asyncio/offsets.c) on any bytes.
 * Input: [u8 minor][104 bytes .AsyncioDebug][_Py_DebugOffsets...].
 * Seeds: both tables of live 3.14 and 3.15 interpreters.
 *
 * Invariant checked: accepted offsets keep every task field inside the task
 * size (a task is copied whole into a 4 KB buffer), and the set and
 * generator fields where the walks' bounds expect them.
 */
#include <stdint.h>
#include <string.h>
#include "asyncio/asyncio.h"

#include "fuzz_check.h"

static int inside(uint64_t off, uint64_t w, uint64_t size)
{
	return off <= size && w <= size - off;
}

static void check_table(const struct asyncio_offsets *a)
{
	CHECK(a->task_size <= 4096);
	CHECK(inside(a->task_name, 8, a->task_size));
	CHECK(inside(a->task_awaited_by, 8, a->task_size));
	CHECK(inside(a->task_is_task, 1, a->task_size));
	CHECK(inside(a->task_awaited_by_is_set, 1, a->task_size));
	CHECK(inside(a->task_coro, 8, a->task_size));
	CHECK(inside(a->task_node, 16, a->task_size));
	CHECK(inside(a->tstate_tasks_head, 16, a->tstate_size));
	CHECK(inside(a->interp_tasks_head, 16, a->interp_size));
	CHECK(a->awaited_slot >= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct asyncio_offsets a;
	char err[256];
	int rc;

	if (size < 1 + ASYNCIO_DEBUG_SIZE)
		return 0;
	err[0] = '\0';
	rc = asyncio_offsets__parse_table(data + 1, ASYNCIO_DEBUG_SIZE, 0x03000000u | data[0] << 16,
					  &a, err, sizeof(err));
	CHECK(rc <= 0 && (rc == 0 || err[0]));
	if (rc)
		return 0;
	check_table(&a);
	err[0] = '\0';
	rc = asyncio_offsets__bind_debug(data + 1 + ASYNCIO_DEBUG_SIZE,
					 size - 1 - ASYNCIO_DEBUG_SIZE, &a, err, sizeof(err));
	CHECK(rc <= 0 && (rc == 0 || err[0]));
	if (rc)
		return 0;
	CHECK(a.llist_next != a.llist_prev && a.llist_next <= 8 && a.llist_prev <= 8);
	CHECK(a.set_read >= 8 && a.gen_iframe <= 4096);
	return 0;
}
