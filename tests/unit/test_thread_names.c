// SPDX-License-Identifier: MIT
/*
 * test_thread_names.c - tid -> name (user/target/thread_names.c): live threads
 * named as /proc says, read once (a rename later is not seen); thousands of
 * tids each found again at the pointer first handed out, across the index's
 * growth; past the limit and for tid 0, the fallback. Python names set
 * beside the comm: copied, replaced, none for a tid never set, refused when
 * the table is full.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "target/thread_names.h"

struct named {
	const char *name;
	pid_t tid;
	pthread_barrier_t *ready, *done;
};

static void *named_thread(void *arg)
{
	struct named *n = arg;

	pthread_setname_np(pthread_self(), n->name);
	n->tid = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(n->ready);
	pthread_barrier_wait(n->done);
	return NULL;
}

static void test_live_threads(void **state)
{
	struct named ns[3] = { { .name = "alpha" }, { .name = "beta-worker" }, { .name = "g" } };
	pthread_barrier_t ready, done;
	struct thread_names *t;
	pthread_t th[3];
	const char *first;

	(void)state;
	assert_int_equal(thread_names__new(16, &t), 0);
	pthread_barrier_init(&ready, NULL, 4);
	pthread_barrier_init(&done, NULL, 4);
	for (int i = 0; i < 3; i++) {
		ns[i].ready = &ready;
		ns[i].done = &done;
		assert_int_equal(pthread_create(&th[i], NULL, named_thread, &ns[i]), 0);
	}
	pthread_barrier_wait(&ready);
	/* Interleaved, as per-CPU events deliver them. */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 3; i++)
			assert_string_equal(thread_names__get(t, getpid(), ns[i].tid, "fb"),
					    ns[i].name);
	first = thread_names__get(t, getpid(), ns[0].tid, "fb");
	pthread_setname_np(th[0], "renamed");
	assert_ptr_equal(thread_names__get(t, getpid(), ns[1].tid, "fb"),
			 thread_names__get(t, getpid(), ns[1].tid, "fb"));
	assert_ptr_equal(thread_names__get(t, getpid(), ns[0].tid, "fb"), first);
	assert_string_equal(first, "alpha");
	pthread_barrier_wait(&done);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	thread_names__free(t);
}

static void test_many_and_limit(void **state)
{
	enum { N = 3000 };
	const char **got = calloc(N, sizeof(*got));
	struct thread_names *t;
	/* Far above pid_max: no such thread, the name read is empty. */
	const pid_t base = 0x7ff00000;

	(void)state;
	assert_non_null(got);
	assert_int_equal(thread_names__new(N, &t), 0);
	for (int i = 0; i < N; i++) {
		got[i] = thread_names__get(t, getpid(), base + i * 7, "fb");
		assert_non_null(got[i]);
		assert_ptr_not_equal(got[i], "fb");
		if (i)
			assert_ptr_not_equal(got[i], got[i - 1]);
	}
	for (int i = N; i-- > 0;)
		assert_ptr_equal(thread_names__get(t, getpid(), base + i * 7, "fb"), got[i]);
	/* Full: a new tid gets the fallback, known ones their names. */
	assert_string_equal(thread_names__get(t, getpid(), base + 1, "fb"), "fb");
	assert_ptr_equal(thread_names__get(t, getpid(), base, "fb"), got[0]);
	assert_string_equal(thread_names__get(t, getpid(), 0, "zero"), "zero");
	thread_names__free(t);
	free(got);
}

static void test_python_names(void **state)
{
	const pid_t base = 0x7ff00000;
	struct thread_names *t;
	char name[64];

	(void)state;
	assert_int_equal(thread_names__new(2, &t), 0);
	assert_null(thread_names__python(t, base));
	strcpy(name, "incident-spinner-thread-A");
	assert_int_equal(thread_names__set_python(t, getpid(), base, name), 0);
	name[0] = 'X';	/* a copy is kept */
	assert_string_equal(thread_names__python(t, base), "incident-spinner-thread-A");
	assert_int_equal(thread_names__set_python(t, getpid(), base, "renamed"), 0);
	assert_string_equal(thread_names__python(t, base), "renamed");
	/* the comm entry is the same one */
	assert_non_null(thread_names__get(t, getpid(), base, NULL));
	assert_null(thread_names__python(t, base + 1));
	assert_int_equal(thread_names__set_python(t, getpid(), base + 1, "b"), 0);
	assert_int_equal(thread_names__set_python(t, getpid(), base + 2, "c"), -ENOSPC);
	assert_null(thread_names__python(t, base + 2));
	assert_int_equal(thread_names__set_python(t, getpid(), 0, "z"), -EINVAL);
	thread_names__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live_threads),
		cmocka_unit_test(test_many_and_limit),
		cmocka_unit_test(test_python_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
