// SPDX-License-Identifier: MIT
/*
 * test_libc_tls.c - glibc's sizeof(struct pthread) read off a libc file
 * (user/target/libc_tls.c): this machine's x86-64 libc and the arm64
 * sysroot's (scripts/provision-sysroot.sh arm64, which make test runs) give
 * the values nm and the bytes at the symbol give; a file without the symbol
 * is -ENOENT, one that is not ELF -ENOEXEC.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "target/libc_tls.h"

static uint32_t read_from(const char *path, int want_rc)
{
	uint32_t v = 1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(libc_tls__sizeof_pthread(fd, &v), want_rc);
	close(fd);
	return v;
}

/* What binutils say: nm's address of the symbol, the 4 bytes there
 * (objdump -s of the section holding it). */
static uint32_t by_binutils(const char *path)
{
	char cmd[1024], line[256];
	unsigned long addr = 0, v = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm -D %s | awk '$3 ~ /^_thread_db_sizeof_pthread@/ {print $1}'",
		 path);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	addr = strtoul(line, NULL, 16);
	snprintf(cmd, sizeof(cmd), "od -An -tu4 -N4 -j$(python3 -c \"import subprocess,sys;"
		 "o=subprocess.run(['readelf','-lW','%s'],capture_output=True,text=True).stdout;"
		 "a=%lu\nfor l in o.splitlines():\n f=l.split()\n if f and f[0]=='LOAD' and "
		 "int(f[2],16)<=a<int(f[2],16)+int(f[4],16): print(a-int(f[2],16)+int(f[1],16))\") %s",
		 path, addr, path);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	v = strtoul(line, NULL, 10);
	return (uint32_t)v;
}

static void test_host_libc(void **state)
{
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	uint32_t v;

	(void)state;
	if (access(libc, R_OK))
		skip();		/* another architecture's host: the arm64 case holds */
	v = read_from(libc, 0);
	assert_int_equal(v, by_binutils(libc));
	assert_true(v >= 1024 && v <= 4096);
}

static void test_arm64_libc(void **state)
{
	const char *cache = getenv("PYPROF_CACHE");
	char libc[512];
	uint32_t v;

	(void)state;
	snprintf(libc, sizeof(libc), "%s/sysroot-arm64/lib/aarch64-linux-gnu/libc.so.6",
		 cache ? cache : "/var/cache/pyprof-bpf");
	if (access(libc, R_OK))
		fail_msg("%s missing: run scripts/provision-sysroot.sh arm64", libc);
	v = read_from(libc, 0);
	assert_int_equal(v, by_binutils(libc));
	assert_true(v >= 1024 && v <= 4096);
}

static void test_no_symbol_or_not_elf(void **state)
{
	(void)state;
	assert_int_equal(read_from("/bin/true", -ENOENT), 0);
	assert_int_equal(read_from("/etc/hostname", -ENOEXEC), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_libc),
		cmocka_unit_test(test_arm64_libc),
		cmocka_unit_test(test_no_symbol_or_not_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
