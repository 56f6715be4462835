/* SPDX-License-Identifier: MIT */
/*
 * thread_names.h - the names of the threads sampled, read from /proc once
 * per thread (they rarely change) and found again by tid in constant time:
 * a sample's thread is looked up on every sample, among thousands of
 * threads when a program starts one per request.
 */
#ifndef PYPROF_THREAD_NAMES_H
#define PYPROF_THREAD_NAMES_H

#include <sys/types.h>

struct thread_names;

/* At most @max threads are named; later ones get the fallback. */
int thread_names__new(unsigned int max, struct thread_names **out);
void thread_names__free(struct thread_names *t);
/*
 * The name of thread @tid of process @pid: read from /proc the first time
 * (empty when it is gone), or @fallback once the table is full. Valid as
 * long as the table.
 */
const char *thread_names__get(struct thread_names *t, pid_t pid, pid_t tid,
			      const char *fallback);

/*
 * Give thread @tid of @pid its Python name (a copy is kept). 0, -ENOSPC
 * (the table is full), -ENOMEM, -EINVAL.
 */
int thread_names__set_python(struct thread_names *t, pid_t pid, pid_t tid, const char *name);
/* The Python name set for @tid, or NULL. Valid until set again or freed. */
const char *thread_names__python(const struct thread_names *t, pid_t tid);

#endif
