/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ksyms.c - /proc/kallsyms (user/offcpu/ksyms.c) of any bytes, loaded
 * from a file, then named at a few addresses: a name found is a text
 * symbol's, NUL-terminated, with the offset into it bounded.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "memfile.h"
#include "offcpu/ksyms.h"

static void check_name(const struct ksyms *k, uint64_t addr, size_t size)
{
	uint64_t off = UINT64_MAX;
	const char *name = ksyms__name(k, addr, &off);

	if (name && (!name[0] || off > KSYMS_MAX_OFFSET || strlen(name) > size))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t probes[] = {
		0, 1, 0xfff, 0x1000, 0xffffffff81000000ull, 0xffffffff81000010ull,
		0xffffffffc0000000ull, UINT64_MAX,
	};
	struct ksyms *k;
	const char *path;
	int rc;

	memfile_set(data, size, &path);
	rc = ksyms__load_file(path, &k);
	if (rc) {
		if (rc != -EINVAL && rc != -ENODATA && rc != -EPERM && rc != -E2BIG)
			__builtin_trap();
		return 0;
	}
	if (!ksyms__count(k) || ksyms__bytes(k) < ksyms__count(k))
		__builtin_trap();
	/* the probes, and every address in the input that parses as one */
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		check_name(k, probes[i], size);
	/* and each line's own address (what is found there is checked) */
	for (const uint8_t *p = data, *end = data + size; p < end;) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		char hex[17] = "";

		memcpy(hex, p, (size_t)(end - p) < 16 ? (size_t)(end - p) : 16);
		check_name(k, strtoull(hex, NULL, 16), size);
		p = nl ? nl + 1 : end;
	}
	ksyms__free(k);
	return 0;
}
