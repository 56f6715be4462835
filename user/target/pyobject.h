/* SPDX-License-Identifier: MIT */
/*
 * pyobject.h - a few CPython objects read from another process: the items
 * of a dict, an object's own attributes, an int.
 *
 * Everything read is untrusted: sizes are checked against fixed bounds, a
 * pointer that leads nowhere is a read error, never a crash or a long loop.
 * The layouts (PyDictObject, PyDictKeysObject, PyLongObject, managed
 * instance dicts) are those of the default builds of 3.11 to 3.15 on LP64,
 * from each version's headers.
 */
#ifndef PYPROF_PYOBJECT_H
#define PYPROF_PYOBJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/py_offsets.h"

/* The most items read of one dict: a longer one is cut (-E2BIG). */
#define PYOBJ_MAX_ITEMS 65536

struct pyobj_item {
	uint64_t key, value;	/* PyObject * in the target; value never 0 */
};

/*
 * The items of the dict at @dict, in insertion order, at most @max into
 * @out (*n of them). Returns 0, -E2BIG (the first @max filled), -EPROTO (not
 * a dict's layout), or a read error.
 */
int pyobj__dict_items(pid_t pid, const struct py_offsets *o, uint64_t dict,
		      struct pyobj_item *out, size_t max, size_t *n);
/*
 * The attributes an instance of a Python class keeps in its own dict or
 * values (a managed dict: 3.11+ classes without __slots__), as
 * pyobj__dict_items(). -ENOTSUP for an object with no managed dict.
 */
int pyobj__attr_items(pid_t pid, const struct py_offsets *o, uint64_t obj,
		      struct pyobj_item *out, size_t max, size_t *n);
/*
 * The int object at @addr as a 64-bit value: *neg says its sign, *mag its
 * magnitude. -ERANGE for one of more than 64 bits, -EPROTO for one whose
 * size or digits are not an int's.
 */
int pyobj__long(pid_t pid, const struct py_offsets *o, uint64_t addr, uint64_t *mag,
		int *neg);

#endif
