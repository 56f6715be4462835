/* SPDX-License-Identifier: MIT */
/*
 * top/top.c - `pyprof-bpf top`: record's pipeline (record__run with a
 * sink) feeding the aggregate, a refresh every --interval, keys between
 * refreshes. On a terminal the view is drawn with ncurses (screen.c); when
 * standard output is not one, each refresh prints a plain snapshot
 * (plain.c).
 */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "types/out_sample.h"
#include "output/output.h"
#include "commands/top/top.h"
#include "util/clock.h"

#define DEFAULT_INTERVAL 1.0
#define DEFAULT_WINDOW 5.0
#define DEFAULT_PLAIN_ROWS 20
#define EARLY_DRAW 0.25

struct top_opts {
	double interval;	/* --interval */
	double window;		/* --window */
	long rows;		/* --rows */
};

struct top {
	struct top_opts o;
	int live;			/* a terminal: the screen, else plain snapshots */
	struct top_agg *agg;		/* the shown event's: aggs[ev] */
	/* One aggregate per event (-e A,B: each its own unit), shown one at a time. */
	struct top_agg *aggs[SAMPLE_MAX_EVENTS];
	const char *evnames[SAMPLE_MAX_EVENTS];
	char evbuf[SAMPLE_MAX_EVENTS * 128];
	unsigned int naggs, ev;
	struct top_view view;
	struct top_screen *scr;
	struct record_info info;	/* with our copies of its strings */
	char comm[32], version[32], mode[16], backend[16];
	struct record_status status;
	double next_refresh;
	/* Until a draw has rows, the screen is drawn every EARLY_DRAW s
	 * (the buckets still turn once an interval): the first samples show
	 * at once. */
	double next_early;
	size_t drawn_rows;
	int paused;
	unsigned int buckets;
};

static const char top_doc[] =
"Watch where a Python process spends its time, live: its functions by own share\n"
"(the innermost frame) and total share (anywhere on the stack), over the last\n"
"few seconds or since the start, refreshed every second.\n"
"\n"
"USAGE: pyprof-bpf top -p PID[,PID...] [-F HZ] [--mode MODE] [OPTIONS]\n"
"       pyprof-bpf top [OPTIONS] -- CMD [ARGS...]\n"
"\v"
"Keys: q quit; o, t, n sort by own share, total share, name; s next sort\n"
"column; r recent window / since the start; l lines / functions only; ] and [\n"
"next and previous thread, a all threads; P next process (-a, several -p); e\n"
"next event (-e A,B: one event's counts at a time); p pause the refresh. Ctrl-C and SIGTERM end it too, and so does the target's\n"
"exit (with a message); the terminal is left as it was found. Own and total\n"
"are weighed by time (the sampling period; off-CPU: the interval's length);\n"
"OwnTime and TotalTime say it in seconds. At an event (-e) they count its\n"
"events (OwnEvents, AllEvents); in memory mode, bytes of pages (OwnBytes,\n"
"AllBytes).\n"
"\n"
"Without a terminal (standard output not one), each refresh prints the\n"
"snapshot as text, ended by an empty line, and the end one more, since the\n"
"start. With a command, top starts it and watches it until it exits; in the\n"
"live view its standard input, output and error are /dev/null, and leaving top\n"
"while it runs (q, -d) kills it. The sampling options are record's.\n"
"\n"
"EXAMPLES:\n"
"    sudo pyprof-bpf top -p 1234                  # live, 99 Hz\n"
"    sudo pyprof-bpf top -p 1234 -F 999 --mode wall  # on and off CPU\n"
"    sudo pyprof-bpf top -- python3 app.py        # start it and watch it\n"
"    sudo pyprof-bpf top -p 1234 --native         # C frames too\n"
"    sudo pyprof-bpf top -p 1234 --opcodes        # the instructions running\n"
"    sudo pyprof-bpf top -p 1234 -d 10 | tail -40  # text snapshots\n"
"    pyprof-bpf top -p 1234 --backend remote      # without BPF\n";

enum { OPT_INTERVAL = 2000, OPT_WINDOW, OPT_ROWS };

static const struct argp_option top_options[] = {
	{ "interval", OPT_INTERVAL, "SECONDS", 0, "Refresh every SECONDS (default 1)", 0 },
	{ "window", OPT_WINDOW, "SECONDS", 0, "The recent view covers the last SECONDS "
	  "(default 5)", 0 },
	{ "rows", OPT_ROWS, "N", 0, "Rows of each plain snapshot (default 20)", 0 },
	{ 0 },
};

static int parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max))
		return -EINVAL;
	*out = v;
	return 0;
}

static error_t top_parse(int key, char *arg, struct argp_state *state)
{
	struct top_opts *o = state->input;
	double v;

	switch (key) {
	case OPT_INTERVAL:
		if (parse_double(arg, 0.1, 60, &v))
			argp_error(state, "invalid interval (0.1 to 60 s): %s", arg);
		o->interval = v;
		break;
	case OPT_WINDOW:
		if (parse_double(arg, 0.1, 3600, &v))
			argp_error(state, "invalid window (0.1 to 3600 s): %s", arg);
		o->window = v;
		break;
	case OPT_ROWS:
		if (parse_double(arg, 1, 100000, &v) || v != (double)(long)v)
			argp_error(state, "invalid rows (1 to 100000): %s", arg);
		o->rows = (long)v;
		break;
	case ARGP_KEY_END:
		if (o->window < o->interval)
			argp_error(state, "the window (%g s) is shorter than the interval (%g s)",
				   o->window, o->interval);
		if (o->window / o->interval > 250)
			argp_error(state, "the window holds at most 250 intervals");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The snapshot of the view now, and show it. 0, 1 (stdout is gone: stop), -errno. */
static int render(struct top *t, double now, const struct top_view *view)
{
	struct top_snapshot snap = {
		.info = &t->info, .status = &t->status, .view = view,
		.window_s = t->buckets * t->o.interval, .paused = t->paused,
		.event = t->naggs > 1 ? t->evnames[t->ev] : t->info.event,
		.nevents = t->naggs,
	};
	size_t n = top_agg__nthreads(t->agg);
	int rc;

	if (view->thread != TOP_ALL_THREADS && (size_t)view->thread < n)
		snap.thread = top_agg__thread(t->agg, (size_t)view->thread);
	for (size_t i = 0; view->pid && !snap.process && i < n; i++)
		if (top_agg__thread(t->agg, i)->pid == view->pid)
			snap.process = top_agg__thread(t->agg, i);
	for (size_t i = 0; i < n; i++)
		if (top_agg__thread(t->agg, i)->recent)
			snap.active_threads++;
	snap.nthreads = n;
	snap.nprocs = top_agg__nprocs(t->agg);
	rc = top_agg__rows(t->agg, view, now, &snap.rows, &snap.nrows, &snap.totals);
	if (rc)
		return rc;
	if (t->live) {
		top_screen__draw(t->scr, &snap, NULL);
		t->drawn_rows = snap.nrows;
		return 0;
	}
	rc = top_plain__print(stdout, &snap, (size_t)t->o.rows);
	return rc == -EPIPE ? 1 : rc;
}

/* A refresh: show the window's buckets, then start the next one. */
static int top_refresh(struct top *t, double now)
{
	int rc = t->paused ? 0 : render(t, now, &t->view);

	for (unsigned int i = 0; i < t->naggs; i++)
		top_agg__rotate(t->aggs[i], now);
	t->next_refresh += t->o.interval;
	if (t->next_refresh <= now)	/* behind: no burst of refreshes */
		t->next_refresh = now + t->o.interval;
	return rc;
}

/* The thread after (@dir 1) or before (-1) @from, among those of the
 * process shown (all: any); TOP_ALL_THREADS past either end. */
static int step_thread(struct top *t, int from, int dir, int n)
{
	int i = from == TOP_ALL_THREADS ? (dir > 0 ? 0 : n - 1) : from + dir;

	for (; i >= 0 && i < n; i += dir)
		if (!t->view.pid || top_agg__thread(t->agg, (size_t)i)->pid == t->view.pid)
			return i;
	return TOP_ALL_THREADS;
}

/* The process after @pid (0: the first) in the order they were seen; 0
 * (every process) after the last. */
static pid_t next_process(struct top *t, pid_t pid, int n)
{
	int past = !pid;

	for (int i = 0; i < n; i++) {
		pid_t p = top_agg__thread(t->agg, (size_t)i)->pid;
		int first = 1;

		for (int k = 0; k < i && first; k++)	/* its first thread only */
			first = top_agg__thread(t->agg, (size_t)k)->pid != p;
		if (!first)
			continue;
		if (past)
			return p;
		past = p == pid;
	}
	return 0;
}

/* 0, or 1 to quit. */
static int on_key(struct top *t, int key)
{
	struct top_view *v = &t->view;
	int n = (int)top_agg__nthreads(t->agg);

	switch (key) {
	case 'q':
	case 'Q':
		return 1;
	case 'o':
		v->sort = TOP_SORT_OWN;
		break;
	case 't':
		v->sort = TOP_SORT_TOTAL;
		break;
	case 'n':
		v->sort = TOP_SORT_NAME;
		break;
	case 's':
	case '\t':
		v->sort = (v->sort + 1) % TOP_SORT__COUNT;
		break;
	case 'r':
	case 'c':
		v->recent = !v->recent;
		break;
	case 'l':
		v->lines = !v->lines;
		break;
	case ']':
	case TOP_KEY_RIGHT:
		v->thread = step_thread(t, v->thread, 1, n);
		break;
	case '[':
	case TOP_KEY_LEFT:
		v->thread = step_thread(t, v->thread, -1, n);
		break;
	case 'a':
		v->thread = TOP_ALL_THREADS;
		break;
	case 'P':
		v->pid = next_process(t, v->pid, n);
		v->thread = TOP_ALL_THREADS;
		break;
	case 'p':
	case ' ':
		t->paused = !t->paused;
		break;
	case 'e':	/* the next event's counts (its own threads: all of them) */
		t->ev = (t->ev + 1) % t->naggs;
		t->agg = t->aggs[t->ev];
		v->thread = TOP_ALL_THREADS;
		break;
	default:	/* TOP_KEY_RESIZE, and any other key: drawn again */
		break;
	}
	return 0;
}

/* -e A,B: an aggregate per event, named as @joined names them; else one. */
static void split_events(struct top *t, const char *joined)
{
	t->naggs = output__split_events(joined, t->evbuf, sizeof(t->evbuf), t->evnames);
	if (!t->naggs)
		t->evnames[t->naggs++] = joined;
}

static int top_start(void *ctx, const struct record_info *info, char *err, size_t errlen)
{
	struct top *t = ctx;
	int rc = 0;

	t->info = *info;
	snprintf(t->comm, sizeof(t->comm), "%s", info->comm);
	snprintf(t->version, sizeof(t->version), "%s", info->python_version);
	snprintf(t->mode, sizeof(t->mode), "%s", info->mode);
	snprintf(t->backend, sizeof(t->backend), "%s", info->backend);
	t->info.comm = t->comm;
	t->info.python_version = t->version;
	t->info.mode = t->mode;
	t->info.backend = t->backend;
	/* Whole intervals, rounded up. */
	t->buckets = (unsigned int)(t->o.window / t->o.interval + 0.999);
	split_events(t, info->event);
	for (unsigned int i = 0; i < t->naggs && !rc; i++)
		rc = top_agg__new(t->buckets, &t->aggs[i]);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	t->agg = t->aggs[0];
	if (t->live) {
		rc = top_screen__open(&t->scr, err, errlen);
		if (rc == -ENOTTY) {
			/* TERM=dumb, an unknown TERM: the text snapshots still work. */
			fprintf(stderr, "pyprof-bpf: %s: plain snapshots instead\n", err);
			err[0] = '\0';
			t->live = 0;
		} else if (rc) {
			return rc;
		}
	}
	t->next_refresh = mono_s();
	for (unsigned int i = 0; i < t->naggs; i++)
		top_agg__rotate(t->aggs[i], t->next_refresh);
	t->next_refresh += t->o.interval;
	t->next_early = mono_s() + EARLY_DRAW;
	return t->live ? render(t, mono_s(), &t->view) : 0;
}

static int top_sample(void *ctx, const struct out_sample *s)
{
	struct top *t = ctx;
	unsigned int i = 0;

	while (t->naggs > 1 && i + 1 < t->naggs && s->event && strcmp(s->event, t->evnames[i]))
		i++;
	return top_agg__add(t->aggs[i], s);
}

static int top_wait(void *ctx, double until, const struct record_status *st)
{
	struct top *t = ctx;
	double now;
	int rc, key;

	t->status = *st;
	for (;;) {
		double stop;

		now = mono_s();
		if (now >= t->next_refresh) {
			rc = top_refresh(t, now);
			if (rc)
				return rc;
		}
		if (t->live && !t->drawn_rows && now >= t->next_early) {
			t->next_early = now + EARLY_DRAW;
			rc = render(t, now, &t->view);
			if (rc)
				return rc;
		}
		if (now >= until)
			return 0;
		stop = until < t->next_refresh ? until : t->next_refresh;
		if (t->live && !t->drawn_rows && t->next_early < stop)
			stop = t->next_early;
		/* No key before stop: sleep up to it (keys from a file that
		 * ended come back at once). */
		key = t->live ? top_screen__key(t->scr, stop) : -1;
		if (key < 0) {
			struct timespec ts = { .tv_sec = (time_t)stop,
					       .tv_nsec = (long)((stop - (time_t)stop) * 1e9) };

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			continue;
		}
		if (on_key(t, key))
			return 1;
		rc = render(t, mono_s(), &t->view);
		if (rc)
			return rc;
	}
}

static void top_end(void *ctx, const char *why, const struct record_status *st)
{
	struct top *t = ctx;
	struct top_view all = t->view;

	t->status = *st;
	if (t->live) {
		top_screen__close(t->scr);
		t->scr = NULL;
	} else if (t->agg) {
		/* The last snapshot: everything since the start, of each event. */
		all.recent = 0;
		all.thread = TOP_ALL_THREADS;
		for (t->ev = 0; t->ev < t->naggs; t->ev++) {
			t->agg = t->aggs[t->ev];
			render(t, mono_s(), &all);
		}
	}
	if (why)
		fprintf(stderr, "pyprof-bpf: %s\n", why);
}

int top__main(int argc, char **argv)
{
	struct top t = {
		.o = { .interval = DEFAULT_INTERVAL, .window = DEFAULT_WINDOW,
		       .rows = DEFAULT_PLAIN_ROWS },
		.live = isatty(STDOUT_FILENO),
		.view = { .recent = 1, .thread = TOP_ALL_THREADS, .sort = TOP_SORT_OWN },
	};
	static const struct argp top_argp = { .options = top_options, .parser = top_parse };
	const struct record_sink sink = {
		.doc = top_doc, .argp = &top_argp, .argp_input = &t.o, .ctx = &t,
		.quiet_command = t.live,
		.start = top_start, .sample = top_sample, .wait = top_wait, .end = top_end,
	};
	int rc;

	rc = record__run(argc, argv, &sink);
	/* An error before end(): the screen, if it was taken, goes back first. */
	top_screen__close(t.scr);
	for (unsigned int i = 0; i < t.naggs; i++)
		top_agg__free(t.aggs[i]);
	return rc;
}
