/* SPDX-License-Identifier: MIT */
/*
 * record_summary.c - what a recording says: at its start, what is sampled
 * and how (on stderr, or to the live view); at its end, on stderr, how it
 * ended, what could not be shown and why, then one line of counts in the
 * same shape in every mode (scripts read it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "pyprof.h"		/* PYPROF_MAX_FRAMES, PYPROF_USTACK_MAX */
#include "asyncio/task_stacks.h"
#include "commands/recording.h"
#include "native/mixed.h"
#include "resolve/resolver.h"
#include "sampling/frame_cache.h"
#include "sampling/sampler.h"
#include "target/proc_follow.h"

/* -v: what the BPF backend's frame cache and off-CPU tracking did. */
static void print_bpf_detail(const struct recording *rec)
{
	struct sampler_detail d;

	if (!rec->env->verbose)
		return;
	sampler__detail(rec->sampler, &d);
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

/* What could not wait for its process to be opened (record_path.c). */
static void print_held_losses(const struct record_hold *h)
{
	if (h->lost.samples || h->lost_code)
		fprintf(stderr, "pyprof-bpf: %llu samples and %llu code snapshots met while "
			"their process was being opened were lost (more than %u MB held, or "
			"no memory)\n", (unsigned long long)h->lost.samples,
			(unsigned long long)h->lost_code, HOLD_MAX_BYTES >> 20);
	if (h->lost_events)
		fprintf(stderr, "pyprof-bpf: %llu process events were lost (no memory): "
			"some processes may not have been followed\n",
			(unsigned long long)h->lost_events);
}

/* Several -e events: each one's samples and the events they stand for
 * (cpu-clock's in ns). */
static void print_event_counts(const struct recording *rec, const struct resolver_stats *rvst)
{
	const struct record_env *env = rec->env;

	if (env->nevs < 2)
		return;
	fputs("pyprof-bpf: per event:", stderr);
	for (unsigned int i = 0; i < env->nevs; i++)
		fprintf(stderr, "%s %s %" PRIu64 " samples (%" PRIu64 " %s)", i ? ";" : "",
			env->evs[i].name, rvst->event_samples[i], rvst->event_weight[i],
			sampler_event__is_clock(&env->evs[i]) ? "ns" : "events");
	fputc('\n', stderr);
}

/* What was dropped or left out, each said once. */
static void print_losses(const struct recording *rec, const struct resolver_stats *rvst)
{
	const struct record_env *env = rec->env;
	struct sampler_detail d;

	sampler__detail(rec->sampler, &d);
	if (rec->late.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples taken after the %g s duration were "
			"dropped\n", (unsigned long long)rec->late.samples, env->duration);
	proc_follow__print(rec->follow, stderr);
	if (env->verbose && rvst->snapshot_errors)
		fprintf(stderr, "pyprof-bpf: %zu code snapshots could not be used (their "
			"process not sampled, or no memory): those objects were read from the "
			"target instead\n", rvst->snapshot_errors);
	if (rvst->unknown.samples)
		fprintf(stderr, "pyprof-bpf: %llu samples of processes that could not be read "
			"were dropped\n", (unsigned long long)rvst->unknown.samples);
	print_held_losses(&rec->hold);
	if (d.lost_intervals)
		fprintf(stderr, "pyprof-bpf: %llu off-CPU intervals lost (their stack's record "
			"did not reach us: the ring was full)\n",
			(unsigned long long)d.lost_intervals);
	if (d.nested)
		fprintf(stderr, "pyprof-bpf: %llu samples not taken: each fired while its CPU "
			"was taking another (an interrupt inside a tracepoint's hit), whose walk it "
			"would have torn\n", (unsigned long long)d.nested);
}

void recording__print_summary(struct recording *rec, const struct sampler_stats *st, int rc)
{
	const struct record_env *env = rec->env;
	struct resolver_stats rvst;
	double secs = rec->end - rec->start;
	bool cpu = env->mode == SAMPLER_MODE_CPU;
	char tail[sizeof(env->ev_joined) + 96] = "";

	resolver__stats(rec->rv, &rvst);
	print_bpf_detail(rec);
	print_losses(rec, &rvst);
	print_native(rec);
	print_async(rec, rc);
	if (rvst.clipped_ns)
		fprintf(stderr, "pyprof-bpf: %.3f s of off-CPU time after the %g s duration "
			"was left out\n", rvst.clipped_ns / 1e9, env->duration);
	if (st->truncated > st->cut)
		fprintf(stderr, "pyprof-bpf: %llu samples had more than %ld Python frames: "
			"their outermost ones are cut at [truncated]; --max-depth N keeps more "
			"(above %d, with the remote backend)\n",
			(unsigned long long)(st->truncated - st->cut), env->max_frames,
			PYPROF_MAX_FRAMES);
	if (st->cut)
		fprintf(stderr, "pyprof-bpf: %llu samples are cut at [truncated] where the frame "
			"cache could not splice their callers, whatever their depth (-v: "
			"\"mismatched\")\n", (unsigned long long)st->cut);
	if (st->torn)
		fprintf(stderr, "pyprof-bpf: %llu samples are [read-fault]: their thread moved "
			"during every copy of its stack (torn reads, given up)\n",
			(unsigned long long)st->torn);
	if (st->stops)
		fprintf(stderr, "pyprof-bpf: --blocking: the target's threads were stopped %llu "
			"times, %.3f ms each on average, %.1f%% of the time\n",
			(unsigned long long)st->stops, st->stopped_ns / 1e6 / st->stops,
			secs > 0 ? 100.0 * st->stopped_ns / 1e9 / secs : 0.0);
	/* One shape in every mode (scripts read it); the mode or the event
	 * (-e: -F's rate was not what it sampled at) said after it. */
	print_event_counts(rec, &rvst);
	if (env->memory)
		snprintf(tail, sizeof(tail), "; memory mode: at %s events, weighed in bytes of "
			 "pages", env->ev_joined);
	else if (env->nevs > 1)
		snprintf(tail, sizeof(tail), "; at %s events (each above)", env->ev_joined);
	else if (env->event_spec)
		snprintf(tail, sizeof(tail), "; at %s events, not the clock", env->ev_joined);
	else if (!cpu)
		snprintf(tail, sizeof(tail), "; %s mode%s", record_env__mode_name(env),
			 env->mode != SAMPLER_MODE_WALL ||
			 !sampler__has(rec->sampler, SAMPLER_CAP_OFFCPU) ? "" :
			 " (an off-CPU interval counts as one sample)");
	fprintf(stderr, "pyprof-bpf: %llu samples in %.2f s (%.1f/s, %ld Hz asked per running "
		"thread), %llu lost, %llu truncated, %llu errors, %zu unresolved frames%s\n",
		(unsigned long long)st->samples, secs, st->samples / secs, env->freq,
		(unsigned long long)st->lost, (unsigned long long)st->truncated,
		(unsigned long long)st->errors, rvst.unresolved, tail);
}

/* "in cpu mode at 99 Hz", "on cycles at 99 Hz", "on page-faults, every
 * event", "on syscalls:sys_enter_openat, one event in 10" (@period: the
 * sampler's). */
static void describe_rate(const struct record_env *env, char *buf, size_t len)
{
	uint64_t period = env->count ? env->count :
			  env->event_spec ? sampler_event__default_period(&env->evs[0]) : 0;
	size_t n;

	if (env->nevs > 1) {
		/* "on cpu-clock at 99 Hz, page-faults every event" */
		n = (size_t)snprintf(buf, len, "on");
		for (unsigned int i = 0; i < env->nevs && n < len; i++) {
			period = env->count ? env->count :
				 sampler_event__default_period(&env->evs[i]);
			n += (size_t)(period == 1 ?
				snprintf(buf + n, len - n, "%s %s every event", i ? "," : "",
					 env->evs[i].name) : period ?
				snprintf(buf + n, len - n, "%s %s one event in %" PRIu64,
					 i ? "," : "", env->evs[i].name, period) :
				snprintf(buf + n, len - n, "%s %s at %ld Hz", i ? "," : "",
					 env->evs[i].name, env->freq));
		}
		return;
	}
	if (env->memory && period == 1)
		snprintf(buf, len, "in memory mode (every page fault, %ld bytes each)",
			 sysconf(_SC_PAGESIZE));
	else if (env->memory)
		snprintf(buf, len, "in memory mode (one page fault in %" PRIu64 ", %ld bytes each)",
			 period, sysconf(_SC_PAGESIZE));
	else if (!env->event_spec)
		snprintf(buf, len, "in %s mode at %ld Hz", record_env__mode_name(env), env->freq);
	else if (period == 1)
		snprintf(buf, len, "on %s, every event", env->ev_joined);
	else if (period)
		snprintf(buf, len, "on %s, one event in %" PRIu64, env->ev_joined, period);
	else
		snprintf(buf, len, "on %s at %ld Hz", env->ev_joined, env->freq);
}

/* What is sampled, said once sampling begins: on stderr, or to the live view. */
int recording__announce(struct recording *rec)
{
	const struct record_env *env = rec->env;
	const char *mode = record_env__mode_name(env);
	const char *backend = sampler__name(rec->sampler);
	bool events = sampler__has(rec->sampler, SAMPLER_CAP_PERF_EVENTS);
	struct sampler_detail d;
	bool per_cpu;
	char rate[sizeof(env->ev_joined) + 512];
	struct record_info info = {
		.pid = env->pid, .comm = rec->comm,
		.python_version = rec->main_proc ? rec->main_proc->version : "",
		.mode = mode, .freq_hz = env->freq, .backend = backend,
		.event = env->event_spec ? env->ev_joined : NULL,
		.command = rec->cmd != NULL, .multi = rec->multi, .procs = rec->procs,
	};
	int rc;

	sampler__detail(rec->sampler, &d);
	if (env->verbose && d.program && d.program[0])	/* and the verifier's figures */
		fprintf(stderr, "pyprof-bpf: BPF program: %s\n", d.program);
	per_cpu = events && d.per_cpu;
	info.per_cpu = per_cpu;
	if (rec->live) {
		rc = rec->live->start(rec->live->ctx, &info, rec->err, sizeof(rec->err));
		rec->live_started = !rc;
		return rc;
	}
	describe_rate(env, rate, sizeof(rate));
	if (env->filter) {	/* the hits that count */
		size_t n = strlen(rate);

		snprintf(rate + n, sizeof(rate) - n, ", the hits matching --filter '%s'",
			 env->filter);
	}
	if (env->all)
		fprintf(stderr, "pyprof-bpf: sampling every Python process%s%s%s %s "
			"with the BPF backend (per-CPU events)%s\n",
			env->comm_re ? " named like '" : "", env->comm_re ? env->comm_re : "",
			env->comm_re ? "'" : "", rate,
			env->duration ? "" : "; Ctrl-C to stop");
	else
		fprintf(stderr, "pyprof-bpf: sampling process %d (Python %s) %s "
			"with the %s backend%s%s\n", (int)env->pid, rec->main_proc->version,
			rate, backend,
			!events || env->mode == SAMPLER_MODE_OFFCPU ? "" :
			per_cpu ? " (per-CPU events)" : " (per-thread events)",
			rec->cmd ? (env->duration ? "" : " until the command exits") :
			env->duration ? "" : "; Ctrl-C to stop");
	return 0;
}
