/* SPDX-License-Identifier: MIT */
/*
 * rawrec_format.h - what the raw recording's writer and reader share (the
 * format itself is described in rawrec.h): the magic, the record types, the
 * limits, and the signed varints' zigzag encoding.
 */
#ifndef PYPROF_RAWREC_FORMAT_H
#define PYPROF_RAWREC_FORMAT_H

#include <stdint.h>

static const unsigned char rawrec_magic[8] = { 0x89, 'p', 'y', 'p', 'r', 'o', 'f', '\n' };

enum {
	REC_HEADER = 'H',
	REC_STRING = 'S',
	REC_FRAME = 'F',
	REC_SAMPLE = 'P',
	REC_EXTRAS = 'X',
	REC_NATIVE = 'N',
	REC_MAPPING = 'M',
	REC_ADDRS = 'A',
	REC_SOURCE = 'C',
	REC_END = 'E',
};

#define VARINT_MAX 10			/* bytes of a 64-bit varint */
#define LEAF_RECORD_MAX 64		/* leaf frames in an 'X' record */
#define BUILD_ID_MAX 64			/* bytes of a build id in an 'M' record */
#define GZ_BUFFER (64u * 1024)

static inline uint64_t zigzag(int64_t v)
{
	return (uint64_t)v << 1 ^ (v < 0 ? ~0ull : 0);
}

static inline int64_t unzigzag(uint64_t u)
{
	return (int64_t)(u >> 1 ^ (0 - (u & 1)));
}

#endif
