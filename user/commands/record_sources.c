// SPDX-License-Identifier: MIT
/* record_sources.c - source files read from a target's root (record_sources.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands/record_sources.h"
#include "target/rootfs.h"

/* All of @fd's @size bytes into a new buffer; -EIO when the file changed size. */
static int read_all(int fd, size_t size, char **out)
{
	char *buf = malloc(size + 1);
	size_t got = 0;

	if (!buf)
		return -ENOMEM;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

/*
 * Only what the target's user may read itself: a file it owns, or anyone
 * may read. Else a process could name a root-only file as its code's file
 * (compile(src, "/etc/shadow", "exec")) and have us copy it into the profile.
 */
static int readable_by(pid_t pid, const struct stat *st)
{
	uid_t owner;

	if (rootfs__owner(pid, &owner))
		return 0;
	return st->st_uid == owner || (st->st_mode & S_IROTH);
}

int record_sources__read(pid_t pid, const char *path, uint64_t start_ns, uint64_t budget,
			 struct out_source *out)
{
	struct stat st;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	out->path = strdup(path);
	if (!out->path)
		return -ENOMEM;
	out->flags = OUT_SRC_UNREADABLE;
	if (path[0] != '/')
		return 0;
	fd = rootfs__open(pid, path, OUT_SRC_MAX_FILE, &st);
	if (fd == -EFBIG)
		out->flags = OUT_SRC_TOO_BIG;
	if (fd < 0)
		return 0;
	if (!readable_by(pid, &st)) {
		close(fd);
		return 0;
	}
	out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
	if ((uint64_t)st.st_size > budget) {
		out->flags = OUT_SRC_TOO_BIG;
		close(fd);
		return 0;
	}
	rc = read_all(fd, (size_t)st.st_size, &out->text);
	close(fd);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return 0;	/* it changed while read: unreadable */
	out->len = (size_t)st.st_size;
	out->flags = out->mtime_ns > start_ns ? OUT_SRC_CHANGED : 0;
	if (memchr(out->text, 0, out->len)) {
		free(out->text);
		out->text = NULL;
		out->len = 0;
		out->flags = OUT_SRC_BINARY;
	}
	return 0;
}

void record_sources__release(struct out_source *src)
{
	free(src->path);
	free(src->text);
	src->path = src->text = NULL;
}
