/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include "native/x86_tail.h"

#define MAX_INSNS 16

/* Registers in the encoding's numbering (ModRM, REX, opcode + r): rax 0,
 * rcx 1, rdx 2, rbx 3, rsp 4, rbp 5, rsi 6, rdi 7, r8-r15 8-15. */
enum { NONE = -1, RSP = 4 };

/* May the function write @reg before it returns? The caller-saved ones
 * (rax rcx rdx rsi rdi r8-r11), and rsp (its frame going away). */
static bool writable(int reg)
{
	return reg == NONE || reg <= 2 || reg == RSP || reg == 6 || reg == 7 ||
	       (reg >= 8 && reg <= 11);
}

/* The length of a ModRM byte and what follows it (SIB, displacement); 0
 * when @left bytes cannot hold it. */
static size_t modrm_len(const unsigned char *p, size_t left)
{
	unsigned int mod = p[0] >> 6, rm = p[0] & 7;
	size_t len = 1;

	if (!left)
		return 0;
	if (mod != 3 && rm == 4) {			/* SIB */
		if (left < 2)
			return 0;
		if (mod == 0 && (p[1] & 7) == 5)	/* no base: disp32 */
			len += 4;
		len++;
	}
	if (mod == 1)
		len += 1;
	else if (mod == 2 || (mod == 0 && rm == 5))	/* disp32, or rip + disp32 */
		len += 4;
	return len <= left ? len : 0;
}

struct insn {
	size_t len;
	int dst;	/* the register written (NONE: memory or flags only) */
	int dst2;	/* a second one (mul and div: rdx) */
	bool end;	/* ret, or an unconditional jmp: a tail call */
};

/* The register a ModRM operand names in mode 3, else NONE (memory). */
static int rm_reg(unsigned int modrm, unsigned int rex)
{
	return (modrm >> 6) == 3 ? (int)((modrm & 7) | (rex & 1 ? 8 : 0)) : NONE;
}

static int reg_field(unsigned int modrm, unsigned int rex)
{
	return (int)(((modrm >> 3) & 7) | (rex & 4 ? 8 : 0));
}

/* An 8-bit register operand: without REX, 4-7 are ah ch dh bh. */
static int reg8(int reg, unsigned int rex)
{
	return reg != NONE && !rex && reg >= 4 && reg <= 7 ? reg - 4 : reg;
}

/* Decodes one instruction of the small set (see x86_tail.h). */
/* 0x66 then 0x66/0x2e prefixes: a nop (90, or 0f 1f /0). */
static bool decode_66_nop(const unsigned char *p, size_t left, struct insn *in)
{
	size_t k = 1, m;

	while (k < left && (p[k] == 0x66 || p[k] == 0x2e))
		k++;
	if (k < left && p[k] == 0x90) {
		in->len = k + 1;
		return true;
	}
	if (k + 2 < left && p[k] == 0x0f && p[k + 1] == 0x1f &&
	    ((p[k + 2] >> 3) & 7) == 0 && (m = modrm_len(p + k + 2, left - k - 2))) {
		in->len = k + 2 + m;
		return true;
	}
	return false;
}

/* 80, 81, 83: group 1 with an immediate; c6, c7: mov r/m, imm; c0, c1,
 * d0-d3: shifts; f6, f7: test, not, neg, mul, div. @p is past the REX. */
static bool decode_group(const unsigned char *p, size_t left, size_t pre, unsigned int rex,
			 struct insn *in)
{
	unsigned int op = p[0];
	size_t m;

	unsigned int sub = (p[1] >> 3) & 7;
	size_t imm = 0;

	if (!(m = modrm_len(p + 1, left - 1)))
		return false;
	if (op == 0x80 || op == 0x83 || op == 0xc0 || op == 0xc1 || op == 0xc6)
		imm = 1;
	else if (op == 0x81 || op == 0xc7)
		imm = 4;
	else if ((op == 0xf6 || op == 0xf7) && sub <= 1)	/* test r/m, imm */
		imm = op == 0xf6 ? 1 : 4;
	if ((op == 0xc6 || op == 0xc7) && sub != 0)
		return false;
	in->len = pre + 1 + m + imm;
	if (in->len - pre > left)
		return false;
	if ((op == 0x80 || op == 0x81 || op == 0x83) && sub == 7)
		return true;					/* cmp */
	if ((op == 0xf6 || op == 0xf7) && sub <= 1)
		return true;					/* test */
	if ((op == 0xf6 || op == 0xf7) && sub >= 4) {		/* mul, div: rdx:rax */
		in->dst = 0;
		in->dst2 = 2;
		return true;
	}
	in->dst = rm_reg(p[1], rex);
	if (op == 0x80 || op == 0xc0 || op == 0xc6 || op == 0xd0 || op == 0xd2 ||
	    op == 0xf6)
		in->dst = reg8(in->dst, rex);
	return true;
}

/* 0f xx: setcc, cmov, movzx/movsx, imul, nop r/m. @p is past the REX. */
static bool decode_0f(const unsigned char *p, size_t left, size_t pre, unsigned int rex,
		      struct insn *in)
{
	size_t m;

	unsigned int op2 = p[1];

	if (!(m = modrm_len(p + 2, left - 2)))
		return false;
	in->len = pre + 2 + m;
	if (op2 >= 0x90 && op2 <= 0x9f)				/* setcc */
		in->dst = reg8(rm_reg(p[2], rex), rex);
	else if ((op2 >= 0x40 && op2 <= 0x4f) || op2 == 0xb6 || op2 == 0xb7 ||
		 op2 == 0xbe || op2 == 0xbf || op2 == 0xaf)	/* cmov, movzx, imul */
		in->dst = reg_field(p[2], rex);
	else if (op2 != 0x1f || ((p[2] >> 3) & 7) != 0)		/* nop r/m */
		return false;
	return true;
}

static bool decode(const unsigned char *p, size_t left, struct insn *in)
{
	unsigned int rex = 0, op;
	size_t pre = 0, m;

	*in = (struct insn){ .dst = NONE, .dst2 = NONE };
	/* 0x66: only in nops here (it would change immediate sizes) */
	if (left >= 2 && p[0] == 0x66)
		return decode_66_nop(p, left, in);
	if (p[0] >= 0x40 && p[0] <= 0x4f) {
		rex = p[0];
		pre = 1;
	}
	if (pre >= left)
		return false;
	p += pre;
	left -= pre;
	op = p[0];

	if (!rex && (op == 0xc3 || (op == 0xc2 && left >= 3))) {	/* ret */
		in->len = op == 0xc3 ? 1 : 3;
		in->end = true;
		return true;
	}
	if (!rex && left >= 2 && op == 0xf3 && p[1] == 0xc3) {		/* rep ret */
		in->len = 2;
		in->end = true;
		return true;
	}
	if (!rex && (op == 0xe9 || op == 0xeb)) {			/* jmp rel */
		in->len = op == 0xe9 ? 5 : 2;
		in->end = true;
		return in->len <= left;
	}
	if (left >= 2 && op == 0xff && ((p[1] >> 3) & 7) == 4 &&	/* jmp *x */
	    (m = modrm_len(p + 1, left - 1))) {
		in->len = pre + 1 + m;
		in->end = true;
		return true;
	}
	if (op >= 0x58 && op <= 0x5f) {					/* pop: a restore */
		in->len = pre + 1;
		return true;
	}
	if (!rex && (op == 0xc9 || op == 0x90)) {			/* leave, nop */
		in->len = 1;
		return true;
	}
	if (op >= 0xb0 && op <= 0xbf) {					/* mov reg, imm */
		int reg = (int)((op & 7) | (rex & 1 ? 8 : 0));

		in->len = pre + 1 + (op < 0xb8 ? 1 : rex & 8 ? 8 : 4);
		in->dst = op < 0xb8 ? reg8(reg, rex) : reg;
		return in->len - pre <= left;
	}
	/* add or adc sbb and sub xor cmp, in their six forms */
	if (op < 0x40 && (op & 7) <= 5 && op != 0x0f) {
		bool cmp = op >= 0x38;

		if ((op & 7) >= 4) {					/* al/eax, imm */
			in->len = pre + 1 + ((op & 7) == 4 ? 1 : 4);
			in->dst = cmp ? NONE : 0;
			return in->len - pre <= left;
		}
		if (left < 2 || !(m = modrm_len(p + 1, left - 1)))
			return false;
		in->len = pre + 1 + m;
		if (!cmp)
			in->dst = op & 2 ? reg_field(p[1], rex) : rm_reg(p[1], rex);
		if (!(op & 1))						/* 8-bit forms */
			in->dst = reg8(in->dst, rex);
		return true;
	}
	if (left >= 2 && (op == 0x84 || op == 0x85 || (op >= 0x88 && op <= 0x8b) ||
			  op == 0x8d || op == 0x63)) {
		if (!(m = modrm_len(p + 1, left - 1)))
			return false;
		in->len = pre + 1 + m;
		if (op == 0x88 || op == 0x89)				/* mov r/m, reg */
			in->dst = op == 0x88 ? reg8(rm_reg(p[1], rex), rex) : rm_reg(p[1], rex);
		else if (op != 0x84 && op != 0x85)			/* mov, lea, movsxd */
			in->dst = op == 0x8a ? reg8(reg_field(p[1], rex), rex) :
					       reg_field(p[1], rex);
		return true;
	}
	/* 80, 81, 83: group 1 with an immediate; c6, c7: mov r/m, imm;
	 * c0, c1, d0-d3: shifts; f6, f7: test, not, neg, mul, div */
	if (left >= 2 && (op == 0x80 || op == 0x81 || op == 0x83 || op == 0xc6 || op == 0xc7 ||
			  op == 0xc0 || op == 0xc1 || (op >= 0xd0 && op <= 0xd3) ||
			  op == 0xf6 || op == 0xf7))
		return decode_group(p, left, pre, rex, in);
	if (op == 0x0f && left >= 3)
		return decode_0f(p, left, pre, rex, in);
	return false;
}

bool x86_tail__is_tail(const unsigned char *code, size_t len)
{
	for (int i = 0; i < MAX_INSNS && len; i++) {
		struct insn in;

		if (!decode(code, len, &in) || in.len > len)
			return false;
		if (in.end)
			return true;
		if (!writable(in.dst) || !writable(in.dst2))
			return false;
		code += in.len;
		len -= in.len;
	}
	return false;
}

size_t x86_tail__length(const unsigned char *code, size_t len, int *dst)
{
	struct insn in;

	if (!len || !decode(code, len, &in) || in.len > len)
		return 0;
	*dst = in.dst;
	return in.len;
}
