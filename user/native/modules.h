/* SPDX-License-Identifier: MIT */
/*
 * modules.h - a process's mapped files as libdwfl modules, for the native
 * unwinder: found in /proc/PID/maps, opened the way the target sees them
 * (through /proc/PID/root, or /proc/PID/map_files for a replaced file; the
 * vDSO from its memory), separate debug files by build id, their function
 * symbols indexed once. One Dwfl per process, kept: a refresh keeps the
 * modules still mapped where they were, with what libdwfl read of them
 * (ELF, CFI, symbols).
 *
 * Not thread-safe.
 */
#ifndef PYPROF_NATIVE_MODULES_H
#define PYPROF_NATIVE_MODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <elfutils/libdwfl.h>

struct native_modules;

/* A module (a mapped file) as the unwinder knows it. */
struct native_module {
	const char *path;		/* as the target sees it; "[vdso]" */
	uint64_t start, end;		/* its mappings, first to last */
	uint64_t base;			/* where its file offset 0 is mapped (= start) */
	const unsigned char *build_id;	/* NULL when it has none */
	size_t build_id_len;
	const char *debug_file;		/* its separate debug file, NULL: none found */
	int symtab;			/* static functions have names (a .symtab in the
					 * file or its debug file), not .dynsym only */
};

/* What an address is called. */
struct native_name {
	const char *path;	/* the module's, as the target sees it; "[vdso]" */
	uint64_t base;		/* where the module's file offset 0 is mapped */
	uint64_t end;		/* the end of its last mapping */
	const unsigned char *build_id;	/* NULL when it has none */
	size_t build_id_len;
	const char *symbol;	/* NULL when no function symbol holds the address */
	uint64_t sym_start;
};

/*
 * Reads @pid's maps. Separate debug files are looked for by build id under
 * the target's /usr/lib/debug, then ours (never from debuginfod servers).
 * Returns 0, -ESRCH, -EPERM, -ENOMEM.
 */
int native_modules__new(pid_t pid, struct native_modules **out);
void native_modules__free(struct native_modules *m);

Dwfl *native_modules__dwfl(struct native_modules *m);

/*
 * Reads the maps again: modules gone are dropped (with everything read of
 * them: names from them die), new ones added. On failure the modules may
 * be fewer. 0, -ESRCH, -EPERM, -ENOMEM.
 */
int native_modules__refresh(struct native_modules *m);

/* Has the process's size (/proc/PID/statm) changed since the last refresh?
 * A mapping added or removed changes it (so does a large allocation). */
bool native_modules__grew(struct native_modules *m);
/* Is @pc in anonymous executable memory (JIT code) as of the last refresh? */
bool native_modules__in_anon(const struct native_modules *m, uint64_t pc);
/* The anonymous executable mapping that holds @pc: 0, or -ENOENT. */
int native_modules__anon_range(const struct native_modules *m, uint64_t pc, uint64_t *start,
			       uint64_t *end);
/*
 * The address of the symbol @name (of any type) in the first module that
 * defines it, searched in every module's symbol table: slow (a pass over
 * each table), for what is looked up once. 0, or -ENOENT.
 */
int native_modules__symbol(struct native_modules *m, const char *name, uint64_t *addr);

/*
 * The module that holds @pc, or NULL. Not dwfl_addrmodule alone: libdwfl
 * (0.188) lets a module's lookup segment run on up to the next module's
 * start, so a pc in a library mapped since the last refresh would be taken
 * for the module below it.
 */
Dwfl_Module *native_modules__at(struct native_modules *m, uint64_t pc);

/* @pc's module and function (the module's symbols are read at its first
 * naming). Strings live until the refresh that drops the module. 0, -ENOENT. */
int native_modules__name(struct native_modules *m, uint64_t pc, struct native_name *out);
int native_modules__info(struct native_modules *m, uint64_t pc, struct native_module *out);

/* The code at @pc, from the module's file image (not the process: code does
 * not change under us), *@len bytes to the end of its segment; NULL if none. */
const unsigned char *native_modules__code(struct native_modules *m, uint64_t pc, size_t *len);

/* How far @pc lies past its module's ELF entry point (where the kernel or
 * the dynamic loader starts the program): 0, or -ENOENT (no module, no
 * entry point, or @pc below it). */
int native_modules__entry_offset(struct native_modules *m, uint64_t pc, uint64_t *off);

/* Modules known, function symbols indexed, the indexes' heap bytes. */
void native_modules__count(struct native_modules *m, size_t *modules, size_t *symbols,
			   size_t *bytes);

#endif
