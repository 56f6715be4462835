// SPDX-License-Identifier: MIT
/*
 * procset.c - the processes of one recording (see procset.h). A handful of
 * processes is the usual case and a few thousand the most: a sorted array,
 * with the last hit remembered (samples come in runs of one process).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "target/procfs.h"
#include "target/procset.h"
#include "util/clock.h"

/* An image is evicted only after this long unused: the Pythons sampled
 * within a second stay open, however many (a soft cap, without thrash). */
#define EVICT_IDLE_NS 1000000000ULL

/* Coarse (a tick's resolution, no clock read): it stamps every sample's
 * image, and only an idle second is told from it. */
/* What described a process before it exec'd: kept to the end, as the
 * sampler may still read through it (a -p target's thread scan) and
 * samples taken before the exec may still be in flight. */
struct retired {
	struct pyproc *p;
	struct symbolizer *sym;
	struct stack_memo *memo;
	pid_t pid;
};

struct procset {
	struct proc_entry **v;	/* sorted by pid */
	size_t n, cap;
	struct proc_entry *last;
	unsigned int max_frames;
	struct retired *old;
	size_t nold, capold;
	size_t max_open;	/* 0: no limit */
	uint64_t image_gens;	/* image_gen of the last image opened */
};

int procset__new(unsigned int max_frames, struct procset **out)
{
	struct procset *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return -ENOMEM;
	ps->max_frames = max_frames;
	*out = ps;
	return 0;
}

/* Close what describes @e's image. */
static void close_image(struct proc_entry *e)
{
	symbolizer__free(e->sym);
	stack_memo__free(e->memo);
	pyproc__free(e->p);
	e->sym = NULL;
	e->memo = NULL;
	e->p = NULL;
}

void procset__free(struct procset *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++) {
		close_image(ps->v[i]);
		free(ps->v[i]);
	}
	for (size_t i = 0; i < ps->nold; i++) {
		symbolizer__free(ps->old[i].sym);
		stack_memo__free(ps->old[i].memo);
		pyproc__free(ps->old[i].p);
	}
	free(ps->old);
	free(ps->v);
	free(ps);
}

/* Index of @pid in ps->v, or where it would go (*found false). */
static size_t slot(const struct procset *ps, pid_t pid, bool *found)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ps->v[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < ps->n && ps->v[lo]->pid == pid;
	return lo;
}

struct proc_entry *procset__find(struct procset *ps, pid_t pid)
{
	bool found;
	size_t i;

	if (ps->last && ps->last->pid == pid)
		return ps->last;
	i = slot(ps, pid, &found);
	if (!found)
		return NULL;
	ps->last = ps->v[i];
	return ps->last;
}

void procset__set_max_open(struct procset *ps, size_t max)
{
	ps->max_open = max;
}

void procset__touch(struct procset *ps, struct proc_entry *e)
{
	(void)ps;
	e->used = mono_coarse_ns();
}

/* Close the least recently used images beyond max_open (never @keep's). */
static void evict(struct procset *ps, struct proc_entry *keep)
{
	uint64_t now = mono_coarse_ns();
	size_t open = 0;

	if (!ps->max_open)
		return;
	for (size_t i = 0; i < ps->n; i++)
		open += ps->v[i]->sym != NULL;
	while (open > ps->max_open) {
		struct proc_entry *lru = NULL;

		for (size_t i = 0; i < ps->n; i++) {
			struct proc_entry *e = ps->v[i];

			/* 3.11 is never evicted: without co_version, its code
			 * objects are named only from the snapshots its
			 * symbolizer holds, and samples already on their way
			 * when it is opened again would lose their names. */
			if (e != keep && e->sym && e->state == PROC_PYTHON &&
			    strncmp(e->version, "3.11.", 5) != 0 &&
			    now - e->used >= EVICT_IDLE_NS && (!lru || e->used < lru->used))
				lru = e;
		}
		if (!lru)
			return;
		close_image(lru);
		lru->state = PROC_EVICTED;
		open--;
	}
}

/* Symbolizer and memo for @e, whose pyproc is open. */
static int open_symbols(struct procset *ps, struct proc_entry *e)
{
	int rc = symbolizer__new(e->p, &e->sym);

	if (!rc)
		rc = stack_memo__new(ps->max_frames, &e->memo);
	if (rc) {
		close_image(e);
		return rc;
	}
	snprintf(e->version, sizeof(e->version), "%s", pyproc__version(e->p));
	e->image_gen = ++ps->image_gens;
	if (pyproc__pid(e->p) == e->pid)	/* else: ended, comm kept */
		procfs__comm(e->pid, 0, e->comm, sizeof(e->comm));
	e->state = PROC_PYTHON;
	procset__touch(ps, e);
	evict(ps, e);
	return 0;
}

struct proc_entry *procset__add(struct procset *ps, pid_t pid, pid_t ppid, struct pyproc *p)
{
	struct proc_entry *e;
	bool found;
	size_t i = slot(ps, pid, &found);

	if (found)
		return ps->v[i];
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		struct proc_entry **v = realloc(ps->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		ps->v = v;
		ps->cap = cap;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->pid = pid;
	e->ppid = ppid;
	e->p = p;
	e->state = PROC_FORKED;
	procfs__comm(pid, 0, e->comm, sizeof(e->comm));
	if (p && open_symbols(ps, e)) {
		e->p = NULL;	/* not taken over: the caller still owns it */
		free(e);
		return NULL;
	}
	memmove(ps->v + i + 1, ps->v + i, (ps->n - i) * sizeof(*ps->v));
	ps->v[i] = e;
	ps->n++;
	return e;
}

int procset__open(struct procset *ps, struct proc_entry *e)
{
	struct proc_entry *parent;
	char err[PYPROF_ERRLEN];
	int rc;

	if (e->state == PROC_PYTHON)
		return 0;
	if (e->state == PROC_EVICTED)
		e->reopened++;
	else if (e->state != PROC_FORKED && e->state != PROC_PENDING)
		return -ENOEXEC;
	rc = pyproc__open(e->pid, &e->p, err, sizeof(err));
	if (rc && rc != -ENOMEM && e->state == PROC_FORKED &&
	    (parent = procset__find(ps, e->ppid)) && parent->state == PROC_PYTHON) {
		/* A forked child that ended (or is ending: no maps left,
		 * not yet a zombie) before its first sample was read (a poll
		 * comes every 10 ms): its image was its parent's, whose
		 * memory still holds the code objects they shared at the
		 * fork; those it made since came with its samples. Until it
		 * execs (then it is PROC_PENDING) that is true of any
		 * forked child. */
		rc = pyproc__open(parent->pid, &e->p, err, sizeof(err));
		if (!rc && !e->comm[0])
			snprintf(e->comm, sizeof(e->comm), "%s", parent->comm);
	}
	if (!rc)
		rc = open_symbols(ps, e);
	if (!rc)
		return 0;
	e->p = NULL;
	snprintf(e->why, sizeof(e->why), "%s", rc == -ENOMEM ? "out of memory" : err);
	if (rc == -ENOEXEC && e->state == PROC_PENDING)
		return rc;	/* its libpython may not be mapped yet */
	e->state = rc == -ENOEXEC || rc == -ENOTSUP ? PROC_NOT_PYTHON : PROC_FAILED;
	return rc;
}

void procset__exec(struct procset *ps, struct proc_entry *e, uint64_t now_ns)
{
	if (e->p) {
		if (ps->nold == ps->capold) {
			size_t cap = ps->capold ? ps->capold * 2 : 8;
			struct retired *v = realloc(ps->old, cap * sizeof(*v));

			if (v) {
				ps->old = v;
				ps->capold = cap;
			}
		}
		if (ps->nold < ps->capold) {
			ps->old[ps->nold++] = (struct retired){ e->p, e->sym, e->memo, e->pid };
			e->p = NULL;
			e->sym = NULL;
			e->memo = NULL;
		}
	}
	close_image(e);
	e->state = PROC_PENDING;
	e->version[0] = '\0';
	e->why[0] = '\0';
	e->pending_since_ns = now_ns;
}

void procset__free_retired(struct procset *ps, pid_t keep)
{
	size_t k = 0;

	for (size_t i = 0; i < ps->nold; i++) {
		struct retired *r = &ps->old[i];

		if (r->pid == keep) {
			ps->old[k++] = *r;
			continue;
		}
		symbolizer__free(r->sym);
		stack_memo__free(r->memo);
		pyproc__free(r->p);
	}
	ps->nold = k;
}

size_t procset__count(const struct procset *ps)
{
	return ps->n;
}

struct proc_entry *procset__at(struct procset *ps, size_t i)
{
	return i < ps->n ? ps->v[i] : NULL;
}

void procset__close(struct procset *ps, struct proc_entry *e)
{
	(void)ps;
	if (e->state != PROC_PYTHON && e->state != PROC_EVICTED)
		return;
	close_image(e);
	e->state = PROC_ENDED;
}

void procset__remove(struct procset *ps, struct proc_entry *e)
{
	bool found;
	size_t i = slot(ps, e->pid, &found);

	if (!found || ps->v[i] != e)
		return;
	if (ps->last == e)
		ps->last = NULL;
	memmove(ps->v + i, ps->v + i + 1, (ps->n - i - 1) * sizeof(*ps->v));
	ps->n--;
	close_image(e);
	free(e);
}
