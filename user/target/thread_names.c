// SPDX-License-Identifier: MIT
/*
 * thread_names.c - tid -> thread name, read once per thread.
 *
 * Names live in one array in the order met, allocated whole up front so a
 * name handed out never moves (untouched pages cost nothing). An
 * open-addressing index of (tid, position) pairs, grown to stay at most
 * half full, finds them: small while the threads are few, so the lines a
 * lookup touches stay in the cache. The last one found is tried first: a
 * thread's samples come in runs.
 *
 * A thread may also carry its Python name (threading's own, whole), set by
 * whoever read it from the target; the comm stays beside it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/procfs.h"
#include "target/thread_names.h"

struct tid_name {
	pid_t tid;
	char name[32];
	char *pyname;		/* NULL: not known */
};

struct name_slot {
	pid_t tid;		/* 0: empty */
	uint32_t pos;		/* in names[] */
};

struct thread_names {
	pid_t last_tid;
	const char *last_name;
	struct name_slot *slots;
	uint32_t mask;
	uint32_t n, max;
	struct tid_name *names;
};

int thread_names__new(unsigned int max, struct thread_names **out)
{
	struct thread_names *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->names = calloc(max ? max : 1, sizeof(*t->names));
	t->slots = calloc(64, sizeof(*t->slots));
	if (!t->names || !t->slots) {
		thread_names__free(t);
		return -ENOMEM;
	}
	t->max = max;
	t->mask = 63;
	*out = t;
	return 0;
}

void thread_names__free(struct thread_names *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; t->names && i < t->n; i++)
		free(t->names[i].pyname);
	free(t->names);
	free(t->slots);
	free(t);
}

static uint32_t slot_of(const struct name_slot *slots, uint32_t mask, pid_t tid)
{
	uint32_t i = ((uint32_t)tid * 0x9e3779b1u) >> 7 & mask;

	while (slots[i].tid && slots[i].tid != tid)
		i = (i + 1) & mask;
	return i;
}

/* Twice the slots; -ENOMEM leaves the table as it was. */
static int grow(struct thread_names *t)
{
	uint32_t mask = t->mask * 2 + 1;
	struct name_slot *ns = calloc((size_t)mask + 1, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (uint32_t k = 0; k <= t->mask; k++)
		if (t->slots[k].tid)
			ns[slot_of(ns, mask, t->slots[k].tid)] = t->slots[k];
	free(t->slots);
	t->slots = ns;
	t->mask = mask;
	return 0;
}

/* The entry of @tid, added (its comm read) when new; NULL when the table is
 * full or cannot grow. */
static struct tid_name *entry_of(struct thread_names *t, pid_t pid, pid_t tid)
{
	struct tid_name *e;
	uint32_t i = slot_of(t->slots, t->mask, tid);

	if (!t->slots[i].tid) {
		if (t->n == t->max)
			return NULL;
		if ((t->n + 1) * 2 > t->mask + 1) {
			if (grow(t))
				return NULL;
			i = slot_of(t->slots, t->mask, tid);
		}
		e = &t->names[t->n];
		e->tid = tid;
		procfs__comm(pid, tid, e->name, sizeof(e->name));
		t->slots[i] = (struct name_slot){ .tid = tid, .pos = t->n++ };
	}
	return &t->names[t->slots[i].pos];
}

const char *thread_names__get(struct thread_names *t, pid_t pid, pid_t tid,
			      const char *fallback)
{
	struct tid_name *e;

	if (tid == t->last_tid && t->last_name)
		return t->last_name;
	if (tid <= 0)
		return fallback;	/* 0 marks an empty slot */
	e = entry_of(t, pid, tid);
	if (!e)
		return fallback;
	t->last_tid = tid;
	t->last_name = e->name;
	return t->last_name;
}

int thread_names__set_python(struct thread_names *t, pid_t pid, pid_t tid, const char *name)
{
	struct tid_name *e;
	char *copy;

	if (tid <= 0)
		return -EINVAL;
	e = entry_of(t, pid, tid);
	if (!e)
		return -ENOSPC;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	free(e->pyname);
	e->pyname = copy;
	return 0;
}

const char *thread_names__python(const struct thread_names *t, pid_t tid)
{
	uint32_t i;

	if (tid <= 0)
		return NULL;
	i = slot_of(t->slots, t->mask, tid);
	return t->slots[i].tid ? t->names[t->slots[i].pos].pyname : NULL;
}
