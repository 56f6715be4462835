/* SPDX-License-Identifier: MIT */
/*
 * record_hold.h - records a poll met that cannot be taken inside it (a
 * sample or code snapshot of a process to be opened first, a process
 * event), held in order, deep-copied, until the recording applies them
 * between polls (record_path.c). Internal to the record command.
 *
 * Bounded: past HOLD_MAX_BYTES of held samples and snapshots, one more is
 * counted as lost (the summary says so), never silently dropped.
 */
#ifndef PYPROF_COMMANDS_RECORD_HOLD_H
#define PYPROF_COMMANDS_RECORD_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "types/raw_sample.h"

#define HOLD_MAX_BYTES (64u << 20)

enum held_kind {
	HELD_SAMPLE = 1,
	HELD_CODE,
	HELD_PROC,
};

struct held {
	enum held_kind kind;
	union {
		struct raw_sample s;	/* pointers into blob */
		struct raw_code c;	/* pointers into blob */
		struct {
			enum sampler_proc_event ev;
			pid_t pid, ppid;
			uint64_t ts_ns;
		} p;
	};
	void *blob;
	size_t bytes;
};

struct record_hold {
	struct held *v;
	size_t head, n, cap;	/* v[head..n) still held */
	size_t bytes;		/* of the blobs held */
	struct sampler_stats lost;	/* samples over the bound (or memory) */
	uint64_t lost_code;		/* code snapshots over it */
	uint64_t lost_events;		/* process events without memory */
};

/* Anything held? (Then whatever follows in the poll is held too, so that
 * the order stays the sampler's.) */
static inline bool record_hold__busy(const struct record_hold *h)
{
	return h->head < h->n;
}

/* Hold a copy of @r, @c, or a process event: 0, or -ENOSPC/-ENOMEM with
 * the record counted as lost. */
int record_hold__sample(struct record_hold *h, const struct raw_sample *r);
int record_hold__code(struct record_hold *h, const struct raw_code *c);
int record_hold__proc(struct record_hold *h, enum sampler_proc_event ev, pid_t pid, pid_t ppid,
		      uint64_t ts_ns);
/* The oldest record held, or NULL; record_hold__pop() releases it. */
struct held *record_hold__peek(struct record_hold *h);
void record_hold__pop(struct record_hold *h);
void record_hold__free(struct record_hold *h);

#endif
