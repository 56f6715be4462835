/* SPDX-License-Identifier: MIT */
/*
 * fuzz_procmaps.c - /proc/PID/maps (user/target/procmaps.c) of any bytes:
 * the mappings parsed, then each found again by path. A mapping's perms
 * and path are NUL-terminated, the path one line's at most, " (deleted)"
 * cut off it when the flag says so; procmaps__first finds a mapping of
 * that very path at or below it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "target/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly @size bytes: ASan sees a read past them */
	char *buf = malloc(size ? size : 1);
	struct procmaps pm;
	int rc;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	rc = procmaps__parse(buf, size, &pm);
	free(buf);
	if (rc) {
		if ((rc != -ESRCH && rc != -E2BIG) || pm.n || pm.maps)
			__builtin_trap();
		return 0;
	}
	if (!pm.n || pm.n > size)
		__builtin_trap();
	for (size_t i = 0; i < pm.n; i++) {
		const struct mapping *m = &pm.maps[i], *f;

		if (!m->path || strnlen(m->perms, sizeof(m->perms)) == sizeof(m->perms) ||
		    strlen(m->path) > size || strchr(m->path, '\n'))
			__builtin_trap();
		f = procmaps__first(&pm, m->path);
		if (!f || strcmp(f->path, m->path) || f->start > m->start)
			__builtin_trap();
	}
	procmaps__free(&pm);
	if (pm.n || pm.maps)
		__builtin_trap();
	return 0;
}
