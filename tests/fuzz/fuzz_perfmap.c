/* SPDX-License-Identifier: MIT */
/*
 * fuzz_perfmap.c - a JIT's perf map (/tmp/perf-PID.map, user/native/perfmap.c)
 * of any bytes: the text in two reads (the first byte says where the first
 * stops: a map read while it is written), then named at each line's start
 * and a few addresses. A name found is NUL-terminated, one line's at most,
 * with no newline, and its code starts at or below the address.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "native/perfmap.h"

static void check_at(struct perfmap *m, uint64_t addr, size_t size)
{
	uint64_t start = UINT64_MAX;
	const char *name = perfmap__lookup(m, addr, &start);
	size_t n;

	if (!name)
		return;
	n = strlen(name);
	if (n > size || memchr(name, '\n', n) || start > addr ||
	    !perfmap__lookup(m, start, &start))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t probes[] = { 0, 1, 0x7f0000000000ull, UINT64_MAX };
	const char *text = (const char *)data + 1;
	struct perfmap *m;
	size_t cut, lines = 0;

	if (size < 1)
		return 0;
	size--;
	cut = (size_t)data[0] * size / 255;
	/* pid -1: no file of its own, what was parsed only */
	if (perfmap__new(-1, &m) || perfmap__parse(m, text, cut) ||
	    perfmap__parse(m, text + cut, size - cut))
		__builtin_trap();
	for (size_t i = 0; i < size; i++)
		lines += text[i] == '\n';
	if (perfmap__count(m) > lines)
		__builtin_trap();
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		check_at(m, probes[i], size);
	for (const char *p = text, *end = text + size; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char hex[17] = "";

		memcpy(hex, p, (size_t)(end - p) < 16 ? (size_t)(end - p) : 16);
		check_at(m, strtoull(hex, NULL, 16), size);
		p = nl ? nl + 1 : end;
	}
	perfmap__free(m);
	return 0;
}
