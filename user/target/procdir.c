// SPDX-License-Identifier: MIT
/*
 * procdir.c - /proc's processes and a process's threads, one entry at a
 * time (procdir.h). The kernel names them in decimal, without sign or
 * spaces: anything else is not an id, and is skipped rather than read as a
 * prefix (atoi) or through strtol's leniency.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include "target/procdir.h"

int procdir__parse_id(const char *name, pid_t *id)
{
	long v = 0;
	const char *c = name;

	if (!*c || *c == '0')	/* none, or 0 or a leading zero: not a kernel id */
		return -EINVAL;
	for (; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (*c - '0');
		if (v > INT_MAX)
			return -EINVAL;
	}
	*id = (pid_t)v;
	return 0;
}

static int open_dir(struct procdir *it, const char *path, int gone)
{
	it->d = opendir(path);
	if (!it->d)
		return errno == ENOENT ? gone : -errno;
	return 0;
}

int procdir__open_pids(struct procdir *it)
{
	return open_dir(it, "/proc", -ENOENT);
}

int procdir__open_tids(struct procdir *it, pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	return open_dir(it, path, -ESRCH);
}

bool procdir__next(struct procdir *it, pid_t *id)
{
	struct dirent *e;

	while (it->d && (e = readdir(it->d)))
		if (procdir__parse_id(e->d_name, id) == 0)
			return true;
	return false;
}

void procdir__close(struct procdir *it)
{
	if (it->d)
		closedir(it->d);
	it->d = NULL;
}
