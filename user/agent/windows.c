/* SPDX-License-Identifier: MIT */
/* windows.c - a continuous recording cut into windows (windows.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/spool.h"
#include "agent/windows.h"
#include "output/output.h"
#include "util/clock.h"

struct window_proc {
	pid_t pid;
	char comm[32];
	struct output *out;
	char entry[SPOOL_ENTRY_LEN];
	uint64_t samples;
};

struct window {
	uint64_t index;			/* [index * W, (index + 1) * W) UNIX time */
	struct window_proc *procs;
	size_t n, cap;
	size_t last;			/* the proc of the last sample: a hint */
};

struct windows {
	struct windows_opts o;
	uint64_t window_ns, grace_ns;
	int64_t real_off_ns;		/* CLOCK_REALTIME - CLOCK_MONOTONIC */
	/* The first window begins when the agent does, the last ends when it
	 * stops: an agent restarted within a window makes its own profile of
	 * the rest of that window, which is no other's (spool entries are
	 * named by their start, to the ms). */
	uint64_t start_ms;
	struct window *open;		/* in index order */
	size_t nopen, capopen;
	uint64_t closed_below;		/* windows before this index are closed */
	struct windows_stats st;
};

int windows__new(const struct windows_opts *o, struct windows **out)
{
	struct windows *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->window_ns = (uint64_t)(o->window_s * 1e9);
	w->grace_ns = (uint64_t)(o->grace_s * 1e9);
	w->real_off_ns = (int64_t)(realtime_ns() - mono_ns());
	w->start_ms = realtime_ns() / 1000000;
	*out = w;
	return 0;
}

static void window_free(struct window *win)
{
	for (size_t i = 0; i < win->n; i++)
		output__free(win->procs[i].out);
	free(win->procs);
	memset(win, 0, sizeof(*win));
}

void windows__free(struct windows *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nopen; i++)
		window_free(&w->open[i]);
	free(w->open);
	free(w);
}

/* Window @index's start, UNIX ms: the agent's start for the first. */
static uint64_t from_ms(const struct windows *w, uint64_t index)
{
	uint64_t from = index * (w->window_ns / 1000000);

	return from < w->start_ms ? w->start_ms : from;
}

static uint64_t index_of(const struct windows *w, uint64_t mono)
{
	return (uint64_t)((int64_t)mono + w->real_off_ns) / w->window_ns;
}

/* The open window of @index (opened), NULL when out of memory. */
static struct window *window_at(struct windows *w, uint64_t index)
{
	size_t i;

	if (index < w->closed_below) {
		index = w->closed_below;	/* late: the oldest one open */
		w->st.late++;
	}
	for (i = 0; i < w->nopen && w->open[i].index < index; i++)
		;
	if (i < w->nopen && w->open[i].index == index)
		return &w->open[i];
	if (w->nopen == w->capopen) {
		size_t cap = w->capopen ? 2 * w->capopen : 4;
		struct window *v = realloc(w->open, cap * sizeof(*v));

		if (!v)
			return NULL;
		w->open = v;
		w->capopen = cap;
	}
	memmove(&w->open[i + 1], &w->open[i], (w->nopen - i) * sizeof(*w->open));
	memset(&w->open[i], 0, sizeof(*w->open));
	w->open[i].index = index;
	w->nopen++;
	return &w->open[i];
}

/* @win's profile of @s's process (made), or NULL with *rc. */
static struct window_proc *proc_of(struct windows *w, struct window *win,
				   const struct out_sample *s, int *rc)
{
	struct output_opts oo = { .mode = w->o.mode };
	char path[4096];
	struct window_proc *p;

	if (win->last < win->n && win->procs[win->last].pid == s->pid)
		return &win->procs[win->last];
	for (size_t i = 0; i < win->n; i++)
		if (win->procs[i].pid == s->pid)
			return &win->procs[win->last = i];
	if (win->n == win->cap) {
		size_t cap = win->cap ? 2 * win->cap : 8;

		p = realloc(win->procs, cap * sizeof(*p));
		if (!p) {
			*rc = -ENOMEM;
			return NULL;
		}
		win->procs = p;
		win->cap = cap;
	}
	p = &win->procs[win->n];
	memset(p, 0, sizeof(*p));
	p->pid = s->pid;
	snprintf(p->comm, sizeof(p->comm), "%s", s->comm ? s->comm : "");
	spool__entry_name(from_ms(w, win->index), s->pid, p->entry, sizeof(p->entry));
	spool__tmp_path(w->o.spool, p->entry, path, sizeof(path));
	oo.start_time_ns = from_ms(w, win->index) * 1000000;
	oo.duration_ns = (win->index + 1) * w->window_ns - oo.start_time_ns;
	*rc = output__new("pprof", path, &oo, &p->out, NULL, 0);
	if (!*rc && w->o.opened)
		*rc = w->o.opened(w->o.ctx, p->pid, p->comm, from_ms(w, win->index));
	if (*rc) {
		output__free(p->out);
		p->out = NULL;
		return NULL;
	}
	win->last = win->n++;
	return p;
}

int windows__add(struct windows *w, const struct out_sample *s)
{
	struct window *win = window_at(w, index_of(w, s->ts_ns));
	struct window_proc *p;
	int rc = -ENOMEM;

	if (!win || !(p = proc_of(w, win, s, &rc)))
		return rc;
	rc = output__add(p->out, s);
	if (rc)
		return rc;
	p->samples++;
	w->st.samples++;
	return 0;
}

/* Write @win's profiles and hand each to the closed callback; @end_ms
 * (UNIX) cuts its end short (the agent stops). */
static int window_close(struct windows *w, struct window *win, uint64_t end_ms)
{
	uint64_t until = (win->index + 1) * (w->window_ns / 1000000);

	if (end_ms && end_ms < until && end_ms > from_ms(w, win->index))
		until = end_ms;
	int first_rc = 0;

	for (size_t i = 0; i < win->n; i++) {
		struct window_proc *p = &win->procs[i];
		struct window_profile wp = {
			.pid = p->pid, .comm = p->comm, .entry = p->entry,
			.from_ms = from_ms(w, win->index), .until_ms = until,
			.samples = p->samples,
		};
		int rc;

		/* The last window, cut short at the stop, lasted that long. */
		output__set_duration(p->out, (until - wp.from_ms) * 1000000);
		if (w->o.comments) {
			const char *const *comments;
			size_t ncomments;

			w->o.comments(w->o.ctx, p->pid, &comments, &ncomments);
			output__set_comments(p->out, comments, ncomments);
		}
		rc = output__finish(p->out);

		output__free(p->out);
		p->out = NULL;
		if (rc) {
			if (!first_rc)
				first_rc = rc;
			continue;
		}
		w->st.profiles++;
		w->st.closed_samples += p->samples;
		w->o.closed(w->o.ctx, &wp);
	}
	w->st.windows++;
	window_free(win);
	return first_rc;
}

int windows__close(struct windows *w, uint64_t now_ns, int all, unsigned int *closed)
{
	uint64_t now_index = index_of(w, now_ns > w->grace_ns ? now_ns - w->grace_ns : 0);
	int first_rc = 0;

	*closed = 0;
	while (w->nopen && (all || w->open[0].index < now_index)) {
		int rc;

		if (w->open[0].index + 1 > w->closed_below)
			w->closed_below = w->open[0].index + 1;
		rc = window_close(w, &w->open[0], all ? realtime_ns() / 1000000 : 0);
		if (rc && !first_rc)
			first_rc = rc;
		w->nopen--;
		memmove(&w->open[0], &w->open[1], w->nopen * sizeof(*w->open));
		(*closed)++;
	}
	/* Windows with no sample close too: a late sample never goes back. */
	if (!all && now_index > w->closed_below)
		w->closed_below = now_index;
	return first_rc;
}

double windows__next_close(const struct windows *w, uint64_t now_ns)
{
	uint64_t next = (index_of(w, now_ns) + 1) * w->window_ns;

	return (double)((int64_t)next - w->real_off_ns + (int64_t)w->grace_ns) / 1e9;
}

void windows__stats(const struct windows *w, struct windows_stats *st)
{
	*st = w->st;
}
