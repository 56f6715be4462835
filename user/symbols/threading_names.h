/* SPDX-License-Identifier: MIT */
/*
 * threading_names.h - Python thread names, whole, read from outside: each
 * interpreter's threading module keeps its Thread objects in
 * threading._active ({ident: Thread}); a Thread's name is its _name.
 */
#ifndef PYPROF_THREADING_NAMES_H
#define PYPROF_THREADING_NAMES_H

#include <stddef.h>

struct pyproc;
struct py_thread;
struct symbolizer;
struct thread_names;

/*
 * Name each of @threads (@n) that threading knows, matching its thread_id to
 * the ident threading keeps, into @names by host tid. What the target holds
 * is untrusted: a record that does not read as expected names no thread
 * (the others are still named). Returns the number named, or -ENOMEM.
 */
int threading_names__read(struct pyproc *p, struct symbolizer *sym,
			  const struct py_thread *threads, size_t n, struct thread_names *names);

#endif
