// SPDX-License-Identifier: MIT
/*
 * libc_tls.c - where glibc's pthread_self() lies against the thread
 * pointer. The BPF program can read a thread's thread pointer (the fs base
 * on x86-64, TPIDR_EL0 on AArch64) and compares it with a thread state's
 * thread_id, which is pthread_self().
 *
 * x86-64 (TLS variant II): pthread_self() is the thread pointer: 0 apart.
 * AArch64 (variant I): glibc's struct pthread lies just below the thread
 * pointer, so pthread_self() is tp - sizeof(struct pthread). glibc exports
 * that size for libthread_db as _thread_db_sizeof_pthread (32 bits in its
 * .rodata). The target's own libc is read, through its mapping (a
 * container's is not this machine's), and every byte of it is checked.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <libelf.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "target/libc_tls.h"

#define SIZEOF_PTHREAD_SYM	"_thread_db_sizeof_pthread"
/* glibc's struct pthread: 0x700-0x900 bytes in the releases seen. */
#define SIZEOF_PTHREAD_MIN	256
#define SIZEOF_PTHREAD_MAX	65536

/* The 32-bit value of @sym at @value in @elf's section @shndx. */
static int read_u32_at(Elf *elf, size_t shndx, uint64_t value, uint32_t *out)
{
	Elf_Scn *scn = elf_getscn(elf, shndx);
	GElf_Shdr sh;
	Elf_Data *d;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
	    value < sh.sh_addr || value - sh.sh_addr > sh.sh_size ||
	    sh.sh_size - (value - sh.sh_addr) < sizeof(*out))
		return -ENOEXEC;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size != sh.sh_size)
		return -ENOEXEC;
	memcpy(out, (const char *)d->d_buf + (value - sh.sh_addr), sizeof(*out));
	return 0;
}

int libc_tls__sizeof_pthread(int fd, uint32_t *out)
{
	Elf_Scn *scn = NULL;
	int rc = -ENOENT;
	Elf *elf;

	*out = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	while (rc == -ENOENT && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Sym sym;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			if (!gelf_getsym(d, (int)i, &sym) ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) ||
			    strcmp(name, SIZEOF_PTHREAD_SYM))
				continue;
			rc = sym.st_size == sizeof(*out) && sym.st_shndx != SHN_UNDEF &&
					     sym.st_shndx < SHN_LORESERVE ?
				     read_u32_at(elf, sym.st_shndx, sym.st_value, out) : -ENOEXEC;
			break;
		}
	}
	elf_end(elf);
	if (!rc && (*out < SIZEOF_PTHREAD_MIN || *out > SIZEOF_PTHREAD_MAX || *out % 8)) {
		*out = 0;
		rc = -ENOEXEC;
	}
	return rc;
}

/* glibc's libc: libc.so.6, or libc-2.NN.so before 2.34. */
static bool is_libc(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libc.so.", 8) || (!strncmp(b, "libc-", 5) && strstr(b, ".so"));
}

uint64_t libc_tls__thread_id_below_tp(const struct pyproc_files *fs, const struct procmaps *maps)
{
#if defined(__aarch64__)
	for (size_t i = 0; i < maps->n; i++) {
		const struct mapping *first;
		uint32_t size;
		int fd, rc;

		if (!maps->maps[i].path[0] || !is_libc(maps->maps[i].path))
			continue;
		first = procmaps__first(maps, maps->maps[i].path);
		fd = first ? fs->open(fs->ctx, first) : -ENOENT;
		if (fd < 0)
			return 0;
		rc = libc_tls__sizeof_pthread(fd, &size);
		close(fd);
		return rc ? 0 : size;
	}
	return 0;
#else
	(void)fs;
	(void)maps;
	(void)is_libc;
	return 0;
#endif
}
