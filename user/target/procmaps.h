/* SPDX-License-Identifier: MIT */
/*
 * procmaps.h - the file mappings of a process (/proc/PID/maps), and opening
 * a mapped file the way the target sees it: through /proc/PID/root (targets
 * in other mount namespaces), or /proc/PID/map_files when the file was
 * deleted or replaced since the target mapped it.
 */
#ifndef PYPROF_PROCMAPS_H
#define PYPROF_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mapping {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char perms[5];
	char *path;		/* as the target sees it, " (deleted)" removed */
	int deleted;
};

struct procmaps {
	struct mapping *maps;
	size_t n;
};

/* -ESRCH when the process is gone, -EPERM, -ENOMEM. */
int procmaps__read(pid_t pid, struct procmaps *out);
void procmaps__free(struct procmaps *m);

/* The lowest mapping of @path (the one that holds its ELF header). */
const struct mapping *procmaps__first(const struct procmaps *m, const char *path);

/*
 * Open the file behind @map read-only: /proc/PID/root/PATH, or PATH itself,
 * when it is still the same file (same inode), else /proc/PID/map_files/S-E
 * (which needs CAP_SYS_ADMIN).
 * Returns an fd or -errno.
 */
int procmaps__open_file(pid_t pid, const struct mapping *map);

#endif
