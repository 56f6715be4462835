/* SPDX-License-Identifier: MIT */
/*
 * record_options.h - record's command line (also top's: the same options
 * with a display in place of the outputs), parsed and checked whole.
 */
#ifndef PYPROF_COMMANDS_RECORD_OPTIONS_H
#define PYPROF_COMMANDS_RECORD_OPTIONS_H

#include "sampling/perf_events.h"
#include <argp.h>
#include <regex.h>
#include <sys/types.h>
#include "output/output_args.h"
#include "sampling/sampler.h"

#define DEFAULT_FREQ 99
#define DEFAULT_NATIVE_STACK 32768
#define DEFAULT_MAX_FRAMES 2048
/* -p PID,PID,... at most */
#define MAX_PIDS 64

enum backend { BACKEND_AUTO, BACKEND_BPF, BACKEND_REMOTE };

struct record_sink;

struct record_env {
	pid_t pid;		/* the first -p target, or the command */
	pid_t pids[MAX_PIDS];	/* every -p target */
	size_t npids;
	int subprocesses;	/* --subprocesses */
	char **argv;		/* -- CMD ARGS: a command to start, NULL-terminated */
	long freq;
	double duration;	/* seconds, 0 = until stopped */
	struct output_args out;	/* -o, --format, --threads, ... */
	const char *raw;	/* --raw FILE */
	enum backend backend;
	long max_frames;
	int verbose;
	int no_frame_cache;	/* --no-frame-cache */
	enum sampler_events events;	/* --events */
	enum sampler_mode mode;		/* --mode */
	int kernel;			/* --kernel */
	int opcodes;			/* --opcodes */
	int blocking;			/* --blocking: remote, threads stopped per tick */
	long native_stack;		/* --native: bytes of user stack; 0: off */
	long stack_size;		/* --stack-size */
	const struct record_sink *sink;	/* `top`: samples go there (record.h) */
	int async;			/* --async: 1; --async=all: 2 */
	int all;			/* -a: every Python process */
	const char *comm_re;		/* --comm REGEX (with -a) */
	regex_t comm;
	const char *event_spec;		/* -e EVENT[,EVENT...]; NULL: cpu-clock */
	struct sampler_event evs[SAMPLER_MAX_EVENTS];	/* -e's, parsed, in its order */
	unsigned int nevs;
	const char *ev_names[SAMPLER_MAX_EVENTS];	/* evs[i].name */
	char ev_joined[SAMPLER_MAX_EVENTS * SAMPLER_EVENT_NAME_MAX];	/* "a,b": perf's names */
	unsigned long long count;	/* -c N: a tick every N events; 0: -F */
	int memory;			/* --mode memory: -e page-faults, weighed in bytes */
	const char *filter;		/* --filter EXPR: the -e tracepoint's hits that match */
};

extern const char record_doc[];
extern const struct argp_option record_options[];
/* argp's parser of record_options over a struct record_env (state->input). */
error_t record_options__parse(int key, char *arg, struct argp_state *state);

/* "cpu", "off-cpu", "wall", "gil", "exception" */
const char *record_mode_name(enum sampler_mode m);
/* The mode as the user named it: record_mode_name's, or "memory". */
const char *record_env__mode_name(const struct record_env *env);

#endif
