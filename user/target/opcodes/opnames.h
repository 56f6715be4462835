/* SPDX-License-Identifier: MIT */
/*
 * opnames.h - the names of the instructions of each CPython version's
 * adaptive bytecode (co_code_adaptive), specialised, instrumented and
 * executor forms included: one generated table per minor version
 * (opnames_3XX.c, written by scripts/gen-opcodes.py from that interpreter's
 * dis), as facts about that interpreter.
 */
#ifndef PYPROF_TARGET_OPNAMES_H
#define PYPROF_TARGET_OPNAMES_H

#include <stddef.h>
#include <stdint.h>

extern const char *const opnames_311[256];
extern const char *const opnames_312[256];
extern const char *const opnames_313[256];
extern const char *const opnames_314[256];
extern const char *const opnames_315[256];

/* The name of instruction byte @op in CPython @version_hex (PY_VERSION_HEX);
 * NULL when that version has none of that number, or is not known. */
const char *opnames__name(uint32_t version_hex, uint8_t op);

/* The leaf frame of @op: "[op] NAME", or "[op] <N>" for a byte with no
 * name; written into @buf (@len bytes), which is returned. */
const char *opnames__leaf(uint32_t version_hex, uint8_t op, char *buf, size_t len);

#endif
