/* SPDX-License-Identifier: MIT */
/*
 * fuzz_procfs.c - the /proc/PID/stat and status parsers (user/target/procfs.c)
 * on any bytes: a stat line's state (no NUL after it), a status line's NSpid.
 * The state found is a letter that follows the last ')' and a space; an
 * NSpid found is a positive id, the line's last.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "target/procfs.h"

static void check_state(const char *buf, size_t len)
{
	char st = 0;
	const char *rp;
	int rc = procfs__stat_state(buf, len, &st);

	if (rc == -EINVAL)
		return;
	if (rc || !((st >= 'A' && st <= 'Z') || (st >= 'a' && st <= 'z')))
		__builtin_trap();
	rp = memrchr(buf, ')', len);
	if (!rp || !memchr(buf, '(', (size_t)(rp - buf)) || rp[1] != ' ' || rp[2] != st)
		__builtin_trap();
}

static void check_nspid(const char *line)
{
	pid_t id = 0;
	int rc = procfs__status_nspid(line, &id);

	if (rc == -ENOENT || rc == -EINVAL) {
		if (id != 0 || (rc == -ENOENT && !strncmp(line, "NSpid:", 6)))
			__builtin_trap();
		return;
	}
	if (rc || id <= 0 || strncmp(line, "NSpid:", 6))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly @size bytes (ASan sees a read past them), then a C string */
	char *buf = malloc(size ? size : 1), *line = malloc(size + 1);

	if (!buf || !line)
		abort();
	memcpy(buf, data, size);
	check_state(buf, size);
	memcpy(line, data, size);
	line[size] = '\0';
	check_nspid(line);
	free(buf);
	free(line);
	return 0;
}
