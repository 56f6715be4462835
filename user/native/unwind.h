/* SPDX-License-Identifier: MIT */
/*
 * unwind.h - native stacks of a live process from a sample: its user
 * registers and a copy of the top of its user stack (perf's
 * PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER, or the BPF sampler's).
 *
 * The unwinding is elfutils libdwfl's, driven by DWARF CFI (.eh_frame, else
 * .debug_frame of the file or of its separate debug file, found by build id
 * under /usr/lib/debug of the target's root and of ours), so binaries built
 * without frame pointers unwind exactly. One unwinder per process keeps one
 * Dwfl alive: each module's ELF, CFI and symbols are read once.
 *
 * Nothing is guessed. Memory is read only from the copy (never from the live
 * process: the stack has moved on since the sample, and CFI addresses only
 * the stack); a frame whose pc has no CFI, or lies in no known module, ends
 * the stack there (libdwfl's frame-pointer fallback is never reached); a
 * stack that ends anywhere but a frame whose CFI says it is the outermost
 * (_start, a thread's clone) is reported incomplete.
 *
 * One case reads below the stack pointer: a sample in an epilogue, after it
 * popped registers its CFI still says are saved (GCC emits no restore rules).
 * A copy that starts below sp (struct native_stack.addr; the 128-byte red
 * zone is enough) holds them. Without it, and only when the instructions
 * left at the pc (read from the module's file) are restores and moves
 * between caller-saved registers up to a ret or a tail call, those registers
 * hold their callers' values already and are taken from there.
 *
 * A pc in no known module (a library dlopen()ed since the last look)
 * rereads /proc/PID/maps, at most once per refresh interval (100 ms by
 * default): a 20th of it when the process's size changed since the last
 * look (/proc/PID/statm), 10 times it when the pc is in anonymous executable
 * memory (JIT code, where a look finds nothing new). Modules still mapped
 * keep their caches.
 *
 * AArch64: the same, with two differences. Its compilers emit CFI for
 * every instruction, epilogues included (restore rules after each reload:
 * 23,892 DW_CFA_restore in bookworm's arm64 libc), so no code is decoded
 * at a pc. Return addresses signed for pointer authentication (pac-ret:
 * paciasp before a store of x30) have their signature stripped (the
 * address is the low NATIVE_VA_BITS bits): libdw reads
 * DW_CFA_AARCH64_negate_ra_state but leaves the address as found.
 *
 * Not thread-safe: one unwinder is used by one thread at a time.
 * x86-64 and AArch64.
 */
#ifndef PYPROF_NATIVE_UNWIND_H
#define PYPROF_NATIVE_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "native/modules.h"

struct native_unwinder;

/*
 * The build's registers in DWARF numbering (the order raw_sample.h's uregs
 * use). NATIVE_REG_IP is the pc; NATIVE_REG_RA the column the CFI gives the
 * return address in (x86-64: the same register, 16; AArch64: x30, the link
 * register, while the pc is 32).
 */
#if defined(__aarch64__)
enum native_reg {
	NATIVE_REG_X0 = 0,
	NATIVE_REG_FP = 29,
	NATIVE_REG_RA = 30,	/* x30, the link register */
	NATIVE_REG_SP = 31,
	NATIVE_REG_IP = 32,	/* pc */
	NATIVE_REG_COUNT
};
/* User addresses are below 2^48 (Linux's arm64 VA_BITS_48 layout; its
 * 52-bit one maps above only on request): higher bits of a return address
 * are a pointer-authentication signature. */
#define NATIVE_VA_BITS 48
#else
enum native_reg {
	NATIVE_REG_AX, NATIVE_REG_DX, NATIVE_REG_CX, NATIVE_REG_BX,
	NATIVE_REG_SI, NATIVE_REG_DI, NATIVE_REG_BP, NATIVE_REG_SP,
	NATIVE_REG_R8, NATIVE_REG_R9, NATIVE_REG_R10, NATIVE_REG_R11,
	NATIVE_REG_R12, NATIVE_REG_R13, NATIVE_REG_R14, NATIVE_REG_R15,
	NATIVE_REG_IP,
	NATIVE_REG_COUNT,
	NATIVE_REG_FP = NATIVE_REG_BP,
	NATIVE_REG_RA = NATIVE_REG_IP,
};
#define NATIVE_VA_BITS 64
#endif

/* Bit @reg of native_regs.valid. */
#define NATIVE_REG_BIT(reg) (1ull << (reg))

struct native_regs {
	uint64_t r[NATIVE_REG_COUNT];
	uint64_t valid;		/* NATIVE_REG_BIT(i): r[i] was sampled (IP and SP are required) */
};

/* All NATIVE_REG_COUNT registers, in DWARF order (raw_sample.h's uregs). */
void native_regs__from_dwarf(struct native_regs *out, const uint64_t *regs);

/*
 * From a PERF_SAMPLE_REGS_USER record: @mask is the event's
 * sample_regs_user (bits of asm/perf_regs.h's enum), @vals its @nvals
 * values in bit order. Registers the mask lacks stay invalid. Returns 0, or
 * -EINVAL when @nvals does not match @mask.
 */
int native_regs__from_perf(struct native_regs *out, uint64_t mask, const uint64_t *vals,
			   size_t nvals);
/* The sample_regs_user mask for every register the unwinder can use. */
uint64_t native_regs__perf_mask(void);

enum native_frame_flags {
	/* pc is the instruction that was running (the sampled frame, or one a
	 * signal interrupted), not a return address */
	NATIVE_FRAME_EXACT = 1u << 0,
	/* a copy of CPython's perf trampoline (trampoline.h): the interpreter's */
	NATIVE_FRAME_TRAMPOLINE = 1u << 1,
};

struct native_frame {
	uint64_t pc;		/* as sampled / the return address; never adjusted */
	uint64_t offset;	/* pc - symbol's start (perf's sym+0xoff); 0 without one */
	uint64_t module_base;	/* where the module's file offset 0 is mapped; 0 without
				 * (perf script prints a frame's address as pc - this) */
	uint64_t module_end;	/* the end of the module's last mapping; 0 without */
	const unsigned char *build_id;	/* the module's, NULL: none (the unwinder's) */
	size_t build_id_len;
	/*
	 * The module's path as the target sees it ("[vdso]"), and the function
	 * (return addresses are named by the call, pc - 1). NULL when unknown.
	 * Both belong to the unwinder: valid until its next unwind, refresh or
	 * free (a refresh can drop modules). Copy what you keep.
	 */
	const char *module;
	const char *symbol;
	uint32_t flags;		/* enum native_frame_flags */
	/* The frame's stack pointer: its locals lie from here up to its
	 * caller's sp (how --native tells which frame holds an evaluation
	 * loop's entry frame, without symbols). */
	uint64_t sp;
};

/* Why a stack ended. Only NATIVE_END_OUTERMOST is complete. */
enum native_end {
	NATIVE_END_OUTERMOST,	/* the last frame's CFI marks it the first of its thread */
	NATIVE_END_MAX,		/* the frame array was full */
	NATIVE_END_STACK,	/* the CFI needed stack beyond the copy */
	NATIVE_END_NO_MODULE,	/* a pc in no mapped file we know (unmapped, or a
				 * mapping newer than the last refresh) */
	NATIVE_END_ANON_CODE,	/* a pc in anonymous executable memory: JIT-compiled
				 * code (CPython 3.15's JIT), no CFI there */
	NATIVE_END_NO_CFI,	/* a pc its module has no CFI for */
	NATIVE_END_BAD,		/* CFI that could not be evaluated (a register not
				 * sampled, an unreadable file) or a frame whose stack
				 * pointer did not move up: not a stack */
	NATIVE_END__COUNT
};

const char *native_end__name(enum native_end end);

/* What the last native_unwinder__unwind found. */
struct native_unwind_info {
	enum native_end end;
	/* Bytes above sp the unwind read (the copy it needed when complete);
	 * with NATIVE_END_STACK, the lowest offset it missed + 8. */
	size_t stack_used;
	int refreshed;		/* the modules were reloaded for this sample */
	int epilogue;		/* popped registers were taken from the registers */
};

struct native_unwinder_stats {
	uint64_t unwinds, complete;
	uint64_t ends[NATIVE_END__COUNT];
	uint64_t refreshes;		/* module list reloads, the first included */
	uint64_t reads_outside;		/* memory reads refused: not in the copy */
	uint64_t epilogues;		/* samples in an epilogue, registers taken as popped */
	uint64_t libdwfl_steps;		/* frames with CFI expressions, stepped by libdwfl */
	uint64_t trampoline_rows;	/* pcs found in CPython's perf trampolines */
	int perfmap_refused;		/* perfmap__refused() of its perf map */
	const char *perfmap_path;	/* that map, as the target names it */
	size_t modules;			/* modules known now */
	size_t symbols;			/* function symbols indexed, all modules */
	size_t symindex_bytes;		/* heap bytes of those indexes */
	size_t rows, rows_bytes;	/* CFI rows decoded and kept, their heap bytes */
};

/*
 * An unwinder for process @pid: reads its maps (each executable file
 * mapping becomes a module; files are opened through /proc/PID/root or
 * /proc/PID/map_files, so a chroot'ed or deleted file is the target's own).
 * Returns 0, -ESRCH (gone), -EPERM, -ENOEXEC (no module libdwfl can read),
 * -ENOMEM.
 */
int native_unwinder__new(pid_t pid, struct native_unwinder **out);
void native_unwinder__free(struct native_unwinder *u);

/* A copy of the top of a user stack, taken with the registers. */
struct native_stack {
	const void *data;
	uint64_t addr;		/* where data[0] was: sp, or up to 128 bytes below */
	size_t len;
};

/*
 * Unwinds one sample of a thread of the process: @regs at the sample and
 * @stack (may be NULL: no copy). Writes up to @max frames to @out,
 * innermost first, in *@n; *@complete is 1 when the stack was unwound to
 * its outermost frame, else 0 (the frames given are still exact, only the
 * rest is missing: native_unwinder__last says why). Returns 0 (even for a
 * stack of no frames), -EINVAL when IP or SP was not sampled or the copy
 * starts above sp.
 */
int native_unwinder__unwind(struct native_unwinder *u, const struct native_regs *regs,
			    const struct native_stack *stack, struct native_frame *out,
			    size_t max, size_t *n, int *complete);
const struct native_unwind_info *native_unwinder__last(const struct native_unwinder *u);

/*
 * Names @pc (module, symbol, offset) as unwinding does; @exact as
 * NATIVE_FRAME_EXACT (0: @pc is a return address, named by pc - 1).
 * Returns 0, or -ENOENT when @pc is in no known module (f->module NULL).
 * Does not refresh the modules.
 */
int native_unwinder__symbolize(struct native_unwinder *u, uint64_t pc, int exact,
			       struct native_frame *f);

/*
 * The module @pc is in. Strings and the build id belong to the unwinder,
 * as native_frame's do. Reads the module's symbols if not yet read.
 * Returns 0, -ENOENT.
 */
int native_unwinder__module(struct native_unwinder *u, uint64_t pc, struct native_module *out);

/* Rereads /proc/PID/maps now. 0, -ESRCH, -EPERM, -ENOMEM. */
int native_unwinder__refresh(struct native_unwinder *u);
/* The least time between two refreshes a pc in no module triggers (ns),
 * while the process's size stays the same. */
void native_unwinder__set_refresh_interval(struct native_unwinder *u, uint64_t ns);

void native_unwinder__stats(const struct native_unwinder *u, struct native_unwinder_stats *out);

#endif
