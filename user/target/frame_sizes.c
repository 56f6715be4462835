// SPDX-License-Identifier: MIT
/*
 * frame_sizes.c - frame sizes per code object (frame_sizes.h).
 */
#include <errno.h>
#include <string.h>
#include "target/frame_sizes.h"
#include "target/remote_mem.h"

int frame_sizes__known(const struct py_offsets *o)
{
	return o->frame_localsplus && o->code_nlocalsplus >= 8;
}

static size_t slot_of(uint64_t code)
{
	/* code objects are 16-byte aligned: mix the bits above */
	return (size_t)((code >> 4) * 0x9e3779b97f4a7c15ull >> 54) & (FRAME_SIZES_SLOTS - 1);
}

int frame_sizes__get(struct frame_sizes *fs, pid_t pid, const struct py_offsets *o,
		     uint64_t code_type, uint64_t code, int fresh, uint32_t *bytes,
		     uint32_t *flags)
{
	size_t i = slot_of(code), len;
	unsigned char head[FRAME_SIZES_HEAD];
	int32_t v[3];	/* co_stacksize, co_firstlineno, co_nlocalsplus */
	uint32_t f;
	uint64_t type;
	int rc;

	if (!fresh && fs->code[i] == code && code) {
		*bytes = fs->bytes[i];
		if (flags)
			*flags = fs->flags[i];
		return 0;
	}
	if (!frame_sizes__known(o))
		return -EOPNOTSUPP;
	len = o->code_nlocalsplus + 4;
	if (len > sizeof(head) || o->ob_type + 8 > len || o->code_nlocalsplus < 24)
		return -EOPNOTSUPP;
	rc = remote_read(pid, code, head, len);
	if (rc)
		return rc;
	memcpy(&type, head + o->ob_type, 8);
	if (code_type && type != code_type)
		return -ENOENT;
	memcpy(v, head + o->code_nlocalsplus - 8, sizeof(v));
	if (v[0] < 0 || v[2] < 0 || (uint32_t)v[0] > FRAME_SIZES_MAX_WORDS ||
	    (uint32_t)v[2] > FRAME_SIZES_MAX_WORDS)
		return -EPROTO;
	memcpy(&f, head + o->code_nlocalsplus - 24, sizeof(f));
	*bytes = (uint32_t)(o->frame_localsplus + 8 * ((uint64_t)v[0] + (uint64_t)v[2]));
	if (flags)
		*flags = f;
	fs->code[i] = code;
	fs->bytes[i] = *bytes;
	fs->flags[i] = f;
	return 0;
}
