/* SPDX-License-Identifier: MIT */
/*
 * frame_sizes.h - how many bytes each code object's frames take on a
 * thread's data stack (3.11+), to check a chain copied from the stack chunks.
 *
 * CPython pushes every frame at the data stack's top, which is the end of
 * its caller's frame: a child in the same chunk sits exactly at its parent's
 * address plus the parent's frame size, (co_nlocalsplus + co_stacksize) words
 * after the frame's fixed part (localsplus). A copy that holds a dead frame
 * (popped, its bytes left) under a live one, or the reverse, breaks that
 * equality unless the two frames' code happens to take the same room.
 * Sizes are read once per code object, from the two ints around
 * co_firstlineno (co_stacksize before it, co_nlocalsplus after it, in every
 * version from 3.11 to 3.15; co_flags four ints before co_stacksize), and
 * checked against bounds: the target is untrusted. A code object freed and
 * another one allocated at its address is why a lookup can ask for a fresh
 * read.
 */
#ifndef PYPROF_FRAME_SIZES_H
#define PYPROF_FRAME_SIZES_H

#include <stdint.h>
#include <sys/types.h>
#include "target/py_offsets.h"

#define FRAME_SIZES_SLOTS 1024		/* a power of two */
#define FRAME_SIZES_MAX_WORDS (1u << 20)	/* co_nlocalsplus, co_stacksize */
#define FRAME_SIZES_HEAD 128		/* bytes of a code object read */

/* co_flags: the 3.13+ trampoline (the __init__ shim), which calls from its
 * first instruction; no function's code has it. */
#define FRAME_SIZES_CO_NO_MONITORING 0x2000000u

struct frame_sizes {
	uint64_t code[FRAME_SIZES_SLOTS];
	uint32_t bytes[FRAME_SIZES_SLOTS];
	uint32_t flags[FRAME_SIZES_SLOTS];	/* co_flags */
};

/* Whether @o has what a size needs (frame_localsplus, code_nlocalsplus). */
int frame_sizes__known(const struct py_offsets *o);

/*
 * *bytes = the frame size of code object @code of process @pid, and
 * *flags (when not NULL) its co_flags (the int 24 bytes before
 * co_nlocalsplus): from the table unless @fresh, else read (and kept).
 * -EFAULT when unreadable, -ENOENT when its type is not @code_type (0: not
 * checked), -EPROTO when out of bounds.
 */
int frame_sizes__get(struct frame_sizes *fs, pid_t pid, const struct py_offsets *o,
		     uint64_t code_type, uint64_t code, int fresh, uint32_t *bytes,
		     uint32_t *flags);

#endif
