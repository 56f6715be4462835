/* SPDX-License-Identifier: MIT */
/*
 * opcode_read.h - the instruction byte a frame is at, read from the target
 * (the remote backend and dump; the BPF program reads it in the kernel).
 */
#ifndef PYPROF_TARGET_OPCODE_READ_H
#define PYPROF_TARGET_OPCODE_READ_H

#include <stdint.h>
#include "target/pyproc.h"

/*
 * The byte at @f's instruction pointer in its code's adaptive bytecode into
 * *op. -ENOENT when the pointer is before the code's first instruction (a
 * 3.11/3.12 frame about to start) or the frame has no code; else 0 or a
 * read error.
 */
int opcode_read(const struct pyproc *p, const struct py_rawframe *f, uint8_t *op);

#endif
