/* SPDX-License-Identifier: MIT */
/*
 * procdir.h - the numbered entries of /proc (processes) and of
 * /proc/PID/task (a process's threads): the one iterator every scan of them
 * uses, and the one strict parse of an entry's name as an id.
 *
 *	struct procdir it;
 *	pid_t tid;
 *
 *	if (procdir__open_tids(&it, pid))
 *		...
 *	while (procdir__next(&it, &tid))
 *		...
 *	procdir__close(&it);
 */
#ifndef PYPROF_PROCDIR_H
#define PYPROF_PROCDIR_H

#include <dirent.h>
#include <stdbool.h>
#include <sys/types.h>

struct procdir {
	DIR *d;
};

/* Open /proc, its processes. 0 or -errno. */
int procdir__open_pids(struct procdir *it);
/* Open /proc/@pid/task, its threads. 0, -ESRCH when @pid is gone, or -errno. */
int procdir__open_tids(struct procdir *it, pid_t pid);
/*
 * The next process or thread into *@id: true, or false at the end (or on a
 * read error: a scan sees what it could). Entries that are no id (".",
 * "self", "sys") are skipped.
 */
bool procdir__next(struct procdir *it, pid_t *id);
/* Close @it; a closed or never opened (zeroed) one too. */
void procdir__close(struct procdir *it);

/* @name as an id: digits only, in [1, INT_MAX]. 0, or -EINVAL (*@id untouched). */
int procdir__parse_id(const char *name, pid_t *id);

#endif
