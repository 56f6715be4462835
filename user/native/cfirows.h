/* SPDX-License-Identifier: MIT */
/*
 * cfirows.h - the DWARF CFI row of each pc an unwinder meets, decoded once
 * by libdw and kept.
 *
 * libdw finds a pc's row by running its function's CFI program from the
 * start each time (dwarf_cfi_addrframe): in a function as large as
 * CPython's _PyEval_EvalFrameDefault, built without frame pointers, that is
 * thousands of instructions and several allocations per frame of every
 * sample. A profile meets the same few thousand return addresses over and
 * over, so each row is decoded once into the rules compiled code uses (the
 * CFA as a register plus an offset; each register undefined, unchanged,
 * saved at CFA + N, equal to CFA + N, or another register's value) and
 * cached by pc. A row with anything else (DWARF expressions: PLT stubs,
 * signal trampolines, realigned stacks) is marked complex and left to
 * libdwfl to apply.
 *
 * What is decoded once, for a module: its Dwarf_CFI (dwfl_module_eh_cfi and
 * dwfl_module_dwarf_cfi keep it in the Dwfl_Module, which the unwinder keeps
 * across samples and across refreshes while the file stays mapped; libdw
 * parses a CIE or FDE once and keeps it in the CFI's search trees); for a pc:
 * its row, here (up to the unwinder's MAX_ROWS, 16,384 rows of ~200 bytes;
 * when full the cache starts again). A steady profile decodes nothing: the
 * live tests (tests/unit/test_native_live.c) keep 63-77 rows for ~130
 * samples of 13-18 frames, and a replayed unwind costs 1.3-2 us against
 * 20-26 us for the first, cold one.
 *
 * The cache belongs to one process's modules and must be cleared whenever
 * they change. Not thread-safe.
 */
#ifndef PYPROF_NATIVE_CFIROWS_H
#define PYPROF_NATIVE_CFIROWS_H

#include <stddef.h>
#include <stdint.h>
#include "native/modules.h"

#if defined(__aarch64__)
#define CFI_NREGS 32		/* AArch64 DWARF registers x0-x30 and sp */
#define CFI_REG_FP 29
#define CFI_REG_SP 31
#define CFI_REG_RA 30		/* the link register */
#else
#define CFI_NREGS 17		/* x86-64 DWARF registers 0-16 (16: the return address) */
#define CFI_REG_FP 6		/* %rbp */
#define CFI_REG_SP 7
#define CFI_REG_RA 16
#endif
/* Bytes of a module's entry code (from its ELF entry point) taken as the
 * outermost frame when it has no CFI: glibc's x86-64 ld.so entry is ~50. */
#define CFI_ENTRY_CODE 64

enum cfi_kind {
	CFI_SIMPLE,		/* every rule below applies */
	CFI_COMPLEX,		/* CFI with expressions: libdwfl applies it */
	CFI_NO_CFI,		/* the module has no CFI for the pc */
	CFI_NO_MODULE,		/* the pc is in no module */
};

enum cfi_rule {
	CFI_EXPR,		/* a DWARF expression: only libdwfl applies it */
	CFI_UNDEF,		/* not recoverable */
	CFI_SAME,		/* the caller's value is the callee's */
	CFI_AT_CFA,		/* saved at CFA + off */
	CFI_VAL_CFA,		/* is CFA + off */
	CFI_REG,		/* is register reg's value */
};

struct cfi_row {
	uint64_t pc;		/* the address looked up */
	uint64_t end;		/* the row applies from pc up to end (exclusive) */
	int64_t cfa_off;
	uint8_t kind;		/* enum cfi_kind */
	uint8_t cfa_reg;
	uint8_t signal;		/* a signal trampoline's: its caller was interrupted */
	uint8_t outermost;	/* the return address is undefined: no caller */
	uint8_t trampoline;	/* a copy of CPython's perf trampoline (trampoline.h) */
	uint8_t anon_tried;	/* a pc in no module, looked for among the trampolines */
	struct {
		int32_t off;
		uint8_t rule;	/* enum cfi_rule */
		uint8_t reg;
	} r[CFI_NREGS];
	/* The unwinder's naming of the pc, filled on its first use (the names
	 * live as long as the modules, so as long as the row). */
	uint8_t named;
	uint8_t stack_root;	/* a function that starts a stack of its own (unwind.c) */
	const char *path;
	const char *symbol;
	uint64_t sym_start;
	uint64_t module_base;
	uint64_t module_end;
	const unsigned char *build_id;
	size_t build_id_len;
};

struct cfirows;

/* A cache of at most @max rows (it is emptied when full). 0 or -ENOMEM. */
int cfirows__new(size_t max, struct cfirows **out);
void cfirows__free(struct cfirows *c);
void cfirows__clear(struct cfirows *c);

/*
 * The row for @pc in @mods (.eh_frame first, then .debug_frame, as libdwfl
 * looks), decoded on first use. NULL only when out of memory. The row stays
 * valid until the next cfirows__get, __clear or __free.
 */
struct cfi_row *cfirows__get(struct cfirows *c, struct native_modules *mods, uint64_t pc);

/*
 * @pc's row in module @mod alone, decoded afresh into @row (what
 * cfirows__get does on a miss): CFI_SIMPLE, CFI_COMPLEX or CFI_NO_CFI.
 */
void cfirows__decode(struct cfi_row *row, Dwfl_Module *mod, uint64_t pc);

size_t cfirows__count(const struct cfirows *c);
size_t cfirows__bytes(const struct cfirows *c);

#endif
