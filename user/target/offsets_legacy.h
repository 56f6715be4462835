/* SPDX-License-Identifier: MIT */
/*
 * offsets_legacy.h - offsets for CPython 3.11 and 3.12, which carry no
 * _Py_DebugOffsets. Derived from those versions' internal headers.
 */
#ifndef PYPROF_OFFSETS_LEGACY_H
#define PYPROF_OFFSETS_LEGACY_H

#include <stdint.h>
#include "target/py_offsets.h"

/* Fill @out for @version_hex (from Py_Version); -ENOTSUP for other versions. */
int offsets_legacy__get(uint32_t version_hex, struct py_offsets *out);

#endif
