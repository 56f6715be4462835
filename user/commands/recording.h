/* SPDX-License-Identifier: MIT */
/*
 * recording.h - one recording, as record.c, record_launch.c, record_async.c
 * and record_summary.c share it (internal to the record command).
 *
 * record wires the stages and owns the loop: the sampler (sampling/
 * sampler.h) delivers raw samples, the resolver (resolve/resolver.h) makes
 * them resolved ones, the sinks (commands/sinks.h) write them. No stage
 * calls back into the recording but through the callbacks it registered
 * (samples, code snapshots, process events).
 */
#ifndef PYPROF_COMMANDS_RECORDING_H
#define PYPROF_COMMANDS_RECORDING_H

#include <stdbool.h>
#include <stdint.h>
#include "commands/record.h"
#include "commands/record_options.h"
#include "commands/record_hold.h"
#include "asyncio/task_stacks.h"
#include "commands/sinks.h"
#include "output/rawrec.h"
#include "sampling/sampler.h"
#include "target/pidwatch.h"
#include "target/pyproc.h"

struct launch;
struct proc_entry;
struct proc_follow;
struct procset;
struct resolver;
struct stack_end;

struct recording {
	struct record_env *env;
	const struct record_sink *live;		/* `top`; NULL: record */
	bool multi;			/* several processes */
	/* The processes sampled, and how new ones are found (--subprocesses, -a). */
	struct procset *procs;
	struct proc_follow *follow;
	struct proc_entry *main_proc;	/* -p's first target or the command; NULL with -a */
	struct pyproc *p;		/* the main target, until procs owns it */
	struct pidwatch watch;
	/* The stages: sampler -> resolver -> sinks. */
	struct sampler *sampler;
	struct sampler_tool tool;	/* what its polls hand on (record_path.c) */
	/* What a poll could not do, done between polls (record_path.c):
	 * records held, stack ends for the sampler. */
	struct record_hold hold;
	struct stack_end *ends;
	size_t nends, capends;
	struct sampler_opts sopts;
	struct resolver *rv;
	struct sinks sinks;
	struct rawrec_info rinfo;
	char comm[32];
	uint64_t period_ns;

	/* A command started (-- CMD ARGS), and its lifecycle (record_launch.c). */
	struct launch *cmd;
	int launching;			/* its interpreter not configured yet */
	unsigned int cmd_execs;
	uint64_t cmd_exec_ns;		/* the last exec, CLOCK_MONOTONIC */
	int sampling;			/* it is sampled: a failure leaves it to run */
	/* The command, sampled without --subprocesses, exec'd: the
	 * interpreter sampled is gone, and the recording ends. */
	int main_execed;

	/* --async (record_async.c): each process's tables */
	struct async_proc *async;
	size_t nasync, capasync;
	size_t async_last;		/* the entry find() gave last */
	size_t async_on;		/* processes whose tasks were read, ever */
	struct task_stacks_stats async_gone;	/* counts of tables dropped */
	int async_waiting;		/* asyncio not imported yet: said once */
	uint64_t pending_ns;		/* --async=all: the last pending tasks' time */
	uint64_t pending_weight;	/* and the weight of this round's */

	/* The window: -d's end stops taking samples (a consumer behind the
	 * kernel must not stretch the recording). */
	double start, end;		/* CLOCK_MONOTONIC s; end 0: none */
	uint64_t deadline_ns;
	int past_deadline;
	struct sampler_stats late;	/* samples after it: dropped */
	const char *ended;		/* why sampling ended; NULL: stopped */
	char ended_buf[PYPROF_ERRLEN];
	int progress;			/* a progress line on stderr */
	int live_started;
	struct record_status live_status;
	double next_status;
	char err[PYPROF_ERRLEN];	/* the one line a failure prints */
};

/* record_path.c: the sample's path (its comment). The sampler's callbacks
 * into rec->tool. */
void recording__set_tool(struct recording *rec);
/* --native: @tid's stack end, told the sampler between polls. 0 or -ENOMEM. */
int recording__queue_stack_end(struct recording *rec, pid_t tid, uint64_t end);
/* Between polls: what proc_follow asked of the sampler, and the stack
 * ends, told it. */
void recording__apply_requests(struct recording *rec);
/* Between polls (after each, and after the last): the records held
 * applied in order. 0, or what the sinks or resolver failed with. */
int recording__replay(struct recording *rec);

/* record_resource.c: what process @pid is, for --format otlp
 * (output_opts.describe; @ctx the recording). */
struct otlp_resource;
void recording__describe(void *ctx, pid_t pid, struct otlp_resource *r);

/* record_launch.c: start the command and find its interpreter
 * (record__start_command's comment). */
int recording__start_command(struct recording *rec);
/* A sample while the command is launched: counted, not shown. */
int recording__drop_sample(void *ctx, const struct raw_sample *r);

/* record_async.c: --async. Tables for the processes that have asyncio
 * (called again every refresh: new processes, images, imports). */
int recording__async_enable(struct recording *rec);
int recording__emit_pending(struct recording *rec);
/* The counts of every process's tables, those dropped included. */
void recording__async_stats(const struct recording *rec, struct task_stacks_stats *st);
void recording__async_free(struct recording *rec);

/* record_summary.c: what the recording says at its end, on stderr. */
void recording__print_summary(struct recording *rec, const struct sampler_stats *st, int rc);
/* What is sampled, said once sampling begins: on stderr, or to the live view. */
int recording__announce(struct recording *rec);

#endif
