/* SPDX-License-Identifier: MIT */
/* dump.h - `pyprof-bpf dump`: every thread's Python stack, now. */
#ifndef PYPROF_DUMP_H
#define PYPROF_DUMP_H

#include <stdio.h>
#include <sys/types.h>

#define DUMP_MAX_PIDS 64

struct dump_opts {
	pid_t pid;		/* the first of pids */
	pid_t pids[DUMP_MAX_PIDS];	/* -p PID[,PID...] */
	size_t npids;
	int all;		/* -a: every Python process */
	int json;
	int async;	/* --async: asyncio tasks instead of thread stacks */
	int opcodes;		/* --opcodes: each thread's innermost instruction */
	int only_active;	/* --only-active: the thread holding the GIL only */
	int no_source;		/* --no-source: no line of source under each frame */
	int locals;		/* --locals: each frame's arguments and locals */
	int blocking;		/* --blocking: the threads stopped while read */
	int kernel;		/* --kernel: each thread's kernel stack */
	const char *core;	/* --core: a core file instead of a process */
	const char *exe;	/* --exe: its executable, where it is now */
	const char *root;	/* --root: the file system it ran in */
};

/* 0, or -errno with one line in @err. */
int dump__run(const struct dump_opts *o, FILE *out, char *err, size_t errlen);

#endif
