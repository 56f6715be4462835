/* SPDX-License-Identifier: MIT */
/*
 * symbolizer.h - turns (code object, instruction) into (qualname, file, line),
 * reading code objects from the target once and caching them.
 *
 * The cache is keyed by code address and checks the object is still the same
 * one (address reuse after a code object is freed). Strings are interned and
 * owned by the symbolizer: they stay valid until symbolizer__free().
 */
#ifndef PYPROF_SYMBOLIZER_H
#define PYPROF_SYMBOLIZER_H

#include <stdint.h>
#include "pyproc.h"

struct symbolizer;

struct py_sym {
	const char *function;	/* co_qualname, UTF-8 */
	const char *file;	/* co_filename verbatim, UTF-8 */
	int line;		/* executing line; -1 when the code has none */
	int firstlineno;	/* co_firstlineno */
};

int symbolizer__new(struct pyproc *p, struct symbolizer **out);
void symbolizer__free(struct symbolizer *s);

/* Start a new sample: cached code objects are checked again (once each)
 * for address reuse before they are trusted. */
void symbolizer__next_sample(struct symbolizer *s);

/* Resolve one raw frame. -EFAULT when the code object cannot be read. */
int symbolizer__resolve(struct symbolizer *s, const struct py_rawframe *f,
			struct py_sym *out);

#endif
