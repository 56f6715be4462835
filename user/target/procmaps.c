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

/* A sane bound: processes with more mappings exist, but not Python ones we
 * could not handle by stopping here with an error. */
#define MAX_MAPPINGS (1u << 20)

static int parse_line(char *line, struct mapping *m)
{
	unsigned long long start, end, off, ino;
	unsigned int maj, min;
	char perms[8];
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

int procmaps__read(pid_t pid, struct procmaps *out)
{
	char fn[64], *line = NULL;
	size_t cap = 0, linecap = 0;
	struct mapping *maps = NULL;
	size_t n = 0;
	int err = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &linecap, f) > 0) {
		if (n == cap) {
			struct mapping *nm;

			if (cap >= MAX_MAPPINGS) {
				err = -E2BIG;
				break;
			}
			cap = cap ? cap * 2 : 256;
			nm = realloc(maps, cap * sizeof(*maps));
			if (!nm) {
				err = -ENOMEM;
				break;
			}
			maps = nm;
		}
		err = parse_line(line, &maps[n]);
		if (err == -EINVAL) {
			err = 0;	/* not a line we understand: skip it */
			continue;
		}
		if (err)
			break;
		n++;
	}
	/* Reading maps of a process we may not trace fails at read time. */
	if (!err && ferror(f))
		err = -errno ? -errno : -EIO;
	free(line);
	fclose(f);
	out->maps = maps;
	out->n = n;
	if (err) {
		procmaps__free(out);
		return err;
	}
	if (n == 0)
		return -ESRCH;	/* a zombie or kernel thread: nothing mapped */
	return 0;
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
	char fn[PATH_MAX + 64];
	struct stat st;
	int fd;

	/* Through the target's root first (containers); then the path as we
	 * see it, since a chroot that shares our mount namespace lists host
	 * paths in its maps. A file replaced since it was mapped is not the one
	 * the target runs: only trust an inode match (the device is not
	 * compared: overlayfs reports another one). */
	for (int pass = 0; pass < 2 && map->path[0] == '/' && !map->deleted; pass++) {
		if (pass == 0)
			snprintf(fn, sizeof(fn), "/proc/%d/root%s", (int)pid, map->path);
		else
			snprintf(fn, sizeof(fn), "%s", map->path);
		fd = open(fn, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* our own view of a path must be the very file: device too */
		if (fstat(fd, &st) == 0 && st.st_ino == map->inode &&
		    (pass == 0 || st.st_dev == makedev(map->dev_major, map->dev_minor)))
			return fd;
		close(fd);
	}
	snprintf(fn, sizeof(fn), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		 map->start, map->end);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}
