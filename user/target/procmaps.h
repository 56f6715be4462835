/* SPDX-License-Identifier: MIT */
/*
 * procmaps.h - the file mappings of a process (/proc/PID/maps), and opening
 * a mapped file the way the target sees it, never anything else.
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
/* The same from the text of a maps file (tests, fuzzing): -ESRCH when empty. */
int procmaps__parse(const char *buf, size_t len, struct procmaps *out);
void procmaps__free(struct procmaps *m);

/* The lowest mapping of @path (the one that holds its ELF header). */
const struct mapping *procmaps__first(const struct procmaps *m, const char *path);

/* The largest mapped file opened (ELF files: libpython with its debug
 * information is ~100 MB). */
#define PROCMAPS_MAX_FILE ((uint64_t)4 << 30)

/*
 * Open the file behind @map read-only, as a regular file of at most
 * PROCMAPS_MAX_FILE bytes (rootfs.h): /proc/PID/map_files/S-E (the very
 * file; needs CAP_SYS_ADMIN), else PATH inside the target's root when it is
 * still the same inode, else PATH as we see it when it is the same device
 * and inode (a chroot in our mount namespace).
 * Returns an fd or -errno.
 */
int procmaps__open_file(pid_t pid, const struct mapping *map);

#endif
