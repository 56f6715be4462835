/* SPDX-License-Identifier: MIT */
/*
 * ksyms.h - kernel text symbols from /proc/kallsyms, for naming the
 * addresses of kernel stacks.
 *
 * The table is read once and immutable afterwards: lookups need no lock, and
 * the names they return live as long as the table (until ksyms__free).
 * Symbols of modules and BPF programs ("name\t[mod]") are kept by name only.
 */
#ifndef PYPROF_OFFCPU_KSYMS_H
#define PYPROF_OFFCPU_KSYMS_H

#include <stddef.h>
#include <stdint.h>

struct ksyms;

/* An address this far past the symbol before it belongs to none (no kernel
 * function is that long): the gaps between text regions, or past the end. */
#define KSYMS_MAX_OFFSET (1u << 20)

/*
 * Reads /proc/kallsyms. Returns 0, -EPERM when every address reads as 0
 * (kernel.kptr_restrict hides them from this user: run as root), -ENODATA
 * when there is no text symbol, or -errno.
 */
int ksyms__load(struct ksyms **out);
/* Same as ksyms__load, from a file in the kallsyms format at @path. */
int ksyms__load_file(const char *path, struct ksyms **out);
void ksyms__free(struct ksyms *k);

/*
 * The symbol containing @addr and, when @offset is not NULL, @addr's offset
 * into it; NULL when @addr is below the first symbol or more than
 * KSYMS_MAX_OFFSET past the one before it. Of several symbols at one
 * address, a global one is preferred to a local or weak one.
 */
const char *ksyms__name(const struct ksyms *k, uint64_t addr, uint64_t *offset);
/* How many symbols (distinct addresses) the table holds. */
size_t ksyms__count(const struct ksyms *k);
/* The bytes the table holds on the heap (entries and names). */
size_t ksyms__bytes(const struct ksyms *k);

#endif
