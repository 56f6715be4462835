/* SPDX-License-Identifier: MIT */
/*
 * fuzz_linetable.c - the 3.11+ location table decoder on any bytes.
 * Input: [u8 selector][i32 firstlineno][i32 offset][table...].
 */
#include <stdint.h>
#include <string.h>
#include "symbols/linetable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct linetable_range ranges[64], r;
	int32_t first, off;
	size_t count;
	int line;

	if (size < 9)
		return 0;
	memcpy(&first, data + 1, 4);
	memcpy(&off, data + 5, 4);
	data += 9;
	size -= 9;
	linetable__line_at(data, size, first, off, &line);
	linetable__range_at(data, size, first, off, &r);
	linetable__ranges(data, size, first, ranges, 64, &count);
	return 0;
}
