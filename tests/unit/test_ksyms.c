// SPDX-License-Identifier: MIT
/*
 * test_ksyms.c - kernel symbols from kallsyms and syscall names by number
 * (user/offcpu/ksyms.c, user/offcpu/syscalls.c).
 *
 * Synthetic kallsyms files check the parser and the lookup; as root, the
 * real /proc/kallsyms is loaded too (its time and size are printed).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "offcpu/ksyms.h"
#include "offcpu/syscalls.h"

static void test_syscall_names(void **state)
{
	(void)state;
	assert_string_equal(syscall__name(0), "read");
	assert_string_equal(syscall__name(1), "write");
	assert_string_equal(syscall__name(45), "recvfrom");
	assert_string_equal(syscall__name(202), "futex");
	assert_string_equal(syscall__name(230), "clock_nanosleep");
	assert_null(syscall__name(-1));
	assert_null(syscall__name(LONG_MIN));
	assert_null(syscall__name(400));	/* the hole between 334 and 424 */
	assert_null(syscall__name(100000));
	assert_null(syscall__name(LONG_MAX));
}

/* @text in a temporary file; its path in @path (PATH_MAX), removed by the caller. */
static void write_file(char *path, const char *text)
{
	int fd;

	strcpy(path, "/tmp/test_ksyms.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int load_text(const char *text, struct ksyms **k)
{
	char path[PATH_MAX];
	int err;

	write_file(path, text);
	err = ksyms__load_file(path, k);
	unlink(path);
	return err;
}

static void expect(const struct ksyms *k, uint64_t addr, const char *name, uint64_t off)
{
	uint64_t got = 12345;
	const char *s = ksyms__name(k, addr, &got);

	assert_non_null(s);
	assert_string_equal(s, name);
	assert_int_equal(got, off);
}

/* Unsorted, with aliases, non-text types and a module symbol. */
static const char synthetic[] =
	"ffffffff81000100 T beta\n"
	"ffffffff81000000 t alpha_local\n"
	"ffffffff81000000 T alpha\n"
	"ffffffff81000200 D some_data\n"
	"ffffffff81000050 b some_bss\n"
	"ffffffffc0001000 t mod_fn\t[ext4]\n"
	"ffffffff81000300 W weak_one\n"
	"ffffffff81000400 t gamma\n"
	"ffffffff81000300 t weak_one_local\n";

static void test_synthetic(void **state)
{
	struct ksyms *k = NULL;
	uint64_t off = 777;

	(void)state;
	assert_int_equal(load_text(synthetic, &k), 0);
	assert_int_equal(ksyms__count(k), 5);

	expect(k, 0xffffffff81000000, "alpha", 0);	/* global over local */
	expect(k, 0xffffffff81000080, "alpha", 0x80);	/* the bss symbol is not text */
	expect(k, 0xffffffff810000ff, "alpha", 0xff);
	expect(k, 0xffffffff81000100, "beta", 0);
	expect(k, 0xffffffff81000250, "beta", 0x150);	/* nor is the data one */
	expect(k, 0xffffffff81000300, "weak_one", 0);	/* weak over local */
	expect(k, 0xffffffff81000410, "gamma", 0x10);
	expect(k, 0xffffffffc0001000, "mod_fn", 0);	/* the module's name dropped */
	expect(k, 0xffffffffc0001000 + KSYMS_MAX_OFFSET, "mod_fn", KSYMS_MAX_OFFSET);

	/* before the first, past the last, in a gap */
	assert_null(ksyms__name(k, 0xffffffff80ffffff, &off));
	assert_null(ksyms__name(k, 0, &off));
	assert_null(ksyms__name(k, 0xffffffffc0001000 + KSYMS_MAX_OFFSET + 1, &off));
	assert_null(ksyms__name(k, UINT64_MAX, &off));
	assert_null(ksyms__name(k, 0xffffffff81000400 + 2 * KSYMS_MAX_OFFSET, &off));
	assert_int_equal(off, 777);	/* untouched when there is no symbol */

	/* the offset is optional */
	assert_string_equal(ksyms__name(k, 0xffffffff81000101, NULL), "beta");
	assert_true(ksyms__bytes(k) > 0);
	ksyms__free(k);
}

static void test_errors(void **state)
{
	struct ksyms *k = NULL;

	(void)state;
	/* kptr_restrict: every address 0 */
	assert_int_equal(load_text("0000000000000000 T _text\n"
				   "0000000000000000 t foo\n", &k), -EPERM);
	assert_int_equal(load_text("", &k), -ENODATA);
	assert_int_equal(load_text("ffffffff81000000 D only_data\n", &k), -ENODATA);
	assert_int_equal(load_text("not a kallsyms line\n", &k), -EINVAL);
	assert_int_equal(load_text("ffffffff81000000 T\n", &k), -EINVAL);
	assert_int_equal(load_text("ffffffff81000000 T \n", &k), -EINVAL);
	assert_int_equal(ksyms__load_file("/nonexistent/kallsyms", &k), -ENOENT);
	assert_null(k);
	ksyms__free(NULL);

	/* a line without its newline, and blank lines, are fine */
	assert_int_equal(load_text("\nffffffff81000000 T last", &k), 0);
	expect(k, 0xffffffff81000004, "last", 4);
	ksyms__free(k);
}

/* Many shuffled symbols against a linear scan. */
static void test_random(void **state)
{
	enum { N = 3000 };
	static uint64_t addrs[N];
	char path[PATH_MAX];
	struct ksyms *k = NULL;
	FILE *f;
	int fd;

	(void)state;
	srand(42);
	for (int i = 0; i < N; i++)
		addrs[i] = 0xffffffff81000000ull + (uint64_t)i * 0x40 + (uint64_t)(rand() % 0x40);
	strcpy(path, "/tmp/test_ksyms.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	for (int i = 0; i < N; i++) {
		int j = (i * 1237) % N;	/* 1237 is prime to N: a permutation */

		fprintf(f, "%016llx T f%d\n", (unsigned long long)addrs[j], j);
	}
	fclose(f);
	assert_int_equal(ksyms__load_file(path, &k), 0);
	unlink(path);
	assert_int_equal(ksyms__count(k), N);

	for (int q = 0; q < 20000; q++) {
		uint64_t a = 0xffffffff81000000ull - 0x100 + (uint64_t)(rand() % (N * 0x40 + 0x200));
		uint64_t off;
		const char *s = ksyms__name(k, a, &off);
		int best = -1;
		char want[16];

		for (int i = 0; i < N; i++)
			if (addrs[i] <= a && (best < 0 || addrs[i] > addrs[best]))
				best = i;
		if (best < 0) {
			assert_null(s);
			continue;
		}
		snprintf(want, sizeof(want), "f%d", best);
		assert_non_null(s);
		assert_string_equal(s, want);
		assert_int_equal(off, a - addrs[best]);
	}
	ksyms__free(k);
}

/* The address of " T @name" in /proc/kallsyms, 0 when hidden or absent. */
static uint64_t kallsyms_addr(const char *name)
{
	unsigned long long addr;
	char type, sym[512];
	uint64_t found = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (fscanf(f, "%llx %c %511s%*[^\n]", &addr, &type, sym) == 3) {
		if (type == 'T' && strcmp(sym, name) == 0) {
			found = addr;
			break;
		}
	}
	fclose(f);
	return found;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_real(void **state)
{
	struct ksyms *k = NULL;
	uint64_t addr, off = 1;
	double t0;
	int err;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "# not root: /proc/kallsyms hides its addresses\n");
		skip();
	}
	addr = kallsyms_addr("schedule");
	if (!addr) {
		/* kptr_restrict=2 hides them from root too */
		assert_int_equal(ksyms__load(&k), -EPERM);
		skip();
	}
	t0 = now();
	err = ksyms__load(&k);
	assert_int_equal(err, 0);
	fprintf(stderr, "# /proc/kallsyms: %zu symbols, %.1f ms, %zu KiB\n",
		ksyms__count(k), (now() - t0) * 1e3, ksyms__bytes(k) / 1024);
	assert_string_equal(ksyms__name(k, addr, &off), "schedule");
	assert_int_equal(off, 0);
	assert_string_equal(ksyms__name(k, addr + 5, &off), "schedule");
	assert_int_equal(off, 5);
	ksyms__free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_syscall_names),
		cmocka_unit_test(test_synthetic),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_real),
	};

	return cmocka_run_group_tests_name("ksyms", tests, NULL, NULL) ? 1 : 0;
}
