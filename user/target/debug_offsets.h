/* SPDX-License-Identifier: MIT */
/*
 * debug_offsets.h - CPython 3.13+'s _Py_DebugOffsets, read from the start of
 * the target's _PyRuntime, treated as untrusted input: validated once, then
 * copied into struct py_offsets. The table's own layout changes between minor
 * versions; the layouts we know are listed in debug_offsets.c.
 */
#ifndef PYPROF_DEBUG_OFFSETS_H
#define PYPROF_DEBUG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>
#include "target/py_offsets.h"

/* cookie[8], version, free_threaded */
#define DEBUG_OFFSETS_HEADER 24
#define DEBUG_OFFSETS_COOKIE "xdebugpy"

/*
 * Bytes of the table to read for @version_hex (from the header), or -ENOTSUP
 * when we do not know that version's layout.
 */
long debug_offsets__size(uint64_t version_hex);

/*
 * Validate @buf (@len bytes from the target) and fill @out. Returns -EPROTO
 * with a message naming the bad field, -ENOTSUP for unknown versions or
 * free-threaded builds.
 */
int debug_offsets__parse(const void *buf, size_t len, struct py_offsets *out,
			 char *err, size_t errlen);

/*
 * The raw value of field @name ("section.field") in the table @buf (@len
 * bytes as read from the target, header included) and the value of its
 * section's "size" field (0 when the section has none). Nothing is validated:
 * the caller checks what it uses. -ENOTSUP for an unknown version, -EPROTO
 * for a truncated table, -ENOENT when this version's layout lacks the field.
 */
int debug_offsets__field(const void *buf, size_t len, const char *name, uint64_t *val,
			 uint64_t *section_size);

#endif
