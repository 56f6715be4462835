/* SPDX-License-Identifier: MIT */
/*
 * backend.h - what a sampling backend implements: one table of operations
 * (internal to sampling/; commands use sampler.h). sampler.c keeps the
 * table of backends, so that a new one (a BPF program built for another
 * kernel or architecture, say) is a new file defining its sampler_ops and
 * a line in that table.
 *
 * Every operation but open, poll, next_poll and close may be NULL: the
 * sampler then refuses it (-EOPNOTSUPP) or answers neutrally (no stats,
 * no detail, never exec'd, nothing left to finish). @b is what open made.
 */
#ifndef PYPROF_SAMPLING_BACKEND_H
#define PYPROF_SAMPLING_BACKEND_H

#include "sampling/sampler.h"

struct sampler_ops {
	const char *id;		/* "bpf": --backend's word, the raw recording's */
	const char *name;	/* "BPF": as said to the user */
	unsigned int caps;	/* enum sampler_cap */
	/* 0, or -errno with one line in @why: not usable here. */
	int (*available)(char *why, size_t len);
	/* Load, sampling @p (NULL: no target yet, with SAMPLER_CAP_PROCESSES). */
	int (*open)(struct pyproc *p, const struct sampler_opts *o, void **b, char *err,
		    size_t errlen);
	int (*set_target)(void *b, struct pyproc *p, char *err, size_t errlen);
	int (*add_process)(void *b, struct pyproc *p, char *err, size_t errlen);
	int (*track_process)(void *b, pid_t pid);
	void (*forget_process)(void *b, pid_t pid);
	int (*set_async)(void *b, pid_t pid, const struct sampler_async *a);
	int (*set_stack_end)(void *b, pid_t tid, uint64_t end);
	int (*poll)(void *b, const struct sampler_tool *t);
	double (*next_poll)(void *b, double started);
	void (*refresh)(void *b, double now);
	void (*stats)(const void *b, struct sampler_stats *st);
	void (*detail)(const void *b, struct sampler_detail *d);
	bool (*execed)(const void *b);
	int (*finish)(void *b, uint64_t end_ns, const struct sampler_tool *t);
	void (*close)(void *b);
};

/* The backends (bpf_backend.c, remote_backend.c). */
extern const struct sampler_ops bpf_sampler_ops;
extern const struct sampler_ops remote_sampler_ops;

#endif
