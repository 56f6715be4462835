/* SPDX-License-Identifier: MIT */
/* shipper.c - one spool queue to one store, on its own thread (shipper.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agent/http.h"
#include "agent/push.h"
#include "agent/shipper.h"
#include "agent/spool.h"
#include "util/clock.h"

struct shipper {
	struct shipper_opts o;
	struct http *http;
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int woken;		/* an entry came since the queue was last seen empty */
	int stopping;
	double deadline;	/* while stopping: CLOCK_MONOTONIC s */
	struct shipper_stats st;
	/* The thread's own: */
	double backoff_s;
	int failing;		/* the last attempt failed */
	uint64_t failed_since;	/* failures in this outage */
};

/* Wait on the condition until CLOCK_MONOTONIC second @until (the
 * condition's clock: shipper__start), a wake or a stop; with the lock held. */
static void wait_until(struct shipper *s, double until)
{
	struct timespec ts;

	if (until <= 0) {
		pthread_cond_wait(&s->cond, &s->lock);
		return;
	}
	ts.tv_sec = (time_t)until;
	ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
	pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

static int status_retried(long status)
{
	return status >= 500 || status == 408 || status == 429;
}

/* @entry is done with (taken by the store, or dropped for good): out of
 * the queue, counted in @counter. */
static void settle(struct shipper *s, const char *entry, uint64_t *counter)
{
	spool_queue__remove(s->o.qdir, entry);
	pthread_mutex_lock(&s->lock);
	(*counter)++;
	pthread_mutex_unlock(&s->lock);
}

/* The store took one: said once after an outage; the backoff starts over. */
static void delivered(struct shipper *s, const char *entry)
{
	if (s->failing)
		fprintf(stderr, "pyprof-bpf agent: %s %s: delivering again, after %llu "
			"failed attempts\n", s->o.kind->name, s->o.url,
			(unsigned long long)s->failed_since);
	s->failing = 0;
	s->failed_since = 0;
	s->backoff_s = 0;
	settle(s, entry, &s->st.sent);
}

/* The store is away (@err): said once an outage; the backoff doubles. */
static void failed(struct shipper *s, const char *err)
{
	if (!s->failing)
		fprintf(stderr, "pyprof-bpf agent: %s %s: %s; profiles wait in the spool, "
			"retried with a backoff up to %.0f s\n", s->o.kind->name, s->o.url, err,
			s->o.backoff_max_s);
	s->failing = 1;
	s->failed_since++;
	s->backoff_s = s->backoff_s ? s->backoff_s * 2 : 1;
	if (s->backoff_s > s->o.backoff_max_s)
		s->backoff_s = s->o.backoff_max_s;
	pthread_mutex_lock(&s->lock);
	s->st.failures++;
	pthread_mutex_unlock(&s->lock);
}

/* A 2xx whose body says the store rejected profiles all the same (OTLP's
 * partial success): said, and true. Such a profile is not sent again. */
static int partly_rejected(struct shipper *s, const char *entry)
{
	char why[256] = "";
	const void *answer;
	size_t len;
	long n;

	if (!s->o.kind->rejected)
		return 0;
	answer = http__answer(s->http, &len);
	n = s->o.kind->rejected(answer, len, why, sizeof(why));
	if (n <= 0)
		return 0;
	fprintf(stderr, "pyprof-bpf agent: %s %s: profile %s taken, but %ld of its profiles "
		"rejected (%s)\n", s->o.kind->name, s->o.url, entry, n, why[0] ? why : "no reason given");
	return 1;
}

/* One attempt at @entry: 0 delivered or dropped for good, 1 to retry. */
static int deliver(struct shipper *s, const char *entry)
{
	struct push_request req;
	void *body = NULL;
	char *meta = NULL, err[512] = "";
	size_t blen = 0;
	long status = 0;
	int rc;

	rc = spool_queue__read(s->o.qdir, entry, &body, &blen, &meta);
	if (rc == -ENOENT)
		return 0;		/* the spool's bound dropped it */
	if (!rc)
		rc = s->o.kind->request(s->http, s->o.url, meta, body, blen, &req);
	if (!rc) {
		rc = http__post(s->http, &(struct http_post){ .url = req.url,
			.content_type = req.content_type,
			.content_encoding = req.content_encoding, .body = req.body, .len = req.len,
			.auth = s->o.auth, .timeout_ms = s->o.timeout_ms }, &status, err,
			sizeof(err));
		push_request__free(&req);
	} else {
		snprintf(err, sizeof(err), "it is unusable: %s", strerror(-rc));
		status = 400;		/* ours, for good: never retried */
		rc = 0;
	}
	free(body);
	free(meta);
	if (!rc && status >= 200 && status <= 299 && partly_rejected(s, entry)) {
		settle(s, entry, &s->st.rejected);
		return 0;
	}
	if (!rc && status >= 200 && status <= 299) {
		delivered(s, entry);
		return 0;
	}
	if (!rc && !status_retried(status)) {
		fprintf(stderr, "pyprof-bpf agent: %s %s: profile %s refused (%s); dropped\n",
			s->o.kind->name, s->o.url, entry, err);
		settle(s, entry, &s->st.rejected);
		return 0;
	}
	failed(s, err);
	return 1;
}

/* Back off after a failure: until the backoff is over or, stopping, the
 * deadline; with the lock held. */
static void back_off(struct shipper *s)
{
	double until = mono_s() + s->backoff_s;

	for (;;) {
		double t = s->stopping && s->deadline < until ? s->deadline : until;

		if (mono_s() >= t)
			return;
		wait_until(s, t);
	}
}

/* Wait for an entry (with the lock held): 0, or 1 when the thread is done. */
static int wait_entries(struct shipper *s)
{
	if (s->stopping)
		return 1;		/* stopping, and nothing left */
	if (!s->woken)
		wait_until(s, 0);
	s->woken = 0;
	return 0;
}

static void *run(void *arg)
{
	struct shipper *s = arg;
	struct spool_entry *batch = NULL;
	size_t n = 0, i = 0;

	for (;;) {
		int stop;

		/* One listing of the queue, delivered to its end, then the next:
		 * a backlog costs one readdir per listing, not one per entry. */
		if (i == n) {
			pthread_mutex_lock(&s->lock);
			s->woken = 0;	/* a wake after this is seen below */
			pthread_mutex_unlock(&s->lock);
			free(batch);
			if (spool_queue__list(s->o.qdir, &batch, &n))
				n = 0;
			i = 0;
		}
		pthread_mutex_lock(&s->lock);
		s->st.queued = n - i;
		stop = s->stopping && (i == n || mono_s() >= s->deadline);
		if (!stop && i == n)
			stop = wait_entries(s);
		pthread_mutex_unlock(&s->lock);
		if (stop)
			break;
		if (i == n)
			continue;
		if (!deliver(s, batch[i].name)) {
			i++;
			continue;
		}
		pthread_mutex_lock(&s->lock);
		back_off(s);
		pthread_mutex_unlock(&s->lock);
	}
	/* What is left, published after the last listing too. */
	free(batch);
	if (spool_queue__list(s->o.qdir, &batch, &n))
		n = 0;
	free(batch);
	pthread_mutex_lock(&s->lock);
	s->st.queued = n;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int shipper__start(const struct shipper_opts *o, struct shipper **out, char *err,
		   size_t errlen)
{
	struct shipper *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int rc;

	if (!s)
		return -ENOMEM;
	s->o = *o;
	rc = http__new(&s->http);
	if (rc) {
		snprintf(err, errlen, "%s %s: no HTTP client: %s", o->kind->name, o->url,
			 strerror(-rc));
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&s->thread, NULL, run, s);
	if (rc) {
		snprintf(err, errlen, "%s %s: no thread: %s", o->kind->name, o->url,
			 strerror(-rc));
		shipper__free(s);
		return rc;
	}
	s->started = 1;
	*out = s;
	return 0;
}

void shipper__wake(struct shipper *s)
{
	pthread_mutex_lock(&s->lock);
	s->woken = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void shipper__stop(struct shipper *s, double deadline)
{
	if (!s || !s->started)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	s->deadline = deadline;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	s->started = 0;
}

void shipper__stats(struct shipper *s, struct shipper_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}

void shipper__free(struct shipper *s)
{
	if (!s)
		return;
	shipper__stop(s, 0);
	http__free(s->http);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
