/* SPDX-License-Identifier: MIT */
/*
 * record_summary.c - what a recording says on stderr at its end: how it
 * ended, what could not be shown and why, then one line of counts in the
 * same shape in every mode (scripts read it).
 */
#include <stdio.h>
#include "pyprof.h"		/* PYPROF_MAX_FRAMES, PYPROF_USTACK_MAX */
#include "asyncio/task_stacks.h"
#include "commands/recording.h"
#include "native/mixed.h"
#include "resolve/resolver.h"
#include "sampling/bpf_sampler.h"
#include "sampling/proc_follow.h"
#include "symbols/frame_cache.h"

/* -v: what the BPF backend's frame cache and off-CPU tracking did. */
static void print_bpf_detail(const struct recording *rec)
{
	struct bpf_sampler_detail d;

	if (!rec->bs || !rec->env->verbose)
		return;
	bpf_sampler__detail(rec->bs, &d);
	if (d.offcpu)
		fprintf(stderr, "pyprof-bpf: off-CPU: %llu switch-outs stood on their thread's last "
			"walk, %llu intervals closed by inference, %llu lost\n",
			(unsigned long long)d.reused, (unsigned long long)d.inferred,
			(unsigned long long)d.lost_intervals);
	if (d.frame_cache)
		frame_cache_stats__print(&d.cache, "sent by the kernel", stderr);
}

static void print_native(const struct recording *rec)
{
	const struct native_mixer *m = resolver__mixer(rec->rv);
	const struct record_env *env = rec->env;
	struct native_mixer_stats ns;

	if (!m)
		return;
	native_mixer__print_warnings(m, stderr);
	if (env->verbose)
		native_mixer__print_unwinders(m, stderr);
	native_mixer__stats(m, &ns);
	if (!ns.samples)
		return;
	fprintf(stderr, "pyprof-bpf: --native: %llu of %llu samples could not be unwound "
		"or merged to their end (cut at [unwind-failed])",
		(unsigned long long)ns.unwind_failed, (unsigned long long)ns.samples);
	/* The one cause a user can act on, said apart. */
	if (ns.cut_by_copy)
		fprintf(stderr, ", %llu of them because their C stack is deeper than the "
			"%ld bytes copied (--stack-size%s)",
			(unsigned long long)ns.cut_by_copy, env->native_stack,
			env->native_stack < PYPROF_USTACK_MAX ? "" : ", at its most");
	if (env->verbose)
		fprintf(stderr, "; stack copies of %.1f KB a sample on average (%llu cut "
			"at an end learnt too low, learnt again)",
			ns.copied / 1024.0 / (double)ns.samples,
			(unsigned long long)ns.cut_by_end);
	fprintf(stderr, "%s%s\n",
		ns.no_unwinder ? "; some processes could not be opened for unwinding" : "",
		ns.unwind_failed && !env->verbose ? "; -v says why per process" : "");
}

static void print_async(const struct recording *rec, int rc)
{
	struct task_stacks_stats ts;

	if (!rec->env->async)
		return;
	if (!rec->async_on) {
		if (!rc)
			fprintf(stderr, "pyprof-bpf: --async: %s\n", rec->multi || !rec->main_proc ?
				"no process sampled had asyncio imported (CPython 3.14+)" :
				"the target never imported asyncio");
		return;
	}
	recording__async_stats(rec, &ts);
	if (rec->multi || !rec->main_proc)
		fprintf(stderr, "pyprof-bpf: --async: the tasks of %zu processes were read\n",
			rec->async_on);
	fprintf(stderr, "pyprof-bpf: --async: %llu samples in tasks; awaiting tasks' frames: "
		"%llu read at the sample, %llu from a snapshot, %llu unread "
		"([task-frames-unread]); %llu names unread ([unread]); %llu chains cut or torn; "
		"%llu snapshots%s",
		(unsigned long long)ts.samples, (unsigned long long)ts.frames_read,
		(unsigned long long)ts.from_snapshot, (unsigned long long)ts.frames_unread,
		(unsigned long long)ts.unknown, (unsigned long long)ts.cut,
		(unsigned long long)ts.snapshots, ts.snapshot_errors ? " (some failed)" : "");
	if (rec->env->async == 2)
		fprintf(stderr, "; %llu stacks of pending tasks", (unsigned long long)ts.pending);
	fputc('\n', stderr);
}

/* What was dropped or left out, each said once. */
static void print_losses(const struct recording *rec, const struct resolver_stats *rs)
{
	const struct record_env *env = rec->env;

	if (rec->late.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples taken after the %g s duration were "
			"dropped\n", (unsigned long long)rec->late.samples, env->duration);
	proc_follow__print(rec->follow, stderr);
	if (env->verbose && rs->snapshot_errors)
		fprintf(stderr, "pyprof-bpf: %zu code snapshots could not be used (their "
			"process not sampled, or no memory): those objects were read from the "
			"target instead\n", rs->snapshot_errors);
	if (rs->unknown.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples of processes that could not be read "
			"were dropped\n", (unsigned long long)rs->unknown.samples);
	if (rec->bs && bpf_sampler__lost_intervals(rec->bs))
		fprintf(stderr, "pyprof-bpf: %llu off-CPU intervals lost (their stack's record "
			"did not reach us: the ring was full)\n",
			(unsigned long long)bpf_sampler__lost_intervals(rec->bs));
}

void recording__print_summary(struct recording *rec, const struct sampler_stats *st, int rc)
{
	const struct record_env *env = rec->env;
	struct resolver_stats rs;
	double secs = rec->end - rec->start;
	bool cpu = env->mode == SAMPLER_MODE_CPU;

	resolver__stats(rec->rv, &rs);
	print_bpf_detail(rec);
	print_losses(rec, &rs);
	print_native(rec);
	print_async(rec, rc);
	if (rs.clipped_ns)
		fprintf(stderr, "pyprof-bpf: %.3f s of off-CPU time after the %g s duration "
			"was left out\n", rs.clipped_ns / 1e9, env->duration);
	if (st->truncated)
		fprintf(stderr, "pyprof-bpf: %llu samples had more than %ld Python frames: "
			"their outermost ones are cut at [truncated]; --max-depth N keeps more "
			"(above %d, with the remote backend)\n", (unsigned long long)st->truncated,
			env->max_frames, PYPROF_MAX_FRAMES);
	if (st->stops)
		fprintf(stderr, "pyprof-bpf: --blocking: the target's threads were stopped %llu "
			"times, %.3f ms each on average, %.1f%% of the time\n",
			(unsigned long long)st->stops, st->stopped_ns / 1e6 / st->stops,
			secs > 0 ? 100.0 * st->stopped_ns / 1e9 / secs : 0.0);
	/* One shape in every mode (scripts read it); the mode said after it. */
	fprintf(stderr, "pyprof-bpf: %llu samples in %.2f s (%.1f/s, %ld Hz asked per running "
		"thread), %llu lost, %llu truncated, %llu errors, %zu unresolved frames%s%s%s\n",
		(unsigned long long)st->samples, secs, st->samples / secs, env->freq,
		(unsigned long long)st->lost, (unsigned long long)st->truncated,
		(unsigned long long)st->errors, rs.unresolved,
		cpu ? "" : "; ", cpu ? "" : record_mode_name(env->mode),
		cpu ? "" : env->mode != SAMPLER_MODE_WALL || !rec->bs ? " mode" :
		" mode (an off-CPU interval counts as one sample)");
}
