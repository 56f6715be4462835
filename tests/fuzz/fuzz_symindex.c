/* SPDX-License-Identifier: MIT */
/*
 * fuzz_symindex.c - the native symbol index (user/native/symindex.c) on
 * made-up symbols: the input is records [u16 addr][u8 size][u8 bind][name,
 * NUL] (small numbers, so that symbols nest, overlap and alias), then every
 * address near them looked up and checked against a plain scan: found iff
 * some symbol holds it, at the highest start among those, the name cut
 * before its '@' (not one starting with it).
 */
#include <stdint.h>
#include <string.h>
#include "native/symindex.h"

#define MAX_SYMS 256

struct rec {
	uint64_t addr, size;
	const char *name;
};

/* The highest start of a symbol holding @addr (what the index must find), or -1. */
static int64_t expected(const struct rec *r, int n, uint64_t addr)
{
	int64_t best = -1;

	for (int i = 0; i < n; i++) {
		uint64_t size = r[i].size ? r[i].size : 1;

		if (r[i].name[0] && addr >= r[i].addr &&
		    addr - r[i].addr < size && (int64_t)r[i].addr > best)
			best = (int64_t)r[i].addr;
	}
	return best;
}

static void check(const struct symindex *idx, const struct rec *r, int n, uint64_t a)
{
	uint64_t off = UINT64_MAX;
	const char *name = symindex__lookup(idx, a, &off);
	int64_t want = expected(r, n, a);

	if (!name != (want < 0))
		__builtin_trap();
	/* the offset into the innermost; a version cut off ("f@@V1" is "f") */
	if (name && (off != a - (uint64_t)want || !name[0] || (name[0] != '@' && strchr(name, '@'))))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rec r[MAX_SYMS];
	struct symindex *idx;
	const uint8_t *p = data, *end = data + size;
	int n = 0;

	if (symindex__new(&idx))
		__builtin_trap();
	while (n < MAX_SYMS && end - p >= 5) {
		const uint8_t *nul = memchr(p + 4, 0, (size_t)(end - p - 4));

		if (!nul)
			break;
		r[n] = (struct rec){ 0x1000 + (p[0] | p[1] << 8), p[2], (const char *)p + 4 };
		if (symindex__add(idx, r[n].addr, r[n].size, r[n].name, p[3] % 3))
			__builtin_trap();
		n++;
		p = nul + 1;
	}
	if (symindex__finish(idx) || symindex__count(idx) > (size_t)n)
		__builtin_trap();
	for (int i = 0; i < n; i++) {
		const uint64_t at[] = { r[i].addr - 1, r[i].addr, r[i].addr + r[i].size / 2,
					r[i].addr + r[i].size - 1, r[i].addr + r[i].size };

		for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
			check(idx, r, n, at[k]);
	}
	symindex__free(idx);
	return 0;
}
