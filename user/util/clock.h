/* SPDX-License-Identifier: MIT */
/*
 * clock.h - the one monotonic clock every stage reads: CLOCK_MONOTONIC,
 * the clock of bpf_ktime_get_ns() and of the samples' ts_ns.
 */
#ifndef PYPROF_UTIL_CLOCK_H
#define PYPROF_UTIL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t mono_ns(void);
/* CLOCK_MONOTONIC_COARSE in nanoseconds: a tick's resolution, for cheap
 * "has a second gone by" checks. */
uint64_t mono_coarse_ns(void);
/* CLOCK_REALTIME in nanoseconds: wall-clock time, for the formats that date a recording. */
uint64_t realtime_ns(void);
/* CLOCK_MONOTONIC in seconds. */
double mono_s(void);
/* Sleep until CLOCK_MONOTONIC reaches @t seconds (a signal ends it early). */
void sleep_until_s(double t);

#endif
