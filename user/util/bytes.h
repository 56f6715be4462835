/* SPDX-License-Identifier: MIT */
/*
 * bytes.h - native-endian fields out of a buffer copied from the target
 * (unaligned: struct offsets come from the target's own tables). The
 * caller has checked that off + the field's size is inside the buffer.
 */
#ifndef PYPROF_UTIL_BYTES_H
#define PYPROF_UTIL_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint64_t get_u64(const unsigned char *b, uint64_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static inline uint32_t get_u32(const unsigned char *b, uint64_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

#endif
