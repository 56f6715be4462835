/* SPDX-License-Identifier: MIT */
/*
 * x86_tail.h - is the x86-64 code at a pc the end of a function?
 *
 * GCC's epilogues restore callee-saved registers without CFI restore rules,
 * so a sample taken between the restores and the return finds, in the CFI,
 * those registers saved in slots already below the stack pointer, where a
 * stack copy taken from sp does not reach. If nothing the function still
 * runs writes them, they hold their callers' values already (the ABI wants
 * them so at the return): the unwinder may take them from the registers.
 *
 * This decides "nothing it still runs writes them" by decoding the code up
 * to its ret or tail-call jmp: register moves and arithmetic, loads, stores,
 * flag setting, pops, leave, nops. A callee-saved register written, a
 * branch, a call, an instruction outside that small set, or more than 16
 * instructions: not a tail (the unwinder then leaves those registers
 * unknown, never guesses them).
 */
#ifndef PYPROF_NATIVE_X86_TAIL_H
#define PYPROF_NATIVE_X86_TAIL_H

#include <stdbool.h>
#include <stddef.h>

/* @code: @len bytes of machine code from the pc. */
bool x86_tail__is_tail(const unsigned char *code, size_t len);

/*
 * The length of the instruction at @code when it is one of the set, else 0,
 * and in *@dst the register it writes (encoding numbers: rax 0 ... r15 15;
 * -1: none, or only memory and flags). For tests, against a disassembler.
 */
size_t x86_tail__length(const unsigned char *code, size_t len, int *dst);

#endif
