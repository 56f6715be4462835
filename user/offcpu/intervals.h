/* SPDX-License-Identifier: MIT */
/*
 * intervals.h - off-CPU intervals in progress, one per thread: the stack and
 * the reason read as the thread left the CPU, kept until it runs again and
 * the interval's length is known (BPF backend, off-CPU modes).
 */
#ifndef PYPROF_OFFCPU_INTERVALS_H
#define PYPROF_OFFCPU_INTERVALS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "types/raw_sample.h"

#define OFFCPU_KSTACK_MAX 32

struct offcpu_iv {
	pid_t pid;
	pid_t tid;
	uint32_t cpu;
	uint64_t out_ns;		/* when it left the CPU */
	uint32_t status;		/* enum sample_status of the stack */
	uint32_t flags;			/* SAMPLE_F_* */
	int64_t syscall_nr;		/* -1: none known */
	uint64_t syscall_arg0;
	uint32_t nkstack;
	uint64_t kstack[OFFCPU_KSTACK_MAX];	/* innermost first */
	/* Opened at the recording's start for a thread found off the CPU
	 * then (its stack read from userspace). */
	bool seeded;
	/* An interval in progress; closed ones stay as the thread's last
	 * stack, which a switch-out not walked (PYPROF_SF_REUSE) stands on. */
	bool open;
	uint32_t nframes;
	struct py_rawframe *frames;	/* innermost first */
	uint32_t cap;
	/* --async: the task chain read as it left (one block: the tasks,
	 * then their frames and names); ntasks 0: none. */
	uint32_t ntasks, tasks_flags;
	struct sample_task *tasks;
};

struct offcpu_ivs;

int offcpu_ivs__new(struct offcpu_ivs **out);
void offcpu_ivs__free(struct offcpu_ivs *v);
/*
 * The interval of @tid, or NULL when it has none. With @create one is made
 * when missing (empty: no frames, no system call); NULL then means ENOMEM.
 * A pointer stays valid until the next __get with @create or __remove.
 */
struct offcpu_iv *offcpu_ivs__get(struct offcpu_ivs *v, pid_t tid, bool create);
/* Replace @iv's frames with a copy of @n frames. 0 or -ENOMEM (then none). */
/* Keep a copy of the task chain @t (@n tasks, SAMPLE_TF_* @flags; n 0:
 * none). 0 or -ENOMEM (then none is kept). */
int offcpu_iv__set_tasks(struct offcpu_iv *iv, const struct sample_task *t, uint32_t n,
			 uint32_t flags);
int offcpu_iv__set_frames(struct offcpu_iv *iv, const struct py_rawframe *f, uint32_t n);
void offcpu_ivs__remove(struct offcpu_ivs *v, pid_t tid);
/* Intervals in progress, and the @i-th of them (any order). */
size_t offcpu_ivs__count(const struct offcpu_ivs *v);
struct offcpu_iv *offcpu_ivs__at(struct offcpu_ivs *v, size_t i);

#endif
