// SPDX-License-Identifier: MIT
/*
 * test_offcpu_tasks.c - an off-CPU interval's copy of its task chain
 * (user/offcpu/intervals.c, offcpu_iv__set_tasks): every task, its name
 * bytes and its awaiters' frames copied into one block of the interval's own
 * (the tick's buffers are reused by the next tick before the interval ends),
 * pointers into that block; set again, the old copy goes; set to none, it is
 * empty. Under ASan a copy that outlives its source or overruns shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "offcpu/intervals.h"

/* A chain of @n tasks in fresh heap buffers (freed by the caller). */
static struct sample_task *make_chain(uint32_t n, struct py_rawframe **frames, uint8_t **names)
{
	struct sample_task *t = calloc(n, sizeof(*t));

	*frames = calloc(4 * n, sizeof(**frames));
	*names = calloc(n, 16);
	assert_non_null(t);
	assert_non_null(*frames);
	assert_non_null(*names);
	for (uint32_t i = 0; i < n; i++) {
		t[i].task = 0x1000 + i;
		t[i].coro = 0x2000 + i;
		t[i].nawaiters = i % 3;
		t[i].name_len = 1 + i % 16;
		memset(*names + 16 * i, 'a' + (int)(i % 26), t[i].name_len);
		t[i].name = *names + 16 * i;
		/* the running task has no frames; awaiters 1 to 3 */
		t[i].nframes = i ? 1 + i % 3 : 0;
		t[i].fflags = i ? SAMPLE_LF_READ : 0;
		for (uint32_t j = 0; j < t[i].nframes; j++)
			(*frames)[4 * i + j] = (struct py_rawframe){ .frame = 0x3000 + 16 * i + j,
								     .code = 0x4000 + i };
		t[i].frames = *frames + 4 * i;
	}
	return t;
}

static void test_copy_is_whole_and_own(void **state)
{
	struct offcpu_iv iv = { 0 };
	struct py_rawframe *frames;
	uint8_t *names;
	struct sample_task *t = make_chain(40, &frames, &names);
	struct sample_task want[40];
	char wname[40][16];

	(void)state;
	memcpy(want, t, sizeof(want));
	for (uint32_t i = 0; i < 40; i++)
		memcpy(wname[i], t[i].name, t[i].name_len);
	assert_int_equal(offcpu_iv__set_tasks(&iv, t, 40, SAMPLE_TF_CUT), 0);
	/* The source goes (the tick's slot is reused): the copy stands alone. */
	free(frames);
	free(names);
	free(t);
	for (uint32_t i = 0; i < 40; i++) {
		assert_int_equal(iv.tasks[i].task, want[i].task);
		assert_int_equal(iv.tasks[i].nframes, want[i].nframes);
		assert_memory_equal(iv.tasks[i].name, wname[i], want[i].name_len);
		for (uint32_t j = 0; j < want[i].nframes; j++) {
			assert_int_equal(iv.tasks[i].frames[j].frame, 0x3000 + 16 * i + j);
			assert_int_equal(iv.tasks[i].frames[j].code, 0x4000 + i);
		}
	}
	assert_int_equal(iv.ntasks, 40);
	assert_int_equal(iv.tasks_flags, SAMPLE_TF_CUT);
	/* Again with a shorter chain: the old copy is replaced. */
	t = make_chain(2, &frames, &names);
	assert_int_equal(offcpu_iv__set_tasks(&iv, t, 2, 0), 0);
	free(frames);
	free(names);
	free(t);
	assert_int_equal(iv.ntasks, 2);
	assert_int_equal(iv.tasks[1].frames[1].frame, 0x3000 + 16 + 1);
	/* None: nothing kept. */
	assert_int_equal(offcpu_iv__set_tasks(&iv, NULL, 0, 0), 0);
	assert_null(iv.tasks);
	assert_int_equal(iv.ntasks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_is_whole_and_own),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
