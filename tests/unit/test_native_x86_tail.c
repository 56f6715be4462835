// SPDX-License-Identifier: MIT
/*
 * test_native_x86_tail.c - the function-end check of the native unwinder
 * (user/native/x86_tail.c): tails seen in Debian's CPython builds and code
 * that must not pass, then every instruction of real binaries against
 * objdump: an instruction the decoder takes must have objdump's length and
 * be a move, arithmetic, pop, leave, nop, ret or jmp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "native/x86_tail.h"

/* a byte array and its length */
#define TAIL(...) ((const unsigned char[]){ __VA_ARGS__ }), \
		  sizeof((const unsigned char[]){ __VA_ARGS__ })

static void test_tails(void **state)
{
	(void)state;
	/* ret; rep ret; pops then ret */
	assert_true(x86_tail__is_tail(TAIL(0xc3)));
	assert_true(x86_tail__is_tail(TAIL(0xf3, 0xc3)));
	assert_true(x86_tail__is_tail(TAIL(0x5b, 0x5d, 0x41, 0x5c, 0x41, 0x5d, 0xc3)));
	/* leave; mov %rax,%rdi; jmp (a tail call, 3.15) */
	assert_true(x86_tail__is_tail(TAIL(0xc9, 0x48, 0x89, 0xc7, 0xe9, 1, 2, 3, 4)));
	/* leave; mov $0xbe9080,%eax; ret */
	assert_true(x86_tail__is_tail(TAIL(0xc9, 0xb8, 0x80, 0x90, 0xbe, 0x00, 0xc3)));
	/* pop %rbp; setbe %al; ret */
	assert_true(x86_tail__is_tail(TAIL(0x5d, 0x0f, 0x96, 0xc0, 0xc3)));
	/* mov %rdx,%rax; and $0x80000000,%eax; neg %rax; ret */
	assert_true(x86_tail__is_tail(TAIL(0x48, 0x89, 0xd0, 0x25, 0, 0, 0, 0x80,
					   0x48, 0xf7, 0xd8, 0xc3)));
	/* mov 0x8(%rsi),%rdi (a load); add $0x18,%rsp; jmp *%rax */
	assert_true(x86_tail__is_tail(TAIL(0x48, 0x8b, 0x7e, 0x08, 0x48, 0x83, 0xc4, 0x18,
					   0xff, 0xe0)));
	/* a store through the SIB form, then jmp *0x0(%rip) */
	assert_true(x86_tail__is_tail(TAIL(0x48, 0x89, 0x54, 0x24, 0xf8, 0xff, 0x25, 0, 0, 0, 0)));
	/* nops: cs nopw 0x0(%rax,%rax,1) */
	assert_true(x86_tail__is_tail(TAIL(0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0xc3)));

	/* a callee-saved register written: xor %ebx,%ebx; mov %rax,%rbp;
	 * mov -8(%rsp),%rbx (a red-zone restore); mov $1,%r12d; pop ... ok but
	 * setcc %bl */
	assert_false(x86_tail__is_tail(TAIL(0x31, 0xdb, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x48, 0x89, 0xc5, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x48, 0x8b, 0x5c, 0x24, 0xf8, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x41, 0xbc, 1, 0, 0, 0, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x0f, 0x96, 0xc3, 0xc3)));
	/* mov %bh... (ah-bh without REX): mov $1,%bh */
	assert_false(x86_tail__is_tail(TAIL(0xb7, 1, 0xc3)));
	/* a call, a conditional branch, an unknown instruction, too long, cut */
	assert_false(x86_tail__is_tail(TAIL(0xe8, 0, 0, 0, 0, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x74, 0x02, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0xcc, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
					    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3)));
	assert_false(x86_tail__is_tail(TAIL(0xb8, 1, 2)));
	assert_false(x86_tail__is_tail(TAIL(0x48)));
	assert_false(x86_tail__is_tail(NULL, 0));
	/* an operand-size prefix outside a nop */
	assert_false(x86_tail__is_tail(TAIL(0x66, 0xb8, 1, 2, 0xc3)));
}

/* Mnemonics the decoder may take (objdump's AT&T spelling, suffixes off). */
static int allowed(const char *mn)
{
	static const char *const ok[] = {
		"mov", "movabs", "movzb", "movzw", "movsb", "movsw", "movsl", "movslq",
		"add", "or", "adc", "sbb", "and", "sub", "xor", "cmp", "test", "lea",
		"neg", "not", "mul", "imul", "div", "idiv", "shl", "shr", "sar", "sal",
		"rol", "ror", "rcl", "rcr", "pop", "leave", "ret", "jmp", "nop", "xchg",
		"cs", "data16", "rep", "repz", "notrack", "bnd", NULL,
	};

	if (!strncmp(mn, "set", 3) || !strncmp(mn, "cmov", 4))
		return 1;
	for (int i = 0; ok[i]; i++) {
		size_t n = strlen(ok[i]);

		/* the name, maybe with a size suffix (b w l q) */
		if (strncmp(mn, ok[i], n))
			continue;
		if (!mn[n] || (strchr("bwlq", mn[n]) && !mn[n + 1]) ||
		    !strcmp(ok[i], "movzb") || !strcmp(ok[i], "movsb"))
			return 1;
	}
	return 0;
}

/* The register an AT&T operand names (encoding numbers), -1 if none. */
static int reg_num(const char *op)
{
	static const char *const names[16][4] = {
		{ "rax", "eax", "ax", "al" }, { "rcx", "ecx", "cx", "cl" },
		{ "rdx", "edx", "dx", "dl" }, { "rbx", "ebx", "bx", "bl" },
		{ "rsp", "esp", "sp", "spl" }, { "rbp", "ebp", "bp", "bpl" },
		{ "rsi", "esi", "si", "sil" }, { "rdi", "edi", "di", "dil" },
	};
	static const char *const high[4] = { "ah", "ch", "dh", "bh" };
	int r;

	if (op[0] != '%')
		return -1;
	op++;
	for (r = 0; r < 8; r++)
		for (int k = 0; k < 4; k++)
			if (!strcmp(op, names[r][k]))
				return r;
	for (r = 0; r < 4; r++)
		if (!strcmp(op, high[r]))
			return r;
	/* r8-r15 and their d, w, b parts */
	if (op[0] == 'r' && op[1] >= '0' && op[1] <= '9') {
		r = atoi(op + 1);
		return r >= 8 && r <= 15 ? r : -1;
	}
	return -1;
}

/* What objdump says @mn with @ops writes: the last operand when it is a
 * register, none for comparisons, moves to memory and the like. -2: not
 * comparable here (implicit operands: mul, div, one-operand imul, xchg). */
static int objdump_dst(const char *mn, const char *ops)
{
	const char *last = strrchr(ops, ',');

	if (!strncmp(mn, "cmp", 3) || !strncmp(mn, "test", 4) || !strncmp(mn, "nop", 3) ||
	    !strncmp(mn, "pop", 3) || !strcmp(mn, "leave") || !strncmp(mn, "ret", 3) ||
	    !strncmp(mn, "jmp", 3) || !strcmp(mn, "cs") || !strcmp(mn, "data16") ||
	    !strncmp(mn, "rep", 3))
		return -1;
	if (!strncmp(mn, "mul", 3) || !strncmp(mn, "div", 3) || !strncmp(mn, "idiv", 4) ||
	    !strncmp(mn, "xchg", 4) || (!strncmp(mn, "imul", 4) && !last))
		return -2;
	return reg_num(last ? last + 1 : ops);
}

/* Every instruction of @file: the decoder's length is objdump's, or 0. */
static void check_file(const char *file)
{
	char cmd[512], line[1024];
	size_t insns = 0, taken = 0, regs = 0;
	FILE *p;

	if (access(file, R_OK))
		return;
	snprintf(cmd, sizeof(cmd), "objdump -d -w --no-addresses --insn-width=16 %s 2>/dev/null",
		 file);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		unsigned char code[16];
		char *s = line, *mn, *end, *ops;
		size_t n = 0, len;
		int dst = -1, want;

		/* "\t<hex bytes>\t<mnemonic> <operands>" */
		if (line[0] != '\t')
			continue;
		s++;
		while (n < sizeof(code)) {
			unsigned long b = strtoul(s, &end, 16);

			if (end == s || end - s != 2)
				break;
			code[n++] = (unsigned char)b;
			s = end;
			while (*s == ' ')
				s++;
		}
		if (!n || *s != '\t')
			continue;
		mn = s + 1;
		ops = mn + strcspn(mn, " \n");
		if (*ops == ' ')
			*ops++ = '\0';
		else
			*ops = '\0';
		ops += strspn(ops, " ");
		ops[strcspn(ops, " \n#<")] = '\0';
		insns++;
		len = x86_tail__length(code, n, &dst);
		if (!len)
			continue;
		taken++;
		want = objdump_dst(mn, ops);
		regs += want >= 0;
		if (len != n || !allowed(mn) || (want != -2 && want != dst)) {
			char hex[64] = "";

			for (size_t i = 0; i < n && i < 16; i++)
				snprintf(hex + 3 * i, sizeof(hex) - 3 * i, "%02x ", code[i]);
			fprintf(stderr, "  %s: %s(%zu bytes, decoded %zu, writes %d) %s %s\n", file,
				hex, n, len, dst, mn, ops);
			fail();
		}
	}
	pclose(p);
	fprintf(stderr, "  %s: %zu instructions, %zu of the tail set: lengths as objdump's, and "
		"the register written (%zu of them write one) too\n", file, insns, taken, regs);
}

static void test_against_objdump(void **state)
{
	(void)state;
	if (system("objdump --version >/dev/null 2>&1")) {
		fprintf(stderr, "  objdump missing: skipped\n");
		skip();
	}
	check_file("/usr/lib/x86_64-linux-gnu/libc.so.6");
	check_file("/var/cache/pyprof-bpf/sid/usr/bin/python3.15");
	check_file("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tails),
		cmocka_unit_test(test_against_objdump),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
