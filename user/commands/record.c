/* SPDX-License-Identifier: MIT */
/*
 * record.c - the recording loop: pick a backend, deliver its raw samples
 * through the symbolizer to an output and/or a raw recording (rawrec.h), or
 * to a sink (record__run(): `top`, record.h), stop cleanly on -d, Ctrl-C,
 * SIGTERM or the target's exit, and say what could not be done.
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pyprof.h"		/* PYPROF_USTACK_MAX */
#include "sampling/bpf_sampler.h"
#include "target/launch.h"
#include "output/output.h"
#include "output/output_args.h"
#include "target/pidwatch.h"
#include "target/procfs.h"
#include "sampling/proc_follow.h"
#include "target/procset.h"
#include "target/pyproc.h"
#include "output/rawrec.h"
#include "offcpu/leaf.h"
#include "asyncio/task_stacks.h"
#include "native/merge.h"
#include "native/unwind.h"
#include "commands/record.h"
#include "sampling/remote_sampler.h"
#include "symbols/stack_memo.h"
#include "symbols/symbolizer.h"
#include "target/thread_names.h"
#include "util/parse.h"
#include "util/clock.h"

#define DEFAULT_FREQ 99
#define DEFAULT_NATIVE_STACK 32768
#define NATIVE_MAX 256		/* native frames kept per sample */
#define MERGE_PY_MAX 4096	/* Python frames a merged stack holds */
#define DEFAULT_MAX_FRAMES 2048
#define MAX_NAMES 4096
/* A command started must run Python within this long (record__start_command). */
#define COMMAND_PYTHON_TIMEOUT 5.0

enum backend { BACKEND_AUTO, BACKEND_BPF, BACKEND_REMOTE };

/* -p PID,PID,... at most */
#define MAX_PIDS 64

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
	long native_stack;		/* --native: bytes of user stack; 0: off */
	long stack_size;		/* --stack-size */
	const struct record_sink *sink;	/* `top`: samples go there (record.h) */
	int async;			/* --async: 1; --async=all: 2 */
	int all;			/* -a: every Python process */
	const char *comm_re;		/* --comm REGEX (with -a) */
	regex_t comm;
};

/* --native: one unwinder per process, and what merging a sample takes. */
struct native_work {
	struct native_proc {
		pid_t pid;
		struct native_unwinder *u;	/* NULL: could not be made */
	} *procs;
	size_t nprocs;
	struct native_frame nat[NATIVE_MAX];
	struct merge_native mnat[NATIVE_MAX];
	struct merge_item items[NATIVE_MAX + MERGE_PY_MAX + 1];
	struct py_sym merged[NATIVE_MAX + MERGE_PY_MAX + 1];
	uint8_t kinds[NATIVE_MAX + MERGE_PY_MAX + 1];
	struct out_addr addrs[NATIVE_MAX + MERGE_PY_MAX + 1];
	uint64_t samples, unwind_failed, no_unwinder;
	uint64_t cut_by_copy;	/* of unwind_failed: the stack copy ended first */
	uint32_t stack_bytes;	/* --stack-size: the whole copy */
	uint64_t cut_by_end;	/* of unwind_failed: copied up to an end learnt too low */
	uint64_t copied;	/* stack bytes of the samples, all told */
};

struct record_ctx {
	struct record_env *env;
	/* Every process sampled, each with its symbolizer and stack memo. */
	struct procset *procs;
	struct bpf_sampler *bs;	/* to configure processes found later */
	/* A command started whose interpreter is not configured yet
	 * (record__start_command): its execs are counted, not followed, and
	 * its children's execs are looked at once it is. */
	int launching;
	unsigned int cmd_execs;
	uint64_t cmd_exec_ns;	/* the last one, CLOCK_MONOTONIC */
	/* The command, sampled without --subprocesses, exec'd: the
	 * interpreter sampled is gone, and the recording ends. */
	int main_execed;
	struct output *out;	/* NULL when only a raw recording is written */
	struct output *summary;	/* the hottest functions on a terminal's stderr */
	/* -d: CLOCK_MONOTONIC ns after which a poll stops taking samples (a
	 * consumer behind the kernel must not stretch the recording). */
	uint64_t deadline_ns;
	int past_deadline;
	struct sampler_stats late;	/* samples dropped for being after it */
	struct rawrec_writer *raw;
	char comm[32];
	struct thread_names *names;
	uint64_t period_ns;
	size_t symbol_errors;
	size_t snapshot_errors;		/* code snapshots that could not be used */
	struct sampler_stats unknown;	/* samples of a process that could not be read */
	int out_err;
	const char *out_err_file;	/* the file out_err is about */
	struct leaf_names *leaf;	/* names of the frames past the Python ones */
	/* --native: the sample's Python frames without the interpreter's
	 * entry frames (which only say where to merge), the lengths of its
	 * runs (one per evaluation loop's call), one unwinder per process,
	 * and what a merged stack is made of. */
	struct py_rawframe *pyonly;
	uint32_t pyonly_cap;
	uint32_t *runs;
	uint32_t nruns;
	uint64_t *entries;		/* entry frames' addresses (3.12+: on the C stack) */
	uint32_t nentries;
	struct native_work *nw;		/* NULL without --native */
	/* Off-CPU time clipped off at -d, or by the end of the recording. */
	uint64_t clipped_ns;
	/* --async: the main target's task-aware stacks, once its asyncio
	 * tables are found (3.14: once it imports asyncio). */
	struct task_stacks *tasks;
	struct proc_entry *async_proc;
	int async_waiting;		/* asyncio not imported yet: said once */
	uint64_t pending_ns;		/* --async=all: the last pending tasks' time */
	uint64_t pending_weight;	/* and the weight of this round's */
	/* The processes followed besides the targets (--subprocesses, -a). */
	struct proc_follow *follow;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static const char record_doc[] =
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
"Formats: perf-script (default), collapsed, speedscope, pprof, flamegraph, top,\n"
"raw; with -o the format is inferred from the extension (.perf .folded\n"
".speedscope.json .pb.gz .html .pyprof). raw is the recording itself, which\n"
"`pyprof-bpf report` turns into any other format later, without the target;\n"
"--raw FILE writes it besides another format.\n"
"\n"
"Modes (--mode): cpu (default) samples threads while they run on a CPU; off-cpu\n"
"records every interval a thread spends off the CPU, weighing its time, its stack\n"
"ending in why: [syscall] NAME and the kernel functions it slept in, [GIL wait],\n"
"or [runnable] (woken or preempted, waiting for a CPU); wall is both, so each\n"
"thread's samples add up to its time; gil marks CPU samples of a thread without\n"
"the GIL [GIL released]. A thread running a garbage collection gets <GC> in\n"
"every mode. The remote backend (used without CAP_BPF/CAP_PERFMON) polls the\n"
"target from outside at each tick: it offers cpu (threads in state R), wall\n"
"(every thread) and gil, and cannot tell why a thread waits (no off-cpu).\n"
"\n"
"EXAMPLES:\n"
"    sudo pyprof-bpf -p 1234                      # 99 Hz to stdout, to Ctrl-C\n"
"    sudo pyprof-bpf -p 1234 -F 999 -d 30 -o out.perf\n"
"    sudo pyprof-bpf -p 1234 -d 10 --format collapsed | flamegraph.pl > f.svg\n"
"    sudo pyprof-bpf -p 1234 -d 30 -o rec.pyprof  # for: pyprof-bpf report\n"
"    sudo pyprof-bpf -p 1234 -o f.html --raw r.pyprof  # both, same samples\n"
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
"    sudo pyprof-bpf -p 1234 --kernel -o k.html  # and the kernel under Python\n"
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
};

static const struct argp_option record_options[] = {
	{ "pid", 'p', "PID[,PID...]", 0, "Process(es) to profile", 0 },
	{ "all", 'a', NULL, 0, "BPF: every Python process of the host and its containers, "
	  "found from the samples themselves (each one's first tick), those that start "
	  "during the recording too; one root per process", 0 },
	{ "comm", OPT_COMM, "REGEX", 0, "With -a: only processes whose name (comm) matches "
	  "this extended regular expression", 0 },
	{ "subprocesses", OPT_SUBPROCESSES, NULL, 0, "BPF: also every process the targets "
	  "start, from its start (fork, exec, multiprocessing, subprocess), each sample with "
	  "its own pid; outputs get one root per process", 0 },
	{ "freq", 'F', "HZ", 0, "Samples a second per running thread (default 99)", 0 },
	{ "duration", 'd', "SECONDS", 0, "Stop after this long (default: Ctrl-C or target exit; "
	  "a command started runs on)", 0 },
	{ "backend", OPT_BACKEND, "bpf|remote", 0, "Sampling backend (default: bpf, falling back "
	  "to remote when BPF cannot be used)", 0 },
	{ "no-frame-cache", OPT_NO_FRAME_CACHE, NULL, 0, "CPython 3.15, BPF: walk every stack "
	  "whole, and never write the frame-cache anchor (last_profiled_frame) into the target "
	  "(by default a rare 16-byte write, without stopping it, makes deep stacks cost about "
	  "what shallow ones do)", 0 },
	{ "events", OPT_EVENTS, "KIND", 0, "BPF: thread: one cpu-clock event per thread of "
	  "the target (ticks only while it runs, but a cost at each of its context switches); "
	  "cpu: one per CPU (no cost at its switches, a timer on every CPU); auto (default): "
	  "cpu while the rate is at most 1,000 Hz and CPUs x rate at most 200,000", 0 },
	{ "mode", OPT_MODE, "cpu|off-cpu|wall|gil", 0, "What to sample (default cpu): threads on "
	  "a CPU; time off the CPU with why (BPF); both (wall); CPU time marked by whether "
	  "the GIL was held (gil)", 0 },
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
	{ "max-depth", OPT_MAX_DEPTH, "N", 0, "Python frames kept per sample (default 2048)", 0 },
	{ "raw", OPT_RAW, "FILE", 0, "Also write a raw recording of the same samples (for "
	  "`pyprof-bpf report`)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose (libbpf) messages", 0 },
	{ 0 },
};

static error_t record_parse(int key, char *arg, struct argp_state *state)
{
	struct record_env *env = state->input;
	char *end;
	long v = 0;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = env->sink ? env->sink->argp_input : &env->out;
		break;
	case 'p':
		/* Every element a PID: "12,", ",12" and "12,,34" are refused. */
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
	case OPT_BACKEND:
		if (strcmp(arg, "bpf") == 0)
			env->backend = BACKEND_BPF;
		else if (strcmp(arg, "remote") == 0)
			env->backend = BACKEND_REMOTE;
		else
			argp_error(state, "invalid backend (bpf or remote): %s", arg);
		break;
	case OPT_NO_FRAME_CACHE:
		env->no_frame_cache = 1;
		break;
	case OPT_EVENTS:
		if (strcmp(arg, "auto") == 0)
			env->events = SAMPLER_EVENTS_AUTO;
		else if (strcmp(arg, "thread") == 0)
			env->events = SAMPLER_EVENTS_THREAD;
		else if (strcmp(arg, "cpu") == 0)
			env->events = SAMPLER_EVENTS_CPU;
		else
			argp_error(state, "invalid events (auto, thread or cpu): %s", arg);
		break;
	case OPT_MODE:
		if (strcmp(arg, "cpu") == 0)
			env->mode = SAMPLER_MODE_CPU;
		else if (strcmp(arg, "off-cpu") == 0 || strcmp(arg, "offcpu") == 0)
			env->mode = SAMPLER_MODE_OFFCPU;
		else if (strcmp(arg, "wall") == 0)
			env->mode = SAMPLER_MODE_WALL;
		else if (strcmp(arg, "gil") == 0)
			env->mode = SAMPLER_MODE_GIL;
		else
			argp_error(state, "invalid mode (cpu, off-cpu, wall or gil): %s", arg);
		break;
	case OPT_KERNEL:
		env->kernel = 1;
		break;
	case OPT_NATIVE:
		if (!env->native_stack)
			env->native_stack = DEFAULT_NATIVE_STACK;
		break;
	case OPT_STACK_SIZE:
		if (parse_long(arg, 1024, PYPROF_USTACK_MAX, &v))
			argp_error(state, "invalid stack size (1024 to %d bytes): %s",
				   PYPROF_USTACK_MAX, arg);
		env->stack_size = v;
		break;
	case OPT_ASYNC:
		if (arg && strcmp(arg, "all"))
			argp_error(state, "invalid --async=%s (--async, or --async=all)", arg);
		env->async = arg ? 2 : 1;
		break;
	case OPT_MAX_DEPTH:
		if (parse_long(arg, 1, 65536, &v))
			argp_error(state, "invalid depth (1 to 65536): %s", arg);
		env->max_frames = v;
		break;
	case OPT_RAW:
		env->raw = arg;
		break;
	case 'v':
		env->verbose = 1;
		break;
	case ARGP_KEY_ARG:
		/* The first argument that is not an option (parsed in order:
		 * ARGP_IN_ORDER) starts the command; the rest are its own,
		 * options included. */
		env->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
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
		if (env->all && (env->raw || rawrec__wanted(env->out.format, env->out.output)))
			argp_error(state, "a raw recording holds one process: not with -a");
		if (env->all && env->async)
			argp_error(state, "--async samples one process: not with -a");
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
		if (env->events && env->backend == BACKEND_REMOTE)
			argp_error(state, "--events is for the BPF backend");
		if (env->mode == SAMPLER_MODE_OFFCPU && env->backend == BACKEND_REMOTE)
			argp_error(state, "--mode off-cpu needs the BPF backend: polling from "
				   "outside cannot see when or why a thread leaves the CPU (the "
				   "remote backend offers cpu, wall and gil)");
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
		if (env->async && (env->subprocesses || env->npids > 1))
			argp_error(state, "--async samples one process: not with --subprocesses "
				   "or several -p targets");
		if (env->async && env->native_stack)
			argp_error(state, "--async and --native do not combine yet");
		if (env->async && env->mode == SAMPLER_MODE_OFFCPU)
			argp_error(state, "--async reads the running task of a tick: not with "
				   "--mode off-cpu");
		if (env->async && (env->raw || rawrec__wanted(env->out.format, env->out.output)))
			argp_error(state, "--async: a raw recording does not keep tasks yet");
		if (env->kernel && env->backend == BACKEND_REMOTE)
			argp_error(state, "--kernel is for the BPF backend");
		if (env->mode == SAMPLER_MODE_OFFCPU && env->events)
			argp_error(state, "--events is for the modes that sample on a CPU");
		if ((env->subprocesses || env->npids > 1) && env->backend == BACKEND_REMOTE)
			argp_error(state, "--subprocesses and several -p targets are for the BPF "
				   "backend");
		/* Per-thread events are opened on the first target's threads only. */
		if (env->subprocesses && env->events == SAMPLER_EVENTS_THREAD)
			argp_error(state, "--subprocesses needs per-CPU events (--events cpu)");
		if (env->npids > 1 && env->events == SAMPLER_EVENTS_THREAD)
			argp_error(state, "several -p targets need per-CPU events (--events cpu)");
		if ((env->subprocesses || env->npids > 1) &&
		    (env->raw || rawrec__wanted(env->out.format, env->out.output)))
			argp_error(state, "a raw recording holds one process: not with "
				   "--subprocesses or several -p targets");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The process of a sample or snapshot (NULL: not a Python sampled). */
static struct proc_entry *sample_proc(struct record_ctx *c, pid_t pid)
{
	return proc_follow__sample_proc(c->follow, pid);
}

/* A code object's snapshot: named from it even once the target frees it.
 * One that cannot be taken only leaves the object to be read later. */
static void on_code(void *ctx, const struct raw_code *code)
{
	struct record_ctx *c = ctx;
	struct proc_entry *e = sample_proc(c, code->pid);

	if (!e || symbolizer__add_code(e->sym, code))
		c->snapshot_errors++;
}

/* The sampler's process events: a command starting is followed here, the
 * rest by proc_follow. */
static void on_proc(void *ctx, enum sampler_proc_event ev, pid_t pid, pid_t ppid,
		    uint64_t ts_ns)
{
	struct record_ctx *c = ctx;

	if (pid == c->env->pid && c->launching) {
		if (ev == SAMPLER_PROC_EXEC) {
			c->cmd_execs++;
			c->cmd_exec_ns = ts_ns;
		}
		return;
	}
	if (!c->env->subprocesses && !c->env->all) {
		/* Only a command started is tracked then (exec events): an
		 * exec once it is sampled replaces the interpreter it was
		 * configured for. The tracepoint unconfigured it already;
		 * writing that again covers an exec that came just before
		 * the configuration (record__start_command). */
		if (ev == SAMPLER_PROC_EXEC && pid == c->env->pid) {
			bpf_sampler__track_process(c->bs, pid);
			c->main_execed = 1;
		}
		return;
	}
	proc_follow__on_event(c->follow, ev, pid, ppid);
}

/*
 * -a: Pythons whose image (reader, symbols, memo: ~0.1-1 MB each) stays
 * open at once; beyond, the least recently sampled is closed and opened
 * again at its next sample. PYPROF_MAX_OPEN overrides (tests).
 */
#define ALL_MAX_OPEN 128

static size_t all_max_open(void)
{
	const char *v = getenv("PYPROF_MAX_OPEN");
	long n;

	if (v && !parse_long(v, 1, 1 << 20, &n))
		return (size_t)n;
	return ALL_MAX_OPEN;
}

/* A sample the sampler counted but the recording leaves out, counted as
 * the sampler does (bpf_sampler.c on_record()), to be taken off its counts. */
static void count_dropped(struct sampler_stats *st, const struct raw_sample *r)
{
	st->samples++;
	if (r->status == SAMPLE_TRUNCATED)
		st->truncated++;
	else if (r->status != SAMPLE_COMPLETE && r->status != SAMPLE_THREAD_YOUNG &&
		 r->status != SAMPLE_THREAD_EXIT && r->status != SAMPLE_EVAL_ENTRY)
		st->errors++;
}

static const char *mode_name(enum sampler_mode m)
{
	switch (m) {
	case SAMPLER_MODE_OFFCPU:
		return "off-cpu";
	case SAMPLER_MODE_WALL:
		return "wall";
	case SAMPLER_MODE_GIL:
		return "gil";
	default:
		return "cpu";
	}
}

/* One sample to every writer. */
static int emit(struct record_ctx *c, const struct out_sample *s)
{
	/* Both get the very same sample: `report` of the raw recording gives this output. */
	int rc = c->out ? output__add(c->out, s) : 0;

	if (rc) {
		c->out_err = rc;
		c->out_err_file = c->env->out.output;
		return rc;
	}
	if (c->env->sink) {
		rc = c->env->sink->sample(c->env->sink->ctx, s);
		if (rc) {
			c->out_err = rc;
			c->out_err_file = "the live view";
			return rc;
		}
	}
	if (c->summary && output__add(c->summary, s)) {
		output__free(c->summary);	/* a nicety: never fail the recording */
		c->summary = NULL;
	}
	rc = c->raw ? rawrec_writer__add(c->raw, s) : 0;
	if (rc) {
		c->out_err = rc;
		c->out_err_file = c->env->raw ? c->env->raw : c->env->out.output;
		return rc;
	}
	return 0;
}

/*
 * An off-CPU interval, ending at r->ts_ns: clipped to -d's end (runnable
 * time last, so first to go), then written as its blocked part (with why)
 * and its runnable part, each weighing its nanoseconds.
 */
static int emit_interval(struct record_ctx *c, struct out_sample *s, const struct raw_sample *r)
{
	uint64_t blocked = r->blocked_ns, runnable = r->runnable_ns, cut;
	struct out_leaf leaf[LEAF_MAX];
	int rc;

	if (c->deadline_ns && s->ts_ns > c->deadline_ns) {
		cut = s->ts_ns - c->deadline_ns;
		c->clipped_ns += cut;
		if (cut >= runnable) {
			cut -= runnable;
			runnable = 0;
			blocked = cut >= blocked ? 0 : blocked - cut;
		} else {
			runnable -= cut;
		}
		s->ts_ns = c->deadline_ns;
	}
	s->event = "offcpu-time";
	if (blocked) {
		s->period_ns = blocked;
		s->nleaf = c->leaf ? leaf_names__frames(c->leaf, r, LEAF_BLOCKED, false, leaf) : 0;
		s->leaf = leaf;
		rc = emit(c, s);
		if (rc)
			return rc;
		s->unchanged = 0;
	}
	if (runnable) {
		s->period_ns = runnable;
		s->nleaf = c->leaf ? leaf_names__frames(c->leaf, r, LEAF_RUNNABLE, false, leaf) : 0;
		s->leaf = leaf;
		rc = emit(c, s);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * @r without its interpreter frames (sent with --native), into @out, and
 * the runs of its Python frames: an entry frame (3.12+, an interpreter
 * frame) ends the run inside it, an entry-flagged Python frame (3.11) is
 * the last of its run.
 */
static int strip_entries(struct record_ctx *c, const struct raw_sample *r, struct raw_sample *out)
{
	uint32_t n = 0, run = 0;

	if (r->nframes + 1 > c->pyonly_cap) {
		struct py_rawframe *f = realloc(c->pyonly, (r->nframes + 1) * sizeof(*f));
		uint32_t *runs = realloc(c->runs, (r->nframes + 1) * sizeof(*runs));
		uint64_t *entries = realloc(c->entries, (r->nframes + 1) * sizeof(*entries));

		if (f)
			c->pyonly = f;
		if (runs)
			c->runs = runs;
		if (entries)
			c->entries = entries;
		if (!f || !runs || !entries)
			return -ENOMEM;
		c->pyonly_cap = r->nframes + 1;
	}
	c->nruns = 0;
	c->nentries = 0;
	for (uint32_t i = 0; i < r->nframes; i++) {
		uint32_t fl = r->frames[i].reserved;

		if ((fl & SAMPLE_FF_INTERP) && (fl & SAMPLE_FF_ENTRY))
			c->entries[c->nentries++] = r->frames[i].frame;
		if (!(fl & SAMPLE_FF_INTERP)) {
			c->pyonly[n++] = r->frames[i];
			run++;
		}
		if (fl & SAMPLE_FF_ENTRY) {
			c->runs[c->nruns++] = run;
			run = 0;
		}
	}
	c->runs[c->nruns++] = run;
	/*
	 * Runs are Python frames above an entry frame, one per evaluation
	 * loop's call; an empty one is a call whose frames are not pushed yet
	 * or already popped. Empty segments below the outermost entry (the
	 * end of the chain, 3.15's base frame) are no call.
	 */
	while (c->nruns && !c->runs[c->nruns - 1])
		c->nruns--;
	*out = *r;
	out->frames = c->pyonly;
	out->nframes = n;
	out->unchanged = 0;
	return 0;
}

static void native_work__free(struct native_work *nw)
{
	if (!nw)
		return;
	for (size_t i = 0; i < nw->nprocs; i++)
		native_unwinder__free(nw->procs[i].u);
	free(nw->procs);
	free(nw);
}

/* The unwinder of @pid, made at its first sample; NULL when it cannot be. */
static struct native_unwinder *native_unwinder_of(struct native_work *nw, pid_t pid)
{
	struct native_proc *p;

	for (size_t i = 0; i < nw->nprocs; i++)
		if (nw->procs[i].pid == pid)
			return nw->procs[i].u;
	p = realloc(nw->procs, (nw->nprocs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	nw->procs = p;
	p = &nw->procs[nw->nprocs++];
	p->pid = pid;
	p->u = NULL;
	if (native_unwinder__new(pid, &p->u))
		p->u = NULL;
	return p->u;
}

/* libpython or the interpreter's executable: "python3.14", "libpython3.12.so.1.0". */
static bool interp_module(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && (!strncmp(b, "libpython", 9) || !strncmp(b, "python", 6));
}

static bool eval_symbol(const char *sym)
{
	static const char eval[] = "_PyEval_EvalFrameDefault";

	return sym && !strncmp(sym, eval, sizeof(eval) - 1) &&
	       (!sym[sizeof(eval) - 1] || sym[sizeof(eval) - 1] == '.');
}

/* Did @r's stack copy stop short of the whole --stack-size (at the end
 * learnt for its thread, or an unreadable page)? The program copies page
 * by page and stops once within a page of the 32 KB buffer's end. */
static bool copy_cut_short(const struct native_work *nw, const struct raw_sample *r)
{
	uint32_t whole = nw->stack_bytes < PYPROF_USTACK_MAX ? nw->stack_bytes :
			 PYPROF_USTACK_MAX - PYPROF_PAGE + 1;

	return r->ustack_len < whole;
}

/*
 * A thread's stack copy needs to reach its outermost frame, whose place is
 * the same in all its samples: found by a complete unwind, it bounds the
 * program's next copies of that thread (bpf_sampler__set_stack_end); a copy
 * that came out short of a stack's end gets the whole size again.
 */
static void learn_stack_end(struct record_ctx *c, const struct raw_sample *r,
			    const struct native_regs *regs, const struct native_unwind_info *li,
			    bool complete)
{
	/* a few words past the last one read: the outermost frame's CFI may
	 * read a slot above another time (a signal frame's) */
	const uint64_t slack = 256;

	if (!c->bs)
		return;
	if (complete)
		bpf_sampler__set_stack_end(c->bs, r->tid,
					   regs->r[NATIVE_REG_SP] + li->stack_used + slack);
	else if (li->end == NATIVE_END_STACK && copy_cut_short(c->nw, r))
		bpf_sampler__set_stack_end(c->bs, r->tid, 0);
}

/*
 * --native: @s's Python frames merged with the native stack of @r (its
 * registers and stack copy), in call order (native/merge.h), into @s.
 * A stack that does not merge, or unwinds short, is cut at
 * [unwind-failed] and counted.
 */
static void merge_native(struct record_ctx *c, const struct raw_sample *r, struct out_sample *s)
{
	struct native_work *nw = c->nw;
	struct native_unwinder *u = native_unwinder_of(nw, r->pid);
	struct native_regs regs;
	struct native_stack st;
	size_t nn = 0;
	uint32_t ni = 0, npy = s->nframes < MERGE_PY_MAX ? s->nframes : MERGE_PY_MAX;
	int complete = 0;

	nw->samples++;
	/*
	 * The symbolizer drops frames Python would not show (pushed, not yet
	 * started): the newest, the innermost run's. The runs follow suit.
	 */
	{
		uint32_t sum = 0, drop;

		for (uint32_t k = 0; k < c->nruns; k++)
			sum += c->runs[k];
		drop = sum > s->nframes ? sum - s->nframes : 0;
		for (uint32_t k = 0; drop && k < c->nruns; k++) {
			uint32_t d = c->runs[k] < drop ? c->runs[k] : drop;

			c->runs[k] -= d;
			drop -= d;
		}
	}
	if (!u) {
		nw->no_unwinder++;
	} else {
		native_regs__from_dwarf(&regs, r->uregs);
		nw->copied += r->ustack_len;
		st = (struct native_stack){ r->ustack, r->uregs[NATIVE_REG_SP] - PYPROF_USTACK_REDZONE,
					    r->ustack_len };
		if (native_unwinder__unwind(u, &regs, &st, nw->nat, NATIVE_MAX, &nn, &complete))
			nn = 0;
		else
			learn_stack_end(c, r, &regs, native_unwinder__last(u), complete);
	}
	for (size_t i = 0; i < nn; i++) {
		/* An evaluation loop's frame: its name, or (stripped binaries:
		 * Debian's) an entry frame among its locals, 3.12+. */
		uint64_t lo = nw->nat[i].sp, hi = i + 1 < nn ? nw->nat[i + 1].sp : UINT64_MAX;
		bool eval = eval_symbol(nw->nat[i].symbol);
		uint32_t run1 = 0;

		for (uint32_t k = 0; !run1 && k < c->nentries; k++)
			if (c->entries[k] >= lo && c->entries[k] < hi)
				run1 = k + 1;
		nw->mnat[i] = (struct merge_native){
			eval || run1, interp_module(nw->nat[i].module) ||
				      (nw->nat[i].flags & NATIVE_FRAME_TRAMPOLINE), run1 };
	}
	/* 3.12+: every run's entry frame known, runs pair by address */
	if (!(c->nruns && c->nentries >= c->nruns ?
	      merge__stacks_by_entry(nw->mnat, (uint32_t)nn, complete, c->runs, c->nruns, npy,
				     nw->items, NATIVE_MAX + MERGE_PY_MAX + 1, &ni) :
	      merge__stacks(nw->mnat, (uint32_t)nn, complete, c->runs, c->nruns, npy, nw->items,
			    NATIVE_MAX + MERGE_PY_MAX + 1, &ni))) {
		nw->unwind_failed++;
		if (u && !complete && native_unwinder__last(u)->end == NATIVE_END_STACK) {
			if (copy_cut_short(nw, r))
				nw->cut_by_end++;	/* the learnt end: learnt again */
			else
				nw->cut_by_copy++;
		}
	}
	for (uint32_t i = 0; i < ni; i++) {
		const struct merge_item *it = &nw->items[i];

		if (it->kind == MERGE_PYTHON) {
			if (it->idx >= s->nframes) {	/* cannot be: the runs fit */
				nw->merged[i] = (struct py_sym){ "[unwind-failed]", "", 0, 0 };
				nw->kinds[i] = OUT_FRAME_STATUS;
				continue;
			}
			nw->merged[i] = s->frames[it->idx];
			nw->kinds[i] = OUT_FRAME_PYTHON;
		} else if (it->kind == MERGE_NATIVE) {
			const struct native_frame *f = &nw->nat[it->idx];

			nw->merged[i] = (struct py_sym){ f->symbol ? f->symbol : "[unknown]",
							 f->module ? f->module : "", 0, 0 };
			nw->kinds[i] = OUT_FRAME_NATIVE;
			nw->addrs[i] = (struct out_addr){ f->pc, f->symbol ? f->offset : 0,
							  f->module ? f->module_base : 0,
							  f->module ? f->module_end : 0,
							  f->module_base, f->build_id,
							  f->build_id_len };
		} else {
			nw->merged[i] = (struct py_sym){ "[unwind-failed]", "", 0, 0 };
			nw->kinds[i] = OUT_FRAME_STATUS;
		}
	}
	s->frames = nw->merged;
	s->nframes = ni;
	s->kinds = nw->kinds;
	s->addrs = nw->addrs;
	s->unchanged = 0;
}

static int on_sample(void *ctx, const struct raw_sample *r)
{
	struct record_ctx *c = ctx;
	struct proc_entry *e = sample_proc(c, r->pid);
	struct out_leaf leaf[LEAF_MAX];
	struct out_sample s = {
		.comm = e ? e->comm : c->comm,
		.pid = r->pid,
		.tid = r->tid,
		.cpu = r->cpu,
		.ts_ns = r->ts_ns,
		.period_ns = c->period_ns,
		.status = r->status,
	};
	bool offcpu = r->kind == SAMPLE_KIND_OFFCPU;
	struct raw_sample rs;
	int rc;

	/* An interval ends when its thread runs again: one that began
	 * before -d's end is kept, clipped. */
	if (c->deadline_ns && (offcpu ? r->ts_ns - r->blocked_ns - r->runnable_ns : r->ts_ns) >
	    c->deadline_ns) {
		if (!offcpu)
			c->past_deadline = 1;	/* taken after -d ended: not part of it */
		count_dropped(&c->late, r);
		return offcpu ? 0 : 1;
	}
	if (!e) {
		/* A process that could not be opened: counted, not shown
		 * under another's name. */
		count_dropped(&c->unknown, r);
		return 0;
	}
	e->samples++;
	s.thread_name = thread_names__get(c->names, r->pid, r->tid, e->comm);
	/* Every sample, one of no Python frame too (start-up, finalization):
	 * its runs are its own, never the last sample's. */
	if (c->env->native_stack) {
		rc = strip_entries(c, r, &rs);
		if (rc)
			return rc;
		r = &rs;
	}
	/* -ENOMEM only costs the reuse: the symbols are there. */
	stack_memo__resolve(e->memo, e->sym, r, &s.frames, &s.nframes, &s.unchanged,
			    &c->symbol_errors);
	if (offcpu)
		return emit_interval(c, &s, r);
	if (c->nw && r->uregs)
		merge_native(c, r, &s);
	if (c->tasks && r->ntasks && e == c->async_proc) {
		rc = task_stacks__splice(c->tasks, r, mono_ns(), &s.frames,
					 &s.kinds, &s.nframes);
		if (rc < 0)
			return rc;
		if (rc)
			s.unchanged = 0;
	}
	if (c->leaf) {
		s.nleaf = leaf_names__frames(c->leaf, r, LEAF_CPU,
					     c->env->mode == SAMPLER_MODE_GIL, leaf);
		s.leaf = leaf;
	}
	return emit(c, &s);
}

static void read_stats(struct bpf_sampler *bs, struct remote_sampler *rs,
		       struct sampler_stats *st)
{
	if (bs)
		bpf_sampler__stats(bs, st);
	else
		remote_sampler__stats(rs, st);
}

/* One self-overwriting line on a terminal, so a long recording shows life. */
/* -v: the BPF sampler's frame-cache and off-CPU counts (its anchor counts
 * are bpf_sampler__stop()'s). */
static void print_bpf_detail(const struct bpf_sampler *bs)
{
	struct bpf_sampler_detail d;

	bpf_sampler__detail(bs, &d);
	if (d.frame_cache)
		fprintf(stderr, "pyprof-bpf: frame cache: %llu samples spliced, %llu walked whole, "
			"%llu mismatched (delivered truncated); %llu frames sent by the kernel, "
			"%llu reused; %llu anchors written (%llu failed)\n",
			(unsigned long long)d.cache.spliced, (unsigned long long)d.cache.whole,
			(unsigned long long)d.cache.mismatches,
			(unsigned long long)d.cache.frames_sent,
			(unsigned long long)d.cache.frames_reused,
			(unsigned long long)d.cache.reanchors,
			(unsigned long long)d.cache.reanchor_failures);
	if (d.offcpu)
		fprintf(stderr, "pyprof-bpf: off-CPU: %llu switch-outs stood on their thread's last "
			"walk, %llu intervals closed by inference, %llu lost\n",
			(unsigned long long)d.reused, (unsigned long long)d.inferred,
			(unsigned long long)d.lost_intervals);
	if (d.frame_cache)
		fprintf(stderr, "pyprof-bpf: frame cache: %llu anchors cleared on exit, %llu left "
			"(written since by someone else)\n",
			(unsigned long long)d.cache.anchors_cleared,
			(unsigned long long)d.cache.anchors_left);
}

static void show_progress(struct bpf_sampler *bs, struct remote_sampler *rs, double elapsed)
{
	struct sampler_stats st;

	read_stats(bs, rs, &st);
	fprintf(stderr, "\r\033[K%.0f s: %llu samples, %llu lost, %llu truncated, %llu errors",
		elapsed, (unsigned long long)st.samples, (unsigned long long)st.lost,
		(unsigned long long)st.truncated, (unsigned long long)st.errors);
}

/*
 * --async: find the main target's asyncio tables and have the program read
 * each sample's running task and its awaiters. 0 when done or to be tried
 * again later (3.14 maps its _asyncio module when asyncio is imported);
 * -errno with @err for a target that cannot have it.
 */
static int async_enable(struct record_ctx *c, char *err, size_t errlen)
{
	struct proc_entry *e = c->async_proc;
	struct asyncio_offsets ao;
	struct sampler_async sa;
	int rc;

	if (c->tasks || !e || !c->bs)
		return 0;
	rc = asyncio_offsets__load(e->p, &ao, err, errlen);
	if (rc == -ENOENT) {
		if (!c->async_waiting)
			fprintf(stderr, "pyprof-bpf: --async: asyncio is not imported yet; its "
				"tasks are shown once it is\n");
		c->async_waiting = 1;
		return 0;
	}
	if (rc == -ENOTSUP)
		snprintf(err, errlen, "--async: process %d runs Python %s: task-aware stacks need "
			 "CPython 3.14 or later (its .AsyncioDebug table, see README)", (int)e->pid,
			 e->version);
	if (rc)
		return rc;
	rc = task_stacks__new(e->p, e->sym, &ao, &c->tasks);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	sa = (struct sampler_async){
		.running_task = ao.tstate_running_task,
		.task_awaited_by = ao.task_awaited_by,
		.task_awaited_by_is_set = ao.task_awaited_by_is_set,
		.task_is_task = ao.task_is_task,
		.task_coro = ao.task_coro,
		.set_used = ao.set_used,
		.set_mask = ao.set_mask,
		.set_table = ao.set_table,
		/* The program copies names from ob_type at 8, as every
		 * build here has it. */
		.task_name = pyproc__offsets(e->p)->ob_type == 8 ? ao.task_name : 0,
		.type_flags = ao.type_flags,
	};
	rc = bpf_sampler__set_async(c->bs, &sa);
	if (rc)
		snprintf(err, errlen, "--async: cannot configure the BPF program: %s",
			 strerror(-rc));
	else if (c->async_waiting)
		fprintf(stderr, "pyprof-bpf: --async: asyncio imported; sampling its tasks\n");
	return rc;
}

/* --async=all: one pending task's stack, weighing the time since the last. */
static int on_pending_task(void *ctx, const struct asyncio_task *t, const struct py_sym *frames,
			   const uint8_t *kinds, uint32_t n)
{
	struct record_ctx *c = ctx;
	struct proc_entry *e = c->async_proc;
	uint64_t now = mono_ns();
	pid_t tid = t->tid ? t->tid : e->pid;
	struct out_sample s = {
		.comm = e->comm,
		.pid = e->pid,
		.tid = tid,
		.thread_name = thread_names__get(c->names, e->pid, tid, e->comm),
		.ts_ns = now,
		.period_ns = c->pending_weight,
		.status = SAMPLE_COMPLETE,
		.frames = frames,
		.kinds = kinds,
		.nframes = n,
		.event = "task-wait",
	};

	return emit(c, &s);
}

/* --async=all: every pending task, once a period; the weight is the time
 * since the last time (a snapshot of many tasks takes a while). */
static int emit_pending(struct record_ctx *c)
{
	uint64_t now = mono_ns();
	int rc;

	if (!c->tasks)
		return 0;
	if (!c->pending_ns) {
		c->pending_ns = now;
		return 0;
	}
	if (now - c->pending_ns < c->period_ns)
		return 0;
	if (c->deadline_ns && now > c->deadline_ns)
		now = c->deadline_ns;
	c->pending_weight = now - c->pending_ns;
	rc = task_stacks__pending(c->tasks, now, on_pending_task, c);
	c->pending_ns = now;
	/* A snapshot that failed (the target changing, or gone) costs this
	 * round: counted in the summary. */
	return rc == -ENOMEM || c->out_err ? rc : 0;
}

/* A sample while a command is launched: no process is configured then, so
 * none should come; one that does is counted as unreadable, not shown. */
static int drop_sample(void *ctx, const struct raw_sample *r)
{
	count_dropped(&((struct record_ctx *)ctx)->unknown, r);
	return 0;
}

/* The command is sampled: the children it exec'd meanwhile (--subprocesses)
 * are looked at from now on, for as long as any exec'd child is. */
static void launch_done(struct record_ctx *c)
{
	uint64_t now = mono_ns();

	c->launching = 0;
	proc_follow__defer(c->follow, false);
	for (size_t i = 0; i < procset__count(c->procs); i++) {
		struct proc_entry *e = procset__at(c->procs, i);

		if (e->state == PROC_PENDING)
			e->pending_since_ns = now;
	}
	if (c->bs)
		proc_follow__retry_pending(c->follow);
}

/*
 * ---- The lifecycle of a command started (-- CMD ARGS) ----
 *
 * The BPF sampler is loaded before the command is released (record__main:
 * per-CPU events, the exec tracepoint, the command's pid tracked in the
 * program's procs map but not configured, so its ticks are dropped in the
 * kernel). The command then runs on, never stopped, through one exec or more
 * (env, chroot, a pyenv shim, a script that execs python); each exec comes
 * as a process event, in order with the samples, and the interpreter is
 * looked for at once and every 0.5 ms after: a shared-libpython build
 * shows its runtime only once ld.so has mapped libpython, a few ms after
 * the exec. Found, its offsets are written in the procs map
 * (bpf_sampler__set_target): the next tick of the command is sampled, and
 * a program of a few milliseconds is sampled from its module body's first
 * statement. Without BPF (the remote backend) the same search runs, and
 * that sampler starts once it ends.
 *
 * An exec that comes between the interpreter's being found and its
 * configuration would leave the new image configured with the old one's
 * offsets: an exec seen while it was opened has it opened again, and one
 * during the configuration itself is handled by on_proc() as the exec of
 * a sampled target.
 *
 * Returns 0 with *p open (and the BPF sampler's target); -ECHILD when the
 * command ended by itself (it could not be exec'd, or exited before running
 * Python: the caller exits with its status); another -errno when pyprof-bpf
 * gives up (the caller kills the command). One line in @err either way.
 */
static int record__start_command(struct record_ctx *c, struct launch *cmd, struct pyproc **p,
				 char *err, size_t errlen)
{
	const struct timespec retry = { .tv_nsec = 500000 };
	pid_t pid = launch__pid(cmd);
	double deadline;
	char why[PYPROF_ERRLEN], how[64];
	unsigned int execs;
	int rc;

	*p = NULL;
	c->launching = 1;
	proc_follow__defer(c->follow, true);
	rc = launch__start(cmd, err, errlen);
	if (rc)
		return launch__exit_code(cmd) >= 0 ? -ECHILD : rc;
	deadline = mono_s() + COMMAND_PYTHON_TIMEOUT;
	for (;;) {
		/* The execs so far: the ring holds them in order. */
		rc = c->bs ? bpf_sampler__poll(c->bs, drop_sample, c) : 0;
		if (rc < 0) {
			snprintf(err, errlen, "sampling failed: %s", strerror(-rc));
			return rc;
		}
		execs = c->cmd_execs;
		rc = pyproc__open(pid, p, why, sizeof(why));
		if (!rc && c->bs) {
			rc = bpf_sampler__poll(c->bs, drop_sample, c);
			if (rc < 0) {
				snprintf(err, errlen, "sampling failed: %s", strerror(-rc));
				pyproc__free(*p);
				*p = NULL;
				return rc;
			}
			rc = 0;
			if (c->cmd_execs != execs) {
				/* It exec'd while being opened: maybe what
				 * was opened is gone. */
				pyproc__free(*p);
				*p = NULL;
				continue;
			}
		}
		if (!rc)
			break;
		/* The command ends (or exec's its next program) meanwhile:
		 * whatever the error, its status says which. */
		if (launch__poll(cmd) == 1) {
			launch__describe(cmd, how, sizeof(how));
			snprintf(err, errlen, "the command %s before running Python; nothing "
				 "recorded", how);
			return -ECHILD;
		}
		/* Not (yet) Python, or its runtime not yet readable: retry.
		 * An unsupported Python will not become a supported one. */
		if (rc == -ENOTSUP || mono_s() > deadline) {
			if (rc == -ENOTSUP)
				snprintf(err, errlen, "%s", why);
			else
				snprintf(err, errlen, "the command runs no Python after %g s "
					 "(%.300s); pyprof-bpf samples the process it starts, "
					 "through its exec()s, not its children",
					 COMMAND_PYTHON_TIMEOUT, why);
			return rc;
		}
		nanosleep(&retry, NULL);
	}
	if (c->bs) {
		rc = bpf_sampler__set_target(c->bs, *p, err, errlen);
		if (rc) {
			/* The sampler is only freed now; *p goes after it. */
			return rc;
		}
		if (c->env->verbose)
			fprintf(stderr, "pyprof-bpf: the command's interpreter (Python %s) is "
				"sampled %.2f ms after its exec (%u exec%s)\n",
				pyproc__version(*p),
				(mono_ns() - c->cmd_exec_ns) / 1e6, c->cmd_execs,
				c->cmd_execs == 1 ? "" : "s");
	}
	launch_done(c);
	return 0;
}

/*
 * The BPF sampler (targeted at @p, or with none yet: a command to start),
 * or *out NULL when the remote backend is to sample instead. 0, or -errno
 * with a line in @err when BPF was asked for and cannot be used.
 */
static int record__load_bpf(struct record_ctx *c, const struct sampler_opts *o,
			    struct pyproc *p, struct bpf_sampler **out, char *err, size_t errlen)
{
	char why[PYPROF_ERRLEN] = "";
	int rc;

	*out = NULL;
	if (c->env->backend == BACKEND_REMOTE)
		return 0;
	rc = bpf_sampler__available(why, sizeof(why));
	if (!rc)
		rc = p ? bpf_sampler__open(p, o, out, why, sizeof(why)) :
			 bpf_sampler__load(o, out, why, sizeof(why));
	if (rc && (c->env->backend == BACKEND_BPF || o->mode == SAMPLER_MODE_OFFCPU ||
		   o->native_stack || o->kernel_stacks)) {
		snprintf(err, errlen, "BPF backend%s: %s",
			 o->mode == SAMPLER_MODE_OFFCPU ? " (--mode off-cpu needs it)" :
			 o->native_stack ? " (--native needs it)" :
			 o->kernel_stacks ? " (--kernel needs it)" : "", why);
		return rc;
	}
	if (rc)
		fprintf(stderr, "pyprof-bpf: cannot use BPF (%s): sampling with the remote "
			"backend instead\n", why);
	if (*out) {
		c->bs = *out;
		proc_follow__set_sampler(c->follow, *out);
		bpf_sampler__set_code_fn(*out, on_code, c);
		bpf_sampler__set_proc_fn(*out, on_proc, c);
	}
	return 0;
}

/*
 * A sink's wait() in place of the loop's sleep, with the recording's
 * status (the sampler's counts read at most every 0.25 s): 0 goes on, 1
 * stops, -errno fails.
 */
static int sink_wait(const struct record_sink *sink, struct bpf_sampler *bs,
		     struct remote_sampler *rs, double until, double start,
		     struct record_status *st, double *next_stats)
{
	double t = mono_s();

	if (t >= *next_stats) {
		*next_stats = t + 0.25;
		read_stats(bs, rs, &st->stats);
	}
	st->elapsed_s = t - start;
	return sink->wait(sink->ctx, until, st);
}

int record__main(int argc, char **argv)
{
	return record__run(argc, argv, NULL);
}

int record__run(int argc, char **argv, const struct record_sink *sink)
{
	static const struct argp_child children[] = {
		{ .argp = &output_args_argp, .header = "Output:" },
		{ 0 },
	};
	struct argp_child sink_children[] = {
		{ .argp = sink ? sink->argp : NULL, .header = "Display:" },
		{ 0 },
	};
	const struct argp argp = {
		.options = record_options, .parser = record_parse,
		.doc = sink ? sink->doc : record_doc,
		.children = !sink ? children : sink->argp ? sink_children : NULL,
	};
	struct record_env env = {
		.freq = DEFAULT_FREQ, .max_frames = DEFAULT_MAX_FRAMES, .backend = BACKEND_AUTO,
		.sink = sink,
	};
	struct record_status sst = { 0 };
	double next_stats = 0;
	int sink_started = 0;
	char why[PYPROF_ERRLEN];
	struct record_ctx ctx = { .env = &env };
	char err[PYPROF_ERRLEN] = "";
	struct sampler_opts sopts;
	struct sampler_stats st = { 0 };
	struct bpf_sampler *bs = NULL;
	struct remote_sampler *rs = NULL;
	struct pyproc *p = NULL;
	struct proc_entry *main_proc = NULL;
	struct pidwatch watch = { .fd = -1 };
	bool multi;
	struct sigaction sa = { .sa_handler = on_signal };
	struct rawrec_info rinfo = { 0 };
	struct rawrec_end rend;
	const char *ended = NULL, *raw_path;
	double start, end, next_refresh, next_progress, poll_s;
	double next_scan, scan_s = 0.1;
	int progress = !sink && isatty(STDERR_FILENO);
	int rc, exit_code = 1;
	struct launch *cmd = NULL;	/* -- CMD ARGS */
	int sampling = 0;		/* the command sampled */
	char how[64];

	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &env))
		return 2;
	/* Forked first: the command inherits our signal dispositions as we
	 * got them, and none of the files opened below. */
	if (env.argv) {
		rc = launch__new(env.argv, &cmd, err, sizeof(err));
		if (rc)
			goto fail;
		if (sink && sink->quiet_command)
			launch__quiet(cmd);
		env.pid = launch__pid(cmd);
		rc = launch__forward_signals(cmd);
		if (rc)
			goto fail;
	} else {
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);

	multi = env.subprocesses || env.npids > 1 || env.all;
	env.out.oopts.process_roots = multi;
	env.out.oopts.mode = mode_name(env.mode);
	sopts = (struct sampler_opts){ .freq_hz = (unsigned int)env.freq,
				       .max_frames = (unsigned int)env.max_frames,
				       .verbose = env.verbose,
				       .no_frame_cache = env.no_frame_cache,
				       /* several processes: per-CPU events, whatever auto
				        * would pick for one */
				       .events = multi && env.events == SAMPLER_EVENTS_AUTO ?
						 SAMPLER_EVENTS_CPU : env.events,
				       .follow_children = env.subprocesses || env.all,
				       .all_procs = env.all,
				       .exec_events = cmd != NULL,
				       .mode = env.mode,
				       .kernel_stacks = env.kernel,
				       .native_stack = (unsigned int)env.native_stack,
				       .async_tasks = env.async != 0 };
	rc = procset__new((unsigned int)env.max_frames, &ctx.procs);
	if (!rc && env.all)
		procset__set_max_open(ctx.procs, all_max_open());
	if (!rc) {
		struct proc_follow_opts fo = {
			.all = env.all, .subprocesses = env.subprocesses, .verbose = env.verbose,
			.comm = env.comm_re ? &env.comm : NULL, .max_open = all_max_open(),
		};

		rc = proc_follow__new(ctx.procs, &fo, &ctx.follow);
	}
	if (!rc && env.native_stack && !(ctx.nw = calloc(1, sizeof(*ctx.nw))))
		rc = -ENOMEM;
	if (ctx.nw)
		ctx.nw->stack_bytes = (uint32_t)(env.native_stack < PYPROF_USTACK_MAX ?
						 env.native_stack : PYPROF_USTACK_MAX);
	if (rc) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	if (cmd) {
		/* Attached before the command execs (record__start_command):
		 * the command tracked, so that its execs are reported. */
		rc = record__load_bpf(&ctx, &sopts, NULL, &bs, err, sizeof(err));
		if (!rc && bs && (rc = bpf_sampler__track_process(bs, env.pid)))
			snprintf(err, sizeof(err), "cannot track the command in the BPF map: %s",
				 strerror(-rc));
		if (!rc)
			rc = record__start_command(&ctx, cmd, &p, err, sizeof(err));
	} else if (env.all) {
		/* -a: the processes come from the samples (on_proc). */
		rc = record__load_bpf(&ctx, &sopts, NULL, &bs, err, sizeof(err));
		if (!rc && !bs) {
			rc = -ENOTSUP;
			snprintf(err, sizeof(err), "-a needs the BPF backend (root, or CAP_BPF, "
				 "CAP_PERFMON and CAP_SYS_PTRACE)");
		}
	} else {
		rc = pyproc__open(env.pid, &p, err, sizeof(err));
	}
	if (rc)
		goto fail;
	if (!env.all && !(main_proc = procset__add(ctx.procs, env.pid, 0, p))) {
		rc = -ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	p = NULL;	/* the process set owns it */
	/* The other -p targets: all of them, or a clear error. */
	for (size_t i = 1; i < env.npids; i++) {
		struct pyproc *q = NULL;
		char qerr[PYPROF_ERRLEN];

		rc = pyproc__open(env.pids[i], &q, qerr, sizeof(qerr));
		if (!rc && !procset__add(ctx.procs, env.pids[i], 0, q)) {
			pyproc__free(q);
			rc = -ENOMEM;
			snprintf(qerr, sizeof(qerr), "out of memory");
		}
		if (rc) {
			snprintf(err, sizeof(err), "%s", qerr);
			goto fail;
		}
	}
	ctx.period_ns = 1000000000ull / (uint64_t)env.freq;
	/* Kernel frames only where off-CPU stacks have them. */
	rc = leaf_names__new(env.mode == SAMPLER_MODE_OFFCPU || env.mode == SAMPLER_MODE_WALL ||
			     env.kernel, &ctx.leaf);
	if (rc && rc != -ENOMEM) {
		fprintf(stderr, "pyprof-bpf: kernel symbols unreadable (%s): off-CPU stacks "
			"without kernel frames\n", strerror(-rc));
		rc = leaf_names__new(false, &ctx.leaf);
	}
	if (rc) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	if (env.all)
		snprintf(ctx.comm, sizeof(ctx.comm), "all");
	else
		procfs__comm(env.pid, 0, ctx.comm, sizeof(ctx.comm));
	if (thread_names__new(MAX_NAMES, &ctx.names)) {
		rc = -ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	/* The raw recording keeps the start time: `report` gives pprof the same. */
	env.out.oopts.start_time_ns = realtime_ns();
	rinfo.start_mono_ns = mono_ns();
	raw_path = env.raw;
	if (rawrec__wanted(env.out.format, env.out.output))
		raw_path = env.out.output ? env.out.output : "-";
	else if (!sink)
		rc = output__new(env.out.format, env.out.output, &env.out.oopts, &ctx.out, err, sizeof(err));
	if (rc)
		goto fail;

	if (!cmd && !env.all) {
		rc = record__load_bpf(&ctx, &sopts, main_proc->p, &bs, err, sizeof(err));
		if (rc)
			goto fail;
		for (size_t i = 1; bs && i < env.npids; i++) {
			rc = bpf_sampler__add_process(bs, procset__find(ctx.procs, env.pids[i])->p,
						      err, sizeof(err));
			if (rc)
				goto fail;
		}
		/* A command's children came through the fork tracepoint,
		 * attached before it ran. */
		if (bs && env.subprocesses)
			proc_follow__adopt_descendants(ctx.follow, env.npids ? env.pids : &env.pid,
						       env.npids ? env.npids : 1);
	}
	if (!bs) {
		if (multi) {
			rc = -ENOTSUP;
			snprintf(err, sizeof(err), "--subprocesses and several -p targets need the "
				 "BPF backend");
			goto fail;
		}
		rc = remote_sampler__open(main_proc->p, &sopts, &rs);
		if (rc) {
			snprintf(err, sizeof(err), "remote backend: %s", strerror(-rc));
			goto fail;
		}
	}
	if (env.async) {
		if (!bs) {
			rc = -ENOTSUP;
			snprintf(err, sizeof(err), "--async needs the BPF backend (root, or "
				 "CAP_BPF and CAP_PERFMON)");
			goto fail;
		}
		ctx.async_proc = main_proc;
		rc = async_enable(&ctx, err, sizeof(err));
		if (rc)
			goto fail;
	}
	/* Recording to a file from a terminal: end with the hottest functions. */
	if (progress && ctx.out && env.out.output && strcmp(env.out.output, "-") &&
	    !(env.out.format && strcmp(env.out.format, "top") == 0)) {
		struct output_opts so = env.out.oopts;
		char serr[PYPROF_ERRLEN];

		so.top_rows = 10;
		if (output__new("top", "/dev/stderr", &so, &ctx.summary, serr, sizeof(serr)))
			ctx.summary = NULL;
	}
	if (raw_path) {
		rinfo.pid = env.pid;
		rinfo.comm = ctx.comm;
		rinfo.python_version = main_proc->version;
		rinfo.backend = bs ? "bpf" : "remote";
		rinfo.freq_hz = (uint32_t)env.freq;
		rinfo.period_ns = ctx.period_ns;
		rinfo.max_frames = (uint32_t)env.max_frames;
		rinfo.start_time_ns = env.out.oopts.start_time_ns;
		rinfo.mode = mode_name(env.mode);
		rc = rawrec_writer__open(raw_path, &rinfo, &ctx.raw, err, sizeof(err));
		if (rc)
			goto fail;
	}
	if (!sink && env.all) {
		fprintf(stderr, "pyprof-bpf: sampling every Python process%s%s%s in %s mode at "
			"%ld Hz with the BPF backend (per-CPU events)%s\n",
			env.comm_re ? " named like '" : "", env.comm_re ? env.comm_re : "",
			env.comm_re ? "'" : "", mode_name(env.mode), env.freq,
			env.duration ? "" : "; Ctrl-C to stop");
	} else if (!sink) {
		fprintf(stderr, "pyprof-bpf: sampling process %d (Python %s) in %s mode at %ld Hz "
			"with the %s backend%s%s\n", (int)env.pid, main_proc->version,
			mode_name(env.mode), env.freq, bs ? "BPF" : "remote",
			!bs || env.mode == SAMPLER_MODE_OFFCPU ? "" :
			bpf_sampler__per_cpu(bs) ? " (per-CPU events)" : " (per-thread events)",
			cmd ? (env.duration ? "" : " until the command exits") :
			env.duration ? "" : "; Ctrl-C to stop");
	}

	if (sink) {
		struct record_info info = {
			.pid = env.pid, .comm = ctx.comm,
			.python_version = main_proc ? main_proc->version : "",
			.mode = mode_name(env.mode), .freq_hz = env.freq,
			.backend = bs ? "BPF" : "remote", .per_cpu = bs && bpf_sampler__per_cpu(bs),
			.command = cmd != NULL, .multi = multi,
		};

		rc = sink->start(sink->ctx, &info, err, sizeof(err));
		if (rc)
			goto fail;
		sink_started = 1;
	}

	/* From here on a failure leaves the command to finish its work. */
	sampling = cmd != NULL;
	start = mono_s();
	end = env.duration ? start + env.duration : 0;
	if (end)
		ctx.deadline_ns = (uint64_t)(end * 1e9);
	next_refresh = start + 0.1;
	next_scan = start + 0.1;
	if (!env.all)
		pidwatch__open(&watch, env.pid);
	next_progress = start + 1.0;
	/*
	 * The ring is read every 10 ms; below 1 kHz in cpu mode every 10
	 * samples' time, up to 100 ms: a wake-up (and what the loop does
	 * then) costs ~30-70 us here, more than a sample's worth at 99 Hz.
	 * The ring holds 200 ms at the rate (ring_size). Off-CPU records come
	 * at the target's switch rate, whatever the rate.
	 */
	poll_s = env.mode == SAMPLER_MODE_CPU && env.freq < 1000 ?
		 (10.0 / env.freq < 0.1 ? 10.0 / env.freq : 0.1) : 0.01;
	for (double next = start; !stop_requested;) {
		double t = mono_s();

		if (end && t >= end) {
			ended = NULL;
			break;
		}
		/* Its end is seen here, not by the checks of -p below (which
		 * would see an unreaped zombie 100 ms later). */
		if (cmd && launch__poll(cmd)) {
			ended = "the command exited";
			break;
		}
		if (bs) {
			rc = bpf_sampler__poll(bs, on_sample, &ctx);
			if (rc < 0)
				break;
			rc = 0;
			if (multi)
				procset__free_retired(ctx.procs, env.pid);
			if (ctx.past_deadline)
				break;
			if (env.async == 2 && (rc = emit_pending(&ctx)))
				break;
			if (t >= next_refresh) {
				next_refresh = t + 0.1;
				proc_follow__retry_pending(ctx.follow);
				if (env.async && !ctx.tasks &&
				    (rc = async_enable(&ctx, err, sizeof(err))))
					break;
				if (!env.all && (multi ? !proc_follow__any_alive(ctx.follow) : !pidwatch__alive(&watch))) {
					ended = multi ? "every process exited" : "the target exited";
					break;
				}
				/* (-a follows execs: every process is its own target.) */
				if (!env.subprocesses && !env.all &&
				    (bpf_sampler__execed(bs) || ctx.main_execed)) {
					ended = "the target exec'd another program";
					break;
				}
			}
			/* The thread scan backs off while it finds nothing new
			 * (to 0.8 s): the program finds new threads' states
			 * itself. A thread it could not name brings it sooner. */
			if (t >= next_scan ||
			    (bpf_sampler__unknown_tid(bs) && t >= next_scan - scan_s + 0.02)) {
				bpf_sampler__refresh(bs);
				scan_s = bpf_sampler__settled(bs) ? (scan_s * 2 < 0.8 ? scan_s * 2 : 0.8) : 0.1;
				next_scan = t + scan_s;
			}
			next = t + poll_s;
		} else {
			rc = remote_sampler__tick(rs, on_sample, &ctx);
			if (rc == -ESRCH || (t >= next_refresh && !pidwatch__alive(&watch))) {
				rc = 0;
				ended = "the target exited";
				break;
			}
			if (t >= next_refresh)
				next_refresh = t + 0.1;
			if (ctx.past_deadline) {
				rc = 0;		/* the tick crossed -d: done */
				break;
			}
			if (rc)
				break;
			next += 1.0 / env.freq;
			/* Behind (a slow or preempted tick): do not burst to
			 * catch up. The next tick starts at least a quarter of a
			 * period (up to 2 ms) after this one ended, so that ticks stay
			 * apart in time (readers group samples by tick); from
			 * the tick's start it could follow its end by ~0.5 ms. */
			{
				double gap = 0.25 / env.freq < 0.002 ? 0.25 / env.freq : 0.002;
				double done = mono_s();

				if (next < done + gap)
					next = done + gap;
			}
		}
		if (progress && !cmd && t >= next_progress) {	/* the command's terminal */
			next_progress = t + 1.0;
			show_progress(bs, rs, t - start);
		}
		if (sink) {
			rc = sink_wait(sink, bs, rs, end && next > end ? end : next, start, &sst,
				       &next_stats);
			if (rc) {
				rc = rc < 0 ? rc : 0;	/* 1: the user quit */
				break;
			}
			continue;
		}
		sleep_until_s(end && next > end ? end : next);
	}
	if (sink_started) {
		/* The sink's screen ends before anything more is said. */
		if (ended && cmd && launch__poll(cmd) == 1) {
			launch__describe(cmd, how, sizeof(how));
			snprintf(why, sizeof(why), "the command %s", how);
			ended = why;
		}
		read_stats(bs, rs, &sst.stats);
		sst.elapsed_s = mono_s() - start;
		sink->end(sink->ctx, ended, &sst);
	}
	if (progress && !cmd)
		fputs("\r\033[K", stderr);
	if (bs)
		bpf_sampler__stop(bs);
	if (bs && !rc) {	/* what the ring buffer still holds */
		rc = bpf_sampler__poll(bs, on_sample, &ctx);
		rc = rc < 0 ? rc : 0;
	}
	if (bs && !rc) {	/* threads off the CPU now: up to the end */
		uint64_t now_ns = mono_ns();

		rc = bpf_sampler__finish_intervals(bs, ctx.deadline_ns && ctx.deadline_ns < now_ns ?
						   ctx.deadline_ns : now_ns, on_sample, &ctx);
		rc = rc < 0 ? rc : 0;
	}
	end = mono_s();
	if (rc && !ctx.out_err) {
		snprintf(err, sizeof(err), "sampling failed: %s", strerror(-rc));
		goto fail;
	}
	if (bs)
		bpf_sampler__stats(bs, &st);
	else
		remote_sampler__stats(rs, &st);
	/* The sampler counted them too: not in the recording. */
	st.samples -= ctx.late.samples + ctx.unknown.samples;
	st.truncated -= ctx.late.truncated + ctx.unknown.truncated;
	st.errors -= ctx.late.errors + ctx.unknown.errors;
	rc = ctx.out_err;
	if (!rc && ctx.out) {
		rc = output__finish(ctx.out);
		ctx.out_err_file = env.out.output;
	}
	if (!rc && ctx.raw) {
		rend = (struct rawrec_end){ .lost = st.lost, .truncated = st.truncated,
					    .errors = st.errors, .unresolved = ctx.symbol_errors,
					    .duration_ns = (uint64_t)((end - start) * 1e9),
					    .flags = ended ? RAWREC_END_TARGET_EXITED : 0 };
		rc = rawrec_writer__close(ctx.raw, &rend);
		ctx.out_err_file = raw_path;
	}
	if (rc) {
		snprintf(err, sizeof(err), "writing %s: %s", ctx.out_err_file &&
			 strcmp(ctx.out_err_file, "-") ? ctx.out_err_file : "stdout",
			 strerror(-rc));
		goto fail;
	}
	if (ctx.summary)
		output__finish(ctx.summary);
	if (sink) {
		/* The sink said why it ended. */
	} else if (cmd && launch__poll(cmd) == 1) {
		launch__describe(cmd, how, sizeof(how));
		fprintf(stderr, "pyprof-bpf: the command %s\n", how);
	} else if (ended) {
		fprintf(stderr, "pyprof-bpf: %s; the recording is complete up to then\n", ended);
	}
	if (ctx.late.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples taken after the %g s duration were "
			"dropped\n", (unsigned long long)ctx.late.samples, env.duration);
	proc_follow__print(ctx.follow, stderr);
	if (env.verbose && ctx.snapshot_errors)
		fprintf(stderr, "pyprof-bpf: %zu code snapshots could not be used (their "
			"process not sampled, or no memory): those objects were read from the "
			"target instead\n", ctx.snapshot_errors);
	if (ctx.unknown.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples of processes that could not be read "
			"were dropped\n", (unsigned long long)ctx.unknown.samples);
	if (bs && bpf_sampler__lost_intervals(bs))
		fprintf(stderr, "pyprof-bpf: %llu off-CPU intervals lost (their stack's record "
			"did not reach us: the ring was full)\n",
			(unsigned long long)bpf_sampler__lost_intervals(bs));
	for (size_t i = 0; ctx.nw && env.verbose && i < ctx.nw->nprocs; i++) {
		struct native_unwinder_stats ns;

		if (!ctx.nw->procs[i].u)
			continue;
		native_unwinder__stats(ctx.nw->procs[i].u, &ns);
		fprintf(stderr, "pyprof-bpf: pid %d: %llu unwinds, %llu complete; ends:",
			(int)ctx.nw->procs[i].pid, (unsigned long long)ns.unwinds,
			(unsigned long long)ns.complete);
		for (int k = 0; k < NATIVE_END__COUNT; k++)
			if (ns.ends[k])
				fprintf(stderr, " %s %llu", native_end__name(k),
					(unsigned long long)ns.ends[k]);
		fputc('\n', stderr);
	}
	if (ctx.nw && ctx.nw->samples) {
		fprintf(stderr, "pyprof-bpf: --native: %llu of %llu samples could not be unwound "
			"or merged to their end (cut at [unwind-failed])",
			(unsigned long long)ctx.nw->unwind_failed, (unsigned long long)ctx.nw->samples);
		/* The one cause a user can act on, said apart. */
		if (ctx.nw->cut_by_copy)
			fprintf(stderr, ", %llu of them because their C stack is deeper than the "
				"%ld bytes copied (--stack-size%s)",
				(unsigned long long)ctx.nw->cut_by_copy, env.native_stack,
				env.native_stack < PYPROF_USTACK_MAX ? "" : ", at its most");
		if (env.verbose)
			fprintf(stderr, "; stack copies of %.1f KB a sample on average (%llu cut "
				"at an end learnt too low, learnt again)",
				ctx.nw->copied / 1024.0 / (double)ctx.nw->samples,
				(unsigned long long)ctx.nw->cut_by_end);
		fprintf(stderr, "%s%s\n",
			ctx.nw->no_unwinder ? "; some processes could not be opened for unwinding" : "",
			ctx.nw->unwind_failed && !env.verbose ? "; -v says why per process" : "");
	}
	if (ctx.tasks) {
		struct task_stacks_stats ts;

		task_stacks__stats(ctx.tasks, &ts);
		fprintf(stderr, "pyprof-bpf: --async: %llu samples in tasks; %llu tasks whose "
			"name or frames could not be read ([unread], [task-frames-unread]), %llu "
			"chains cut or torn, %llu snapshots%s",
			(unsigned long long)ts.samples, (unsigned long long)ts.unknown,
			(unsigned long long)ts.cut, (unsigned long long)ts.snapshots,
			ts.snapshot_errors ? " (some failed)" : "");
		if (env.async == 2)
			fprintf(stderr, "; %llu stacks of pending tasks", (unsigned long long)ts.pending);
		fputc('\n', stderr);
	} else if (env.async && !rc) {
		fprintf(stderr, "pyprof-bpf: --async: the target never imported asyncio\n");
	}
	if (ctx.clipped_ns)
		fprintf(stderr, "pyprof-bpf: %.3f s of off-CPU time after the %g s duration "
			"was left out\n", ctx.clipped_ns / 1e9, env.duration);
	if (st.truncated)
		fprintf(stderr, "pyprof-bpf: %llu samples had more than %ld Python frames: "
			"their outermost ones are cut at [truncated]; --max-depth N keeps more "
			"(above %d, with the remote backend)\n", (unsigned long long)st.truncated,
			env.max_frames, PYPROF_MAX_FRAMES);
	/* One shape in every mode (scripts read it); the mode said after it. */
	fprintf(stderr, "pyprof-bpf: %llu samples in %.2f s (%.1f/s, %ld Hz asked per running "
		"thread), %llu lost, %llu truncated, %llu errors, %zu unresolved frames%s%s%s\n",
		(unsigned long long)st.samples, end - start, st.samples / (end - start), env.freq,
		(unsigned long long)st.lost, (unsigned long long)st.truncated,
		(unsigned long long)st.errors, ctx.symbol_errors,
		env.mode == SAMPLER_MODE_CPU ? "" : "; ", env.mode == SAMPLER_MODE_CPU ? "" :
		mode_name(env.mode), env.mode == SAMPLER_MODE_CPU ? "" :
		env.mode != SAMPLER_MODE_WALL || !bs ? " mode" :
		" mode (an off-CPU interval counts as one sample)");
	exit_code = 0;
	if (sink && cmd && launch__poll(cmd) == 0) {
		/* The user left the live view: the command goes with it. */
		launch__kill(cmd);
		fprintf(stderr, "pyprof-bpf: the command (pid %d) was killed\n", (int)env.pid);
		exit_code = 0;
		goto out;
	}
	if (cmd && launch__poll(cmd) != 1) {	/* -d, or it exec'd */
		fprintf(stderr, "pyprof-bpf: the recording is written; waiting for the command "
			"(pid %d) to exit\n", (int)env.pid);
		if (!launch__wait(cmd)) {
			launch__describe(cmd, how, sizeof(how));
			fprintf(stderr, "pyprof-bpf: the command %s\n", how);
		}
	}
	if (cmd)
		exit_code = launch__exit_code(cmd) >= 0 ? launch__exit_code(cmd) : 1;
	goto out;
fail:
	fprintf(stderr, "pyprof-bpf: %s\n", err[0] ? err : strerror(-rc));
	if (cmd && rc == -ECHILD && launch__exit_code(cmd) >= 0) {
		/* It could not be run, or ran no Python: its status. */
		exit_code = launch__exit_code(cmd);
	} else if (cmd && launch__poll(cmd) == 0) {
		/* Before sampling it has barely begun: it would run unprofiled.
		 * Once sampled, it is left to finish its work. */
		if (!sampling) {
			launch__kill(cmd);
			fprintf(stderr, "pyprof-bpf: the command (pid %d) was killed\n",
				(int)env.pid);
		} else {
			fprintf(stderr, "pyprof-bpf: waiting for the command (pid %d) to "
				"exit\n", (int)env.pid);
			launch__wait(cmd);
		}
	}
out:
	if (bs) {
		/* Again on the normal path (it is idempotent): on every path, the
		 * anchors written into the target are released. */
		bpf_sampler__stop(bs);
		if (env.verbose)
			print_bpf_detail(bs);
	}
	bpf_sampler__free(bs);
	remote_sampler__free(rs);
	output__free(ctx.out);
	rawrec_writer__free(ctx.raw);
	output__free(ctx.summary);
	leaf_names__free(ctx.leaf);
	free(ctx.pyonly);
	free(ctx.runs);
	free(ctx.entries);
	native_work__free(ctx.nw);
	task_stacks__free(ctx.tasks);
	proc_follow__free(ctx.follow);
	procset__free(ctx.procs);
	thread_names__free(ctx.names);
	pidwatch__close(&watch);
	pyproc__free(p);
	launch__free(cmd);
	if (env.comm_re)
		regfree(&env.comm);
	return exit_code;
}
