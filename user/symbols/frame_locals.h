/* SPDX-License-Identifier: MIT */
/*
 * frame_locals.h - a frame's arguments and local variables (cells and free
 * variables included) with short reprs of simple values, read from outside
 * as untrusted input, for dump --locals.
 */
#ifndef PYPROF_FRAME_LOCALS_H
#define PYPROF_FRAME_LOCALS_H

#include <stddef.h>
#include <stdint.h>

struct pyproc;
struct symbolizer;
struct py_rawframe;

#define LOCALS_MAX_PER_FRAME 64	/* names shown of one frame */
#define LOCALS_MAX_REPR 96	/* bytes of one repr, "..." ending a cut one */

struct frame_local {
	const char *name;	/* interned by the symbolizer */
	char repr[LOCALS_MAX_REPR + 4];
};

/*
 * The bound locals of frame @f, at most @max into @out (*n): None, bool,
 * int, float, str and bytes as repr() writes them (cut), anything else as
 * <TYPE at 0xADDR>. 0, -ENOTSUP (offsets unknown), or a read error.
 */
int frame_locals__read(struct pyproc *p, struct symbolizer *sym, const struct py_rawframe *f,
		       struct frame_local *out, size_t max, size_t *n);

#endif
