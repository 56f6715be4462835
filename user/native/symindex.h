/* SPDX-License-Identifier: MIT */
/*
 * symindex.h - the function symbols of one module, sorted by address, for
 * naming native pcs.
 *
 * libdwfl's own address lookup (dwfl_module_addrinfo) scans every symbol of
 * the module on each call (elfutils 0.188): thousands of pcs a second over
 * libpython's 13,000+ symbols is too slow, so the unwinder builds one of
 * these per module, once, from the symbols libdwfl found (the module's
 * .symtab, its separate debug file's, or .dynsym).
 *
 * Names are not copied: the index points at the strings it was given, which
 * must outlive it (libdwfl's live as long as the module). Only a name with
 * a symbol version (glibc's "__libc_start_main@@GLIBC_2.34") is copied,
 * without it: the version says nothing about where the time went.
 */
#ifndef PYPROF_NATIVE_SYMINDEX_H
#define PYPROF_NATIVE_SYMINDEX_H

#include <stddef.h>
#include <stdint.h>

struct symindex;

/* Preference among symbols at one address (aliases): lower wins; then fewer
 * leading underscores, then the name. */
enum symindex_bind {
	SYMINDEX_GLOBAL = 0,
	SYMINDEX_WEAK = 1,
	SYMINDEX_LOCAL = 2,
};

int symindex__new(struct symindex **out);
void symindex__free(struct symindex *idx);

/*
 * Adds the function [@addr, @addr + @size). A symbol without a size (hand
 * written assembly: glibc's __restore_rt) names its first byte only: where
 * it ends is unknown, and a .dynsym-only binary would lend its name to
 * every static function after it. Returns 0 or -ENOMEM.
 */
int symindex__add(struct symindex *idx, uint64_t addr, uint64_t size, const char *name,
		  enum symindex_bind bind);
/* Sorts the symbols; call once, after the last symindex__add. */
int symindex__finish(struct symindex *idx);

/*
 * The innermost symbol containing @addr (of several at its address, the
 * preferred one), @addr's offset into it in @offset (may be NULL), or NULL
 * when no symbol contains @addr.
 */
const char *symindex__lookup(const struct symindex *idx, uint64_t addr, uint64_t *offset);

size_t symindex__count(const struct symindex *idx);
/* Heap bytes held by the index (with the names it copied). */
size_t symindex__bytes(const struct symindex *idx);

#endif
