// SPDX-License-Identifier: MIT
/* opcode_read.c - see opcode_read.h. */
#include <errno.h>
#include "target/opcodes/opcode_read.h"
#include "target/remote_mem.h"

int opcode_read(const struct pyproc *p, const struct py_rawframe *f, uint8_t *op)
{
	uint64_t first = pyproc__offsets(p)->code_adaptive;

	if (!f->code || !first || f->instr < f->code + first)
		return -ENOENT;
	return remote_read(pyproc__pid(p), f->instr, op, 1);
}
