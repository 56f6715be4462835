/* SPDX-License-Identifier: MIT */
/* record_launch.c - a command started by record (-- CMD ARGS), until its interpreter is sampled. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "commands/recording.h"
#include "resolve/resolver.h"
#include "sampling/sampler.h"
#include "target/launch.h"
#include "target/proc_follow.h"
#include "target/procset.h"
#include "util/clock.h"

/* A command started must run Python within this long. */
#define COMMAND_PYTHON_TIMEOUT 5.0

/* A sample while a command is launched: no process is configured then, so
 * none should come; one that does is counted as unreadable, not shown. */
int recording__drop_sample(void *ctx, const struct raw_sample *r)
{
	struct recording *rec = ctx;

	resolver__drop(rec->rv, r);
	return 0;
}

/* The command is sampled: the children it exec'd meanwhile (--subprocesses)
 * are looked at from now on, for as long as any exec'd child is. */
static void launch_done(struct recording *rec)
{
	uint64_t now = mono_ns();

	rec->launching = 0;
	proc_follow__defer(rec->follow, false);
	for (size_t i = 0; i < procset__count(rec->procs); i++) {
		struct proc_entry *e = procset__at(rec->procs, i);

		if (e->state == PROC_PENDING)
			e->pending_since_ns = now;
	}
	if (sampler__has(rec->sampler, SAMPLER_CAP_PROCESSES)) {
		proc_follow__retry_pending(rec->follow);
		recording__apply_requests(rec);
	}
}

/*
 * ---- The lifecycle of a command started (-- CMD ARGS) ----
 *
 * The BPF sampler is loaded before the command is released (record.c's load_bpf():
 * per-CPU events, the exec tracepoint, the command's pid tracked in the
 * program's procs map but not configured, so its ticks are dropped in the
 * kernel). The command then runs on, never stopped, through one exec or more
 * (env, chroot, a pyenv shim, a script that execs python); each exec comes
 * as a process event, in order with the samples, and the interpreter is
 * looked for at once and every 0.5 ms after: a shared-libpython build
 * shows its runtime only once ld.so has mapped libpython, a few ms after
 * the exec. Found, its offsets are written in the procs map
 * (sampler__set_target): the next tick of the command is sampled, and
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
 * Returns 0 with rec->p open (and the BPF sampler's target); -ECHILD when the
 * command ended by itself (it could not be exec'd, or exited before running
 * Python: the caller exits with its status); another -errno when pyprof-bpf
 * gives up (the caller kills the command). One line in rec->err either way.
 */
int recording__start_command(struct recording *rec)
{
	struct record_env *env = rec->env;
	struct launch *cmd = rec->cmd;
	struct pyproc **p = &rec->p;
	char *err = rec->err;
	size_t errlen = sizeof(rec->err);
	const struct timespec retry = { .tv_nsec = 500000 };
	pid_t pid = launch__pid(cmd);
	/* Its samples are dropped; its code snapshots and process events
	 * (the execs) go where the recording's go. */
	struct sampler_tool drop = rec->tool;
	double deadline;
	char why[PYPROF_ERRLEN], how[64];
	unsigned int execs;
	int rc;

	*p = NULL;
	drop.sample = recording__drop_sample;
	rec->launching = 1;
	proc_follow__defer(rec->follow, true);
	rc = launch__start(cmd, err, errlen);
	if (rc)
		return launch__exit_code(cmd) >= 0 ? -ECHILD : rc;
	deadline = mono_s() + COMMAND_PYTHON_TIMEOUT;
	for (;;) {
		/* The execs so far: the ring holds them in order. */
		rc = rec->sampler ? sampler__poll(rec->sampler, &drop) : 0;
		if (rc >= 0)
			rc = recording__replay(rec);
		if (rc < 0) {
			snprintf(err, errlen, "sampling failed: %s", strerror(-rc));
			return rc;
		}
		execs = rec->cmd_execs;
		rc = pyproc__open(pid, p, why, sizeof(why));
		if (!rc && rec->sampler) {
			rc = sampler__poll(rec->sampler, &drop);
			if (rc >= 0)
				rc = recording__replay(rec);
			if (rc < 0) {
				snprintf(err, errlen, "sampling failed: %s", strerror(-rc));
				pyproc__free(*p);
				*p = NULL;
				return rc;
			}
			rc = 0;
			if (rec->cmd_execs != execs) {
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
	if (rec->sampler) {
		rc = sampler__set_target(rec->sampler, *p, err, errlen);
		if (rc) {
			/* The sampler is only freed now; *p goes after it. */
			return rc;
		}
		if (env->verbose)
			fprintf(stderr, "pyprof-bpf: the command's interpreter (Python %s) is "
				"sampled %.2f ms after its exec (%u exec%s)\n",
				pyproc__version(*p),
				(mono_ns() - rec->cmd_exec_ns) / 1e6, rec->cmd_execs,
				rec->cmd_execs == 1 ? "" : "s");
	}
	launch_done(rec);
	return 0;
}

