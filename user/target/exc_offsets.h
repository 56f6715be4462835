/* SPDX-License-Identifier: MIT */
/*
 * exc_offsets.h - where a thread state keeps its exceptions (--mode
 * exception), per CPython version: facts of each version's headers, which
 * 3.13 and 3.14's _Py_DebugOffsets do not carry.
 *
 * A thread has an exception when one is in flight (tstate->current_exception;
 * 3.11: curexc_value) or being handled: walking the exception stack from
 * tstate->exc_info through each item's previous_item, an item whose
 * exc_value is an exception instance (its type has
 * Py_TPFLAGS_BASE_EXC_SUBCLASS; NULL and None are skipped). That stack
 * holds the handlers of the frames running (an except block, a finally
 * reached by a propagating exception) and of the generators and coroutines
 * running (each pushes its own item), so an outer handler counts while
 * generators run below it; a finally after the exception was handled has
 * popped it.
 */
#ifndef PYPROF_TARGET_EXC_OFFSETS_H
#define PYPROF_TARGET_EXC_OFFSETS_H

#include "target/py_offsets.h"

/* _PyErr_StackItem: exc_value, previous_item. */
#define EXC_ITEM_VALUE		0
#define EXC_ITEM_PREVIOUS	8
#define EXC_ITEM_SIZE		16
/* Py_TPFLAGS_BASE_EXC_SUBCLASS */
#define EXC_TPFLAGS_BASE_EXC	(1ULL << 30)
/* Exception stack items followed at most (nested handlers and generators:
 * CPython follows the chain to its end), and the type said when a chain
 * went on past them without an exception: [exception-chain-cut]. */
#define EXC_CHAIN_MAX		4096
#define EXC_TYPE_CHAIN_CUT	1ULL

/* Fill @o's tstate_exc_current, tstate_exc_info, type_tp_name and
 * type_tp_flags for o->version_hex (a 3.15 current_exception from the debug
 * offsets is kept, and must agree); -ENOTSUP for another version. */
int exc_offsets__fill(struct py_offsets *o);

#endif
