/* SPDX-License-Identifier: MIT */
/*
 * py_sym.h - a Python frame once named: what the symbolizer makes of a raw
 * frame and what every later stage (the resolver, the writers, the raw
 * recording, dump) reads. A type of its own so that those stages need not
 * include the symbolizer.
 */
#ifndef PYPROF_TYPES_PY_SYM_H
#define PYPROF_TYPES_PY_SYM_H

struct py_sym {
	const char *function;	/* co_qualname, UTF-8 */
	const char *file;	/* co_filename verbatim, UTF-8 */
	int line;		/* executing line; -1 when the code has none */
	int firstlineno;	/* co_firstlineno */
};

#endif
