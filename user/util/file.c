/* SPDX-License-Identifier: MIT */
/* file.c - a whole file read into memory, or written (file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "util/file.h"

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

int write_file(const char *path, const void *data, size_t len, unsigned int mode)
{
	char tmp[4200];
	size_t done = 0;
	int fd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	while (!rc && done < len) {
		ssize_t w = write(fd, (const char *)data + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = w < 0 ? -errno : -EIO;
		else
			done += (size_t)w;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}
