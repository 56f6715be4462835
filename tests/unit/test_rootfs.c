// SPDX-License-Identifier: MIT
/*
 * test_rootfs.c - files a target names, opened inside its root
 * (user/target/rootfs.c), against a child chroot'ed into a scratch
 * directory: an absolute symlink, a "../.." one and a symlinked directory
 * stay inside it (never the host's /etc/passwd), a FIFO and a device are
 * refused without blocking nor opening them, a size bound holds, a link to
 * a file inside the root is followed; and map_files gives the very file a
 * mapping holds, a device mapping refused. Needs root (chroot, mknod).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "target/rootfs.h"

static char dir[] = "/tmp/test_rootfs.XXXXXX";
static pid_t child;

static void put(const char *name, const char *text)
{
	char fn[256];
	FILE *f;

	snprintf(fn, sizeof(fn), "%s/%s", dir, name);
	f = fopen(fn, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void link_at(const char *target, const char *name)
{
	char fn[256];

	snprintf(fn, sizeof(fn), "%s/%s", dir, name);
	assert_int_equal(symlink(target, fn), 0);
}

static int setup(void **state)
{
	char fn[256];
	int ready[2];
	char c;

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	put("file", "inside\n");
	snprintf(fn, sizeof(fn), "%s/sub", dir);
	mkdir(fn, 0755);
	put("sub/deep", "deeper\n");
	link_at("/etc/passwd", "abs");		/* the host's, seen from outside */
	link_at("../../../../etc/passwd", "up");
	link_at("/file", "inner");
	link_at("/sub", "subdir");
	link_at("/proc/self/root/etc/passwd", "magic");
	snprintf(fn, sizeof(fn), "%s/fifo", dir);
	mkfifo(fn, 0600);
	snprintf(fn, sizeof(fn), "%s/null", dir);
	mknod(fn, S_IFCHR | 0600, makedev(1, 3));
	if (pipe(ready))
		return -1;
	child = fork();
	if (child == 0) {
		close(ready[0]);
		if (chroot(dir) || chdir("/"))
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (child < 0 || read(ready[0], &c, 1) != 1)
		return -1;
	close(ready[0]);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The first line of what rootfs__open(child, path) opened; "" on error. */
static int first_line(const char *path, uint64_t max, char *out, size_t len)
{
	int fd = rootfs__open(child, path, max, NULL);
	ssize_t got;

	out[0] = 0;
	if (fd < 0)
		return fd;
	got = read(fd, out, len - 1);
	close(fd);
	out[got > 0 ? got : 0] = 0;
	return 0;
}

static void test_inside(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(first_line("/file", 1024, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "inside\n");
	assert_int_equal(first_line("/inner", 1024, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "inside\n");
	assert_int_equal(first_line("/subdir/deep", 1024, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "deeper\n");
	assert_int_equal(first_line("/../../file", 1024, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "inside\n");
}

static void test_escapes(void **state)
{
	char buf[64];

	(void)state;
	/* resolved inside the root, where there is no /etc/passwd */
	assert_int_equal(first_line("/abs", 1 << 20, buf, sizeof(buf)), -ELOOP);
	assert_int_equal(first_line("/up", 1 << 20, buf, sizeof(buf)), -ELOOP);
	assert_int_equal(first_line("/etc/passwd", 1 << 20, buf, sizeof(buf)), -ENOENT);
	assert_int_not_equal(first_line("/magic", 1 << 20, buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "root:"));
	assert_int_equal(first_line("relative", 1 << 20, buf, sizeof(buf)), -EINVAL);
}

static void test_not_regular(void **state)
{
	char buf[64];

	(void)state;
	/* would block in open() without O_PATH; a device's open never runs */
	assert_int_equal(first_line("/fifo", 1024, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(first_line("/null", 1024, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(first_line("/sub", 1024, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(first_line("/file", 3, buf, sizeof(buf)), -EFBIG);
}

/* Without openat2: only plain paths inside the root open. */
static void test_nofollow(void **state)
{
	int fd;

	(void)state;
	fd = rootfs__open_nofollow(child, "/sub/deep", 1024, NULL);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rootfs__open_nofollow(child, "/inner", 1024, NULL), -EINVAL);
	assert_int_equal(rootfs__open_nofollow(child, "/abs", 1 << 20, NULL), -EINVAL);
	assert_int_equal(rootfs__open_nofollow(child, "/subdir/deep", 1024, NULL), -ENOTDIR);
	assert_int_equal(rootfs__open_nofollow(child, "/sub/../file", 1024, NULL), -EXDEV);
	assert_int_equal(rootfs__open_nofollow(child, "/fifo", 1024, NULL), -EINVAL);
	assert_int_equal(rootfs__open_nofollow(child, "/etc/passwd", 1024, NULL), -ENOENT);
}

static void test_gone(void **state)
{
	(void)state;
	assert_int_equal(rootfs__open(0x7ffffff0, "/file", 1024, NULL), -ESRCH);
}

static void test_mapped(void **state)
{
	char fn[256];
	struct stat st, want;
	void *file, *dev;
	int fd, zero;

	(void)state;
	snprintf(fn, sizeof(fn), "%s/file", dir);
	fd = open(fn, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &want), 0);
	file = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(file != MAP_FAILED);
	close(fd);
	fd = rootfs__open_mapped(getpid(), (uintptr_t)file, (uintptr_t)file + 4096, 1024, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_ino, want.st_ino);
	close(fd);
	/* too large for the bound */
	assert_int_equal(rootfs__open_mapped(getpid(), (uintptr_t)file, (uintptr_t)file + 4096,
					     3, NULL), -EFBIG);
	munmap(file, 4096);
	/* a device mapped: never opened for real */
	zero = open("/dev/zero", O_RDONLY);
	assert_true(zero >= 0);
	dev = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, zero, 0);
	assert_true(dev != MAP_FAILED);
	close(zero);
	assert_int_equal(rootfs__open_mapped(getpid(), (uintptr_t)dev, (uintptr_t)dev + 4096,
					     1 << 20, NULL), -EINVAL);
	munmap(dev, 4096);
}

static void test_owner(void **state)
{
	uid_t uid;

	(void)state;
	assert_int_equal(rootfs__owner(getpid(), &uid), 0);
	assert_int_equal(uid, geteuid());
	assert_int_equal(rootfs__owner(0x7ffffff0, &uid), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inside),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_nofollow),
		cmocka_unit_test(test_gone),
		cmocka_unit_test(test_mapped),
		cmocka_unit_test(test_owner),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
