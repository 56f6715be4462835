// SPDX-License-Identifier: MIT
/*
 * programs.c - which of the two BPF objects this kernel runs, and what each
 * mode needs of the kernel, found by probing it (never by its version
 * number: RHEL 9's 5.14 has bpf_loop backported).
 *
 * pyprof.bpf.o needs bpf_loop (5.17+), bpf_get_current_task_btf (5.11+)
 * and bpf_task_pt_regs (5.15+), and in off-CPU modes a sched_switch that
 * passes prev_state (5.18+); pyprof_noloop.bpf.o, the same source
 * without them (bpf/compat.bpf.h), runs from 5.8 (ring buffers) on. Both
 * are in the binary; pyprof_noloop.skel.h is generated under the main
 * skeleton's name and its layout checked equal at build, so the loader
 * opens either through pyprof.skel.h. Only its bytes are taken from here.
 *
 * PYPROF_BPF_PROGRAM=pyprof|pyprof_noloop overrides the choice (tests and
 * the benchmark run the second program on kernels that have bpf_loop).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "pyprof_noloop.skel.h"		/* after pyprof.h, whose types it uses */

struct need {
	enum bpf_func_id helper;
	const char *name;
};

/* What the main program calls that older kernels lack. */
static const struct need loop_needs[] = {
	{ BPF_FUNC_loop, "bpf_loop (5.17+)" },
	{ BPF_FUNC_get_current_task_btf, "bpf_get_current_task_btf (5.11+)" },
	{ BPF_FUNC_task_pt_regs, "bpf_task_pt_regs (5.15+)" },
};

/* What both programs call. */
static const struct need base_needs[] = {
	{ BPF_FUNC_probe_read_user, "bpf_probe_read_user (5.5+)" },
	{ BPF_FUNC_probe_read_kernel, "bpf_probe_read_kernel (5.5+)" },
	{ BPF_FUNC_get_current_task, "bpf_get_current_task (4.8+)" },
	{ BPF_FUNC_ringbuf_output, "bpf_ringbuf_output (5.8+)" },
};

static int print_nothing(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

/* The first of @needs the kernel lacks for perf_event programs; NULL: none. */
static const char *first_missing(const struct need *needs, size_t n)
{
	libbpf_print_fn_t old = libbpf_set_print(print_nothing);
	const char *missing = NULL;

	for (size_t i = 0; i < n && !missing; i++)
		if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, needs[i].helper, NULL) != 1)
			missing = needs[i].name;
	libbpf_set_print(old);
	return missing;
}

const char *bpf_programs__base_missing(void)
{
	return first_missing(base_needs, sizeof(base_needs) / sizeof(base_needs[0]));
}

/* A raw tracepoint the kernel's BTF describes (what tp_btf attaches to). */
static bool has_btf_tracepoint(const char *name)
{
	libbpf_print_fn_t old = libbpf_set_print(print_nothing);
	int id = libbpf_find_vmlinux_btf_id(name, BPF_TRACE_RAW_TP);

	libbpf_set_print(old);
	return id > 0;
}

const char *bpf_programs__mode_missing(const struct sampler_opts *o, bool off_cpu)
{
	static const char *const follow[] = { "sched_process_fork", "sched_process_exit",
					      "sched_process_exec" };

	if (off_cpu && !has_btf_tracepoint("sched_switch"))
		return "the sched_switch tracepoint in the kernel's BTF (tp_btf, 5.5+)";
	if (off_cpu && !has_btf_tracepoint("sched_wakeup"))
		return "the sched_wakeup tracepoint in the kernel's BTF (tp_btf, 5.5+)";
	for (size_t i = 0; i < 3 && (o->follow_children || o->exec_events); i++)
		if ((o->follow_children || i == 2) && !has_btf_tracepoint(follow[i]))
			return follow[i];
	if (o->kernel_stacks || off_cpu) {
		static const struct need stack[] = { { BPF_FUNC_get_stack, "bpf_get_stack (4.18+)" } };

		return first_missing(stack, 1);
	}
	return NULL;
}

/*
 * Does the kernel's sched_switch pass prev_state (5.18+)? pyprof.bpf.o's
 * off-CPU program takes it as an argument; pyprof_noloop.bpf.o reads the
 * task's state, so a kernel with bpf_loop but the older tracepoint (a
 * backport) runs that one for off-CPU modes. True when unknown: the load
 * then says what is wrong.
 */
static bool switch_has_prev_state(void)
{
	libbpf_print_fn_t old = libbpf_set_print(print_nothing);
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	bool has = true;
	int id;

	libbpf_set_print(old);
	if (!btf)
		return true;
	/* typedef void (*btf_trace_sched_switch)(void *, bool, prev, next[, state]) */
	id = btf__find_by_name_kind(btf, "btf_trace_sched_switch", BTF_KIND_TYPEDEF);
	t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	t = t ? btf__type_by_id(btf, t->type) : NULL;		/* the pointer */
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	if (t && btf_is_func_proto(t))
		has = btf_vlen(t) >= 5;
	btf__free(btf);
	return has;
}

int bpf_programs__choose(struct bpf_program_choice *c, bool off_cpu, char *err, size_t errlen)
{
	const char *force = getenv("PYPROF_BPF_PROGRAM"), *missing;

	memset(c, 0, sizeof(*c));
	if (force && *force && strcmp(force, "pyprof") && strcmp(force, "pyprof_noloop")) {
		snprintf(err, errlen, "PYPROF_BPF_PROGRAM=%s: the programs are pyprof and "
			 "pyprof_noloop", force);
		return -EINVAL;
	}
	if (force && *force) {
		c->noloop = !strcmp(force, "pyprof_noloop");
		snprintf(c->why, sizeof(c->why), "PYPROF_BPF_PROGRAM says so");
	} else {
		missing = first_missing(loop_needs, sizeof(loop_needs) / sizeof(loop_needs[0]));
		if (!missing && off_cpu && !switch_has_prev_state())
			missing = "prev_state in sched_switch (5.18+)";
		c->noloop = missing != NULL;
		snprintf(c->why, sizeof(c->why), "%s%s", missing ? "the kernel has no " :
			 "the kernel has bpf_loop", missing ? missing : "");
	}
	if (c->noloop)
		c->bytes = pyprof_bpf__elf_bytes(&c->size);
	c->name = c->noloop ? "pyprof_noloop.bpf.o" : "pyprof.bpf.o";
	return 0;
}
