/* SPDX-License-Identifier: MIT */
/*
 * fuzz_core_file.c - core files (user/target/core_file.c) of any bytes:
 * opened from a memfd, then every mapping, thread and segment edge read.
 * Seeds: tests/fuzz/tools/make_core_seed.py (a small x86-64 ELF core with
 * the notes a kernel or gcore writes).
 *
 * Invariants checked: an open either fails with a line said, or gives a pid,
 * at least one thread, at most the documented counts, NUL-terminated names;
 * reads stay within what the core and its (absent) files hold.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "target/core_file.h"

#include "fuzz_check.h"

static void read_around(struct core_file *cf, uint64_t addr)
{
	unsigned char buf[64];

	/* the bytes before, at and past an edge */
	for (int d = -1; d <= 1; d++)
		core_file__read(cf, addr + (uint64_t)(d * 32), buf, sizeof(buf));
}

/* An empty root: the files a core names are looked for there (and on the
 * host, read-only and ELF only, as gcore's cores need). */
static char root[] = "/tmp/fuzz-core-root-XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!mkdtemp(root))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	struct core_file *cf;
	const struct procmaps *m;
	const struct core_thread *t;
	size_t n;
	int fd = memfd_create("core", MFD_CLOEXEC);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	if (core_file__open_fd(fd, root, &cf, err, sizeof(err))) {
		CHECK(err[0] != '\0' && strnlen(err, sizeof(err)) < sizeof(err));
		return 0;
	}
	t = core_file__threads(cf, &n);
	CHECK(n >= 1 && n <= CORE_FILE_MAX_THREADS);
	for (size_t i = 0; i < n; i++)
		read_around(cf, t[i].sp);
	CHECK(strnlen(core_file__comm(cf), 16) < 16);
	(void)core_file__exe(cf);
	(void)core_file__pid(cf);
	m = core_file__maps(cf);
	CHECK(m->n <= CORE_FILE_MAX_SEGMENTS);
	for (size_t i = 0; i < m->n; i++) {
		CHECK(m->maps[i].path && m->maps[i].start <= m->maps[i].end);
		read_around(cf, m->maps[i].start);
		read_around(cf, m->maps[i].end);
	}
	core_file__free(cf);
	return 0;
}
