/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the files of `pyprof-bpf dump` share, not for the rest
 * of the tree: dump.c runs it (one process or several), collect.c reads a
 * process's threads into struct dump_thread, render.c, render_text.c and
 * render_json.c write them, async.c is --async, core.c --core, source.c
 * each frame's line of source.
 */
#ifndef PYPROF_DUMP_INTERNAL_H
#define PYPROF_DUMP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "commands/dump.h"
#include "commands/dump/core.h"
#include "commands/dump/source.h"
#include "target/pyproc.h"
#include "target/stack_read.h"
#include "target/thread_state.h"
#include "target/thread_stop.h"

#define DUMP_MAX_THREADS 16384
#define DUMP_MAX_FRAMES 65536
/* dump_thread.truncated beside 1 and PY_WALK_LOOPED: cut at a read fault */
#define DUMP_CUT_FAULT 3
/* dump --core: the core holds zeros where the next frame is */
#define DUMP_CUT_CORE 4
/* --locals: names shown in one dump at most (LOCALS_MAX_PER_FRAME a frame) */
#define DUMP_MAX_LOCALS 4096
/* -a: processes looked at at most */
#define DUMP_MAX_PROCS 65536

struct py_sym;
struct symbolizer;
struct thread_names;

struct dump_thread {
	struct py_thread t;
	struct py_sym *syms;
	size_t nframes;
	int truncated;
	char name[64];		/* the kernel's comm */
	char op[48];		/* --opcodes: "[op] NAME"; "": not read */
	const char *pyname;	/* threading's name, whole; NULL: not known */
	struct py_thread_state st;
	size_t nraw;			/* frames walked (syms: those shown) */
	bool torn;			/* its stack kept changing while read */
	struct dump_loc *locs;		/* per shown frame, as syms */
	const char *kstack;		/* --kernel: names innermost first, '\n' apart */
	int64_t interp_id;		/* its interpreter's id; -1: unread */
};

#define DUMP_KSTACK_LEN 2048		/* a thread's kernel stack names */

/* A running thread changes its stack while we read it: a walk whose frames do
 * not all resolve is taken again, a few times, before it is reported. */
#define DUMP_ATTEMPTS 20

/* What one process's dump holds while it is read. */
struct dump_ctx {
	struct pyproc *p;
	struct symbolizer *sym;
	struct thread_names *names;
	struct py_thread *threads;	/* DUMP_MAX_THREADS */
	struct py_thread_state *st;	/* as threads */
	struct dump_thread *th;		/* as threads: what is shown */
	char *kst;			/* --kernel: DUMP_KSTACK_LEN a thread */
	struct stack_read sr;
	struct thread_stop stop;	/* --blocking */
	struct dump_core core;		/* --core */
	pid_t pid;			/* the process (a core's, as it was) */
	size_t n;
	size_t locals_left;
};

/* collect.c: reading one process's threads. */

/* The memory of a dump, and its reader. 0 or -ENOMEM (said in @err). */
int dump_ctx__open(const struct dump_opts *o, struct dump_ctx *c, char *err, size_t errlen);
void dump_ctx__free(struct dump_ctx *c);
/*
 * The threads (c->n into c->threads), their states (c->st) in one look, and
 * their Python names into c->names. 0, -ENOMEM, or a read error.
 */
int dump_ctx__list_threads(const struct dump_opts *o, struct dump_ctx *c);
/*
 * --kernel: each waiting thread's kernel stack into c->kst, read just after
 * its state (and before any --blocking stop, which would show the stop's
 * own). 0 or -ENOMEM.
 */
int dump_ctx__kernel_stacks(const struct dump_opts *o, struct dump_ctx *c);
/*
 * --blocking: the threads stopped for the walks (the list and states read
 * just before). 0, or -errno with @err.
 */
int dump_ctx__stop_threads(const struct dump_opts *o, struct dump_ctx *c, char *err,
			   size_t errlen);
/*
 * Each listed thread's stack, names, source positions and locals into
 * c->th. 0; -errno with @err set (*@said) or a read error for the caller.
 */
int dump_ctx__read_stacks(const struct dump_opts *o, struct dump_ctx *c, char *err,
			  size_t errlen, bool *said);

/* render.c: what the text and JSON dumps share. */

/* The kernel's state letter, said in words. */
const char *dump_render__kstate_word(char c);
/*
 * The notes on stderr, @before, then the dump of @n threads (@th) of @p
 * (@pid) as text or JSON. 0, or -EIO with @err.
 */
int dump_render__write(const struct dump_opts *o, FILE *out, const char *before,
		       struct pyproc *p, pid_t pid, const struct dump_thread *th, size_t n,
		       char *err, size_t errlen);
/* render_text.c */
void dump_render__text(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th,
		       size_t n);
/* render_json.c */
void dump_render__json(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th,
		       size_t n, int with_locals);

/* async.c: dump --async, the asyncio tasks of @o->pid. 0, or -errno with @err. */
int dump_async__run(const struct dump_opts *o, FILE *out, char *err, size_t errlen);

#endif
