/* SPDX-License-Identifier: MIT */
/* record_options.c - record's command line (record_options.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sysexits.h>
#include "pyprof.h"		/* PYPROF_USTACK_MAX */
#include "commands/record.h"
#include "commands/record_options.h"
#include "output/rawrec.h"
#include "sampling/tp_filter.h"
#include "util/parse.h"

const char record_doc[] =
"Sample a running Python process, or a command it starts, and write its stacks.\n"
"\n"
"USAGE: pyprof-bpf [record] -p PID[,PID...] [-F HZ] [-d SECONDS] [-o FILE]\n"
"                          [--format FMT] [--subprocesses]\n"
"       pyprof-bpf [record] -o FILE [OPTIONS] -- CMD [ARGS...]\n"
"\v"
"With a command, pyprof-bpf starts it (under sudo, as the invoking user:\n"
"SUDO_UID, SUDO_GID and SUDO_USER's groups) and samples it until it exits, then\n"
"writes the recording and exits with the command's status (128 + N when it was\n"
"killed by signal N; 127 or 126 when it cannot be run, as in a shell). The\n"
"command keeps the terminal, standard input and output: -o FILE is required,\n"
"so the recording never mixes with its output. Ctrl-C reaches the command from\n"
"the terminal, and SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to pyprof-bpf are passed\n"
"on to it; pyprof-bpf itself goes on recording until the command exits. -d\n"
"ends the recording, not the command: pyprof-bpf writes the recording at once,\n"
"then waits for the command (passing signals on) and exits with its status.\n"
"The process started is sampled, through its exec()s (env, chroot, a shell\n"
"script that execs python), not its children; it must run Python within 5 s.\n"
"If pyprof-bpf fails before sampling begins it kills the command; later, it\n"
"says why and waits for the command (exit status 1). Everything from the first\n"
"argument that is not an option (or after --) is the command's own.\n"
"\n"
"Formats: perf-script (default), collapsed, speedscope, pprof, flamegraph,\n"
"pstats, callgrind, top, heatmap, jsonl (a JSON object per sample, streamed),\n"
"chrome-trace (a timeline for Perfetto), raw; with -o the format is inferred\n"
"from the extension (.perf .folded .speedscope.json .pb.gz .html .pstats\n"
".callgrind .heatmap.html .jsonl .trace.json .pyprof). heatmap shows source\n"
"lines by time (read in the target's root); raw is the recording itself, which\n"
"`pyprof-bpf report` turns into any other format later, without the target;\n"
"--raw FILE writes it besides another format.\n"
"\n"
"Modes (--mode): cpu (default) samples threads while they run on a CPU; off-cpu\n"
"records every interval a thread spends off the CPU, weighing its time, its stack\n"
"ending in why: [syscall] NAME and the kernel functions it slept in, [GIL wait],\n"
"or [runnable] (woken or preempted, waiting for a CPU); wall is both, so each\n"
"thread's samples add up to its time; gil marks CPU samples of a thread without\n"
"the GIL [GIL released]; exception samples only threads with an exception in\n"
"flight or being handled (an except block, a finally it propagates through, a\n"
"handler in a generator or coroutine running), ending in [exception] TYPE;\n"
"memory (BPF) takes a sample at every page fault and weighs it by the page's\n"
"bytes: where the process's memory grows, by Python line. It sees the first\n"
"touch of new pages, not allocations: memory reused from a free list or a pool\n"
"faults nothing, and what is freed is not subtracted. A\n"
"thread running a garbage collection gets <GC> in every mode. The remote backend\n"
"(used without CAP_BPF/CAP_PERFMON) polls the target from outside at each tick:\n"
"it offers cpu (threads in state R), wall (every thread), gil and exception, and\n"
"cannot tell why a thread waits (no off-cpu).\n"
"\n"
"EXAMPLES:\n"
"    sudo pyprof-bpf -p 1234                      # 99 Hz to stdout, to Ctrl-C\n"
"    sudo pyprof-bpf -p 1234 -F 999 -d 30 -o out.perf\n"
"    sudo pyprof-bpf -p 1234 -d 10 --format collapsed | flamegraph.pl > f.svg\n"
"    sudo pyprof-bpf -p 1234 -d 30 -o rec.pyprof  # for: pyprof-bpf report\n"
"    sudo pyprof-bpf -p 1234 -o f.html --raw r.pyprof  # both, same samples\n"
"    sudo pyprof-bpf -p 1234 -d 30 -o out.pstats  # python3 -m pstats, snakeviz\n"
"    sudo pyprof-bpf -p 1234 -d 30 -o callgrind.out.1  # kcachegrind\n"
"    sudo pyprof-bpf -p 1234 -d 10 -o lines.heatmap.html  # hot source lines\n"
"    sudo pyprof-bpf -p 1234 -o live.jsonl & tail -f live.jsonl  # streamed\n"
"    sudo pyprof-bpf -p 1234 -d 10 --mode wall -o t.trace.json  # Perfetto\n"
"    sudo pyprof-bpf -p 1234 -F 9999 --events thread  # per-thread events\n"
"    sudo pyprof-bpf -o out.html -- python3 app.py  # start, sample to its exit\n"
"    sudo pyprof-bpf -F 999 -o out.perf -- ./run.sh  # a script exec'ing python\n"
"    sudo pyprof-bpf -p 1234 --subprocesses -o f.html  # and what it starts\n"
"    sudo pyprof-bpf -p 1234,5678 -d 10 -o out.folded  # several at once\n"
"    sudo pyprof-bpf -a -d 10 -o host.html        # every Python process here\n"
"    sudo pyprof-bpf -a --comm '^gunicorn' -d 10  # those named like this\n"
"    sudo pyprof-bpf -p 1234 --mode wall -d 10 -o wall.html  # on and off CPU\n"
"    sudo pyprof-bpf -p 1234 --mode off-cpu -d 10 -o wait.folded  # why it waits\n"
"    sudo pyprof-bpf -p 1234 --mode gil -d 10 -o gil.html  # who holds the GIL\n"
"    sudo pyprof-bpf -p 1234 --mode exception -o exc.html  # time in handlers\n"
"    sudo pyprof-bpf -p 1234 --kernel -o k.html  # and the kernel under Python\n"
"    sudo pyprof-bpf -p 1234 --opcodes -o op.html  # and the instruction running\n"
"    sudo pyprof-bpf -p 1234 --mode memory -o mem.html  # where memory grows\n"
"    sudo pyprof-bpf -p 1234 -e page-faults -o f.html  # who touches new memory\n"
"    sudo pyprof-bpf -p 1234 -e syscalls:sys_enter_openat  # who opens files\n"
"    sudo pyprof-bpf -p 1234 -e cpu-clock,page-faults -o both.pb.gz  # two at once\n"
"    pyprof-bpf -p 1234 --backend remote -d 5     # no BPF: read from outside\n";

enum {
	OPT_BACKEND = 1000,
	OPT_NO_FRAME_CACHE,
	OPT_EVENTS,
	OPT_MAX_DEPTH,
	OPT_RAW,
	OPT_SUBPROCESSES,
	OPT_MODE,
	OPT_KERNEL,
	OPT_NATIVE,
	OPT_STACK_SIZE,
	OPT_ASYNC,
	OPT_COMM,
	OPT_OPCODES,
	OPT_BLOCKING,
	OPT_FILTER,
};

const struct argp_option record_options[] = {
	{ "pid", 'p', "PID[,PID...]", 0, "Process(es) to profile", 0 },
	{ "all", 'a', NULL, 0, "BPF: every Python process of the host and its containers, "
	  "found from the samples themselves (each one's first tick), those that start "
	  "during the recording too; one root per process", 0 },
	{ "comm", OPT_COMM, "REGEX", 0, "With -a: only processes whose name (comm) matches "
	  "this extended regular expression", 0 },
	{ "subprocesses", OPT_SUBPROCESSES, NULL, 0, "BPF: also every process the targets "
	  "start, from its start (fork, exec, multiprocessing, subprocess), each sample with "
	  "its own pid; outputs get one root per process", 0 },
	{ "freq", 'F', "HZ", 0, "Samples a second per running thread (default 99; agent: "
	  "19)", 0 },
	{ "event", 'e', "EVENT[,EVENT...]", 0, "BPF, cpu mode: take the samples at this event "
	  "(up to 4, comma-separated: each sample says its own; each stack then starts at an "
	  "event root frame [EVENT], pprof has a sample type per event and the flame graph a "
	  "choice; several are opened on every CPU, and need Linux 5.17+) instead of "
	  "the CPU clock, named as perf names it: page-faults (faults), minor-faults, "
	  "major-faults, context-switches (cs), cpu-migrations, task-clock, alignment-faults, "
	  "emulation-faults; hardware cycles, instructions, cache-misses, cache-references, "
	  "branches, branch-misses, ref-cycles where the CPU exposes counters; a tracepoint "
	  "SUBSYS:NAME (syscalls:sys_enter_openat), every hit sampled. Each sample weighs the "
	  "events it stands for, and perf-script output names the event", 0 },
	{ "count", 'c', "N", 0, "With -e: one sample every N events (instead of -F's rate; a "
	  "tracepoint's on each CPU)", 0 },
	{ "filter", OPT_FILTER, "EXPR", 0, "With -e SUBSYS:NAME (the first tracepoint there): "
	  "only its hits whose record "
	  "matches EXPR, in the kernel's tracepoint filter syntax (as perf record --filter: "
	  "'flags & 0x40 && filename ~ \"/tmp/*\"'), tested by the BPF program before it takes "
	  "the sample; numbers with == != < <= > >= &, strings with == != ~ and a prefix abc* "
	  "or suffix *abc, && || ! and parentheses", 0 },
	{ "duration", 'd', "SECONDS", 0, "Stop after this long (default: Ctrl-C or target exit; "
	  "a command started runs on)", 0 },
	{ "backend", OPT_BACKEND, "bpf|remote", 0, "Sampling backend (default: bpf, falling back "
	  "to remote when BPF cannot be used)", 0 },
	{ "no-frame-cache", OPT_NO_FRAME_CACHE, NULL, 0, "CPython 3.15, both backends: walk every "
	  "stack whole, and never write the frame-cache anchor (last_profiled_frame) into the target "
	  "(by default a rare 16-byte write, without stopping it, makes deep stacks cost about "
	  "what shallow ones do)", 0 },
	{ "events", OPT_EVENTS, "KIND", 0, "BPF: thread: one cpu-clock event per thread of "
	  "the target (ticks only while it runs, but a cost at each of its context switches); "
	  "cpu: one per CPU (no cost at its switches, a timer on every CPU); auto (default): "
	  "cpu while the rate is at most 1,000 Hz and CPUs x rate at most 200,000", 0 },
	{ "mode", OPT_MODE, "cpu|off-cpu|wall|gil|exception|memory", 0, "What to sample "
	  "(default cpu): threads on a CPU; time off the CPU with why (BPF); both (wall); CPU "
	  "time marked by whether the GIL was held (gil); CPU time of threads with an exception "
	  "in flight or being handled, ending in [exception] TYPE (exception); where memory "
	  "grows: every page fault, weighed by its page in bytes (memory: -e page-faults; the "
	  "first touch of new pages, not allocations; BPF)", 0 },
	{ "kernel", OPT_KERNEL, NULL, 0, "BPF: a sample taken in the kernel (a system call at "
	  "work) ends in the kernel functions it was in", 0 },
	{ "native", OPT_NATIVE, NULL, 0, "BPF: native frames too (C extensions, libc, the "
	  "interpreter), merged with the Python frames in call order; DWARF unwinding with "
	  "libdw, no frame pointers needed", 0 },
	{ "stack-size", OPT_STACK_SIZE, "BYTES", 0, "--native: user stack copied per sample at "
	  "most (default and most 32768; a thread's copies stop at its outermost frame once "
	  "found)", 0 },
	{ "async", OPT_ASYNC, "all", OPTION_ARG_OPTIONAL, "BPF, CPython 3.14+: task-aware "
	  "stacks: a thread running an asyncio task shows that task's frames, then <task NAME>, "
	  "then the frames of the task awaiting it, and so on to the root task; =all: also "
	  "every pending task at each tick, read from outside, weighing the wall time since "
	  "the last (event task-wait)", 0 },
	{ "opcodes", OPT_OPCODES, NULL, 0, "Each sample ends in the bytecode instruction its "
	  "innermost Python frame was executing, specialised form included, read at the sample "
	  "from the code's adaptive bytecode: [op] BINARY_OP_ADD_INT", 0 },
	{ "blocking", OPT_BLOCKING, NULL, 0, "Remote backend: stop the target's threads "
	  "(ptrace) while each tick reads their stacks, so that none is torn (as py-spy does "
	  "by default): exact stacks at the cost of a pause of the target per tick; implies "
	  "--backend remote", 0 },
	{ "max-depth", OPT_MAX_DEPTH, "N", 0, "Python frames kept per sample (default 2048)", 0 },
	{ "raw", OPT_RAW, "FILE", 0, "Also write a raw recording of the same samples (for "
	  "`pyprof-bpf report`)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: the BPF program loaded and the verifier's figures, "
	  "libbpf's warnings; twice (-vv), libbpf's debug output and a rejected program's "
	  "whole verifier log", 0 },
	{ 0 },
};

const char *record_env__mode_name(const struct record_env *env)
{
	return env->memory ? "memory" : record_mode_name(env->mode);
}

const char *record_mode_name(enum sampler_mode m)
{
	switch (m) {
	case SAMPLER_MODE_OFFCPU:
		return "off-cpu";
	case SAMPLER_MODE_WALL:
		return "wall";
	case SAMPLER_MODE_GIL:
		return "gil";
	case SAMPLER_MODE_EXCEPTION:
		return "exception";
	default:
		return "cpu";
	}
}

/* -p PID[,PID...]: every element a PID: "12,", ",12" and "12,,34" are refused. */
static void parse_pids(struct record_env *env, char *arg, struct argp_state *state)
{
	long v = 0;

	for (char *tok = arg, *next; tok; tok = next) {
		next = strchr(tok, ',');
		if (next)
			*next++ = '\0';
		if (!*tok)
			argp_error(state, "invalid PID list: an empty element");
		if (parse_long(tok, 1, INT_MAX, &v))
			argp_error(state, "invalid PID: %s", tok);
		if (env->npids == MAX_PIDS)
			argp_error(state, "at most %d processes with -p", MAX_PIDS);
		for (size_t i = 0; i < env->npids; i++)
			if (env->pids[i] == (pid_t)v)
				argp_error(state, "PID %ld given twice", v);
		env->pids[env->npids++] = (pid_t)v;
	}
	if (!env->npids)
		argp_error(state, "invalid PID: %s", arg);
	env->pid = env->pids[0];
}

/* @arg among @names (NULL-terminated): its index; else argp_error with @what. */
static int parse_choice(const char *arg, const char *const *names, const char *what,
			struct argp_state *state)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(arg, names[i]) == 0)
			return i;
	argp_error(state, "invalid %s: %s", what, arg);
	return 0;
}

static void parse_enums(struct record_env *env, int key, char *arg, struct argp_state *state)
{
	static const char *const backends[] = { "bpf", "remote", NULL };
	static const char *const events[] = { "auto", "thread", "cpu", NULL };
	static const char *const modes[] = { "cpu", "off-cpu", "offcpu", "wall", "gil",
					     "exception", "memory", NULL };
	static const enum sampler_mode mode_of[] = { SAMPLER_MODE_CPU, SAMPLER_MODE_OFFCPU,
						     SAMPLER_MODE_OFFCPU, SAMPLER_MODE_WALL,
						     SAMPLER_MODE_GIL, SAMPLER_MODE_EXCEPTION,
						     SAMPLER_MODE_CPU };
	int i;

	switch (key) {
	case OPT_BACKEND:
		env->backend = parse_choice(arg, backends, "backend (bpf or remote)", state) ?
			       BACKEND_REMOTE : BACKEND_BPF;
		break;
	case OPT_EVENTS:
		env->events = (enum sampler_events)parse_choice(arg, events,
					"events (auto, thread or cpu)", state);
		break;
	case OPT_MODE:
		i = parse_choice(arg, modes, "mode (cpu, off-cpu, wall, gil, exception or memory)",
				 state);
		env->mode = mode_of[i];
		env->memory = !strcmp(modes[i], "memory");
		break;
	}
}

/* The options that take a number, or a duration. */
static void parse_numbers(struct record_env *env, int key, char *arg, struct argp_state *state)
{
	char *end;
	long v = 0;

	switch (key) {
	case 'F':
		if (parse_long(arg, 1, 100000, &v))
			argp_error(state, "invalid frequency (1 to 100000 Hz): %s", arg);
		env->freq = v;
		break;
	case 'd':
		errno = 0;
		env->duration = strtod(arg, &end);
		if (errno || end == arg || *end || env->duration <= 0 || env->duration > 1e7)
			argp_error(state, "invalid duration: %s", arg);
		break;
	case OPT_STACK_SIZE:
		if (parse_long(arg, 1024, PYPROF_USTACK_MAX, &v))
			argp_error(state, "invalid stack size (1024 to %d bytes): %s",
				   PYPROF_USTACK_MAX, arg);
		env->stack_size = v;
		break;
	case OPT_MAX_DEPTH:
		if (parse_long(arg, 1, 65536, &v))
			argp_error(state, "invalid depth (1 to 65536): %s", arg);
		env->max_frames = v;
		break;
	}
}

static bool wants_raw(const struct record_env *env)
{
	return env->raw || rawrec__wanted(env->out.format, env->out.output);
}

/* What is sampled: the targets, -a, a command, and their outputs. */
static void check_targets(struct record_env *env, struct argp_state *state)
{
	if (env->all && (env->pid || env->argv))
		argp_error(state, "-a takes every Python process: not with -p or a command");
	if (env->comm_re && !env->all)
		argp_error(state, "--comm narrows -a");
	if (env->comm_re) {
		int rc = regcomp(&env->comm, env->comm_re, REG_EXTENDED | REG_NOSUB);

		if (rc) {
			char msg[128];

			regerror(rc, &env->comm, msg, sizeof(msg));
			argp_error(state, "invalid --comm regular expression '%s': %s",
				   env->comm_re, msg);
		}
	}
	if (env->all && env->backend == BACKEND_REMOTE)
		argp_error(state, "-a is for the BPF backend: processes are found from "
			   "the kernel's samples");
	if (env->all && env->events == SAMPLER_EVENTS_THREAD)
		argp_error(state, "-a needs per-CPU events (--events cpu)");
	if (env->all && wants_raw(env))
		argp_error(state, "a raw recording holds one process: not with -a");
	if (!env->pid && !env->argv && !env->all)
		argp_error(state, "a target is needed: -p PID, -a, or -- COMMAND [ARGS...]");
	if (env->pid && env->argv)
		argp_error(state, "-p PID and a command exclude each other");
	if (env->argv && !env->sink && (!env->out.output || strcmp(env->out.output, "-") == 0))
		argp_error(state, "with a command, -o FILE is needed: the command's "
			   "output is on stdout");
	if (env->argv && env->raw && strcmp(env->raw, "-") == 0)
		argp_error(state, "with a command, --raw needs a file: the command's "
			   "output is on stdout");
	if (env->raw && rawrec__wanted(env->out.format, env->out.output))
		argp_error(state, "--raw is for writing another format besides the raw "
			   "recording; -o already writes one");
}

/* --blocking: the remote backend, whatever checks come after. */
static void check_blocking(struct record_env *env, struct argp_state *state)
{
	if (!env->blocking)
		return;
	if (env->backend == BACKEND_BPF)
		argp_error(state, "--blocking is for the remote backend (BPF reads each stack "
			   "with its thread stopped already)");
	env->backend = BACKEND_REMOTE;
}

/* What needs the BPF backend, and the options that do not combine. */
static void check_features(struct record_env *env, struct argp_state *state)
{
	if (env->events && env->backend == BACKEND_REMOTE)
		argp_error(state, "--events is for the BPF backend");
	if (env->mode == SAMPLER_MODE_OFFCPU && env->backend == BACKEND_REMOTE)
		argp_error(state, "--mode off-cpu needs the BPF backend: polling from "
			   "outside cannot see when or why a thread leaves the CPU (the "
			   "remote backend offers cpu, wall, gil and exception)");
	if (env->stack_size && !env->native_stack)
		argp_error(state, "--stack-size is for --native");
	if (env->native_stack && env->stack_size)
		env->native_stack = env->stack_size;
	if (env->native_stack && env->backend == BACKEND_REMOTE)
		argp_error(state, "--native is for the BPF backend");
	if (env->native_stack && env->mode == SAMPLER_MODE_OFFCPU)
		argp_error(state, "--native unwinds samples on a CPU: not with --mode off-cpu");
	if (env->async && env->backend == BACKEND_REMOTE)
		argp_error(state, "--async is for the BPF backend: the running task is "
			   "read with the stack, in the kernel");
	if (env->kernel && env->backend == BACKEND_REMOTE)
		argp_error(state, "--kernel is for the BPF backend");
	if (env->mode == SAMPLER_MODE_OFFCPU && env->events)
		argp_error(state, "--events is for the modes that sample on a CPU");
}

/* -c N: a whole number of events, 1 to 2^32 - 1 (a tracepoint's count
 * lives in a 32-bit BPF global). */
static int parse_count(const char *arg, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(arg, &end, 10);
	return errno || end == arg || *end || arg[0] == '-' || !*out || *out > UINT32_MAX ?
	       -EINVAL : 0;
}

/* --filter EXPR: for the first tracepoint of -e (the others are not
 * filtered), compiled now to say what is wrong at once (the BPF backend
 * compiles it again into its program). */
static void check_filter(struct record_env *env, struct argp_state *state)
{
	struct pyprof_filter f;
	char err[PYPROF_ERRLEN];
	int tp = -1;

	if (!env->filter)
		return;
	for (unsigned int i = 0; i < env->nevs && tp < 0; i++)
		if (sampler_event__is_tracepoint(&env->evs[i]))
			tp = (int)i;
	if (tp < 0)
		argp_error(state, "--filter is for a tracepoint's hits: -e SUBSYS:NAME");
	if (tp_filter__compile(&env->evs[tp], env->filter, &f, err, sizeof(err)))
		argp_failure(state, EX_USAGE, 0, "%s", err);
}

/* -e EVENT[,EVENT...] into env->evs, each once, at most SAMPLER_MAX_EVENTS. */
static void parse_events(struct record_env *env, struct argp_state *state)
{
	char err[PYPROF_ERRLEN], one[SAMPLER_EVENT_NAME_MAX];
	const char *p = env->event_spec, *comma;
	size_t len;

	env->nevs = 0;
	env->ev_joined[0] = '\0';
	for (; ; p = comma + 1) {
		comma = strchr(p, ',');
		len = comma ? (size_t)(comma - p) : strlen(p);
		if (!len || len >= sizeof(one))
			argp_failure(state, EX_USAGE, 0, "-e %s: %s", env->event_spec,
				     len ? "an event name too long" : "an empty event name");
		if (env->nevs == SAMPLER_MAX_EVENTS)
			argp_failure(state, EX_USAGE, 0, "-e %s: at most %d events at once",
				     env->event_spec, SAMPLER_MAX_EVENTS);
		memcpy(one, p, len);
		one[len] = '\0';
		if (sampler_event__parse(one, &env->evs[env->nevs], err, sizeof(err)))
			argp_failure(state, EX_USAGE, 0, "%s", err);
		for (unsigned int i = 0; i < env->nevs; i++)
			if (!strcmp(env->evs[i].name, env->evs[env->nevs].name))
				argp_failure(state, EX_USAGE, 0, "-e %s: %s given twice",
					     env->event_spec, env->evs[i].name);
		env->ev_names[env->nevs] = env->evs[env->nevs].name;
		if (env->nevs)
			strcat(env->ev_joined, ",");
		strcat(env->ev_joined, env->evs[env->nevs].name);
		env->nevs++;
		if (!comma)
			break;
	}
}

/* -e EVENT, -c N: parsed (tracefs read, a hardware counter tried) once the
 * other options are known; each refusal one line. */
static void check_event(struct record_env *env, struct argp_state *state)
{
		if (env->memory && env->event_spec)
		argp_error(state, "--mode memory takes its samples at page-faults: not with -e %s",
			   env->event_spec);
	if (env->memory && env->backend == BACKEND_REMOTE)
		argp_error(state, "--mode memory is for the BPF backend: the program runs at each "
			   "page fault, in the thread that faults");
	if (env->memory)
		env->event_spec = "page-faults";
	if (env->count && !env->event_spec)
		argp_error(state, "-c N counts the events of -e EVENT");
	if (env->filter && !env->event_spec)
		argp_error(state, "--filter is for a tracepoint's hits: -e SUBSYS:NAME");
	if (!env->event_spec)
		return;
	if (env->mode != SAMPLER_MODE_CPU)
		argp_error(state, "-e EVENT takes samples at an event: cpu mode's (--mode %s "
			   "takes its own)", record_mode_name(env->mode));
	if (env->backend == BACKEND_REMOTE)
		argp_error(state, "-e EVENT is for the BPF backend: the program runs at the "
			   "event, in the thread it happens in");
	parse_events(env, state);
	for (unsigned int i = 0; i < env->nevs; i++)
		if (sampler_event__is_tracepoint(&env->evs[i]) &&
		    env->events == SAMPLER_EVENTS_THREAD)
			argp_error(state, "-e %s: a tracepoint is attached once for the whole "
				   "machine, not per thread (--events thread)", env->evs[i].name);
	if (env->nevs > 1 && env->events == SAMPLER_EVENTS_THREAD)
		argp_error(state, "-e %s: several events are opened on every CPU, not per "
			   "thread (--events thread)", env->event_spec);
	check_filter(env, state);
}

/* Several processes at once (--subprocesses, -p A,B). */
static void check_multi(struct record_env *env, struct argp_state *state)
{
	if ((env->subprocesses || env->npids > 1) && env->backend == BACKEND_REMOTE)
		argp_error(state, "--subprocesses and several -p targets are for the BPF "
			   "backend");
	/* Per-thread events are opened on the first target's threads only. */
	if (env->subprocesses && env->events == SAMPLER_EVENTS_THREAD)
		argp_error(state, "--subprocesses needs per-CPU events (--events cpu)");
	if (env->npids > 1 && env->events == SAMPLER_EVENTS_THREAD)
		argp_error(state, "several -p targets need per-CPU events (--events cpu)");
	if ((env->subprocesses || env->npids > 1) && wants_raw(env))
		argp_error(state, "a raw recording holds one process: not with "
			   "--subprocesses or several -p targets");
}

error_t record_options__parse(int key, char *arg, struct argp_state *state)
{
	struct record_env *env = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = env->sink ? env->sink->argp_input : &env->out;
		break;
	case 'p':
		parse_pids(env, arg, state);
		break;
	case OPT_SUBPROCESSES:
		env->subprocesses = 1;
		break;
	case 'a':
		env->all = 1;
		break;
	case OPT_COMM:
		env->comm_re = arg;
		break;
	case 'F':
	case 'd':
	case OPT_STACK_SIZE:
	case OPT_MAX_DEPTH:
		parse_numbers(env, key, arg, state);
		break;
	case 'e':
		env->event_spec = arg;
		break;
	case OPT_FILTER:
		env->filter = arg;
		break;
	case 'c':
		if (parse_count(arg, &env->count))
			argp_error(state, "invalid count (1 to 2^32 - 1 events): %s", arg);
		break;
	case OPT_BACKEND:
	case OPT_EVENTS:
	case OPT_MODE:
		parse_enums(env, key, arg, state);
		break;
	case OPT_NO_FRAME_CACHE:
		env->no_frame_cache = 1;
		break;
	case OPT_KERNEL:
		env->kernel = 1;
		break;
	case OPT_BLOCKING:
		env->blocking = 1;
		break;
	case OPT_OPCODES:
		env->opcodes = 1;
		break;
	case OPT_NATIVE:
		if (!env->native_stack)
			env->native_stack = DEFAULT_NATIVE_STACK;
		break;
	case OPT_ASYNC:
		if (arg && strcmp(arg, "all"))
			argp_error(state, "invalid --async=%s (--async, or --async=all)", arg);
		env->async = arg ? 2 : 1;
		break;
	case OPT_RAW:
		env->raw = arg;
		break;
	case 'v':
		/* -v: libbpf's warnings and the verifier's figures; -vv: its
		 * debug output and a rejected program's whole verifier log. */
		if (env->verbose < 2)
			env->verbose++;
		break;
	case ARGP_KEY_ARG:
		/* The first argument that is not an option (parsed in order:
		 * ARGP_IN_ORDER) starts the command; the rest are its own,
		 * options included. */
		env->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (env->sink && env->sink->default_all && !env->npids && !env->argv)
			env->all = 1;
		check_blocking(env, state);
		check_targets(env, state);
		check_features(env, state);
		check_event(env, state);
		check_multi(env, state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}
