/* SPDX-License-Identifier: MIT */
/* clock.c - see clock.h. */
#include <time.h>
#include "util/clock.h"

static uint64_t ns_of(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t mono_ns(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

uint64_t mono_coarse_ns(void)
{
	return ns_of(CLOCK_MONOTONIC_COARSE);
}

uint64_t realtime_ns(void)
{
	return ns_of(CLOCK_REALTIME);
}

double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void sleep_until_s(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9) };

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}
