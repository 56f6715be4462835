/* SPDX-License-Identifier: MIT */
/*
 * exceptions.h - a thread's exception, read from outside (--mode exception,
 * remote backend; the BPF program reads the same in the kernel), and the
 * name of an exception's type. Definitions in target/exc_offsets.h.
 */
#ifndef PYPROF_TARGET_EXCEPTIONS_H
#define PYPROF_TARGET_EXCEPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include "target/pyproc.h"

/*
 * The type of the exception thread state @tstate has in flight or is
 * handling (the one in flight first, else the topmost of its exception
 * stack) into *type, 0 when it has none, EXC_TYPE_CHAIN_CUT when the stack
 * went on past EXC_CHAIN_MAX items without one (or came back to an item: a
 * corrupted one). An item without an
 * exception (a generator's that handles none) passes to the previous, as
 * sys.exception() does. Returns 0, -ENOTSUP when this version's offsets are
 * unknown, or a read error.
 */
int exceptions__type(const struct pyproc *p, uint64_t tstate, uint64_t *type);

/*
 * exceptions__type() of a thread that may run meanwhile: walked twice, and
 * again (a few times) until both walks agree (the exception and the items
 * read) with the thread's current frame the same around them: the stack
 * being unwound or rebuilt (a generator's yield or return) under a walk can
 * end it at an item just unlinked, and say "none" of a thread that has one
 * (a frame's address alone is not enough: a new call reuses it). When it
 * never holds still, an exception any walk saw (torn walks miss one, they
 * hardly make one up).
 */
int exceptions__type_steady(struct pyproc *p, uint64_t tstate, uint64_t *type);

/* The name of type object @type (its tp_name, cut at @len - 1 bytes, only
 * printable ASCII kept) into @buf. 0 or -errno. */
int exceptions__type_name(const struct pyproc *p, uint64_t type, char *buf, size_t len);

#endif
