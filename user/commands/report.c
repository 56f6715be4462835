/* SPDX-License-Identifier: MIT */
/*
 * report.c - `pyprof-bpf report`: a raw recording (rawrec.h) written in any
 * output format. Its samples go through output__new/add/finish exactly as a
 * recording's do, with the options recording would use (the pprof start time
 * comes from the header), so the output is what recording straight to that
 * format would have written.
 */
#include <argp.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "output/output.h"
#include "output/output_args.h"
#include "target/pyproc.h"		/* PYPROF_ERRLEN */
#include "output/rawrec.h"
#include "commands/record.h"
#include "util/errbuf.h"

struct report_env {
	const char *input;
	const char *diff_base;	/* --diff BASE: a differential view of input over it */
	const char *event;	/* -e EVENT: that event's samples alone (recorded with several) */
	struct output_args out;	/* -o, --format, --threads, ... */
	int quiet;
};

static const char report_doc[] =
"Write a raw recording (made with -o FILE.pyprof) in any output format.\n"
"\n"
"USAGE: pyprof-bpf report -i REC.pyprof [--format FMT] [-o FILE] [--threads]\n"
"                         [--no-lines]\n"
"       pyprof-bpf report --diff BASE.pyprof NEW.pyprof [-o DIFF.html]\n"
"\v"
"Formats: perf-script (default), collapsed, speedscope, pprof, flamegraph,\n"
"pstats, callgrind, top, heatmap, jsonl, chrome-trace; with -o the format is\n"
"inferred from the extension (.perf .folded .speedscope.json .pb.gz .html .svg\n"
".pstats .prof .callgrind, callgrind.out.*, .heatmap.html .jsonl .trace.json).\n"
"The output is the one that recording\n"
"straight to that format with the same options writes. A truncated recording\n"
"(the recorder was killed) is reported up to its last complete sample, with a\n"
"warning.\n"
"\n"
"-e EVENT: of a recording at several events (record -e A,B), the samples of\n"
"EVENT alone, as that event's recording (perf-script, pprof and the flame\n"
"graph keep the events apart by themselves; top, pstats and callgrind add\n"
"weights across stacks, which only one event's share a unit).\n"
"\n"
"--diff BASE: NEW's flame graph with each frame red where its share of the\n"
"time grew since BASE, blue where it shrank (-o FILE.html or .svg), and on\n"
"stdout (or alone with --format top) the functions whose share changed most.\n"
"Frames match by function and file, not line: edits that move lines keep\n"
"them matched.\n"
"\n"
"EXAMPLES:\n"
"    sudo pyprof-bpf -p 1234 -d 30 -o rec.pyprof    # record once, then:\n"
"    pyprof-bpf report -i rec.pyprof -o flame.html  # interactive flame graph\n"
"    pyprof-bpf report -i rec.pyprof --format top   # the hottest functions\n"
"    pyprof-bpf report -i rec.pyprof --threads -o out.speedscope.json\n"
"    pyprof-bpf report -i rec.pyprof -o out.pstats   # python3 -m pstats, snakeviz\n"
"    pyprof-bpf report -i rec.pyprof -o callgrind.out.1  # kcachegrind\n"
"    pyprof-bpf report rec.pyprof --format collapsed | flamegraph.pl > f.svg\n"
"    pyprof-bpf report -i rec.pyprof -o rec.heatmap.html # source lines by time\n"
"    pyprof-bpf report --diff before.pyprof after.pyprof -o diff.html\n"
"    pyprof-bpf report -i ev.pyprof -e page-faults --format top  # one event\n"
"    pyprof-bpf report -i rec.pyprof -o run.trace.json  # timeline: Perfetto\n";

static const struct argp_option report_options[] = {
	{ "input", 'i', "REC", 0, "The raw recording to read (- for stdin)", 0 },
	{ "quiet", 'q', NULL, 0, "No summary of the recording on stderr", 0 },
	{ "diff", 'D', "BASE", 0, "A differential flame graph and table of REC over BASE", 0 },
	{ "event", 'e', "EVENT", 0, "Only the samples of EVENT (a recording at several)", 0 },
	{ 0 },
};

static error_t report_parse(int key, char *arg, struct argp_state *state)
{
	struct report_env *env = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &env->out;
		break;
	case 'i':
		env->input = arg;
		break;
	case 'q':
		env->quiet = 1;
		break;
	case 'D':
		env->diff_base = arg;
		break;
	case 'e':
		env->event = arg;
		break;
	case ARGP_KEY_ARG:
		/* `report REC` as well as `report -i REC`, as perf report takes either. */
		if (env->input)
			argp_error(state, "unexpected argument: %s", arg);
		env->input = arg;
		break;
	case ARGP_KEY_END:
		if (!env->input)
			argp_error(state, "a raw recording is needed: -i REC.pyprof");
		if (rawrec__wanted(env->out.format, env->out.output))
			argp_error(state, "--format and -o name what to write (%s); the raw "
				   "recording is the input (-i)", output__format_names());
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static void print_summary(const char *input, const struct rawrec_info *in,
			  const struct rawrec_end *end, uint64_t samples)
{
	time_t t = (time_t)(in->start_time_ns / 1000000000u);
	char when[64] = "at an unknown time";
	struct tm tm;

	if (in->start_time_ns && localtime_r(&t, &tm))
		strftime(when, sizeof(when), "on %Y-%m-%d at %H:%M:%S", &tm);
	fprintf(stderr, "pyprof-bpf: %s: process %d (%s, Python %s) recorded %s with the %s "
		"backend at %u Hz: %llu samples", input, (int)in->pid, in->comm,
		in->python_version, when, in->backend, in->freq_hz,
		(unsigned long long)samples);
	if (end)
		fprintf(stderr, " in %.2f s%s, %llu lost, %llu truncated, %llu errors, "
			"%llu unresolved frames", end->duration_ns / 1e9,
			end->flags & RAWREC_END_TARGET_EXITED ? " (until the target exited)" : "",
			(unsigned long long)end->lost, (unsigned long long)end->truncated,
			(unsigned long long)end->errors, (unsigned long long)end->unresolved);
	fputc('\n', stderr);
}

/*
 * A report that failed leaves no file that looks like a whole profile. Only a
 * regular file is removed: -o /dev/null or a FIFO stays.
 */
static void remove_output(const char *path)
{
	struct stat st;

	if (path && strcmp(path, "-") && !stat(path, &st) && S_ISREG(st.st_mode))
		unlink(path);
}

/*
 * --diff: BASE's samples into @out (and @table) as the base of a
 * differential view. 0 or -errno with @err set.
 */
static int add_base(const char *path, struct output *out, struct output *table, char *err,
		    size_t errlen)
{
	struct rawrec_reader *r = NULL;
	struct out_sample s;
	int rc = rawrec_reader__open(path, &r, err, errlen);

	while (!rc && (rc = rawrec_reader__next(r, &s, err, errlen)) > 0) {
		rc = output__add_base(out, &s);
		if (!rc && table)
			rc = output__add_base(table, &s);
		if (rc)
			seterr(err, errlen, "reading %s: %s", path, strerror(-rc));
	}
	rawrec_reader__free(r);
	return rc;
}

/* --diff: the flame graph or the table; a flame graph in a file has the table on stdout. */
static int open_diff(struct report_env *env, struct output *out, struct output **table,
		     char *err, size_t errlen)
{
	const char *fmt = output__format(out);
	int rc;

	*table = NULL;
	if (strcmp(fmt, "flamegraph") && strcmp(fmt, "top")) {
		seterr(err, errlen, "--diff writes a flame graph (-o FILE.html or .svg) or the "
		       "top table, not %s", fmt);
		return -EINVAL;
	}
	if (!strcmp(fmt, "flamegraph") && env->out.output && strcmp(env->out.output, "-")) {
		rc = output__new("top", NULL, &env->out.oopts, table, err, errlen);
		if (rc)
			return rc;
	}
	rc = add_base(env->diff_base, out, *table, err, errlen);
	return rc;
}

/* The recording's source files, for the formats that show them (heatmap). */
static int add_sources(struct output *out, const struct out_sources *src)
{
	int rc = 0;

	for (uint32_t i = 0; i < src->n && !rc; i++)
		rc = output__add_source(out, &src->v[i]);
	return rc;
}

/* -e EVENT: one of the recording's events (its samples alone, written as
 * that event's recording). 0 or -EINVAL with @err. */
static int pick_event(struct report_env *env, char *err, size_t errlen)
{
	struct output_opts *o = &env->out.oopts;

	if (!env->event)
		return 0;
	for (unsigned int i = 0; i < o->nevents; i++)
		if (!strcmp(o->events[i], env->event)) {
			o->event = o->events[i];
			o->nevents = 0;
			return 0;
		}
	if (o->event && !strcmp(o->event, env->event))
		return 0;	/* its only one */
	snprintf(err, errlen, "-e %s: the recording was taken at %s", env->event,
		 o->event ? o->event : "cpu-clock");
	return -EINVAL;
}

int report__main(int argc, char **argv)
{
	static const struct argp_child children[] = {
		{ .argp = &output_args_argp, .header = "Output:" },
		{ 0 },
	};
	static const struct argp argp = {
		.options = report_options, .parser = report_parse, .doc = report_doc,
		.children = children,
	};
	struct report_env env = { 0 };
	char err[PYPROF_ERRLEN] = "";
	struct rawrec_reader *r = NULL;
	const struct rawrec_info *info;
	const struct rawrec_end *end;
	struct output *out = NULL, *table = NULL;
	struct out_sample s;
	char evbuf[1024];
	const char *evnames[SAMPLE_MAX_EVENTS];
	int rc, exit_code = 1;

	if (argp_parse(&argp, argc, argv, 0, NULL, &env))
		return 2;
	/* A closed pipe is a write error to report, not a reason to die. */
	signal(SIGPIPE, SIG_IGN);

	rc = rawrec_reader__open(env.input, &r, err, sizeof(err));
	if (rc)
		goto fail;
	info = rawrec_reader__info(r);
	/* What record gives the writers besides the samples (record.c). */
	env.out.oopts.start_time_ns = info->start_time_ns;
	env.out.oopts.mode = info->mode;
	env.out.oopts.event = info->event;
	env.out.oopts.nevents = output__split_events(info->event, evbuf, sizeof(evbuf), evnames);
	env.out.oopts.events = evnames;
	rc = pick_event(&env, err, sizeof(err));
	if (rc)
		goto fail;
	rc = output__new(env.out.format || env.out.output || !env.diff_base ? env.out.format :
			 "top", env.out.output, &env.out.oopts, &out, err, sizeof(err));
	if (rc)
		goto fail;
	rc = env.diff_base ? open_diff(&env, out, &table, err, sizeof(err)) : 0;
	if (rc)
		goto fail_remove;
	while ((rc = rawrec_reader__next(r, &s, err, sizeof(err))) > 0) {
		if (env.event && s.event && strcmp(s.event, env.event))
			continue;	/* another event's */
		rc = output__add(out, &s);
		if (!rc && table)
			rc = output__add(table, &s);
		if (rc)
			goto fail_write;
	}
	if (rc < 0)
		goto fail_remove;
	end = rawrec_reader__end(r);
	rc = add_sources(out, rawrec_reader__sources(r));
	if (!rc)
		rc = output__finish(out);
	if (!rc && table)
		rc = output__finish(table);
	if (rc)
		goto fail_write;
	if (!end)
		fprintf(stderr, "pyprof-bpf: warning: %s is truncated (the recording was "
			"interrupted?): reported its %llu complete samples\n", env.input,
			(unsigned long long)rawrec_reader__samples(r));
	if (!env.quiet)
		print_summary(env.input, info, end, rawrec_reader__samples(r));
	exit_code = 0;
	goto out;
fail_write:
	snprintf(err, sizeof(err), "writing %s: %s", env.out.output ? env.out.output : "stdout",
		 strerror(-rc));
fail_remove:
	output__free(out);
	out = NULL;
	remove_output(env.out.output);
fail:
	fprintf(stderr, "pyprof-bpf: %s\n", err[0] ? err : strerror(-rc));
out:
	output__free(out);
	output__free(table);
	rawrec_reader__free(r);
	return exit_code;
}
