// SPDX-License-Identifier: MIT
/*
 * proc_follow.c - the processes a recording follows besides its targets (see
 * proc_follow.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "target/proc_follow.h"
#include "target/procfs.h"
#include "target/pyproc.h"
#include "util/clock.h"

/* A followed process that exec'd is looked at this long for a Python (a
 * shared libpython is mapped moments after the exec). */
#define EXEC_PENDING_NS (300 * 1000000ULL)
/* --subprocesses: descendants looked for at the start, per target. */
#define MAX_DESCENDANTS 4096

struct proc_follow {
	struct procset *procs;
	bool configurable;	/* processes can be configured in the sampler */
	/* Requests not yet taken: reqs[req_head..nreqs). */
	struct proc_request *reqs;
	size_t req_head, nreqs, capreqs;
	struct proc_follow_opts o;
	/* -a: processes met that ran no Python (or not --comm's), forgotten
	 * once they ended. */
	unsigned long long others_ended;
	/* Processes that could not be followed: no memory for their entry. */
	unsigned long long untracked;
	bool deferred;		/* exec'd processes noted, not opened */
};

int proc_follow__new(struct procset *ps, const struct proc_follow_opts *o,
		     struct proc_follow **out)
{
	struct proc_follow *pf = calloc(1, sizeof(*pf));

	*out = NULL;
	if (!pf)
		return -ENOMEM;
	pf->procs = ps;
	pf->o = *o;
	*out = pf;
	return 0;
}

void proc_follow__free(struct proc_follow *pf)
{
	if (pf)
		free(pf->reqs);
	free(pf);
}

void proc_follow__set_configurable(struct proc_follow *pf, bool configurable)
{
	pf->configurable = configurable;
}

/* Queue a request; false (counted) without memory. */
static bool request(struct proc_follow *pf, enum proc_request_kind kind, pid_t pid)
{
	struct proc_request *r;
	size_t cap;

	if (pf->req_head == pf->nreqs)
		pf->req_head = pf->nreqs = 0;
	if (pf->nreqs == pf->capreqs) {
		cap = pf->capreqs ? pf->capreqs * 2 : 16;
		r = realloc(pf->reqs, cap * sizeof(*r));
		if (!r) {
			pf->untracked++;
			return false;
		}
		pf->reqs = r;
		pf->capreqs = cap;
	}
	pf->reqs[pf->nreqs++] = (struct proc_request){ kind, pid };
	return true;
}

bool proc_follow__next_request(struct proc_follow *pf, struct proc_request *r)
{
	if (pf->req_head == pf->nreqs)
		return false;
	*r = pf->reqs[pf->req_head++];
	return true;
}

void proc_follow__added(struct proc_follow *pf, struct proc_entry *e, int rc, const char *why)
{
	if (rc) {
		snprintf(e->why, sizeof(e->why), "%s", why);
		e->state = PROC_FAILED;
		return;
	}
	if (pf->o.verbose)
		fprintf(stderr, "pyprof-bpf: following process %d (%s, Python %s)\n",
			(int)e->pid, e->comm, e->version);
}

/* Has @e (open) an interpreter with a thread state? */
static bool runs_python(struct proc_entry *e)
{
	struct py_thread t;
	size_t n = 0;
	int rc = pyproc__threads(e->p, &t, 1, &n);

	return (!rc || rc == -E2BIG) && n > 0;
}

/* Have @e (open, running Python) configured in the sampler: requested,
 * answered by proc_follow__added(). */
static void configure(struct proc_follow *pf, struct proc_entry *e)
{
	if (!pf->configurable) {
		snprintf(e->why, sizeof(e->why), "following processes needs the BPF backend");
		e->state = PROC_FAILED;
		return;
	}
	if (!request(pf, PROC_REQ_ADD, e->pid)) {
		snprintf(e->why, sizeof(e->why), "out of memory");
		e->state = PROC_FAILED;
	}
}

/* A process that exec'd (or was met): sampled once its image is found to be
 * a Python's; the sampler drops its ticks until then. */
static void try_python(struct proc_follow *pf, struct proc_entry *e)
{
	if (procset__open(pf->procs, e))
		return;
	if (pf->o.all && !runs_python(e)) {
		/* -a: libpython loaded without an interpreter (perf links it
		 * for its scripts), or one still starting (a loaded host may
		 * take a second): kept open, and looked at again at each
		 * refresh (one read) for as long as it runs. */
		e->state = PROC_NO_INTERP;
		snprintf(e->why, sizeof(e->why), "libpython is loaded, but no interpreter runs");
		return;
	}
	configure(pf, e);
}

/* -a --comm: @e's name does not match (said as why it is not sampled). */
static bool comm_excluded(struct proc_follow *pf, struct proc_entry *e)
{
	if (!pf->o.comm || !regexec(pf->o.comm, e->comm, 0, NULL, 0))
		return false;
	snprintf(e->why, sizeof(e->why), "its name does not match --comm");
	e->state = PROC_NOT_PYTHON;
	return true;
}

/* @pid's entry, made if it has none; NULL (counted) without memory. */
static struct proc_entry *entry_of(struct proc_follow *pf, pid_t pid, pid_t ppid)
{
	struct proc_entry *e = procset__find(pf->procs, pid);

	if (!e && !(e = procset__add(pf->procs, pid, ppid, NULL)))
		pf->untracked++;
	return e;
}

void proc_follow__defer(struct proc_follow *pf, bool defer)
{
	pf->deferred = defer;
}

void proc_follow__on_event(struct proc_follow *pf, enum sampler_proc_event ev, pid_t pid,
			   pid_t ppid)
{
	struct proc_entry *e;

	switch (ev) {
	case SAMPLER_PROC_SEEN:
		/* -a: met on a CPU; looked at as an exec'd process is. */
		e = entry_of(pf, pid, 0);
		if (!e || e->state == PROC_PYTHON || e->state == PROC_PENDING ||
		    e->state == PROC_NO_INTERP)
			break;
		e->state = PROC_PENDING;
		e->pending_since_ns = mono_ns();
		if (!comm_excluded(pf, e))
			try_python(pf, e);
		break;
	case SAMPLER_PROC_FORK:
		if (!procset__add(pf->procs, pid, ppid, NULL))
			pf->untracked++;
		break;
	case SAMPLER_PROC_EXEC:
		e = entry_of(pf, pid, 0);
		if (!e)
			break;
		procset__exec(pf->procs, e, mono_ns());
		procfs__comm(pid, 0, e->comm, sizeof(e->comm));
		/* While a command starts, a child's samples would come
		 * before anything can take them: retried once it runs. */
		if (!pf->deferred && !comm_excluded(pf, e))
			try_python(pf, e);
		break;
	case SAMPLER_PROC_EXIT:
		e = procset__find(pf->procs, pid);
		if (e)
			e->exited = true;
		if (e && pf->o.all) {
			/* -a may meet thousands: what an ended process held is
			 * freed; a Python keeps its line in the summary. */
			if (e->state == PROC_PYTHON || e->state == PROC_ENDED ||
			    e->state == PROC_EVICTED) {
				procset__close(pf->procs, e);
			} else {
				procset__remove(pf->procs, e);
				pf->others_ended++;
			}
		}
		/* Its entry in the program's map is freed for the processes
		 * to come (a long recording of a forking server). */
		if (pf->configurable)
			request(pf, PROC_REQ_FORGET, pid);
		break;
	}
}

struct proc_entry *proc_follow__sample_proc(struct proc_follow *pf, pid_t pid)
{
	struct proc_entry *e = procset__find(pf->procs, pid);

	if (!e && pf->o.subprocesses)
		e = procset__add(pf->procs, pid, 0, NULL);
	if (e && e->state == PROC_FORKED)
		procset__open(pf->procs, e);
	/* -a: an evicted one is opened again (another evicted instead) and
	 * configured anew, so that its code snapshots come again. */
	if (e && e->state == PROC_EVICTED && !procset__open(pf->procs, e))
		configure(pf, e);
	if (!e || e->state != PROC_PYTHON)
		return NULL;
	procset__touch(pf->procs, e);
	return e;
}

struct proc_entry *proc_follow__lookup(struct proc_follow *pf, pid_t pid, bool *later)
{
	struct proc_entry *e = procset__find(pf->procs, pid);

	/* As proc_follow__sample_proc() decides, without its opening. */
	*later = (!e && pf->o.subprocesses) ||
		 (e && (e->state == PROC_FORKED || e->state == PROC_EVICTED));
	if (!e || e->state != PROC_PYTHON)
		return NULL;
	procset__touch(pf->procs, e);
	return e;
}

void proc_follow__retry_pending(struct proc_follow *pf)
{
	uint64_t now = mono_ns();

	for (size_t i = 0; i < procset__count(pf->procs); i++) {
		struct proc_entry *e = procset__at(pf->procs, i);

		if (e->state == PROC_NO_INTERP && !e->exited && runs_python(e)) {
			e->state = PROC_PYTHON;
			e->why[0] = '\0';
			configure(pf, e);
			continue;
		}
		if (e->state != PROC_PENDING)
			continue;
		if (e->exited || now - e->pending_since_ns > EXEC_PENDING_NS) {
			e->state = PROC_NOT_PYTHON;
			continue;
		}
		try_python(pf, e);
	}
}

void proc_follow__adopt_descendants(struct proc_follow *pf, const pid_t *roots, size_t nroots)
{
	size_t n = 0;
	pid_t *d = calloc(MAX_DESCENDANTS, sizeof(*d));

	if (!d) {
		pf->untracked++;
		return;
	}
	for (size_t t = 0; t < nroots; t++) {
		procfs__descendants(roots[t], d, MAX_DESCENDANTS, &n);
		for (size_t i = 0; i < n; i++) {
			struct proc_entry *e;

			if (procset__find(pf->procs, d[i]))
				continue;
			e = procset__add(pf->procs, d[i], roots[t], NULL);
			if (!e) {
				pf->untracked++;
				break;
			}
			e->state = PROC_PENDING;	/* open it as an exec'd one */
			e->pending_since_ns = mono_ns();
			try_python(pf, e);
			if (e->state != PROC_PYTHON) {
				e->state = PROC_NOT_PYTHON;
				if (pf->configurable)
					request(pf, PROC_REQ_TRACK, d[i]);
			}
		}
	}
	free(d);
}

bool proc_follow__any_alive(struct proc_follow *pf)
{
	for (size_t i = 0; i < procset__count(pf->procs); i++) {
		struct proc_entry *e = procset__at(pf->procs, i);

		if (e->exited)
			continue;
		if (!procfs__alive(e->pid))
			e->exited = true;
		else if (e->state != PROC_NOT_PYTHON && e->state != PROC_FAILED)
			return true;
	}
	return false;
}

static int by_samples(const void *a, const void *b)
{
	const struct proc_entry *x = *(struct proc_entry *const *)a;
	const struct proc_entry *y = *(struct proc_entry *const *)b;

	return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : x->pid - y->pid;
}

/* -a: the Pythons by samples (CPU), then how many others were met. */
static void print_all(struct proc_follow *pf, FILE *f)
{
	size_t n = procset__count(pf->procs), np = 0, others = 0;
	struct proc_entry **v = calloc(n ? n : 1, sizeof(*v));
	unsigned long long reopened = 0;

	for (size_t i = 0; i < n; i++) {
		struct proc_entry *e = procset__at(pf->procs, i);

		reopened += e->reopened;
		if ((e->state == PROC_PYTHON || e->state == PROC_ENDED ||
		     e->state == PROC_EVICTED) && v)
			v[np++] = e;
		else
			others++;
	}
	if (reopened)
		fprintf(f, "pyprof-bpf: more than %zu Pythons at once: images closed and "
			"opened again %llu times\n", pf->o.max_open, reopened);
	if (v)
		qsort(v, np, sizeof(*v), by_samples);
	fprintf(f, "pyprof-bpf: %zu Python processes:\n", np);
	for (size_t i = 0; i < np; i++)
		fprintf(f, "  %7d %-16s Python %-8s %8llu samples%s\n", (int)v[i]->pid,
			v[i]->comm, v[i]->version, (unsigned long long)v[i]->samples,
			v[i]->exited ? ", exited" : "");
	fprintf(f, "pyprof-bpf: %llu other processes met on a CPU (no Python%s), %zu of "
		"them still running\n", (unsigned long long)others + pf->others_ended,
		pf->o.comm ? ", or not matching --comm" : "", others);
	free(v);
}

void proc_follow__print(struct proc_follow *pf, FILE *f)
{
	size_t n = procset__count(pf->procs);

	if (pf->untracked)
		fprintf(f, "pyprof-bpf: %llu processes could not be followed (out of memory)\n",
			pf->untracked);
	if (pf->o.all) {
		print_all(pf, f);
		return;
	}
	if (n < 2)
		return;
	fprintf(f, "pyprof-bpf: %zu processes:\n", n);
	for (size_t i = 0; i < n; i++) {
		struct proc_entry *e = procset__at(pf->procs, i);

		fprintf(f, "  %7d %-16s ", (int)e->pid, e->comm);
		if (e->version[0])
			fprintf(f, "Python %-8s %8llu samples", e->version,
				(unsigned long long)e->samples);
		else
			fprintf(f, "not sampled: %s", e->why[0] ? e->why :
				e->state == PROC_FORKED ? "no sample before it exec'd or ended" :
				"not a Python");
		if (e->ppid)
			fprintf(f, ", child of %d", (int)e->ppid);
		fputs(e->exited ? ", exited\n" : "\n", f);
	}
}
