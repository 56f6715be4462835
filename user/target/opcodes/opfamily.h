/* SPDX-License-Identifier: MIT */
/*
 * opfamily.h - what decoding a 3.11 or 3.12 code object's adaptive bytecode
 * needs to know of each instruction byte: how many inline cache units
 * follow it (a property of its family, which specialisation keeps when it
 * rewrites the byte in place), and whether its family may push a Python
 * frame without going through C. One generated table per minor version
 * (opfamily_3XX.c, scripts/gen-opcodes.py --families), facts of that
 * interpreter. 3.13+ have none: their frames point at the instruction
 * itself, and nothing here uses them.
 */
#ifndef PYPROF_TARGET_OPFAMILY_H
#define PYPROF_TARGET_OPFAMILY_H

#include <stdint.h>

/* An instruction whose family, and so its cache units, is known; bytes
 * without it (no instruction, CACHE, the instrumented forms, which hide
 * the instruction they replace) stop a decoder. */
#define OPFAMILY_KNOWN 1u
/* A family one of whose names suggests an inline frame push (a call, a
 * generator resumed, a __getitem__ or property run in place), named widely
 * on purpose (gen-opcodes.py's MAY_PUSH). */
#define OPFAMILY_MAY_PUSH 2u

struct opfamily {
	uint8_t caches;		/* code units of inline cache after it */
	uint8_t flags;		/* OPFAMILY_* */
};

extern const struct opfamily opfamily_311[256];
extern const struct opfamily opfamily_312[256];

/* The table of CPython @version_hex (PY_VERSION_HEX); NULL but for 3.11 and
 * 3.12. */
const struct opfamily *opfamily__table(uint32_t version_hex);

#endif
