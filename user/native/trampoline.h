/* SPDX-License-Identifier: MIT */
/*
 * trampoline.h - unwinding through CPython's perf trampolines (`python -X
 * perf`, PYTHONPERFSUPPORT=1, sys.activate_stack_trampoline()).
 *
 * With them on, the interpreter enters each Python function's evaluation
 * through a small function of its own, the template from
 * _Py_trampoline_func_start to _Py_trampoline_func_end in its binary,
 * copied once per code object into anonymous executable memory that no
 * CFI covers (3.12 to 3.15). Every call goes through C then, so every
 * Python frame of a stack sits on a copy, and an unwinder that stops at
 * anonymous code stops at the first one.
 *
 * A copy holds the template's bytes exactly, so a pc in one is placed at an
 * offset in the template by comparing the bytes around it (the target's
 * memory, read once per pc: the unwinder keeps the row). The template's few
 * instructions (Debian's 3.13-3.15: endbr64; push %rbp; mov %rsp,%rbp;
 * call *%rcx; pop %rbp; ret. pyenv's 3.12: sub $8,%rsp; call *%rcx; add
 * $8,%rsp; ret) say where the caller's registers are at each offset: a row
 * as exact as CFI would give. A template with any other instruction gives no rows,
 * and the unwind stops there as at any JIT code. So does every copy on
 * AArch64, whose template (a stp/ldp of x29 and x30 around a blr) is not
 * decoded yet.
 *
 * Not thread-safe.
 */
#ifndef PYPROF_NATIVE_TRAMPOLINE_H
#define PYPROF_NATIVE_TRAMPOLINE_H

#include <stdint.h>
#include <sys/types.h>
#include "native/cfirows.h"
#include "native/modules.h"

#define PY_TRAMPOLINE_MAX 64	/* template bytes handled */

struct py_trampoline;

int py_trampoline__new(pid_t pid, struct py_trampoline **out);
void py_trampoline__free(struct py_trampoline *t);
/* The modules changed: the template is looked for again at the next use. */
void py_trampoline__reset(struct py_trampoline *t);

/*
 * Fills @row (its pc kept) when @row->pc lies in a copy of the template in
 * the anonymous mapping [@lo, @hi) and the template is one this file
 * understands. 0, or -ENOENT (no template, not a copy, unreadable).
 */
int py_trampoline__row(struct py_trampoline *t, struct native_modules *mods, uint64_t lo,
		       uint64_t hi, struct cfi_row *row);

/*
 * The rows of a template (exposed for the unit test): for each byte offset
 * of @code (@len bytes), where the caller's frame is. 0, or -ENOTSUP (an
 * instruction not understood, or a stack that does not balance).
 */
struct py_trampoline_step {
	uint8_t cfa_reg;	/* CFI_REG_SP or CFI_REG_FP */
	uint8_t fp_saved;	/* %rbp is saved at CFA + fp_off */
	int8_t cfa_off;
	int8_t fp_off;
};
int py_trampoline__decode(const unsigned char *code, size_t len,
			  struct py_trampoline_step *steps);

#endif
