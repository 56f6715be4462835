// SPDX-License-Identifier: MIT
/*
 * outdrv.c - feeds a text list of samples through one output writer, so the
 * writers can be tested with real consumers before (and besides) recording.
 *
 * usage: outdrv [-f FORMAT] [-o PATH] [-t] [-n] [-c] [-T TITLE] [-S NS] < samples
 *   -f  format name (default: from -o's extension)   -o  output (default stdout)
 *   -t  --threads    -n  --no-lines    -c  comm root  -T title  -S pprof start time
 *
 * Input, one record a line, fields separated by TABs; in fields \\ \t \n and
 * \xHH stand for a backslash, TAB, newline and any byte:
 *   S comm pid tid thread_name cpu ts_ns period_ns status [repeat]
 *   F function file line firstlineno        (frames, innermost first)
 *   E                                       (ends the sample)
 * An empty thread_name is NULL. With repeat N the sample is added N times,
 * its time advancing by period_ns each time. Lines starting with '#' and
 * empty lines are ignored.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/output.h"

#define MAXF 16

static int unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (*r != '\\') {
			*w++ = *r;
			continue;
		}
		r++;
		if (*r == '\\')
			*w++ = '\\';
		else if (*r == 't')
			*w++ = '\t';
		else if (*r == 'n')
			*w++ = '\n';
		else if (*r == 'x' && r[1] && r[2]) {
			char hex[3] = { r[1], r[2], 0 };

			*w++ = (char)strtoul(hex, NULL, 16);
			r += 2;
		} else {
			return -EINVAL;
		}
	}
	*w = '\0';
	return 0;
}

static int split(char *line, char **f, int max)
{
	int n = 0;

	for (char *p = line; n < max;) {
		f[n++] = p;
		p = strchr(p, '\t');
		if (!p)
			break;
		*p++ = '\0';
	}
	for (int i = 0; i < n; i++)
		if (unescape(f[i]))
			return -1;
	return n;
}

struct frame_store {
	struct py_sym *v;
	char **strs;
	size_t n, cap, nstrs, strs_cap;
};

static char *keep(struct frame_store *fs, const char *s)
{
	char *c;

	if (fs->nstrs == fs->strs_cap) {
		size_t nc = fs->strs_cap ? fs->strs_cap * 2 : 64;
		char **n = realloc(fs->strs, nc * sizeof(*n));

		if (!n)
			return NULL;
		fs->strs = n;
		fs->strs_cap = nc;
	}
	c = strdup(s);
	if (c)
		fs->strs[fs->nstrs++] = c;
	return c;
}

static void drop(struct frame_store *fs)
{
	for (size_t i = 0; i < fs->nstrs; i++)
		free(fs->strs[i]);
	fs->nstrs = 0;
	fs->n = 0;
}

int main(int argc, char **argv)
{
	struct output_opts opts = { 0 };
	const char *format = NULL, *path = NULL;
	struct frame_store fs = { 0 };
	struct out_sample s = { 0 };
	char comm[256] = "", tname[256] = "", err[512], *line = NULL, *fld[MAXF];
	struct output *o = NULL;
	unsigned long repeat = 1, lineno = 0;
	size_t cap = 0;
	int c, ret = 1, in_sample = 0, r;

	while ((c = getopt(argc, argv, "f:o:tncT:S:")) != -1) {
		switch (c) {
		case 'f':
			format = optarg;
			break;
		case 'o':
			path = optarg;
			break;
		case 't':
			opts.per_thread_roots = 1;
			break;
		case 'n':
			opts.no_lines = 1;
			break;
		case 'c':
			opts.comm_root = 1;
			break;
		case 'T':
			opts.title = optarg;
			break;
		case 'S':
			opts.start_time_ns = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: outdrv [-f FORMAT] [-o PATH] [-t] [-n] [-c] "
				"[-T TITLE] [-S NS] < samples\n");
			return 2;
		}
	}
	r = output__new(format, path, &opts, &o, err, sizeof(err));
	if (r) {
		fprintf(stderr, "outdrv: %s\n", err);
		return 1;
	}
	while (getline(&line, &cap, stdin) > 0) {
		int n;

		lineno++;
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		n = split(line, fld, MAXF);
		if (n < 1)
			goto bad;
		if (!strcmp(fld[0], "S") && (n == 9 || n == 10) && !in_sample) {
			snprintf(comm, sizeof(comm), "%s", fld[1]);
			snprintf(tname, sizeof(tname), "%s", fld[4]);
			s = (struct out_sample){
				.comm = comm,
				.pid = atoi(fld[2]),
				.tid = atoi(fld[3]),
				.thread_name = tname[0] ? tname : NULL,
				.cpu = (uint32_t)strtoul(fld[5], NULL, 10),
				.ts_ns = strtoull(fld[6], NULL, 10),
				.period_ns = strtoull(fld[7], NULL, 10),
				.status = (uint32_t)strtoul(fld[8], NULL, 10),
			};
			repeat = n == 10 ? strtoul(fld[9], NULL, 10) : 1;
			in_sample = 1;
		} else if (!strcmp(fld[0], "F") && n == 5 && in_sample) {
			if (fs.n == fs.cap) {
				size_t nc = fs.cap ? fs.cap * 2 : 64;
				struct py_sym *nv = realloc(fs.v, nc * sizeof(*nv));

				if (!nv)
					goto oom;
				fs.v = nv;
				fs.cap = nc;
			}
			fs.v[fs.n].function = keep(&fs, fld[1]);
			fs.v[fs.n].file = keep(&fs, fld[2]);
			if (!fs.v[fs.n].function || !fs.v[fs.n].file)
				goto oom;
			fs.v[fs.n].line = atoi(fld[3]);
			fs.v[fs.n].firstlineno = atoi(fld[4]);
			fs.n++;
		} else if (!strcmp(fld[0], "E") && in_sample) {
			s.nframes = (uint32_t)fs.n;
			s.frames = fs.v;
			for (unsigned long k = 0; k < repeat; k++) {
				r = output__add(o, &s);
				if (r) {
					fprintf(stderr, "outdrv: output__add: %s\n", strerror(-r));
					goto out;
				}
				s.ts_ns += s.period_ns;
			}
			drop(&fs);
			in_sample = 0;
		} else {
			goto bad;
		}
	}
	r = output__finish(o);
	if (r) {
		fprintf(stderr, "outdrv: output__finish: %s\n", strerror(-r));
		goto out;
	}
	ret = 0;
	goto out;
bad:
	fprintf(stderr, "outdrv: line %lu: bad record\n", lineno);
	goto out;
oom:
	fprintf(stderr, "outdrv: out of memory\n");
out:
	output__free(o);
	drop(&fs);
	free(fs.v);
	free(fs.strs);
	free(line);
	return ret;
}
