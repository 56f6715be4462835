/* SPDX-License-Identifier: MIT */
/*
 * record.c - `pyprof-bpf [record]` (and `top`, through a sink): wire the
 * stages of a sample's path, sampler -> resolver -> sinks (recording.h),
 * own the loop, stop cleanly on -d, Ctrl-C, SIGTERM or the target's exit,
 * and say what could not be done. A recording is set up, looped, finished
 * and torn down; each step below is one of those.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pyprof.h"		/* PYPROF_USTACK_MAX */
#include "commands/record.h"
#include "commands/record_options.h"
#include "commands/recording.h"
#include "native/mixed.h"
#include "offcpu/leaf.h"
#include "output/output.h"
#include "output/output_args.h"
#include "output/rawrec.h"
#include "resolve/resolver.h"
#include "sampling/sampler.h"
#include "target/launch.h"
#include "target/proc_follow.h"
#include "target/procfs.h"
#include "target/procset.h"
#include "target/pyproc.h"
#include "target/thread_names.h"
#include "util/clock.h"
#include "util/parse.h"
#include "util/privileges.h"

#define MAX_NAMES 4096

/*
 * -a: Pythons whose image (reader, symbols, memo: ~0.1-1 MB each) stays
 * open at once; beyond, the least recently sampled is closed and opened
 * again at its next sample. PYPROF_MAX_OPEN overrides (tests).
 */
#define ALL_MAX_OPEN 128

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static size_t all_max_open(void)
{
	const char *v = getenv("PYPROF_MAX_OPEN");
	long n;

	if (v && !parse_long(v, 1, 1 << 20, &n))
		return (size_t)n;
	return ALL_MAX_OPEN;
}

static int fail(struct recording *rec, int rc, const char *msg)
{
	snprintf(rec->err, sizeof(rec->err), "%s", msg);
	return rc;
}

/* ---- setup ---- */

/* The command is forked first: it inherits our signal dispositions as we
 * got them, and none of the files opened below. */
static int setup_command(struct recording *rec)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct record_env *env = rec->env;
	int rc;

	if (env->argv) {
		rc = launch__new(env->argv, &rec->cmd, rec->err, sizeof(rec->err));
		if (rc)
			return rc;
		if (rec->live && rec->live->quiet_command)
			launch__quiet(rec->cmd);
		env->pid = launch__pid(rec->cmd);
		rc = launch__forward_signals(rec->cmd);
		if (rc)
			return rc;
	} else {
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void setup_sampler_opts(struct recording *rec)
{
	const struct record_env *env = rec->env;

	rec->sopts = (struct sampler_opts){
		.freq_hz = (unsigned int)env->freq,
		.max_frames = (unsigned int)env->max_frames,
		.verbose = env->verbose,
		.no_frame_cache = env->no_frame_cache,
		/* several processes: per-CPU events, whatever auto would pick for one */
		.events = rec->multi && env->events == SAMPLER_EVENTS_AUTO ?
			  SAMPLER_EVENTS_CPU : env->events,
		.follow_children = env->subprocesses || env->all,
		.all_procs = env->all,
		.exec_events = rec->cmd != NULL,
		.mode = env->mode,
		.kernel_stacks = env->kernel,
		.native_stack = (unsigned int)env->native_stack,
		.async_tasks = env->async != 0,
		.opcodes = env->opcodes,
		.blocking = env->blocking,
		.event = env->event_spec ? env->evs : NULL,
		.nevents = env->nevs,
		.filter = env->filter,
		.period = env->count,
	};
}

/* The leaf names (kernel frames only where off-CPU stacks have them), the
 * thread names and the native mixer, given to a new resolver. */
static int setup_resolver(struct recording *rec)
{
	const struct record_env *env = rec->env;
	struct resolver_opts ro = { .follow = rec->follow, .period_ns = rec->period_ns,
				    .event = env->event_spec ? env->evs[0].name : NULL,
				    .events = env->ev_names, .nevents = env->nevs,
				    .event_scale = env->memory ? (uint64_t)sysconf(_SC_PAGESIZE) : 0,
				    .gil_mode = env->mode == SAMPLER_MODE_GIL };
	int rc;

	rc = leaf_names__new(env->mode == SAMPLER_MODE_OFFCPU || env->mode == SAMPLER_MODE_WALL ||
			     env->kernel, &ro.leaf);
	if (rc && rc != -ENOMEM) {
		fprintf(stderr, "pyprof-bpf: kernel symbols unreadable (%s): off-CPU stacks "
			"without kernel frames\n", strerror(-rc));
		rc = leaf_names__new(false, &ro.leaf);
	}
	if (!rc)
		rc = thread_names__new(MAX_NAMES, &ro.names);
	if (!rc && env->native_stack)
		rc = native_mixer__new((uint32_t)env->native_stack, &ro.mixer);
	if (!rc)
		rc = resolver__new(&ro, &rec->rv);
	if (rc) {
		leaf_names__free(ro.leaf);
		thread_names__free(ro.names);
		native_mixer__free(ro.mixer);
	}
	return rc;
}

/* The process set, how processes are followed, and the resolver. */
static int setup_stages(struct recording *rec)
{
	struct record_env *env = rec->env;
	size_t max_open = all_max_open();
	struct proc_follow_opts fo = {
		.all = env->all, .subprocesses = env->subprocesses, .verbose = env->verbose,
		.comm = env->comm_re ? &env->comm : NULL, .max_open = max_open,
	};
	int rc;

	rec->multi = env->subprocesses || env->npids > 1 || env->all;
	env->out.oopts.process_roots = rec->multi;
	env->out.oopts.mode = record_env__mode_name(env);
	env->out.oopts.describe = recording__describe;
	env->out.oopts.describe_ctx = rec;
	if (env->event_spec) {
		env->out.oopts.event = env->ev_joined;
		env->out.oopts.events = env->ev_names;
		env->out.oopts.nevents = env->nevs;
	}
	rec->period_ns = 1000000000ull / (uint64_t)env->freq;
	recording__set_tool(rec);
	setup_sampler_opts(rec);
	rc = procset__new((unsigned int)env->max_frames, &rec->procs);
	if (!rc && env->all)
		procset__set_max_open(rec->procs, max_open);
	if (!rc)
		rc = proc_follow__new(rec->procs, &fo, &rec->follow);
	if (!rc)
		rc = setup_resolver(rec);
	return rc ? fail(rec, rc, "out of memory") : 0;
}

/*
 * The BPF sampler (targeted at @p, or with none yet: a command to start,
 * -a), or none when the remote backend is to sample instead. 0, or -errno
 * with rec->err when BPF was asked for and cannot be used.
 */
static int load_bpf(struct recording *rec, struct pyproc *p)
{
	const struct sampler_opts *o = &rec->sopts;
	char why[PYPROF_ERRLEN] = "";
	int rc;

	if (rec->env->backend == BACKEND_REMOTE)
		return 0;
	rc = sampler__open("bpf", p, o, &rec->sampler, why, sizeof(why));
	if (rc && (rec->env->backend == BACKEND_BPF || o->mode == SAMPLER_MODE_OFFCPU ||
		   o->native_stack || o->kernel_stacks || o->async_tasks || o->all_procs ||
		   rec->env->subprocesses || o->event)) {
		/* Why BPF failed: not always "needs root" (a verifier). */
		snprintf(rec->err, sizeof(rec->err), "BPF backend%s: %s",
			 o->mode == SAMPLER_MODE_OFFCPU ? " (--mode off-cpu needs it)" :
			 o->native_stack ? " (--native needs it)" :
			 o->kernel_stacks ? " (--kernel needs it)" :
			 o->async_tasks ? " (--async needs it)" :
			 o->all_procs ? " (-a needs it)" :
			 o->event ? " (-e needs it)" :
			 rec->env->subprocesses ? " (--subprocesses needs it)" : "", why);
		return rc;
	}
	if (rc) {
		fprintf(stderr, "pyprof-bpf: cannot use BPF (%s): sampling with the remote "
			"backend instead\n", why);
		return 0;
	}
	proc_follow__set_configurable(rec->follow,
				      sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES));
	return 0;
}

/* The first target: a command started, -a's none, or -p's first. */
static int open_main_target(struct recording *rec)
{
	struct record_env *env = rec->env;
	int rc;

	if (rec->cmd) {
		/* Attached before the command execs (recording__start_command):
		 * the command tracked, so that its execs are reported. */
		rc = load_bpf(rec, NULL);
		if (!rc && sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES) &&
		    (rc = sampler__track_process(rec->sampler, env->pid)))
			snprintf(rec->err, sizeof(rec->err), "cannot track the command in the BPF "
				 "map: %s", strerror(-rc));
		return rc ? rc : recording__start_command(rec);
	}
	if (env->all) {
		/* -a: the processes come from the samples (on_proc). */
		rc = load_bpf(rec, NULL);
		if (!rc && !sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES))
			return fail(rec, -ENOTSUP, "-a needs the BPF backend (root, or CAP_BPF, "
				    "CAP_PERFMON and CAP_SYS_PTRACE)");
		return rc;
	}
	return pyproc__open(env->pid, &rec->p, rec->err, sizeof(rec->err));
}

/* Every target, opened: all of -p's, or a clear error. */
static int open_targets(struct recording *rec)
{
	struct record_env *env = rec->env;
	int rc = open_main_target(rec);

	if (rc)
		return rc;
	if (!env->all && !(rec->main_proc = procset__add(rec->procs, env->pid, 0, rec->p)))
		return fail(rec, -ENOMEM, "out of memory");
	rec->p = NULL;	/* the process set owns it */
	for (size_t i = 1; i < env->npids; i++) {
		struct pyproc *q = NULL;

		rc = pyproc__open(env->pids[i], &q, rec->err, sizeof(rec->err));
		if (!rc && !procset__add(rec->procs, env->pids[i], 0, q)) {
			pyproc__free(q);
			return fail(rec, -ENOMEM, "out of memory");
		}
		if (rc)
			return rc;
	}
	if (env->all)
		snprintf(rec->comm, sizeof(rec->comm), "all");
	else
		procfs__comm(env->pid, 0, rec->comm, sizeof(rec->comm));
	return 0;
}

/* -p's targets: the BPF sampler on them, else the remote backend. */
static int open_sampler(struct recording *rec)
{
	struct record_env *env = rec->env;
	bool procs;
	int rc;

	if (!rec->cmd && !env->all) {
		rc = load_bpf(rec, rec->main_proc->p);
		procs = sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES);
		for (size_t i = 1; !rc && procs && i < env->npids; i++)
			rc = sampler__add_process(rec->sampler, procset__find(rec->procs,
						  env->pids[i])->p, rec->err, sizeof(rec->err));
		if (rc)
			return rc;
		/* A command's children came through the fork tracepoint,
		 * attached before it ran. */
		if (procs && env->subprocesses) {
			proc_follow__adopt_descendants(rec->follow, env->npids ? env->pids : &env->pid,
						       env->npids ? env->npids : 1);
			recording__apply_requests(rec);
		}
	}
	if (rec->sampler)
		return 0;
	if (rec->multi)
		return fail(rec, -ENOTSUP, "--subprocesses and several -p targets need the BPF "
			    "backend");
	rc = sampler__open("remote", rec->main_proc->p, &rec->sopts, &rec->sampler, rec->err,
			   sizeof(rec->err));
	if (rc == -EPERM && rec->sopts.blocking)
		snprintf(rec->err, sizeof(rec->err), "--blocking: cannot stop the target's "
			 "threads (ptrace: %s): another tracer holds them (a debugger, strace, "
			 "py-spy), or CAP_SYS_PTRACE is missing", strerror(-rc));
	else if (rc)
		snprintf(rec->err, sizeof(rec->err), "remote backend: %s", strerror(-rc));
	return rc;
}

/* -o's writer, or the raw recording; a terminal's summary of the hottest
 * functions when writing to a file. */
static int open_sinks(struct recording *rec)
{
	struct record_env *env = rec->env;
	struct sinks *k = &rec->sinks;
	int rc = 0;

	k->live = rec->live;
	k->out_path = env->out.output;
	/* The raw recording keeps the start time: `report` gives pprof the same. */
	env->out.oopts.start_time_ns = realtime_ns();
	rec->rinfo.start_mono_ns = mono_ns();
	k->raw_path = env->raw;
	if (rawrec__wanted(env->out.format, env->out.output))
		k->raw_path = env->out.output ? env->out.output : "-";
	else if (!rec->live)
		rc = output__new(env->out.format, env->out.output, &env->out.oopts, &k->out,
				 rec->err, sizeof(rec->err));
	k->sources.start_ns = env->out.oopts.start_time_ns;
	k->want_sources = k->raw_path || (k->out && !strcmp(output__format(k->out), "heatmap"));
	return rc;
}

static int open_summary_and_raw(struct recording *rec)
{
	struct record_env *env = rec->env;
	struct sinks *k = &rec->sinks;
	struct rawrec_info *ri = &rec->rinfo;

	if (rec->progress && k->out && env->out.output && strcmp(env->out.output, "-") &&
	    !(env->out.format && strcmp(env->out.format, "top") == 0)) {
		struct output_opts so = env->out.oopts;
		char serr[PYPROF_ERRLEN];

		so.top_rows = 10;
		if (output__new("top", "/dev/stderr", &so, &k->summary, serr, sizeof(serr)))
			k->summary = NULL;
	}
	if (!k->raw_path)
		return 0;
	ri->pid = env->pid;
	ri->comm = rec->comm;
	ri->python_version = rec->main_proc->version;
	ri->backend = sampler__id(rec->sampler);
	ri->freq_hz = (uint32_t)env->freq;
	ri->period_ns = rec->period_ns;
	ri->max_frames = (uint32_t)env->max_frames;
	ri->start_time_ns = env->out.oopts.start_time_ns;
	ri->mode = record_env__mode_name(env);
	ri->event = env->event_spec ? env->ev_joined : NULL;
	return rawrec_writer__open(k->raw_path, ri, &k->raw, rec->err, sizeof(rec->err));
}

/* Attached: what is left to do needs far less than root (privileges.h). */
static int drop_privileges(struct recording *rec)
{
	int rc = privileges__drop_after_attach(rec->cmd != NULL);

	if (rc)
		return fail(rec, rc, "could not drop the capabilities it no longer needs");
	return 0;
}

static int recording__setup(struct recording *rec)
{
	struct record_env *env = rec->env;
	int rc;

	rec->progress = !rec->live && isatty(STDERR_FILENO);
	rc = setup_command(rec);
	if (!rc)
		rc = setup_stages(rec);
	if (!rc)
		rc = open_targets(rec);
	if (!rc)
		rc = open_sinks(rec);
	if (!rc)
		rc = open_sampler(rec);
	if (!rc && env->async) {
		if (!sampler__has(rec->sampler, SAMPLER_CAP_ASYNC))
			return fail(rec, -ENOTSUP, "--async needs the BPF backend (root, or "
				    "CAP_BPF and CAP_PERFMON)");
		rc = recording__async_enable(rec);
	}
	if (!rc)
		rc = open_summary_and_raw(rec);
	if (!rc)
		rc = drop_privileges(rec);
	if (!rc)
		rc = recording__announce(rec);
	return rc;
}

/* ---- the loop ---- */

/* Every 0.1 s (after the sinks' flush): processes pending, asyncio, and whether the targets live on.
 * 0 goes on, 1 ends (rec->ended says why), -errno fails. */
static int refresh(struct recording *rec)
{
	const struct record_env *env = rec->env;
	int rc;

	if (sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES)) {
		proc_follow__retry_pending(rec->follow);
		recording__apply_requests(rec);
	}
	if (env->async && (rc = recording__async_enable(rec)))
		return rc;
	if (!env->all && (rec->multi ? !proc_follow__any_alive(rec->follow) :
			  !pidwatch__alive(&rec->watch))) {
		rec->ended = rec->multi ? "every process exited" : "the target exited";
		return 1;
	}
	/* (-a follows execs: every process is its own target.) */
	if (!env->subprocesses && !env->all &&
	    (sampler__execed(rec->sampler) || rec->main_execed)) {
		rec->ended = "the target exec'd another program";
		return 1;
	}
	return 0;
}

/* One self-overwriting line on a terminal, so a long recording shows life. */
static void show_progress(const struct recording *rec, double elapsed)
{
	struct sampler_stats st;

	sampler__stats(rec->sampler, &st);
	fprintf(stderr, "\r\033[K%.0f s: %llu samples, %llu lost, %llu truncated, %llu errors",
		elapsed, (unsigned long long)st.samples, (unsigned long long)st.lost,
		(unsigned long long)st.truncated, (unsigned long long)st.errors);
}

/*
 * Until @until, the live view's wait() in place of the loop's sleep, with
 * the recording's status (the sampler's counts read at most every 0.25 s):
 * 0 goes on, 1 stops, -errno fails.
 */
static int live_wait(struct recording *rec, double until)
{
	double t = mono_s();

	if (t >= rec->next_status) {
		rec->next_status = t + 0.25;
		sampler__stats(rec->sampler, &rec->live_status.stats);
	}
	rec->live_status.elapsed_s = t - rec->start;
	return rec->live->wait(rec->live->ctx, until, &rec->live_status);
}

static void begin_window(struct recording *rec)
{
	const struct record_env *env = rec->env;

	/* From here on a failure leaves the command to finish its work. */
	rec->sampling = rec->cmd != NULL;
	rec->start = mono_s();
	rec->end = env->duration ? rec->start + env->duration : 0;
	if (rec->end)
		rec->deadline_ns = (uint64_t)(rec->end * 1e9);
	resolver__set_deadline(rec->rv, rec->deadline_ns);
	if (!env->all)
		pidwatch__open(&rec->watch, env->pid);
}

/* Poll what is due and look after the targets: 0 goes on, 1 ends, -errno fails. */
static int loop_once(struct recording *rec, double t, double *next_refresh)
{
	int rc;

	if (rec->end && t >= rec->end)
		return 1;
	/* Its end is seen here, not by the checks of the targets (which
	 * would see an unreaped zombie 100 ms later). */
	if (rec->cmd && launch__poll(rec->cmd)) {
		rec->ended = "the command exited";
		return 1;
	}
	rc = sampler__poll(rec->sampler, &rec->tool);
	if (rc == -ESRCH) {
		rec->ended = "the target exited";
		return 1;
	}
	if (rc < 0)
		return rc;
	rc = recording__replay(rec);
	if (rc)
		return rc;
	/* The files the poll's samples named, read now that it is over. */
	rc = sinks__read_sources(&rec->sinks);
	if (rc)
		return rc;
	if (rec->multi)
		procset__free_retired(rec->procs, rec->env->pid);
	if (rec->past_deadline)
		return 1;
	if (rec->env->async == 2 && (rc = recording__emit_pending(rec)))
		return rc < 0 ? rc : 1;
	if (t >= *next_refresh) {
		*next_refresh = t + 0.1;
		/* A streaming format's readers follow the file (tail -f). */
		rc = sinks__flush(&rec->sinks);
		if (rc)
			return rc;
		rc = refresh(rec);
		if (rc)
			return rc;
	}
	sampler__refresh(rec->sampler, t);
	return 0;
}

static int recording__loop(struct recording *rec)
{
	double next_refresh, next_progress;
	int rc = 0;

	begin_window(rec);
	next_refresh = rec->start + 0.1;
	next_progress = rec->start + 1.0;
	while (!stop_requested) {
		double t = mono_s(), next, until;

		rc = loop_once(rec, t, &next_refresh);
		if (rc)
			break;
		next = sampler__next_poll(rec->sampler, t);
		if (rec->progress && !rec->cmd && t >= next_progress) {	/* the command's terminal */
			next_progress = t + 1.0;
			show_progress(rec, t - rec->start);
		}
		until = rec->end && next > rec->end ? rec->end : next;
		if (rec->live) {
			rc = live_wait(rec, until);
			if (rc)
				break;	/* 1: the user quit */
			continue;
		}
		sleep_until_s(until);
	}
	return rc < 0 ? rc : 0;
}

/* ---- the end ---- */

/* The live view's screen ends before anything more is said. */
static void end_live_view(struct recording *rec)
{
	char how[64];

	if (!rec->live_started)
		return;
	if (rec->ended && rec->cmd && launch__poll(rec->cmd) == 1) {
		launch__describe(rec->cmd, how, sizeof(how));
		snprintf(rec->ended_buf, sizeof(rec->ended_buf), "the command %s", how);
		rec->ended = rec->ended_buf;
	}
	sampler__stats(rec->sampler, &rec->live_status.stats);
	rec->live_status.elapsed_s = mono_s() - rec->start;
	rec->live->end(rec->live->ctx, rec->ended, &rec->live_status);
}

/* The writers' last bytes and the raw recording's end record. */
static int close_sinks(struct recording *rec, const struct sampler_stats *st)
{
	struct sinks *k = &rec->sinks;
	struct resolver_stats rvst;
	struct rawrec_end rend;
	int rc = k->err ? k->err : sinks__read_sources(k);

	if (!rc && k->out) {
		rc = output__finish(k->out);
		k->err_file = k->out_path;
	}
	if (!rc && k->raw) {
		resolver__stats(rec->rv, &rvst);
		rend = (struct rawrec_end){ .lost = st->lost, .truncated = st->truncated,
					    .errors = st->errors, .unresolved = rvst.unresolved,
					    .duration_ns = (uint64_t)((rec->end - rec->start) * 1e9),
					    .flags = rec->ended ? RAWREC_END_TARGET_EXITED : 0 };
		rc = rawrec_writer__close(k->raw, &rend);
		k->err_file = k->raw_path;
	}
	if (rc)
		snprintf(rec->err, sizeof(rec->err), "writing %s: %s",
			 k->err_file && strcmp(k->err_file, "-") ? k->err_file : "stdout",
			 strerror(-rc));
	else if (k->summary)
		output__finish(k->summary);
	return rc;
}

/* Sampling stopped (@rc: how): what is left delivered, the outputs
 * written, and the end said. 0, or -errno with rec->err. */
static int recording__finish(struct recording *rec, int rc)
{
	struct sampler_stats st, lost;
	struct resolver_stats rvst;
	uint64_t now_ns;
	char how[64];

	end_live_view(rec);
	if (rec->progress && !rec->cmd)
		fputs("\r\033[K", stderr);
	if (!rc) {
		now_ns = mono_ns();
		rc = sampler__finish(rec->sampler, rec->deadline_ns && rec->deadline_ns < now_ns ?
				     rec->deadline_ns : now_ns, &rec->tool);
		if (!rc)
			rc = recording__replay(rec);
	}
	rec->end = mono_s();
	if (rc && !rec->sinks.err) {
		snprintf(rec->err, sizeof(rec->err), "sampling failed: %s", strerror(-rc));
		return rc;
	}
	/* The sampler counted them too: not in the recording. */
	sampler__stats(rec->sampler, &st);
	resolver__stats(rec->rv, &rvst);
	lost = rvst.unknown;
	lost.samples += rec->hold.lost.samples;
	lost.truncated += rec->hold.lost.truncated;
	lost.errors += rec->hold.lost.errors;
	st.samples -= rec->late.samples + lost.samples;
	st.truncated -= rec->late.truncated + lost.truncated;
	st.errors -= rec->late.errors + lost.errors;
	rc = close_sinks(rec, &st);
	if (rc)
		return rc;
	if (rec->live) {
		/* The live view said why it ended. */
	} else if (rec->cmd && launch__poll(rec->cmd) == 1) {
		launch__describe(rec->cmd, how, sizeof(how));
		fprintf(stderr, "pyprof-bpf: the command %s\n", how);
	} else if (rec->ended) {
		fprintf(stderr, "pyprof-bpf: %s; the recording is complete up to then\n",
			rec->ended);
	}
	if (!rec->live || !rec->live->no_summary)
		recording__print_summary(rec, &st, rc);
	return 0;
}

/* The exit status of a recording written: the command's, if one was started. */
static int exit_written(struct recording *rec)
{
	pid_t pid = rec->env->pid;
	char how[64];

	if (!rec->cmd)
		return 0;
	if (rec->live && launch__poll(rec->cmd) == 0) {
		/* The user left the live view: the command goes with it. */
		launch__kill(rec->cmd);
		fprintf(stderr, "pyprof-bpf: the command (pid %d) was killed\n", (int)pid);
		return 0;
	}
	if (launch__poll(rec->cmd) != 1) {	/* -d, or it exec'd */
		fprintf(stderr, "pyprof-bpf: the recording is written; waiting for the command "
			"(pid %d) to exit\n", (int)pid);
		if (!launch__wait(rec->cmd)) {
			launch__describe(rec->cmd, how, sizeof(how));
			fprintf(stderr, "pyprof-bpf: the command %s\n", how);
		}
	}
	return launch__exit_code(rec->cmd) >= 0 ? launch__exit_code(rec->cmd) : 1;
}

/* The exit status of a recording that failed, said on stderr. */
static int exit_failed(struct recording *rec, int rc)
{
	pid_t pid = rec->env->pid;

	fprintf(stderr, "pyprof-bpf: %s\n", rec->err[0] ? rec->err : strerror(-rc));
	if (rec->cmd && rc == -ECHILD && launch__exit_code(rec->cmd) >= 0)
		return launch__exit_code(rec->cmd);	/* it could not be run, or ran no Python */
	if (rec->cmd && launch__poll(rec->cmd) == 0) {
		/* Before sampling it has barely begun: it would run unprofiled.
		 * Once sampled, it is left to finish its work. */
		if (!rec->sampling) {
			launch__kill(rec->cmd);
			fprintf(stderr, "pyprof-bpf: the command (pid %d) was killed\n", (int)pid);
		} else {
			fprintf(stderr, "pyprof-bpf: waiting for the command (pid %d) to "
				"exit\n", (int)pid);
			launch__wait(rec->cmd);
		}
	}
	return 1;
}

static void recording__teardown(struct recording *rec)
{
	sampler__close(rec->sampler);
	sinks__free(&rec->sinks);
	resolver__free(rec->rv);
	recording__async_free(rec);
	record_hold__free(&rec->hold);
	free(rec->ends);
	proc_follow__free(rec->follow);
	procset__free(rec->procs);
	pidwatch__close(&rec->watch);
	pyproc__free(rec->p);
	launch__free(rec->cmd);
	if (rec->env->comm_re)
		regfree(&rec->env->comm);
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
		{ .argp = sink ? sink->argp : NULL,
		  .header = sink && sink->header ? sink->header : "Display:" },
		{ 0 },
	};
	const struct argp argp = {
		.options = record_options, .parser = record_options__parse,
		.doc = sink ? sink->doc : record_doc,
		.children = !sink ? children : sink->argp ? sink_children : NULL,
	};
	struct record_env env = {
		.freq = sink && sink->default_freq ? sink->default_freq : DEFAULT_FREQ,
		.max_frames = DEFAULT_MAX_FRAMES, .backend = BACKEND_AUTO,
		.sink = sink,
	};
	struct recording rec = { .env = &env, .live = sink, .watch = { .fd = -1 } };
	int rc, exit_code;

	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &env))
		return 2;
	rc = recording__setup(&rec);
	if (!rc)
		rc = recording__finish(&rec, recording__loop(&rec));
	exit_code = rc ? exit_failed(&rec, rc) : exit_written(&rec);
	recording__teardown(&rec);
	return exit_code;
}
