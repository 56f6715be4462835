// SPDX-License-Identifier: MIT
/*
 * load.c - the BPF object opened and loaded: the one this kernel runs
 * (programs.c chose it) opened through the skeleton, the modes' needs
 * checked first; the load with a statistics log per program kept, whence
 * -v's "BPF program:" line (verifier.c reads the figures) and a rejection's
 * program and reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "pyprof.skel.h"		/* after pyprof.h, whose types it uses */

/*
 * The verifier's statistics log of each program to load, in buffers of
 * their own (@logs: one per program, VERIFIER_LOG_SIZE each). With -vv
 * libbpf keeps its own full log, printed when a program is rejected.
 */
#define VERIFIER_LOG_SIZE	(64 << 10)
#define VERIFIER_MAX_PROGS	16

static int verifier_logs(struct pyprof_bpf *skel, int verbose, char **logs)
{
	struct bpf_program *prog;
	size_t i = 0;

	*logs = NULL;
	if (verbose > 1)
		return 0;
	*logs = calloc(VERIFIER_MAX_PROGS, VERIFIER_LOG_SIZE);
	if (!*logs)
		return -ENOMEM;
	bpf_object__for_each_program(prog, skel->obj) {
		if (i == VERIFIER_MAX_PROGS)
			break;
		if (!bpf_program__autoload(prog))
			continue;
		bpf_program__set_log_level(prog, 4);	/* BPF_LOG_STATS */
		bpf_program__set_log_buf(prog, *logs + i++ * VERIFIER_LOG_SIZE, VERIFIER_LOG_SIZE);
	}
	return 0;
}

/*
 * A program loaded whose log is empty (7.x kernels write no statistics for
 * a program accepted): the instructions the kernel says it verified (5.16+),
 * against the limit every kernel since 5.2 has; no stack figure.
 */
static void verified_insns(int fd, struct verifier_figures *f)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || !info.verified_insns)
		return;
	f->known = true;
	f->insns = info.verified_insns;
	f->limit = 1000000;		/* BPF_COMPLEXITY_LIMIT_INSNS */
	f->stack = 0;
	f->stack_limit = 0;		/* unknown */
}

/* After the load: the figures of each program into s->program_note, or the
 * reason of the first one rejected into @reason. */
static void read_verifier_logs(struct bpf_sampler *s, const struct bpf_program_choice *c,
			       const char *logs, char *reason, size_t rlen)
{
	struct bpf_program *prog;
	size_t i = 0, n;

	n = (size_t)snprintf(s->program_note, sizeof(s->program_note), "%s (%s)", c->name, c->why);
	if (rlen)
		reason[0] = '\0';
	if (!logs)
		return;
	n += (size_t)snprintf(s->program_note + n, sizeof(s->program_note) - n, "; verifier:");
	bpf_object__for_each_program(prog, s->skel->obj) {
		struct verifier_figures f;
		const char *log;

		if (i == VERIFIER_MAX_PROGS || n >= sizeof(s->program_note))
			break;
		if (!bpf_program__autoload(prog))
			continue;
		log = logs + i++ * VERIFIER_LOG_SIZE;
		/* A rejection's log has figures too: the program that failed
		 * is the first one without a descriptor. */
		if (verifier__parse(log, &f) && bpf_program__fd(prog) >= 0)
			verified_insns(bpf_program__fd(prog), &f);
		/* Rejected: no descriptor (libbpf closes the others' too),
		 * and a verdict in its log. */
		if (rlen && !reason[0] && bpf_program__fd(prog) < 0 && log[0]) {
			char why[256];

			verifier__reason(log, why, sizeof(why));
			if (why[0])
				snprintf(reason, rlen, "%s: %s", bpf_program__name(prog), why);
		}
		n += (size_t)snprintf(s->program_note + n, sizeof(s->program_note) - n, " ");
		if (n < sizeof(s->program_note))
			n += (size_t)verifier__describe(bpf_program__name(prog), &f,
							s->program_note + n,
							sizeof(s->program_note) - n);
		if (n < sizeof(s->program_note) && !f.known)
			n += (size_t)snprintf(s->program_note + n, sizeof(s->program_note) - n,
					      " (its log: \"%.80s\")", log);
		if (n < sizeof(s->program_note) && verifier__near_limit(&f, 20))
			n += (size_t)snprintf(s->program_note + n, sizeof(s->program_note) - n,
					      " (near a limit)");
		if (n < sizeof(s->program_note))
			n += (size_t)snprintf(s->program_note + n, sizeof(s->program_note) - n, ";");
	}
	if (n && n < sizeof(s->program_note) && s->program_note[n - 1] == ';')
		s->program_note[n - 1] = '\0';
}

/*
 * The skeleton's open with another object's bytes (@c): both objects have
 * the same maps, programs and globals at the same places (the build checks).
 */
static struct pyprof_bpf *open_object(const struct bpf_program_choice *c)
{
	struct pyprof_bpf *obj = calloc(1, sizeof(*obj));
	int err;

	if (!obj) {
		errno = ENOMEM;
		return NULL;
	}
	err = pyprof_bpf__create_skeleton(obj);
	if (!err && c->bytes) {
		obj->skeleton->data = (void *)c->bytes;
		obj->skeleton->data_sz = c->size;
	}
	if (!err)
		err = bpf_object__open_skeleton(obj->skeleton, NULL);
	if (err) {
		pyprof_bpf__destroy(obj);
		errno = -err;
		return NULL;
	}
	return obj;
}

/* The object this kernel runs, opened; and the modes of @o checked. */
int bpf_load__open(struct bpf_sampler *s, const struct sampler_opts *o,
		   struct bpf_program_choice *c, char *err, size_t errlen)
{
	const char *missing = bpf_programs__mode_missing(o, bpf_lifecycle__off_cpu(s));
	int ret;

	if (missing) {
		snprintf(err, errlen, "kernel cannot run the BPF sampler in this mode: no %s",
			 missing);
		return -ENOTSUP;
	}
	ret = bpf_programs__choose(c, bpf_lifecycle__off_cpu(s), err, errlen);
	if (ret)
		return ret;
	/* The program tells several events apart by their links' cookies
	 * (5.15+); the one for kernels without bpf_loop takes one event. */
	if (s->nevents > 1 && c->noloop) {
		snprintf(err, errlen, "several events at once (-e %s,...) need a kernel with "
			 "bpf_loop (5.17+): this one runs %s, one event a recording",
			 s->events[0].name, c->name);
		return -ENOTSUP;
	}
	s->skel = open_object(c);
	if (!s->skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the BPF object %s: %s", c->name, strerror(-ret));
		return ret;
	}
	return 0;
}

int bpf_load__load(struct bpf_sampler *s, const struct sampler_opts *o,
		   const struct bpf_program_choice *c, char *err, size_t errlen)
{
	char reason[300], *logs = NULL;
	int ret;

	ret = verifier_logs(s->skel, o->verbose, &logs);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	ret = pyprof_bpf__load(s->skel);
	read_verifier_logs(s, c, logs, reason, sizeof(reason));
	free(logs);
	if (ret == -EPERM && !reason[0]) {
		snprintf(err, errlen, "loading the BPF program: permission denied "
			 "(needs root, or CAP_BPF and CAP_PERFMON)");
		return ret;
	}
	if (ret) {
		snprintf(err, errlen, "the kernel's BPF verifier rejected the program %s (%s)%s%s%s",
			 c->name, strerror(-ret), reason[0] ? ": " : "", reason,
			 o->verbose > 1 ? "" : "; rerun with -vv for its log");
		return ret;
	}
	return 0;
}
