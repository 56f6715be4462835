/* SPDX-License-Identifier: MIT */
/*
 * pidwatch.h - is a process still running? Asked ten times a second for
 * the whole recording: a pidfd answers in one poll(2), where reading
 * /proc/PID/stat costs open, read and close (most of an idle recording's
 * CPU at 99 Hz). Kernels without pidfd_open (before 5.3), or a pid the
 * caller cannot open, fall back to /proc.
 */
#ifndef PYPROF_PIDWATCH_H
#define PYPROF_PIDWATCH_H

#include <stdbool.h>
#include <sys/types.h>

struct pidwatch {
	pid_t pid;
	int fd;			/* pidfd, or -1: /proc */
};

void pidwatch__open(struct pidwatch *w, pid_t pid);
void pidwatch__close(struct pidwatch *w);
/* False once the process has exited (a zombie included). */
bool pidwatch__alive(const struct pidwatch *w);

#endif
