/* SPDX-License-Identifier: MIT */
/*
 * perf_events.h - the event a recording samples at (`-e EVENT`, issue #35),
 * named as perf names it:
 *
 *   software: cpu-clock (the default), task-clock, page-faults (faults),
 *             minor-faults, major-faults, context-switches (cs),
 *             cpu-migrations (migrations), alignment-faults,
 *             emulation-faults
 *   hardware: cycles (cpu-cycles), instructions, cache-references,
 *             cache-misses, branches (branch-instructions), branch-misses,
 *             ref-cycles; only where the CPU's counters are exposed (the
 *             event is opened once on ourselves to find out)
 *   tracepoint: SUBSYS:NAME (syscalls:sys_enter_openat), its id read from
 *             tracefs (mounted at /sys/kernel/tracing when it is not)
 *
 * Names and tracepoint parts are checked before any path is built from
 * them ([A-Za-z0-9_]). Every error is one line naming the event.
 */
#ifndef PYPROF_SAMPLING_PERF_EVENTS_H
#define PYPROF_SAMPLING_PERF_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAMPLER_EVENT_NAME_MAX 128
/* -e EVENT,EVENT...: at most this many at once (the record's two bits). */
#define SAMPLER_MAX_EVENTS 4

struct sampler_event {
	char name[SAMPLER_EVENT_NAME_MAX];	/* perf's name (aliases resolved) */
	uint32_t type;				/* PERF_TYPE_* */
	uint64_t config;			/* the event, or the tracepoint's id */
	/* SUBSYS and NAME of a tracepoint (type PERF_TYPE_TRACEPOINT) */
	char subsys[64], tracepoint[64];
};

/*
 * @spec ("page-faults", "syscalls:sys_enter_openat") into @out. 0, or
 * -errno with a line in @err: -ENOENT (no such event or tracepoint),
 * -EINVAL (a malformed name), -EOPNOTSUPP (a hardware event without
 * counters), another from tracefs.
 */
int sampler_event__parse(const char *spec, struct sampler_event *out, char *err,
			 size_t errlen);

bool sampler_event__is_tracepoint(const struct sampler_event *e);
/* The default event's weight is nanoseconds of CPU: cpu-clock, task-clock. */
bool sampler_event__is_clock(const struct sampler_event *e);
/*
 * The period @e is sampled at without -c: 1 (every event) for a tracepoint
 * and for software events but the clocks, whose counts come in bursts the
 * kernel's frequency mode misjudges (page-faults at -F 99: periods of 1,
 * 30, 5,638, then 10,868,769, and no sample after); 0 (-F's rate) else.
 */
uint64_t sampler_event__default_period(const struct sampler_event *e);

#endif
