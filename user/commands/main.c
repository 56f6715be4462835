/* SPDX-License-Identifier: MIT */
/*
 * main.c - the command line: `pyprof-bpf [record] -p PID ...` (or
 * `-- CMD ARGS`),
 * `pyprof-bpf top -p PID`, `pyprof-bpf dump -p PID`, `pyprof-bpf report -i FILE`.
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "commands/dump.h"
#include "target/pyproc.h"
#include "commands/record.h"
#include "commands/top/top.h"
#include "agent/agent.h"
#include "sampling/sampler.h"
#include "version.h"	/* PYPROF_VERSION, PYPROF_COMMIT: made by the Makefile */
#include "util/parse.h"

#if defined(__x86_64__)
#define PYPROF_ARCH "x86-64"
#elif defined(__aarch64__)
#define PYPROF_ARCH "arm64"
#else
#error "pyprof-bpf: x86-64 and arm64 only"
#endif
const char *argp_program_version = "pyprof-bpf " PYPROF_VERSION " (commit " PYPROF_COMMIT ", "
				   PYPROF_ARCH ")";
const char *argp_program_bug_address = "<https://github.com/pyprof-bpf/pyprof-bpf/issues>";

/* ---- dump ---- */

static const char dump_doc[] =
"Print every thread's Python stack of a running process, now (with --async: its\n"
"asyncio tasks, Python 3.14+).\n"
"\n"
"USAGE: pyprof-bpf dump [--async] -p PID[,PID...] | -a [--json] [--only-active] [--no-source]\n"
"                       [--locals] [--opcodes] [--blocking] [--kernel]\n"
"       pyprof-bpf dump --core CORE [--exe PYTHON] [--root DIR] [--json] [--locals] ...\n"
"\v"
"EXAMPLES:\n"
"    pyprof-bpf dump -p 1234           # tracebacks of every thread, with its state\n"
"    pyprof-bpf dump -p 1234 --only-active   # only the thread holding the GIL\n"
"    pyprof-bpf dump -p 1234 --no-source     # frames without their source lines\n"
"    pyprof-bpf dump -p 1234 --locals        # with each frame's local variables\n"
"    pyprof-bpf dump -p 1234 --blocking      # its threads stopped while read\n"
"    sudo pyprof-bpf dump -p 1234 --kernel   # and where each waits in the kernel\n"
"    pyprof-bpf dump -p 1234,5678 --json     # two processes: {\"processes\": [...]}\n"
"    pyprof-bpf dump -a                      # every Python process of the host\n"
"    pyprof-bpf dump -p 1234 --json    # the same as JSON, innermost frame first\n"
"    pyprof-bpf dump -p 1234 --opcodes # and the instruction each thread is at\n"
"    pyprof-bpf dump --async -p 1234   # asyncio tasks (3.14+) as a tree\n"
"    pyprof-bpf dump --async -p 1234 --json   # each task, its frames, awaiters\n"
"    gcore -o core 1234 && pyprof-bpf dump --core core.1234   # from a core file\n"
"    pyprof-bpf dump --core core.1234 --exe /opt/py/bin/python3.13 --locals\n";

enum { OPT_JSON = 1000, OPT_ASYNC, OPT_OPCODES, OPT_ONLY_ACTIVE, OPT_NO_SOURCE, OPT_LOCALS,
       OPT_BLOCKING, OPT_KERNEL, OPT_CORE, OPT_EXE, OPT_ROOT };

static const struct argp_option dump_options[] = {
	{ "pid", 'p', "PID[,PID...]", 0, "Process(es) to read", 0 },
	{ "all", 'a', NULL, 0, "Every Python process of the host (others skipped)", 0 },
	{ "json", OPT_JSON, NULL, 0, "Print JSON: {pid, python, threads: [{tid, name, comm, state, "
	  "syscall, status, in_gc, frames}]}", 0 },
	{ "only-active", OPT_ONLY_ACTIVE, NULL, 0, "Only the thread holding the GIL", 0 },
	{ "no-source", OPT_NO_SOURCE, NULL, 0, "No line of source under each frame (read from "
	  "the target's root, the executing expression marked ^^^)", 0 },
	{ "locals", OPT_LOCALS, NULL, 0, "Each frame's arguments and local variables: short "
	  "reprs of None, bool, int, float, str, bytes; others as <TYPE at 0xADDR>", 0 },
	{ "kernel", OPT_KERNEL, NULL, 0, "Each thread's kernel stack, where it waits in the "
	  "kernel (root: /proc/PID/task/TID/stack), after its Python frames; JSON: kernel_stack",
	  0 },
	{ "blocking", OPT_BLOCKING, NULL, 0, "Stop the threads (ptrace) while their stacks are "
	  "read, so that a busy thread's stack is one instant's; their states are read just "
	  "before", 0 },
	{ "async", OPT_ASYNC, NULL, 0, "The asyncio tasks (3.14+): an await tree like `python -m "
	  "asyncio pstree`; with --json {pid, python, tasks: [{id, name, tid, running, frames, "
	  "awaited_by}]}", 0 },
	{ "core", OPT_CORE, "CORE", 0, "Read a core file (gcore, systemd-coredump) instead of a "
	  "process: every thread's stack, state as its registers tell it, names, locals", 0 },
	{ "exe", OPT_EXE, "PYTHON", 0, "--core: the executable the process ran, when it is no "
	  "longer where the core says", 0 },
	{ "root", OPT_ROOT, "DIR", 0, "--core: the file system the process ran in (a container's "
	  "root; default /): its libraries and sources are read there", 0 },
	{ "opcodes", OPT_OPCODES, NULL, 0, "The instruction each thread's innermost frame is at, "
	  "specialised form included ([op] NAME after it; JSON: \"opcode\"), read just after "
	  "its stack", 0 },
	{ 0 },
};

static error_t dump_parse(int key, char *arg, struct argp_state *state)
{
	struct dump_opts *o = state->input;
	long v = 0;

	switch (key) {
	case 'p':
		/* PID[,PID...]: no empty element, none twice */
		for (char *tok = arg, *next; tok; tok = next) {
			next = strchr(tok, ',');
			if (next)
				*next++ = '\0';
			if (parse_long(tok, 1, INT_MAX, &v))
				argp_error(state, "invalid PID: %s", *tok ? tok : "(empty)");
			for (size_t i = 0; i < o->npids; i++)
				if (o->pids[i] == (pid_t)v)
					argp_error(state, "PID %ld given twice", v);
			if (o->npids == DUMP_MAX_PIDS)
				argp_error(state, "at most %d processes with -p", DUMP_MAX_PIDS);
			o->pids[o->npids++] = (pid_t)v;
		}
		o->pid = o->pids[0];
		break;
	case 'a':
		o->all = 1;
		break;
	case OPT_JSON:
		o->json = 1;
		break;
	case OPT_ASYNC:
		o->async = 1;
		break;
	case OPT_OPCODES:
		o->opcodes = 1;
		break;
	case OPT_ONLY_ACTIVE:
		o->only_active = 1;
		break;
	case OPT_NO_SOURCE:
		o->no_source = 1;
		break;
	case OPT_LOCALS:
		o->locals = 1;
		break;
	case OPT_BLOCKING:
		o->blocking = 1;
		break;
	case OPT_KERNEL:
		o->kernel = 1;
		break;
	case OPT_CORE:
		o->core = arg;
		break;
	case OPT_EXE:
		o->exe = arg;
		break;
	case OPT_ROOT:
		o->root = arg;
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: %s", arg);
		break;
	case ARGP_KEY_END:
		if (o->core && (o->pid || o->all))
			argp_error(state, "--core reads a core file: not with -p or -a");
		if (o->core && (o->async || o->kernel || o->blocking))
			argp_error(state, "--core: --async, --kernel and --blocking need a live "
				   "process");
		if ((o->exe || o->root) && !o->core)
			argp_error(state, "--exe and --root are for --core");
		if (!o->pid && !o->all && !o->core)
			argp_error(state, "a target is needed: -p PID[,PID...], -a or --core CORE");
		if (o->pid && o->all)
			argp_error(state, "-a takes every Python process: not with -p");
		if (o->async && (o->all || o->npids > 1))
			argp_error(state, "--async reads one process: -p PID");
		if (o->kernel && o->async)
			argp_error(state, "--kernel is for the thread stacks, not --async");
		if (o->blocking && o->async)
			argp_error(state, "--blocking is for the thread stacks, not --async");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static int cmd_dump(int argc, char **argv)
{
	static const struct argp argp = {
		.options = dump_options, .parser = dump_parse, .doc = dump_doc,
	};
	struct dump_opts o = { 0 };
	char err[PYPROF_ERRLEN] = "";
	int rc;

	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return 2;
	rc = dump__run(&o, stdout, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "pyprof-bpf: %s\n", err[0] ? err : strerror(-rc));
		return 1;
	}
	return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fputs("Usage: pyprof-bpf [record] -p PID [-F HZ] [-d SECONDS] [-o FILE] [--format FMT]\n"
	      "       pyprof-bpf [record] -o FILE [OPTIONS] -- CMD [ARGS...]\n"
	      "       pyprof-bpf top -p PID [-F HZ] [--mode MODE]    (or -- CMD [ARGS...])\n"
	      "       pyprof-bpf dump [--async] -p PID [--json]\n"
	      "       pyprof-bpf agent [-p PID] --push KIND=URL | --output-dir DIR\n"
	      "       pyprof-bpf report -i REC.pyprof [--format FMT] [-o FILE] [--threads]\n"
	      "                         [--no-lines]\n"
	      "\n"
	      "A sampling profiler for CPython 3.11 to 3.15, assisted by eBPF.\n"
	      "`pyprof-bpf COMMAND --help` describes each command.\n"
	      "\n"
	      "EXAMPLES:\n"
	      "    sudo pyprof-bpf -p 1234 > out.perf            # 99 Hz to Ctrl-C, perf text\n"
	      "    sudo pyprof-bpf -p 1234 -F 999 -d 10 -o out.folded\n"
	      "    sudo pyprof-bpf -o out.html -- python3 app.py # run it, to its end\n"
	      "    sudo pyprof-bpf -p 1234 -d 10 -o rec.pyprof   # raw, then any format:\n"
	      "    pyprof-bpf report -i rec.pyprof -o flame.html\n"
	      "    sudo pyprof-bpf top -p 1234                   # live: hottest functions\n"
	      "    pyprof-bpf dump -p 1234                       # every thread's stack now\n"
	      "    sudo pyprof-bpf agent --push pyroscope=http://host:4040  # continuous\n", f);
}

/* --version; with -v, the BPF programs carried and the one this kernel runs. */
static int print_version(bool verbose)
{
	char why[PYPROF_ERRLEN] = "";
	struct utsname u;
	int rc;

	puts(argp_program_version);
	if (!verbose)
		return 0;
	puts("BPF programs: pyprof.bpf.o (kernels with bpf_loop: 5.17+, or a backport), "
	     "pyprof_noloop.bpf.o (5.8 to 5.16)");
	rc = sampler__available("bpf", why, sizeof(why));
	printf("this kernel (%s): %s%s\n", uname(&u) ? "?" : u.release,
	       rc ? "no BPF backend: " : "loads ", why);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0)
		return print_version(argc > 2 && (!strcmp(argv[2], "-v") ||
						   !strcmp(argv[2], "--verbose")));
	if (strcmp(cmd, "dump") == 0) {
		argv[1] = "pyprof-bpf dump";
		return cmd_dump(argc - 1, argv + 1);
	}
	/* argp names the command in its messages after argv[0] */
	if (strcmp(cmd, "record") == 0) {
		argv[1] = "pyprof-bpf record";
		return record__main(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "top") == 0) {
		argv[1] = "pyprof-bpf top";
		return top__main(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "agent") == 0) {
		argv[1] = "pyprof-bpf agent";
		return agent__main(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "report") == 0) {
		argv[1] = "pyprof-bpf report";
		return report__main(argc - 1, argv + 1);
	}
	if (cmd[0] == '-') {
		argv[0] = "pyprof-bpf";
		return record__main(argc, argv);
	}
	fprintf(stderr, "pyprof-bpf: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return 2;
}
