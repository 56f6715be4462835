/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <gelf.h>
#include <libelf.h>
#include "target/elf_symbols.h"

#define PAGE_MASK_4K (~(uint64_t)0xfff)

static void scan_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct elf_pyinfo *out)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count;

	if (!data || sh->sh_entsize == 0)
		return;
	count = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (name[0] != '_' && name[0] != 'P'))
			continue;
		if (!out->runtime && strcmp(name, "_PyRuntime") == 0)
			out->runtime = sym.st_value;
		else if (!out->py_version && strcmp(name, "Py_Version") == 0)
			out->py_version = sym.st_value;
		else if (!out->code_type && strcmp(name, "PyCode_Type") == 0)
			out->code_type = sym.st_value;
		else if (!out->coro_type && strcmp(name, "PyCoro_Type") == 0)
			out->coro_type = sym.st_value;
		else if (!out->asyncgen_type && strcmp(name, "PyAsyncGen_Type") == 0)
			out->asyncgen_type = sym.st_value;
	}
}

int elf_pyinfo__read(int fd, struct elf_pyinfo *out)
{
	size_t shstrndx, nphdr;
	Elf_Scn *scn = NULL;
	int err = 0;
	Elf *elf;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) ||
	    elf_getphdrnum(elf, &nphdr)) {
		err = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			out->load_vaddr = ph.p_vaddr & PAGE_MASK_4K;
			break;
		}
	}
	/* The section is authoritative (3.13+ builds put _PyRuntime in its
	 * own .PyRuntime section); symbols cover the rest. */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, ".PyRuntime") == 0)
			out->runtime = sh.sh_addr;
		if (name && strcmp(name, ".AsyncioDebug") == 0) {
			out->asyncio_debug = sh.sh_addr;
			out->asyncio_debug_size = sh.sh_size;
		}
	}
	/* .symtab first (complete when not stripped), then .dynsym. */
	for (int pass = 0; pass < 2; pass++) {
		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB))
				scan_symtab(elf, scn, &sh, out);
		}
	}
out:
	elf_end(elf);
	return err;
}
