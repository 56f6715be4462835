/* SPDX-License-Identifier: MIT */
/* agent.c - `pyprof-bpf agent`: continuous profiling (agent.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent.h"
#include "agent/agent_options.h"
#include "agent/labels.h"
#include "agent/push.h"
#include "agent/shipper.h"
#include "agent/spool.h"
#include "agent/windows.h"
#include "commands/record.h"
#include "output/tables.h"		/* out_fnv1a() */
#include "types/out_sample.h"
#include "target/procset.h"
#include "util/clock.h"
#include "util/errbuf.h"
#include "util/file.h"

#define GRACE_S 1.0		/* a window closes this long after its end */
#define DEFAULT_SPOOL "/var/lib/pyprof-bpf/spool"
#define BACKOFF_MAX_S 30.0

/* What the agent knows of a process it sampled, read once per window. */
struct agent_proc {
	pid_t pid;
	uint64_t from_ms;		/* the window its labels were read for */
	struct proc_labels labels;
	char version[16];
};

struct agent {
	struct agent_opts o;
	/* the recording's, copied: what record__run passes lives on its
	 * caller's stack (its strings and procset outlive the agent's use) */
	struct record_info info_copy;
	const struct record_info *info;
	char host[LABEL_VALUE_MAX];
	char spool_path[4096];
	struct spool *spool;
	struct windows *win;
	char *queues[AGENT_MAX_PUSH];
	struct shipper *ship[AGENT_MAX_PUSH];
	size_t nship;
	struct agent_proc *procs;
	size_t nprocs, capprocs;
	uint64_t dropped;		/* spooled profiles the bounds dropped */
	int started;
	int err;			/* a sample the windows could not take */
	double next_prune;		/* --retain's next look (CLOCK_MONOTONIC s) */
	/* The comments of the profile being written (comments_of()). */
	char comment_text[5 + AGENT_MAX_LABELS][LABEL_NAME_MAX + LABEL_VALUE_MAX + 2];
	const char *comment_ptrs[5 + AGENT_MAX_LABELS];
};

static struct agent_proc *proc_of(struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	return NULL;
}

/*
 * A window's profile of @pid begins: its labels read (again: by now the
 * pid may be another process's), once per process per window, never per
 * sample.
 */
static int on_opened(void *ctx, pid_t pid, const char *comm, uint64_t from_ms)
{
	struct agent *a = ctx;
	struct agent_proc *p = proc_of(a, pid);
	struct proc_entry *e;

	if (!p) {
		if (a->nprocs == a->capprocs) {
			size_t cap = a->capprocs ? 2 * a->capprocs : 16;
			struct agent_proc *v = realloc(a->procs, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			a->procs = v;
			a->capprocs = cap;
		}
		p = &a->procs[a->nprocs++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
	}
	p->from_ms = from_ms;
	labels__read(pid, comm, &p->labels);
	e = a->info && a->info->procs ? procset__find(a->info->procs, pid) : NULL;
	labels__clean(e && e->version[0] ? e->version : "", 16, p->version, sizeof(p->version));
	return 0;
}

/* The text of @p's meta (spool.h): the caller frees it; NULL on ENOMEM. */
static char *meta_of(struct agent *a, const struct window_profile *wp,
		     const struct agent_proc *p)
{
	char comm[64], *m = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&m, &len);

	if (!f)
		return NULL;
	labels__clean(wp->comm, strlen(wp->comm), comm, sizeof(comm));
	fprintf(f, "from_ms=%llu\nuntil_ms=%llu\npid=%d\nservice_name=%s\nhost=%s\nmode=%s\n"
		"comm=%s\nsamples=%llu\n", (unsigned long long)wp->from_ms,
		(unsigned long long)wp->until_ms, (int)wp->pid,
		p ? p->labels.service : comm, a->host, a->info ? a->info->mode : "cpu", comm,
		(unsigned long long)wp->samples);
	if (p && p->version[0])
		fprintf(f, "python_version=%s\n", p->version);
	if (p && p->labels.container[0])
		fprintf(f, "container_id=%s\n", p->labels.container);
	for (size_t i = 0; p && i < p->labels.nresource; i++)
		fprintf(f, "resource.%s=%s\n", p->labels.resource[i].key,
			p->labels.resource[i].value);
	for (size_t i = 0; i < a->o.nlabels; i++)
		fprintf(f, "label.%s=%s\n", a->o.labels[i].name, a->o.labels[i].value);
	if (fclose(f)) {
		free(m);
		return NULL;
	}
	return m;
}

/* The labels inside the profile too (pprof comments): a file of
 * --output-dir says what it is without its name. */
static void comments_of(void *ctx, pid_t pid, const char *const **out, size_t *n)
{
	struct agent *a = ctx;
	const struct agent_proc *p = proc_of(a, pid);
	size_t k = 0;

#define COMMENT(...) snprintf(a->comment_text[k], sizeof(a->comment_text[k]), __VA_ARGS__), \
		     a->comment_ptrs[k] = a->comment_text[k], k++
	COMMENT("service_name=%s", p ? p->labels.service : "python");
	COMMENT("pid=%d", (int)pid);
	COMMENT("host=%s", a->host);
	if (p && p->version[0])
		COMMENT("python_version=%s", p->version);
	if (p && p->labels.container[0])
		COMMENT("container_id=%s", p->labels.container);
	for (size_t i = 0; i < a->o.nlabels; i++)
		COMMENT("%s=%s", a->o.labels[i].name, a->o.labels[i].value);
#undef COMMENT
	*out = a->comment_ptrs;
	*n = k;
}

/* Copy @from to @to (another file system than the spool's). */
static int copy_file(const char *from, const char *to)
{
	char *data;
	size_t n;
	int rc = read_file(from, SPOOL_BODY_MAX, 0, &data, &n);

	if (rc)
		return rc;
	rc = write_file(to, data, n, 0644);
	free(data);
	return rc;
}

/* --output-dir: SERVICE-PID-FROM.pb.gz, FROM the window's UNIX second. */
static void write_output_dir(struct agent *a, const struct window_profile *wp,
			     const struct agent_proc *p)
{
	char from[4096], to[4096], svc[LABEL_VALUE_MAX];
	int rc;

	snprintf(svc, sizeof(svc), "%s", p ? p->labels.service : "python");
	for (char *c = svc; *c; c++)
		if (*c == '/')
			*c = '_';
	spool__tmp_path(a->spool, wp->entry, from, sizeof(from));
	snprintf(to, sizeof(to), "%s/%s-%d-%llu.pb.gz", a->o.output_dir, svc, (int)wp->pid,
		 (unsigned long long)(wp->from_ms / 1000));
	unlink(to);
	rc = link(from, to) ? copy_file(from, to) : 0;
	if (rc)
		fprintf(stderr, "pyprof-bpf agent: %s: %s\n", to, strerror(-rc));
}

/* A window closed @wp: label it, put it where it goes. */
static void on_closed(void *ctx, const struct window_profile *wp)
{
	struct agent *a = ctx;
	struct agent_proc *p = proc_of(a, wp->pid);
	char *meta;
	int rc;

	if (a->o.output_dir)
		write_output_dir(a, wp, p);
	meta = meta_of(a, wp, p);
	rc = meta ? spool__publish(a->spool, wp->entry, meta, a->queues, a->nship) : -ENOMEM;
	free(meta);
	if (rc) {
		char path[4096];

		spool__tmp_path(a->spool, wp->entry, path, sizeof(path));
		unlink(path);
		fprintf(stderr, "pyprof-bpf agent: the profile of pid %d could not be spooled "
			"in %s: %s\n", (int)wp->pid, a->spool_path, strerror(-rc));
	}
}

/* --retain: --output-dir's profiles older than it go. */
static void prune_output_dir(struct agent *a)
{
	DIR *d = opendir(a->o.output_dir);
	struct dirent *de;
	time_t now = time(NULL);
	char path[4096];

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		struct stat st;

		if (n < 7 || strcmp(de->d_name + n - 6, ".pb.gz"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", a->o.output_dir, de->d_name);
		if (!stat(path, &st) && S_ISREG(st.st_mode) &&
		    (double)(now - st.st_mtime) > a->o.retain_s)
			unlink(path);
	}
	closedir(d);
}

/* One line per window: what it made and where it went. */
static void log_window(struct agent *a, unsigned int closed, const struct windows_stats *before)
{
	struct windows_stats st;
	char line[1024];
	size_t n;

	windows__stats(a->win, &st);
	n = (size_t)snprintf(line, sizeof(line), "pyprof-bpf agent: %llu profile%s, %llu "
			     "samples in %u window%s", (unsigned long long)(st.profiles -
			     before->profiles), st.profiles - before->profiles == 1 ? "" : "s",
			     (unsigned long long)(st.closed_samples - before->closed_samples), closed,
			     closed == 1 ? "" : "s");
	if (st.late > before->late && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n, " (%llu late)",
				      (unsigned long long)(st.late - before->late));
	for (size_t i = 0; i < a->nship && n < sizeof(line); i++) {
		struct shipper_stats ss;

		shipper__stats(a->ship[i], &ss);
		n += (size_t)snprintf(line + n, sizeof(line) - n, "; %s: %llu sent, %zu waiting",
				      a->o.push[i].kind->name, (unsigned long long)ss.sent,
				      ss.queued);
	}
	if (a->dropped && n < sizeof(line))
		snprintf(line + n, sizeof(line) - n, "; %llu dropped by the spool's bounds",
			 (unsigned long long)a->dropped);
	fprintf(stderr, "%s\n", line);
}

/* Forget processes not sampled for a few windows: -a on a host where
 * processes come and go must not grow. A process's windows close within
 * one window after its last sample, so its labels are not needed then. */
static void forget_gone(struct agent *a)
{
	uint64_t now_ms = realtime_ns() / 1000000, keep_ms = (uint64_t)(3e3 * a->o.window_s);
	size_t k = 0;

	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].from_ms + keep_ms > now_ms)
			a->procs[k++] = a->procs[i];
	a->nprocs = k;
}

/* Close the windows due (all of them when @all), then the spool's bounds. */
static int close_windows(struct agent *a, int all)
{
	struct windows_stats before;
	unsigned int closed = 0;
	uint64_t dropped = 0;
	int rc;

	windows__stats(a->win, &before);
	rc = windows__close(a->win, mono_ns(), all, &closed);
	if (!closed)
		return rc;
	for (size_t i = 0; i < a->nship; i++)
		shipper__wake(a->ship[i]);
	if (!spool__enforce(a->spool, (uint64_t)time(NULL), &dropped) && dropped) {
		a->dropped += dropped;
		fprintf(stderr, "pyprof-bpf agent: the spool is past its bounds (--spool-size, "
			"--spool-age): dropped the %llu oldest profile%s\n",
			(unsigned long long)dropped, dropped == 1 ? "" : "s");
	}
	if (a->o.output_dir && mono_s() >= a->next_prune) {
		/* A day of files is thousands: looked over every tenth of
		 * --retain (a window at least, 10 min at most), not each window. */
		double every = a->o.retain_s / 10;

		every = every < a->o.window_s ? a->o.window_s : every > 600 ? 600 : every;
		a->next_prune = mono_s() + every;
		prune_output_dir(a);
	}
	if (!all)
		forget_gone(a);
	log_window(a, closed, &before);
	return rc;
}

static int open_spool(struct agent *a, char *err, size_t errlen)
{
	const char *state = getenv("STATE_DIRECTORY");
	int rc;

	if (a->o.spool_dir)
		snprintf(a->spool_path, sizeof(a->spool_path), "%s", a->o.spool_dir);
	else if (!a->o.npush)
		/* Only --output-dir: the profiles are written beside it. */
		snprintf(a->spool_path, sizeof(a->spool_path), "%s/.spool", a->o.output_dir);
	else if (state && state[0])
		/* systemd's StateDirectory=: the first of its ':'-separated list */
		snprintf(a->spool_path, sizeof(a->spool_path), "%.*s/spool",
			 (int)strcspn(state, ":"), state);
	else
		snprintf(a->spool_path, sizeof(a->spool_path), "%s", DEFAULT_SPOOL);
	rc = spool__open(a->spool_path, a->o.spool_bytes, (uint64_t)a->o.spool_age_s, &a->spool,
			 err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < a->o.npush; i++) {
		char name[64], path[4096];

		/* A queue per store: the same URL finds its queue after a restart. */
		snprintf(name, sizeof(name), "%s-%016llx", a->o.push[i].kind->name,
			 (unsigned long long)out_fnv1a(a->o.push[i].url));
		rc = spool__queue(a->spool, name, path, sizeof(path));
		if (rc || !(a->queues[i] = strdup(path))) {
			rc = rc ? rc : -ENOMEM;
			seterr(err, errlen, "the spool queue %s cannot be made: %s", path,
			       strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int start_shippers(struct agent *a, char *err, size_t errlen)
{
	double backoff = a->o.window_s < BACKOFF_MAX_S ? a->o.window_s : BACKOFF_MAX_S;

	for (size_t i = 0; i < a->o.npush; i++) {
		struct shipper_opts so = {
			.kind = a->o.push[i].kind, .url = a->o.push[i].url, .qdir = a->queues[i],
			.auth = a->o.auth_file || a->o.auth.nheaders ? &a->o.auth : NULL,
			.timeout_ms = (long)(a->o.push_timeout_s * 1000),
			.backoff_max_s = backoff,
		};
		int rc = shipper__start(&so, &a->ship[i], err, errlen);

		if (rc)
			return rc;
		a->nship++;
	}
	return 0;
}

/* ---- record's sink ---- */

static int agent_start(void *ctx, const struct record_info *info, char *err, size_t errlen)
{
	struct agent *a = ctx;
	struct windows_opts wo = {
		.window_s = a->o.window_s, .grace_s = GRACE_S, .mode = info->mode,
		.opened = on_opened, .closed = on_closed, .comments = comments_of,
		.ctx = a,
	};
	char host[256] = "";
	int rc;

	a->info_copy = *info;
	a->info = &a->info_copy;
	gethostname(host, sizeof(host) - 1);
	labels__clean(host[0] ? host : "unknown", strlen(host[0] ? host : "unknown"), a->host,
		      sizeof(a->host));
	if (a->o.output_dir && mkdir(a->o.output_dir, 0755) && errno != EEXIST) {
		rc = -errno;
		seterr(err, errlen, "--output-dir %s: %s", a->o.output_dir, strerror(-rc));
		return rc;
	}
	rc = open_spool(a, err, errlen);
	if (!rc)
		rc = start_shippers(a, err, errlen);
	if (rc)
		return rc;
	wo.spool = a->spool;
	rc = windows__new(&wo, &a->win);
	if (rc) {
		seterr(err, errlen, "out of memory");
		return rc;
	}
	a->started = 1;
	fprintf(stderr, "pyprof-bpf agent: sampling %s in %s mode at %ld Hz, a profile per "
		"process every %g s; spool %s\n", info->pid ? "the processes given" :
		"every Python process", info->mode, info->freq_hz, a->o.window_s, a->spool_path);
	return 0;
}

static int agent_sample(void *ctx, const struct out_sample *s)
{
	struct agent *a = ctx;
	int rc = windows__add(a->win, s);

	if (rc && !a->err) {
		a->err = rc;
		fprintf(stderr, "pyprof-bpf agent: a profile could not be written in %s: %s\n",
			a->spool_path, strerror(-rc));
	}
	return rc == -ENOMEM ? rc : 0;
}

static int agent_wait(void *ctx, double until, const struct record_status *st)
{
	struct agent *a = ctx;
	double next;

	(void)st;
	close_windows(a, 0);
	next = windows__next_close(a->win, mono_ns());
	sleep_until_s(next < until ? next : until);
	return 0;
}

static void agent_end(void *ctx, const char *why, const struct record_status *st)
{
	(void)ctx;
	if (why)
		fprintf(stderr, "pyprof-bpf agent: %s\n", why);
	/* record's summary in one line (its own is several). */
	fprintf(stderr, "pyprof-bpf agent: sampling ended after %.0f s: %llu samples, %llu "
		"lost, %llu truncated, %llu errors\n", st->elapsed_s,
		(unsigned long long)st->stats.samples, (unsigned long long)st->stats.lost,
		(unsigned long long)st->stats.truncated, (unsigned long long)st->stats.errors);
}

/* After the recording: the open windows closed and delivered (or left in
 * the spool) within --push-timeout. */
static void agent_finish(struct agent *a)
{
	double deadline = mono_s() + a->o.push_timeout_s;
	uint64_t waiting = 0;

	close_windows(a, 1);
	for (size_t i = 0; i < a->nship; i++) {
		struct shipper_stats ss;

		/* One after the other: they share the deadline, not the time. */
		shipper__stop(a->ship[i], deadline);
		shipper__stats(a->ship[i], &ss);
		waiting += ss.queued;
		fprintf(stderr, "pyprof-bpf agent: %s %s: %llu profiles sent, %llu refused, %zu "
			"left in the spool\n", a->o.push[i].kind->name, a->o.push[i].url,
			(unsigned long long)ss.sent, (unsigned long long)ss.rejected, ss.queued);
	}
	if (waiting)
		fprintf(stderr, "pyprof-bpf agent: %llu profile%s left in the spool %s, for the "
			"next start\n", (unsigned long long)waiting, waiting == 1 ? "" : "s",
			a->spool_path);
}

static void agent_free(struct agent *a)
{
	for (size_t i = 0; i < a->nship; i++)
		shipper__free(a->ship[i]);
	for (size_t i = 0; i < a->o.npush; i++)
		free(a->queues[i]);
	windows__free(a->win);
	spool__free(a->spool);
	free(a->procs);
}

int agent__main(int argc, char **argv)
{
	struct agent a = { 0 };
	const struct record_sink sink = {
		.doc = agent_doc, .header = "Agent:", .argp = &agent_argp, .argp_input = &a.o,
		.ctx = &a, .default_freq = AGENT_DEFAULT_FREQ, .default_all = 1,
		.no_summary = 1,
		.start = agent_start, .sample = agent_sample, .wait = agent_wait,
		.end = agent_end,
	};
	int rc;

	agent_opts__init(&a.o);
	rc = record__run(argc, argv, &sink);
	if (a.started)
		agent_finish(&a);
	agent_free(&a);
	return rc;
}
