/* SPDX-License-Identifier: MIT */
/*
 * fuzz_elf_pyinfo.c - elf_pyinfo__read (user/target/elf_symbols.c) on any
 * file: what a Python executable or libpython holds (.PyRuntime,
 * _PyRuntime, Py_Version, the type objects, .AsyncioDebug), read with
 * libelf. It is 0 or -ENOEXEC, and the load address is page-aligned.
 */
#include <errno.h>
#include <stdint.h>
#include "memfile.h"
#include "target/elf_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elf_pyinfo info;
	int rc = elf_pyinfo__read(memfile_set(data, size, NULL), &info);

	if (rc && rc != -ENOEXEC)
		__builtin_trap();
	if (info.load_vaddr & 0xfff)
		__builtin_trap();
	return 0;
}
