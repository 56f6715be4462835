/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <asm/perf_regs.h>
#include "native/unwind.h"

/*
 * perf's register numbers (asm/perf_regs.h) of each DWARF register. The
 * unwinder is x86-64's so far (#34): elsewhere --native is refused, and no
 * register maps.
 */
#if defined(__x86_64__)
static const int perf_of_dwarf[NATIVE_REG_COUNT] = {
	PERF_REG_X86_AX, PERF_REG_X86_DX, PERF_REG_X86_CX, PERF_REG_X86_BX,
	PERF_REG_X86_SI, PERF_REG_X86_DI, PERF_REG_X86_BP, PERF_REG_X86_SP,
	PERF_REG_X86_R8, PERF_REG_X86_R9, PERF_REG_X86_R10, PERF_REG_X86_R11,
	PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15,
	PERF_REG_X86_IP,
};
#else
static const int perf_of_dwarf[NATIVE_REG_COUNT] = {
	[0 ... NATIVE_REG_COUNT - 1] = -1,
};
#endif

void native_regs__from_dwarf(struct native_regs *out, const uint64_t *regs)
{
	memcpy(out->r, regs, sizeof(out->r));
	out->valid = (1u << NATIVE_REG_COUNT) - 1;
}

uint64_t native_regs__perf_mask(void)
{
	uint64_t mask = 0;

	for (int i = 0; i < NATIVE_REG_COUNT; i++)
		if (perf_of_dwarf[i] >= 0)
			mask |= 1ull << perf_of_dwarf[i];
	return mask;
}

int native_regs__from_perf(struct native_regs *out, uint64_t mask, const uint64_t *vals,
			   size_t nvals)
{
	size_t k = 0;

	memset(out, 0, sizeof(*out));
	/* values come in the order of the mask's bits, lowest first */
	for (int bit = 0; bit < 64; bit++) {
		if (!(mask & (1ull << bit)))
			continue;
		if (k == nvals)
			return -EINVAL;
		for (int d = 0; d < NATIVE_REG_COUNT; d++) {
			if (perf_of_dwarf[d] == bit) {
				out->r[d] = vals[k];
				out->valid |= 1u << d;
			}
		}
		k++;
	}
	return k == nvals ? 0 : -EINVAL;
}
