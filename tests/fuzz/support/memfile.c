/* SPDX-License-Identifier: MIT */
/* memfile.c - the fuzzer's bytes as a file (memfile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "memfile.h"

static int memfd = -1;
static char memfd_path[32];

int memfile_set(const uint8_t *data, size_t size, const char **path)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz-input", MFD_CLOEXEC);
		if (memfd < 0)
			abort();
		snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0) || (size && pwrite(memfd, data, size, 0) != (ssize_t)size) ||
	    lseek(memfd, 0, SEEK_SET))
		abort();
	if (path)
		*path = memfd_path;
	return memfd;
}
