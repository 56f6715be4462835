/* SPDX-License-Identifier: MIT */
/* procfs.h - small facts about a process from /proc: names and liveness. */
#ifndef PYPROF_PROCFS_H
#define PYPROF_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* The comm of @pid (@tid 0) or of its thread @tid; "" when it is gone. */
void procfs__comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* 1 while @pid exists and is not a zombie. */
int procfs__alive(pid_t pid);
/* 1 while thread @tid of @pid exists. */
int procfs__thread_alive(pid_t pid, pid_t tid);
/*
 * The live descendants of @pid (children, grandchildren...), parents
 * before their children, at most @max of them into @out. Sets *n; returns
 * 0, -E2BIG when there were more, or -errno.
 */
int procfs__descendants(pid_t pid, pid_t *out, size_t max, size_t *n);

#endif
