/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "target/procmaps.h"
#include "target/rootfs.h"

/* A sane bound: processes with more mappings exist, but not Python ones we
 * could not handle by stopping here with an error. */
#define MAX_MAPPINGS (1u << 20)

static int parse_line(char *line, struct mapping *m)
{
	unsigned long long start, end, off, ino;
	unsigned int maj, min;
	char perms[8] = "";
	int pos = 0;
	char *path;
	size_t len;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &off,
		   &maj, &min, &ino, &pos) < 7)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->dev_major = maj;
	m->dev_minor = min;
	m->inode = ino;
	memcpy(m->perms, perms, 4);
	path = line + pos;
	len = strcspn(path, "\n");
	path[len] = '\0';
	if (len > 10 && strcmp(path + len - 10, " (deleted)") == 0) {
		path[len - 10] = '\0';
		m->deleted = 1;
	}
	m->path = strdup(path);
	return m->path ? 0 : -ENOMEM;
}

/* One line into @out (grown as needed); a line not of the format is skipped. */
static int append_line(struct procmaps *out, size_t *cap, char *line)
{
	int err;

	if (out->n == *cap) {
		struct mapping *nm;

		if (*cap >= MAX_MAPPINGS)
			return -E2BIG;
		nm = realloc(out->maps, (*cap ? *cap * 2 : 256) * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		out->maps = nm;
		*cap = *cap ? *cap * 2 : 256;
	}
	err = parse_line(line, &out->maps[out->n]);
	if (err == -EINVAL)
		return 0;
	if (!err)
		out->n++;
	return err;
}

/* The end of a read: an empty list is a zombie or a kernel thread. */
static int finish(struct procmaps *out, int err)
{
	/* lines but none of the format leave an array allocated: freed too */
	if (err || !out->n) {
		procmaps__free(out);
		return err ? err : -ESRCH;
	}
	return 0;
}

int procmaps__read(pid_t pid, struct procmaps *out)
{
	char fn[64], *line = NULL;
	size_t cap = 0, linecap = 0;
	int err = 0;
	FILE *f;

	out->maps = NULL;
	out->n = 0;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (!err && getline(&line, &linecap, f) > 0)
		err = append_line(out, &cap, line);
	/* Reading maps of a process we may not trace fails at read time. */
	if (!err && ferror(f))
		err = errno ? -errno : -EIO;
	free(line);
	fclose(f);
	return finish(out, err);
}

int procmaps__parse(const char *buf, size_t len, struct procmaps *out)
{
	size_t cap = 0, linecap = 0;
	char *line = NULL;
	int err = 0;

	out->maps = NULL;
	out->n = 0;
	while (!err && len) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) + 1 : len;

		if (n + 1 > linecap) {
			char *l = realloc(line, n + 1);

			if (!l) {
				err = -ENOMEM;
				break;
			}
			line = l;
			linecap = n + 1;
		}
		memcpy(line, buf, n);
		line[n] = '\0';
		err = append_line(out, &cap, line);
		buf += n;
		len -= n;
	}
	free(line);
	return finish(out, err);
}

void procmaps__free(struct procmaps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->maps[i].path);
	free(m->maps);
	m->maps = NULL;
	m->n = 0;
}

const struct mapping *procmaps__first(const struct procmaps *m, const char *path)
{
	const struct mapping *best = NULL;

	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->maps[i].path, path) != 0)
			continue;
		if (!best || m->maps[i].start < best->start)
			best = &m->maps[i];
	}
	return best;
}

int procmaps__open_file(pid_t pid, const struct mapping *map)
{
	struct stat st;
	int fd, pathfd;

	if (map->path[0] != '/')
		return -ENOENT;
	/* The very file the target maps, where we may (CAP_SYS_ADMIN). */
	fd = rootfs__open_mapped(pid, map->start, map->end, PROCMAPS_MAX_FILE, NULL);
	if (fd >= 0 || map->deleted)
		return fd;
	/* Its path in the target's root (a container): only an inode match is
	 * trusted, a file replaced since is not the one the target runs (the
	 * device is not compared: overlayfs reports another one). */
	fd = rootfs__open(pid, map->path, PROCMAPS_MAX_FILE, &st);
	if (fd >= 0 && st.st_ino == map->inode)
		return fd;
	if (fd >= 0)
		close(fd);
	/* Our own view of the path: a chroot sharing our mount namespace lists
	 * host paths in its maps. The very file only (device too), so the
	 * target learns nothing through it it could not read itself. */
	pathfd = open(map->path, O_PATH | O_CLOEXEC);
	if (pathfd < 0)
		return -errno;
	fd = rootfs__reopen(pathfd, PROCMAPS_MAX_FILE, &st);
	if (fd >= 0 && (st.st_ino != map->inode ||
			st.st_dev != makedev(map->dev_major, map->dev_minor))) {
		close(fd);
		fd = -ESTALE;
	}
	return fd;
}
