// SPDX-License-Identifier: MIT
/* exc_offsets.c - see exc_offsets.h. */
#include <errno.h>
#include "target/exc_offsets.h"

/*
 * offsetof(PyThreadState, current_exception) (3.11: curexc_value) and
 * offsetof(PyThreadState, exc_info) on x86-64, from each version's
 * cpython/pystate.h; PyTypeObject's tp_name and tp_flags have not moved
 * since 3.0 (64-bit).
 */
static const struct {
	unsigned int minor;
	uint64_t current, info;
} tstate_exc[] = {
	{ 11, 104, 120 },
	{ 12, 96, 104 },
	{ 13, 112, 120 },
	{ 14, 112, 120 },
	{ 15, 136, 144 },
};

int exc_offsets__fill(struct py_offsets *o)
{
	unsigned int minor = (o->version_hex >> 16) & 0xff;

	if ((o->version_hex >> 24) != 3)
		return -ENOTSUP;
	for (size_t i = 0; i < sizeof(tstate_exc) / sizeof(tstate_exc[0]); i++) {
		if (tstate_exc[i].minor != minor)
			continue;
		/* 3.15's table says where current_exception is: it must be
		 * where the header put it, or the layout is not that one. */
		if (o->tstate_exc_current && o->tstate_exc_current != tstate_exc[i].current)
			return -EPROTO;
		o->tstate_exc_current = tstate_exc[i].current;
		o->tstate_exc_info = tstate_exc[i].info;
		o->type_tp_name = 24;
		o->type_tp_flags = 168;
		return 0;
	}
	return -ENOTSUP;
}
