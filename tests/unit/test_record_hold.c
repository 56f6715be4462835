// SPDX-License-Identifier: MIT
/*
 * test_record_hold.c - records held between polls (commands/record_hold.h):
 * a held sample and code snapshot are deep copies (the sampler's buffers
 * may be reused as soon as the callback returns), records come back in the
 * order they were held, and past the bound a record is counted as lost,
 * never dropped silently.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "commands/record_hold.h"

static void test_deep_copy_and_order(void **state)
{
	struct py_rawframe frames[3] = { { .frame = 1, .code = 2 }, { .frame = 3 }, { .frame = 5 } };
	struct py_rawframe tframes[2] = { { .frame = 7 }, { .frame = 9 } };
	uint64_t kstack[2] = { 11, 12 }, regs[SAMPLE_NREGS] = { 13 };
	uint8_t ustack[5] = { 1, 2, 3, 4, 5 }, name[4] = "abc";
	struct sample_task task = { .task = 21, .frames = tframes, .nframes = 2,
				    .name = name, .name_len = 4 };
	struct raw_sample r = { .pid = 42, .tid = 43, .nframes = 3, .frames = frames,
				.nkstack = 2, .kstack = kstack, .uregs = regs, .ustack = ustack,
				.ustack_len = 5, .ntasks = 1, .tasks = &task };
	uint8_t qual[6] = "qname", line[3] = { 9, 8, 7 };
	struct raw_code c = { .pid = 42, .code = 99, .qualname = qual, .qualname_len = 6,
			      .linetable = line, .linetable_len = 3 };
	struct record_hold h = { 0 };
	struct held *e;

	(void)state;
	assert_false(record_hold__busy(&h));
	assert_int_equal(record_hold__code(&h, &c), 0);
	assert_int_equal(record_hold__sample(&h, &r), 0);
	assert_int_equal(record_hold__proc(&h, SAMPLER_PROC_EXEC, 42, 0, 77), 0);
	assert_true(record_hold__busy(&h));
	/* The sampler reuses its buffers. */
	memset(frames, 0xee, sizeof(frames));
	memset(tframes, 0xee, sizeof(tframes));
	memset(kstack, 0xee, sizeof(kstack));
	memset(ustack, 0xee, sizeof(ustack));
	memset(name, 0xee, sizeof(name));
	memset(qual, 0xee, sizeof(qual));
	memset(&task, 0xee, sizeof(task));

	e = record_hold__peek(&h);
	assert_int_equal(e->kind, HELD_CODE);
	assert_int_equal(e->c.code, 99);
	assert_string_equal((const char *)e->c.qualname, "qname");
	assert_int_equal(e->c.linetable[2], 7);
	assert_null(e->c.obj);
	record_hold__pop(&h);

	e = record_hold__peek(&h);
	assert_int_equal(e->kind, HELD_SAMPLE);
	assert_int_equal(e->s.tid, 43);
	assert_int_equal(e->s.frames[0].code, 2);
	assert_int_equal(e->s.frames[2].frame, 5);
	assert_int_equal(e->s.kstack[1], 12);
	assert_int_equal(e->s.uregs[0], 13);
	assert_int_equal(e->s.ustack[4], 5);
	assert_int_equal(e->s.tasks[0].task, 21);
	assert_int_equal(e->s.tasks[0].frames[1].frame, 9);
	assert_string_equal((const char *)e->s.tasks[0].name, "abc");
	record_hold__pop(&h);

	e = record_hold__peek(&h);
	assert_int_equal(e->kind, HELD_PROC);
	assert_int_equal(e->p.ev, SAMPLER_PROC_EXEC);
	assert_int_equal(e->p.ts_ns, 77);
	record_hold__pop(&h);
	assert_null(record_hold__peek(&h));
	assert_false(record_hold__busy(&h));
	assert_int_equal(h.bytes, 0);
	record_hold__free(&h);
}

static void test_bound_counts_losses(void **state)
{
	static uint8_t big[1 << 20];
	struct raw_sample r = { .pid = 1, .ustack = big, .ustack_len = sizeof(big),
				.status = SAMPLE_TRUNCATED };
	struct raw_code c = { .pid = 1, .obj = big, .obj_len = sizeof(big) };
	struct record_hold h = { 0 };
	size_t held = 0;

	(void)state;
	while (!record_hold__sample(&h, &r))
		held++;
	assert_int_equal(held, HOLD_MAX_BYTES / sizeof(big));
	assert_int_equal(h.lost.samples, 1);
	assert_int_equal(h.lost.truncated, 1);
	assert_int_equal(record_hold__code(&h, &c), -ENOSPC);
	assert_int_equal(h.lost_code, 1);
	/* Process events are small: never over the bound. */
	assert_int_equal(record_hold__proc(&h, SAMPLER_PROC_EXIT, 1, 0, 0), 0);
	record_hold__free(&h);
	assert_false(record_hold__busy(&h));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deep_copy_and_order),
		cmocka_unit_test(test_bound_counts_losses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
