/* SPDX-License-Identifier: MIT */
/*
 * elf_symbols.h - what we need from a Python executable or libpython on disk:
 * where _PyRuntime, Py_Version and PyCode_Type are, and the load address the
 * file was linked at (to turn them into addresses in the target).
 */
#ifndef PYPROF_ELF_SYMBOLS_H
#define PYPROF_ELF_SYMBOLS_H

#include <stdint.h>

struct elf_pyinfo {
	uint64_t load_vaddr;	/* first PT_LOAD's p_vaddr, page-aligned */
	uint64_t runtime;	/* .PyRuntime section or _PyRuntime symbol; 0 if none */
	uint64_t py_version;	/* Py_Version (3.11+); 0 if none */
	uint64_t code_type;	/* PyCode_Type; 0 if none */
	/* PyCoro_Type and PyAsyncGen_Type (exported by every build): what an
	 * awaited object is, for --async's coroutine chains; 0 if none. */
	uint64_t coro_type, asyncgen_type;
	/* The .AsyncioDebug section (3.14+: the _asyncio module's, or the
	 * interpreter's on 3.15): its link-time address and size; 0 if none. */
	uint64_t asyncio_debug;
	uint64_t asyncio_debug_size;
};

/* Reads @fd (not closed). -ENOEXEC when it is not an ELF file we can read. */
int elf_pyinfo__read(int fd, struct elf_pyinfo *out);

#endif
