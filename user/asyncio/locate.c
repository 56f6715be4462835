/* SPDX-License-Identifier: MIT */
/*
 * asyncio/locate.c - where a live process keeps its .AsyncioDebug table, and
 * loading it: 3.14 has it in the _asyncio extension module (mapped once
 * asyncio is imported), 3.15 in the interpreter itself (the executable or
 * libpython). The ELF files are opened the way the target sees them
 * (procmaps__open_file: /proc/PID/root, map_files).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "asyncio/asyncio.h"
#include "target/debug_offsets.h"
#include "target/procmaps.h"
#include "target/elf_symbols.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"


static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* Files that may hold the table: _asyncio modules, libpython, the executable. */
static int candidate(const char *path, const char *exe)
{
	const char *b = base_name(path);

	return strncmp(b, "_asyncio.", 9) == 0 || strncmp(b, "libpython", 9) == 0 ||
	       (exe[0] && strcmp(path, exe) == 0);
}

/* The table's address in the target; -ENOENT when no mapped file has it. */
static int find_table(pid_t pid, uint64_t *table, char *err, size_t errlen)
{
	struct procmaps maps = { 0 };
	char exe[PATH_MAX] = "", fn[64];
	ssize_t n;
	int rc;

	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
	n = readlink(fn, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (n > 10 && strcmp(exe + n - 10, " (deleted)") == 0)
		exe[n - 10] = '\0';
	rc = procmaps__read(pid, &maps);
	if (rc) {
		snprintf(err, errlen, "process %d: reading its memory map: %s", (int)pid,
			 strerror(-rc));
		return rc;
	}
	rc = -ENOENT;
	for (size_t i = 0; i < maps.n; i++) {
		const struct mapping *m = &maps.maps[i], *first;
		uint64_t addr, size, load, bias, at;
		struct elf_pyinfo info;
		int fd, frc;

		if (!m->path[0] || !candidate(m->path, exe))
			continue;
		first = procmaps__first(&maps, m->path);
		if (first != m)
			continue;	/* each file once, from its lowest mapping */
		fd = procmaps__open_file(pid, first);
		if (fd < 0)
			continue;
		frc = elf_pyinfo__read(fd, &info);
		close(fd);
		if (frc || !info.asyncio_debug)
			continue;
		addr = info.asyncio_debug;
		size = info.asyncio_debug_size;
		load = info.load_vaddr;
		if (size != ASYNCIO_DEBUG_SIZE) {
			snprintf(err, errlen,
				 "process %d: %s's %s section has %llu bytes, expected %d", (int)pid, m->path, ASYNCIO_DEBUG_SECTION, (unsigned long long)size,
				 ASYNCIO_DEBUG_SIZE);
			rc = -EPROTO;
			break;
		}
		bias = first->start - first->offset - load;
		at = bias + addr;
		/* it must lie in a mapping of that file */
		rc = -EPROTO;
		for (size_t k = 0; k < maps.n; k++) {
			const struct mapping *q = &maps.maps[k];

			if (strcmp(q->path, m->path) == 0 && at >= q->start &&
			    q->end - at >= ASYNCIO_DEBUG_SIZE && at <= q->end)
				rc = 0;
		}
		if (rc) {
			snprintf(err, errlen, "process %d: %s's %s section is not mapped where its "
				 "ELF headers say", (int)pid, m->path, ASYNCIO_DEBUG_SECTION);
			break;
		}
		*table = at;
		break;
	}
	procmaps__free(&maps);
	return rc;
}

int asyncio_offsets__load(struct pyproc *p, struct asyncio_offsets *out, char *err,
			  size_t errlen)
{
	const struct py_offsets *po = pyproc__offsets(p);
	uint32_t hex = po->version_hex;
	unsigned int minor = (hex >> 16) & 0xff;
	unsigned char table[ASYNCIO_DEBUG_SIZE], *dbg = NULL;
	uint64_t at = 0;
	pid_t pid = pyproc__pid(p);
	long dbglen;
	int rc;

	if (minor < 14) {
		snprintf(err, errlen, "process %d runs Python %s: asyncio tasks are read on "
			 "Python 3.14 and later only (through CPython's .AsyncioDebug table; "
			 "3.11 to 3.13 keep their tasks in weak sets, see README)", (int)pid,
			 pyproc__version(p));
		return -ENOTSUP;
	}
	rc = find_table(pid, &at, err, errlen);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "process %d (Python %s) has not imported asyncio: no %s "
			 "table is mapped", (int)pid, pyproc__version(p), ASYNCIO_DEBUG_SECTION);
		return rc;
	}
	if (rc)
		return rc;
	rc = remote_read(pid, at, table, sizeof(table));
	if (rc) {
		snprintf(err, errlen, "process %d: reading its %s table: %s", (int)pid,
			 ASYNCIO_DEBUG_SECTION, strerror(-rc));
		return rc;
	}
	rc = asyncio_offsets__parse_table(table, sizeof(table), hex, out, err, errlen);
	if (rc)
		return rc;
	out->coro_type = pyproc__coro_type(p);
	out->asyncgen_type = pyproc__asyncgen_type(p);
	dbglen = debug_offsets__size(hex);
	if (dbglen < 0) {
		snprintf(err, errlen, "process %d: no _Py_DebugOffsets layout for Python %s",
			 (int)pid, pyproc__version(p));
		return -ENOTSUP;
	}
	dbg = malloc(dbglen);
	if (!dbg) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = remote_read(pid, pyproc__runtime(p), dbg, dbglen);
	if (rc)
		snprintf(err, errlen, "process %d: reading _Py_DebugOffsets: %s", (int)pid,
			 strerror(-rc));
	else
		rc = asyncio_offsets__bind_debug(dbg, dbglen, out, err, errlen);
	free(dbg);
	return rc;
}
