/* SPDX-License-Identifier: MIT */
/*
 * top/format.c - the text of a `top` snapshot, the same on a terminal and in
 * plain snapshots:
 *
 *   pyprof-bpf top: pid 1234 (python3), Python 3.14.0, cpu mode, 99 Hz, BPF per-CPU
 *   samples 12345 (98.7/s), lost 0, errors 0, threads 3 active / 4 seen, 12 s
 *   view: last 5 s, functions, all threads, sorted by own
 *     %Own  %Total  OwnTime  TotalTime  Function (file:line)
 *     62.1    62.1    3.10s      3.10s  hot (/app/work.py:12)
 */
#include <stdio.h>
#include <string.h>
#include "output/utf8.h"
#include "commands/top/top.h"

/*
 * @s into @buf as the terminal may show it: control characters (C0, DEL,
 * C1) and bytes that are not UTF-8 become '?', so that a name the target
 * chose cannot drive the terminal (as output_top.c does).
 */
static const char *clean(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	while (*s && n + 5 < len) {
		uint32_t cp;
		int k = out_utf8_seq((const unsigned char *)s, &cp);

		if (k <= 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
			buf[n++] = '?';
			s += k > 0 ? k : 1;
			continue;
		}
		memcpy(buf + n, s, (size_t)k);
		n += (size_t)k;
		s += k;
	}
	buf[n] = '\0';
	return buf;
}

/* Cut @buf to @width columns (UTF-8: continuation bytes take none). */
static void cut(char *buf, int width)
{
	int cols = 0;

	if (width <= 0)
		return;
	for (char *p = buf; *p; p++) {
		if (((unsigned char)*p & 0xc0) == 0x80)
			continue;
		if (cols++ == width) {
			*p = '\0';
			return;
		}
	}
}

/* What the weights are: time (the clocks), bytes (--mode memory) or a count of -e's events. */
enum top_unit { TOP_SECONDS, TOP_BYTES, TOP_EVENTS };

static enum top_unit unit_of(const struct top_snapshot *s)
{
	const char *ev = s->event;

	if (s->info->mode && !strcmp(s->info->mode, "memory"))
		return TOP_BYTES;
	if (ev && strcmp(ev, "cpu-clock") && strcmp(ev, "task-clock"))
		return TOP_EVENTS;
	return TOP_SECONDS;
}

/* @v in 9 columns or less: "3.10s", "256.0MiB", "65832" or "12.3M". */
static void amount(enum top_unit u, uint64_t v, char *buf, size_t len)
{
	static const char *const bytes[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	static const char *const counts[] = { "", "k", "M", "G", "T" };
	double x = (double)v;
	int i = 0;

	if (u == TOP_SECONDS) {
		snprintf(buf, len, "%.2fs", x / 1e9);
		return;
	}
	for (; x >= (u == TOP_BYTES ? 1024.0 : 1e6) && i < 4; i++)
		x /= u == TOP_BYTES ? 1024.0 : 1000.0;
	if (u == TOP_BYTES)
		snprintf(buf, len, i ? "%.1f%s" : "%.0f%s", x, bytes[i]);
	else
		snprintf(buf, len, i ? "%.1f%s" : "%.0f%s", x, counts[i]);
}

void top_fmt__header(const struct top_snapshot *s, int i, char *buf, size_t len, int width)
{
	const struct record_info *in = s->info;
	const struct record_status *st = s->status;
	const struct top_view *v = s->view;
	char more[48] = "", thr[256], name[128], rate[192];

	switch (i) {
	case 0:
		/* -a: no one target; -p A,B, --subprocesses: the first and a count */
		if (!in->pid)
			snprintf(thr, sizeof(thr), "every Python process (%zu seen)", s->nprocs);
		else if (s->nprocs > 1)
			snprintf(thr, sizeof(thr), "pid %d (%s) + %zu more processes, Python %s",
				 (int)in->pid, clean(in->comm, name, sizeof(name)), s->nprocs - 1,
				 in->python_version);
		else
			snprintf(thr, sizeof(thr), "pid %d (%s), Python %s", (int)in->pid,
				 clean(in->comm, name, sizeof(name)), in->python_version);
		if (s->nevents > 1)	/* one shown at a time */
			snprintf(rate, sizeof(rate), "at %s (e: next of %u events)", s->event,
				 s->nevents);
		else if (s->event && unit_of(s) != TOP_SECONDS)
			snprintf(rate, sizeof(rate), "at %s", s->event);
		else
			snprintf(rate, sizeof(rate), "%ld Hz", in->freq_hz);
		snprintf(buf, len, "pyprof-bpf top: %s, %s mode, %s, %s%s%s", thr, in->mode,
			 rate, in->backend, strcmp(in->backend, "BPF") ? "" :
			 in->per_cpu ? " per-CPU" : " per-thread", s->paused ? "  [PAUSED]" : "");
		break;
	case 1:
		snprintf(buf, len, "samples %llu (%.1f/s), lost %llu, errors %llu, threads %zu "
			 "active / %zu seen, %.0f s",
			 (unsigned long long)st->stats.samples,
			 s->totals.seconds > 0 ? s->totals.samples / s->totals.seconds : 0.0,
			 (unsigned long long)st->stats.lost, (unsigned long long)st->stats.errors,
			 s->active_threads, s->nthreads, st->elapsed_s);
		break;
	default:
		if (s->thread && s->nprocs > 1)
			snprintf(thr, sizeof(thr), "thread %d (%s) of pid %d", (int)s->thread->tid,
				 clean(s->thread->name, name, sizeof(name)), (int)s->thread->pid);
		else if (s->thread)
			snprintf(thr, sizeof(thr), "thread %d (%s)", (int)s->thread->tid,
				 clean(s->thread->name, name, sizeof(name)));
		else if (s->process)
			snprintf(thr, sizeof(thr), "pid %d (%s), all its threads",
				 (int)s->process->pid, clean(s->process->comm, name, sizeof(name)));
		else
			snprintf(thr, sizeof(thr), "all threads");
		if (v->recent)
			snprintf(more, sizeof(more), "last %.0f s", s->window_s);
		else
			snprintf(more, sizeof(more), "since the start");
		snprintf(buf, len, "view: %s, %s, %s, sorted by %s", more,
			 v->lines ? "lines" : "functions", thr, top_sort__name(v->sort));
		break;
	}
	cut(buf, width);
}

void top_fmt__columns(const struct top_snapshot *s, char *buf, size_t len, int width)
{
	static const char *const own[] = { "OwnTime", "OwnBytes", "OwnEvents" };
	static const char *const total[] = { "TotalTime", "AllBytes", "AllEvents" };
	enum top_unit u = unit_of(s);

	snprintf(buf, len, "%7s %7s %9s %9s  %s", "%Own", "%Total", own[u], total[u],
		 "Function (file:line)");
	cut(buf, width);
}

void top_fmt__row(const struct top_snapshot *s, size_t i, char *buf, size_t len, int width)
{
	const struct top_row *r = &s->rows[i];
	double w = s->totals.weight ? (double)s->totals.weight : 1.0;
	char fn[1024], path[1024], line[16] = "", own[24], total[24];
	const char *file = clean(r->file, path, sizeof(path));
	int n, room;

	if (r->line > 0)
		snprintf(line, sizeof(line), ":%d", r->line);
	amount(unit_of(s), r->own, own, sizeof(own));
	amount(unit_of(s), r->total, total, sizeof(total));
	n = snprintf(buf, len, "%7.1f %7.1f %9s %9s  %s", 100.0 * r->own / w,
		     100.0 * r->total / w, own, total, clean(r->function, fn, sizeof(fn)));
	if (n < 0 || (size_t)n >= len)
		goto done;
	if (!*file)
		goto done;
	/* What is left for " (file:line)": the file keeps its end. */
	room = width > 0 ? width - n - 3 - (int)strlen(line) : 1 << 20;
	if (room < (int)strlen(file)) {
		if (room < 8)
			goto done;
		file += strlen(file) - (size_t)(room - 3);
		while (((unsigned char)*file & 0xc0) == 0x80)	/* not mid-character */
			file++;
	}
	snprintf(buf + n, len - (size_t)n, " (%s%s%s)", file != path ? "..." : "", file, line);
done:
	cut(buf, width);
}
