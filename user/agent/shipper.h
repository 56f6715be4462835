/* SPDX-License-Identifier: MIT */
/*
 * shipper.h - delivers one spool queue to one store, in order, on a thread
 * of its own (a slow store never holds up sampling). The oldest entry goes
 * first and is removed when the store took it (2xx). A store that is
 * away (no connection, a timeout, 5xx, 408, 429) is retried with a backoff
 * doubling from 1 s to the cap, and the entry waits: nothing is skipped.
 * A 4xx that will not change (a profile the store rejects) drops that
 * entry, said on stderr and counted, so one bad profile does not block
 * the rest.
 */
#ifndef PYPROF_AGENT_SHIPPER_H
#define PYPROF_AGENT_SHIPPER_H

#include <stddef.h>
#include <stdint.h>

struct http_auth;
struct push_kind;

struct shipper_opts {
	const struct push_kind *kind;
	const char *url;		/* the store's base URL */
	const char *qdir;		/* its spool queue */
	const struct http_auth *auth;	/* NULL: none */
	long timeout_ms;		/* per request */
	double backoff_max_s;
};

struct shipper_stats {
	uint64_t sent;		/* entries the store took */
	uint64_t rejected;	/* entries it refused for good (dropped) */
	uint64_t failures;	/* attempts that failed and will be retried */
	size_t queued;		/* entries waiting, as last seen */
};

struct shipper;

/* Start delivering @o's queue. 0 or -errno with one line in @err. */
int shipper__start(const struct shipper_opts *o, struct shipper **out, char *err,
		   size_t errlen);
/* An entry was put in the queue: deliver it now (unless backing off). */
void shipper__wake(struct shipper *s);
/* Deliver what is queued until CLOCK_MONOTONIC second @deadline, then
 * stop the thread (what is left stays in the spool). */
void shipper__stop(struct shipper *s, double deadline);
void shipper__stats(struct shipper *s, struct shipper_stats *st);
/* Stops it at once if it was not; accepts NULL. */
void shipper__free(struct shipper *s);

#endif
