/* SPDX-License-Identifier: MIT */
/*
 * windows.h - a continuous recording cut into windows, one pprof per
 * process per window.
 *
 * Windows are aligned on the wall clock (window k is [k*W, (k+1)*W) in
 * UNIX time), so that the windows of every host line up. A sample goes to
 * the window of its time: none is in two, none between two. A window is
 * closed once its end is @grace past (samples come a little after they
 * were taken); a sample for a window already closed (a late one) goes to
 * the oldest one still open, and is counted.
 */
#ifndef PYPROF_AGENT_WINDOWS_H
#define PYPROF_AGENT_WINDOWS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct out_sample;
struct spool;

/* One process's profile of one window, closed and written. */
struct window_profile {
	pid_t pid;
	const char *comm;
	uint64_t from_ms, until_ms;	/* UNIX time */
	const char *entry;		/* its spool entry; the pprof at its tmp path */
	uint64_t samples;
};

/* Called for each profile a window closes: 0, or -errno (said, not fatal). */
typedef void (*window_closed_fn)(void *ctx, const struct window_profile *p);

/* A window's profile of @pid begins (its first sample, @comm): 0, or
 * -ENOMEM to fail the sample. */
typedef int (*window_opened_fn)(void *ctx, pid_t pid, const char *comm, uint64_t from_ms);

/* The comments of @pid's profile of a window (its labels, "key=value"),
 * asked just before it is written: *out stays valid until the next call. */
typedef void (*window_comments_fn)(void *ctx, pid_t pid, const char *const **out,
				   size_t *n);

struct windows_opts {
	double window_s;
	double grace_s;
	const char *mode;	/* "cpu", "wall"...: the pprof's sample type */
	struct spool *spool;
	window_opened_fn opened;	/* NULL: none */
	window_closed_fn closed;
	window_comments_fn comments;	/* NULL: none */
	void *ctx;
};

struct windows;

int windows__new(const struct windows_opts *o, struct windows **out);
void windows__free(struct windows *w);

/* @s into its window's profile of its process. 0 or -errno (-ENOMEM, a
 * write error of the profile). */
int windows__add(struct windows *w, const struct out_sample *s);
/* Close the windows that ended @grace before CLOCK_MONOTONIC @now_ns
 * (every window when @all); the number closed in *closed. 0 or -errno. */
int windows__close(struct windows *w, uint64_t now_ns, int all, unsigned int *closed);
/* When the next window to close may be closed (CLOCK_MONOTONIC s). */
double windows__next_close(const struct windows *w, uint64_t now_ns);

struct windows_stats {
	uint64_t samples;	/* taken in */
	uint64_t late;		/* of which came after their window closed */
	uint64_t profiles;	/* written */
	uint64_t windows;	/* closed */
	uint64_t closed_samples;	/* in the profiles written */
};
void windows__stats(const struct windows *w, struct windows_stats *st);

#endif
