/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <asm/perf_regs.h>
#include "native/unwind.h"

#if defined(__x86_64__)
/* perf's register numbers (asm/perf_regs.h) of each DWARF register */
static const int perf_of_dwarf[NATIVE_REG_COUNT] = {
	PERF_REG_X86_AX, PERF_REG_X86_DX, PERF_REG_X86_CX, PERF_REG_X86_BX,
	PERF_REG_X86_SI, PERF_REG_X86_DI, PERF_REG_X86_BP, PERF_REG_X86_SP,
	PERF_REG_X86_R8, PERF_REG_X86_R9, PERF_REG_X86_R10, PERF_REG_X86_R11,
	PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15,
	PERF_REG_X86_IP,
};

static int perf_reg_of(int dwarf)
{
	return perf_of_dwarf[dwarf];
}
#elif defined(__aarch64__)
/* perf numbers x0-x30, sp and pc as DWARF does (x30 is PERF_REG_ARM64_LR) */
_Static_assert(PERF_REG_ARM64_LR == NATIVE_REG_RA && PERF_REG_ARM64_SP == NATIVE_REG_SP &&
	       PERF_REG_ARM64_PC == NATIVE_REG_IP, "arm64 perf and DWARF numbers differ");

static int perf_reg_of(int dwarf)
{
	return dwarf;
}
#else
#error "native/regs.c: x86-64 and arm64 only"
#endif

void native_regs__from_dwarf(struct native_regs *out, const uint64_t *regs)
{
	memcpy(out->r, regs, sizeof(out->r));
	out->valid = NATIVE_REG_BIT(NATIVE_REG_COUNT) - 1;
}

uint64_t native_regs__perf_mask(void)
{
	uint64_t mask = 0;

	for (int i = 0; i < NATIVE_REG_COUNT; i++)
		mask |= 1ull << perf_reg_of(i);
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
			if (perf_reg_of(d) == bit) {
				out->r[d] = vals[k];
				out->valid |= NATIVE_REG_BIT(d);
			}
		}
		k++;
	}
	return k == nvals ? 0 : -EINVAL;
}
