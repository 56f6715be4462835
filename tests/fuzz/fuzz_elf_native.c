/* SPDX-License-Identifier: MIT */
/*
 * fuzz_elf_native.c - --native's reading of a module on any ELF file:
 * libdwfl reports it (as modules.c does, at a load address, no separate
 * debug file), its function symbols go into a symindex (symindex.c) as
 * modules.c puts them, and cfirows__decode (cfirows.c) decodes the CFI row
 * of a few pcs: the entry point, each symbol's start and middle.
 *
 * Checked: every symbol indexed is found at its own address, offset 0; a
 * name found is NUL-terminated; a row is for its pc, of a kind the unwinder
 * knows, its registers and rules in range.
 */
#include <gelf.h>
#include <stdint.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include "memfile.h"
#include "native/cfirows.h"
#include "native/symindex.h"

#define BASE 0x7f0000000000ull	/* where the module is "mapped" */
#define MAX_SYMS 4096		/* symbols read at most: keeps one input fast */
#define MAX_PCS 64		/* rows decoded at most */

static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = no_debuginfo,
};

static void check_row(Dwfl_Module *mod, uint64_t pc)
{
	struct cfi_row row;

	cfirows__decode(&row, mod, pc);
	if (row.pc != pc || (row.kind != CFI_SIMPLE && row.kind != CFI_COMPLEX &&
			     row.kind != CFI_NO_CFI))
		__builtin_trap();
	if (row.kind == CFI_SIMPLE && row.cfa_reg >= CFI_NREGS)
		__builtin_trap();
	for (int r = 0; r < CFI_NREGS; r++)
		if (row.r[r].rule > CFI_REG || (row.r[r].rule == CFI_REG && row.r[r].reg >= CFI_NREGS) ||
		    (row.kind == CFI_SIMPLE && row.r[r].rule == CFI_EXPR))
			__builtin_trap();
}

/* What modules.c indexes: defined functions, @addrs their addresses. */
static int index_syms(Dwfl_Module *mod, struct symindex *idx, uint64_t *addrs, int *naddrs)
{
	int n = dwfl_module_getsymtab(mod);

	*naddrs = 0;
	for (int i = 0; i < n && i < MAX_SYMS; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		unsigned char type = GELF_ST_TYPE(sym.st_info);

		if (!name || shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		if (symindex__add(idx, addr, sym.st_size, name, GELF_ST_BIND(sym.st_info) ==
				  STB_GLOBAL ? SYMINDEX_GLOBAL : SYMINDEX_LOCAL))
			__builtin_trap();
		/* one the index keeps: a name, and no wrap past the top */
		if (name[0] && addr + (sym.st_size ? sym.st_size : 1) > addr && *naddrs < MAX_PCS)
			addrs[(*naddrs)++] = addr;
	}
	return symindex__finish(idx);
}

static void run(Dwfl_Module *mod)
{
	uint64_t addrs[MAX_PCS], off, start, end;
	struct symindex *idx;
	const char *name;
	int n;

	if (symindex__new(&idx) || index_syms(mod, idx, addrs, &n))
		__builtin_trap();
	for (int i = 0; i < n; i++) {
		off = 1;
		name = symindex__lookup(idx, addrs[i], &off);
		if (!name || off != 0 || strlen(name) > 1u << 20)
			__builtin_trap();
		check_row(mod, addrs[i]);
		name = symindex__lookup(idx, addrs[i] + 7, &off);
		if (name && (off > addrs[i] + 7 || strlen(name) > 1u << 20))
			__builtin_trap();
		check_row(mod, addrs[i] + 7);
	}
	dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL);
	check_row(mod, start);
	check_row(mod, start + (end - start) / 2);
	symindex__free(idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Dwfl *dwfl = dwfl_begin(&callbacks);
	Dwfl_Module *mod;
	const char *path;

	if (!dwfl)
		__builtin_trap();
	memfile_set(data, size, &path);
	dwfl_report_begin(dwfl);
	mod = dwfl_report_elf(dwfl, "fuzz", path, -1, BASE, false);
	dwfl_report_end(dwfl, NULL, NULL);
	if (mod)
		run(mod);
	dwfl_end(dwfl);
	return 0;
}
