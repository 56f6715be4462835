// SPDX-License-Identifier: MIT
/*
 * threading_names.c - interpreter -> sys.modules["threading"] -> its _active
 * dict -> each Thread's _name.
 *
 * Dicts are walked entry by entry (no hashing of our own): sys.modules holds
 * hundreds of entries at most in practice, and PYOBJ_MAX_ITEMS bounds it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/symbolizer.h"
#include "symbols/threading_names.h"
#include "target/pyobject.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "target/thread_names.h"

/* PyModuleObject.md_dict, 3.11 to 3.15 */
#define MODULE_DICT 16
#define MAX_THREAD_ATTRS 256

/* The value whose key is the str @key among @items; 0 when none. */
static uint64_t find_key(struct symbolizer *sym, const struct pyobj_item *items, size_t n,
			 const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const char *s;

		if (symbolizer__read_str(sym, items[i].key, &s) == 0 && strcmp(s, key) == 0)
			return items[i].value;
	}
	return 0;
}

/* dict[@key] of the dict at @dict; 0 when absent or unreadable. */
static uint64_t dict_get(struct pyproc *p, struct symbolizer *sym, uint64_t dict,
			 const char *key, struct pyobj_item *items, size_t max)
{
	size_t n = 0;
	int rc = pyobj__dict_items(pyproc__pid(p), pyproc__offsets(p), dict, items, max, &n);

	if (rc && rc != -E2BIG)
		return 0;
	return find_key(sym, items, n, key);
}

/* The Thread @thread's _name, or NULL. */
static const char *thread_name(struct pyproc *p, struct symbolizer *sym, uint64_t thread)
{
	struct pyobj_item attrs[MAX_THREAD_ATTRS];
	const char *name;
	size_t n = 0;
	uint64_t s;
	int rc;

	rc = pyobj__attr_items(pyproc__pid(p), pyproc__offsets(p), thread, attrs,
			       MAX_THREAD_ATTRS, &n);
	if (rc && rc != -E2BIG)
		return NULL;
	s = find_key(sym, attrs, n, "_name");
	return s && symbolizer__read_str(sym, s, &name) == 0 ? name : NULL;
}

/* Name the threads of interpreter @interp from its threading._active. */
static int name_interp(struct pyproc *p, struct symbolizer *sym, uint64_t interp,
		       const struct py_thread *threads, size_t n, struct thread_names *names,
		       struct pyobj_item *items)
{
	const struct py_offsets *o = pyproc__offsets(p);
	pid_t pid = pyproc__pid(p);
	uint64_t modules, mod, mdict, active;
	size_t na = 0;
	int named = 0, rc;

	if (remote_read_u64(pid, interp + o->interp_modules, &modules))
		return 0;
	mod = dict_get(p, sym, modules, "threading", items, PYOBJ_MAX_ITEMS);
	if (!mod || remote_read_u64(pid, mod + MODULE_DICT, &mdict))
		return 0;	/* threading never imported: no Python names */
	active = dict_get(p, sym, mdict, "_active", items, PYOBJ_MAX_ITEMS);
	if (!active)
		return 0;
	rc = pyobj__dict_items(pid, o, active, items, PYOBJ_MAX_ITEMS, &na);
	if (rc && rc != -E2BIG)
		return 0;
	for (size_t i = 0; i < na; i++) {
		const char *name = NULL;
		uint64_t ident;
		int neg;

		if (pyobj__long(pid, o, items[i].key, &ident, &neg) || neg)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (threads[k].interp != interp || threads[k].thread_id != ident ||
			    threads[k].host_tid <= 0)
				continue;
			if (!name)
				name = thread_name(p, sym, items[i].value);
			if (!name)
				break;
			rc = thread_names__set_python(names, pid, threads[k].host_tid, name);
			if (rc == -ENOMEM)
				return rc;
			named += rc == 0;
		}
	}
	return named;
}

int threading_names__read(struct pyproc *p, struct symbolizer *sym,
			  const struct py_thread *threads, size_t n, struct thread_names *names)
{
	struct pyobj_item *items;
	int named = 0, rc = 0;

	if (!pyproc__offsets(p)->interp_modules)
		return 0;
	items = calloc(PYOBJ_MAX_ITEMS, sizeof(*items));
	if (!items)
		return -ENOMEM;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		int seen = 0;

		/* each interpreter once: its first thread in the list */
		for (size_t k = 0; k < i && !seen; k++)
			seen = threads[k].interp == threads[i].interp;
		if (seen)
			continue;
		rc = name_interp(p, sym, threads[i].interp, threads, n, names, items);
		if (rc > 0)
			named += rc;
	}
	free(items);
	return rc < 0 ? rc : named;
}
