/* SPDX-License-Identifier: MIT */
/* readfile.c - a whole file into memory, bounded (readfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include "util/readfile.h"

int read_file(const char *path, size_t max, int cut, char **out, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0, cap = 4096;
	char *buf, *p;
	int rc = 0;

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	while (buf) {
		ssize_t r;

		if (got == cap) {
			if (cap >= max + 1)
				break;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			p = realloc(buf, cap + 1);
			if (!p) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = p;
		}
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!buf)
		return -ENOMEM;
	if (!rc && got > max) {
		if (!cut)
			rc = -EFBIG;
		got = max;
	}
	if (rc) {
		free(buf);
		return rc;
	}
	buf[got] = '\0';
	*out = buf;
	*n = got;
	return 0;
}
