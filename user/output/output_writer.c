// SPDX-License-Identifier: MIT
/*
 * output_writer.c - what every writer asks of its output: the first write
 * error of its file, how titles name the recording's mode, HTML escaping.
 */
#include <errno.h>
#include <string.h>
#include "output/internal.h"
#include "types/raw_sample.h"	/* SAMPLE_MAX_EVENTS */

int output__check_io(struct output *o)
{
	if (!o->err && ferror(o->f))
		o->err = errno ? -errno : -EIO;
	return o->err;
}

const char *output__count_event(const struct output_opts *opts)
{
	const char *e = opts ? opts->event : NULL;

	if (opts && opts->nevents > 1)
		return NULL;	/* each event's own: output__event_of() */
	return e && *e && strcmp(e, "cpu-clock") && strcmp(e, "task-clock") ? e : NULL;
}

unsigned int output__split_events(const char *joined, char *buf, size_t len, const char **names)
{
	unsigned int n = 0;
	char *save = NULL;

	if (!joined || !strchr(joined, ',') || strlen(joined) >= len)
		return 0;
	strcpy(buf, joined);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == SAMPLE_MAX_EVENTS)
			return 0;	/* not ours: one name, commas and all */
		names[n++] = t;
	}
	return n;
}

bool output__weighs_bytes(const struct output_opts *opts)
{
	return opts && opts->mode && !strcmp(opts->mode, "memory");
}

const char *output__mode_label(const struct output_opts *opts)
{
	const char *m = opts ? opts->mode : NULL;

	if (output__weighs_bytes(opts))
		return "memory";
	if (output__count_event(opts))
		return output__count_event(opts);
	if (!m || !strcmp(m, "cpu"))
		return "CPU";
	if (!strcmp(m, "off-cpu"))
		return "off-CPU";
	if (!strcmp(m, "wall"))
		return "wall-clock";
	if (!strcmp(m, "gil"))
		return "GIL";
	return m;
}

void out_html_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}
