// SPDX-License-Identifier: MIT
/*
 * test_unicode.c - str payloads to UTF-8 and the state bit field
 * (user/symbols/unicode.c).
 *
 *   test_unicode            synthetic payloads of every kind
 *   test_unicode FIXTURE    also the str objects a real interpreter held in
 *                           memory (state word and payload, read with ctypes
 *                           by tests/tools/dump_linetables.py)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "symbols/unicode.h"

/* Convert into an exact-size heap buffer and compare with want. */
static void expect_utf8(unsigned int kind, int ascii, const void *data, size_t length,
			const char *want, size_t want_len)
{
	size_t outlen = 12345, sz;
	char *out;

	out = malloc(want_len + 1);
	assert_non_null(out);
	assert_int_equal(pyunicode__to_utf8(kind, ascii, data, length, out, want_len + 1,
					    &outlen), 0);
	assert_int_equal(outlen, want_len);
	assert_memory_equal(out, want, want_len);
	assert_int_equal(out[want_len], '\0');
	free(out);

	/* every smaller buffer: -ENOSPC, the size needed, an empty string */
	for (sz = 0; sz <= want_len; sz++) {
		out = malloc(sz ? sz : 1);
		assert_non_null(out);
		outlen = 0;
		assert_int_equal(pyunicode__to_utf8(kind, ascii, data, length,
						    sz ? out : NULL, sz, &outlen), -ENOSPC);
		assert_int_equal(outlen, want_len);
		if (sz)
			assert_int_equal(out[0], '\0');
		free(out);
	}
}

static void test_ascii(void **state)
{
	static const uint8_t s[] = "plain_ascii_name";

	(void)state;
	expect_utf8(1, 1, s, 16, "plain_ascii_name", 16);
	expect_utf8(1, 0, s, 16, "plain_ascii_name", 16);
	expect_utf8(1, 1, s, 0, "", 0);
	expect_utf8(1, 1, NULL, 0, "", 0);
}

static void test_latin1(void **state)
{
	/* größe, and the ends of latin-1 */
	static const uint8_t s[] = { 'g', 'r', 0xf6, 0xdf, 'e' };
	static const uint8_t ends[] = { 0x7f, 0x80, 0xff };

	(void)state;
	expect_utf8(1, 0, s, 5, "gr\xc3\xb6\xc3\x9f" "e", 7);
	expect_utf8(1, 0, ends, 3, "\x7f\xc2\x80\xc3\xbf", 5);
}

static void test_ucs2(void **state)
{
	/* 名前, and the ends of each UTF-8 length */
	static const uint16_t s[] = { 0x540d, 0x524d };
	static const uint16_t ends[] = { 0x7f, 0x80, 0x7ff, 0x800, 0xfffd, 0xffff };

	(void)state;
	expect_utf8(2, 0, s, 2, "\xe5\x90\x8d\xe5\x89\x8d", 6);
	expect_utf8(2, 0, ends, 6,
		    "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbd\xef\xbf\xbf", 14);
}

static void test_ucs4(void **state)
{
	/* 𝔘𝔫𝔦 */
	static const uint32_t s[] = { 0x1d518, 0x1d52b, 0x1d526 };
	static const uint32_t ends[] = { 0x41, 0xe9, 0x540d, 0x10000, 0x10ffff };

	(void)state;
	expect_utf8(4, 0, s, 3, "\xf0\x9d\x94\x98\xf0\x9d\x94\xab\xf0\x9d\x94\xa6", 12);
	expect_utf8(4, 0, ends, 5,
		    "A\xc3\xa9\xe5\x90\x8d\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 14);
}

/* Surrogates, paired or not, become U+FFFD each (documented in unicode.h). */
static void test_surrogates(void **state)
{
	static const uint16_t lone[] = { 'x', 0xdfff, 0xd800, 'y' };
	static const uint16_t pair[] = { 0xd83d, 0xde00 };
	static const uint32_t in4[] = { 0x1d518, 0xdc00, 0xd7ff, 0xe000 };

	(void)state;
	expect_utf8(2, 0, lone, 4, "x\xef\xbf\xbd\xef\xbf\xbdy", 8);
	expect_utf8(2, 0, pair, 2, "\xef\xbf\xbd\xef\xbf\xbd", 6);
	expect_utf8(4, 0, in4, 4,
		    "\xf0\x9d\x94\x98\xef\xbf\xbd\xed\x9f\xbf\xee\x80\x80", 13);
}

static void test_embedded_nul(void **state)
{
	static const uint8_t s[] = { 'a', 0, 'b' };

	(void)state;
	expect_utf8(1, 1, s, 3, "a\0b", 3);
}

/* The payload copied out of the target may sit at any alignment. */
static void test_unaligned(void **state)
{
	static const uint32_t cps[] = { 0x1d518, 0x540d, 'z' };
	uint8_t buf[1 + sizeof(cps)];

	(void)state;
	memcpy(buf + 1, cps, sizeof(cps));
	expect_utf8(4, 0, buf + 1, 3, "\xf0\x9d\x94\x98\xe5\x90\x8dz", 8);
	memcpy(buf + 1, (const uint16_t[]){ 0x540d, 0x524d }, 4);
	expect_utf8(2, 0, buf + 1, 2, "\xe5\x90\x8d\xe5\x89\x8d", 6);
}

static void test_invalid(void **state)
{
	static const uint8_t hi[] = { 'a', 0x80 };
	static const uint32_t big[] = { 'a', 0x110000 };
	static const uint32_t huge[] = { 0xffffffffu };
	static const uint8_t ok[] = { 'a' };
	char out[16];
	size_t outlen;
	unsigned int kind;

	(void)state;
	for (kind = 0; kind < 9; kind++)
		if (kind != 1 && kind != 2 && kind != 4)
			assert_int_equal(pyunicode__to_utf8(kind, 0, ok, 1, out, sizeof(out),
							    &outlen), -EINVAL);
	/* an ascii string holding a non-ASCII byte: inconsistent, torn read */
	assert_int_equal(pyunicode__to_utf8(1, 1, hi, 2, out, sizeof(out), &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(2, 1, ok, 0, out, sizeof(out), &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(4, 0, big, 2, out, sizeof(out), &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(4, 0, huge, 1, out, sizeof(out), &outlen), -EINVAL);
	/* validation comes before the size check */
	assert_int_equal(pyunicode__to_utf8(4, 0, big, 2, out, 1, &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(1, 0, NULL, 1, out, sizeof(out), &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(1, 0, ok, 1, NULL, 4, &outlen), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(1, 0, ok, 1, out, sizeof(out), NULL), -EINVAL);
	assert_int_equal(pyunicode__to_utf8(4, 0, ok, SIZE_MAX / 2, out, sizeof(out), &outlen),
			 -EINVAL);
}

static void test_state_decode(void **state)
{
	unsigned int kind = 0;
	int compact = -1, ascii = -1;

	(void)state;
	/* 3.11: compact ascii, ready, interned mortal; upper bits are garbage */
	assert_int_equal(pyunicode__state_decode(0x5bc08fe5, &kind, &compact, &ascii), 0);
	assert_int_equal(kind, 1);
	assert_int_equal(compact, 1);
	assert_int_equal(ascii, 1);
	/* compact UCS-4, not interned */
	assert_int_equal(pyunicode__state_decode(0x000000b0 & 0x7f, &kind, &compact, &ascii), 0);
	assert_int_equal(kind, 4);
	assert_int_equal(compact, 1);
	assert_int_equal(ascii, 0);
	/* UCS-2, not compact (a legacy string's object) */
	assert_int_equal(pyunicode__state_decode(2 << 2, &kind, &compact, &ascii), 0);
	assert_int_equal(kind, 2);
	assert_int_equal(compact, 0);
	/* 3.12+ static latin-1 singleton: statically_allocated, interned 3 */
	assert_int_equal(pyunicode__state_decode(0xa7, &kind, &compact, &ascii), 0);
	assert_int_equal(kind, 1);
	assert_int_equal(ascii, 0);
	assert_int_equal(pyunicode__state_decode(0xa7, NULL, NULL, NULL), 0);
	/* kinds 0 (3.11 not ready), 3, 5, 6, 7 */
	assert_int_equal(pyunicode__state_decode(0x20, &kind, &compact, &ascii), -EINVAL);
	assert_int_equal(pyunicode__state_decode(3 << 2, &kind, &compact, &ascii), -EINVAL);
	assert_int_equal(pyunicode__state_decode(5 << 2, &kind, &compact, &ascii), -EINVAL);
	assert_int_equal(pyunicode__state_decode(7 << 2, &kind, &compact, &ascii), -EINVAL);
	/* ascii with a wide kind */
	assert_int_equal(pyunicode__state_decode(0x40 | 0x20 | (2 << 2), &kind, NULL, NULL),
			 -EINVAL);
}

/* ------------------------------------------------------------------------ */

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static uint8_t *hex_decode(const char *s, size_t *len)
{
	size_t n = strcmp(s, "-") ? strlen(s) : 0, i;
	uint8_t *out;

	assert_int_equal(n % 2, 0);
	out = malloc(n / 2 ? n / 2 : 1);
	assert_non_null(out);
	for (i = 0; i < n / 2; i++) {
		int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);

		assert_true(hi >= 0 && lo >= 0);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return out;
}

/* str STATE KIND ASCII LENGTH PAYLOAD UTF8 LABEL */
static void check_str_record(char *rest)
{
	char *f[7], *save = NULL;
	unsigned int kind, want_kind;
	int compact, ascii, want_ascii;
	size_t length, plen, ulen, i;
	uint32_t st;
	uint8_t *payload, *utf8;

	for (i = 0; i < 7; i++) {
		f[i] = strtok_r(i ? NULL : rest, i == 6 ? "\n" : " ", &save);
		if (!f[i])
			fail_msg("short str record");
	}
	st = (uint32_t)strtoul(f[0], NULL, 16);
	want_kind = (unsigned int)strtoul(f[1], NULL, 10);
	want_ascii = (int)strtol(f[2], NULL, 10);
	length = strtoul(f[3], NULL, 10);
	payload = hex_decode(f[4], &plen);
	utf8 = hex_decode(f[5], &ulen);

	if (pyunicode__state_decode(st, &kind, &compact, &ascii) != 0)
		fail_msg("%s: state %08x does not decode", f[6], st);
	if (kind != want_kind || ascii != want_ascii || !compact)
		fail_msg("%s: state %08x: kind %u ascii %d compact %d, "
			 "want kind %u ascii %d compact 1",
			 f[6], st, kind, ascii, compact, want_kind, want_ascii);
	assert_int_equal(plen, length * kind);
	expect_utf8(kind, ascii, payload, length, (const char *)utf8, ulen);
	free(payload);
	free(utf8);
}

static void test_fixture(void **state)
{
	const char *path = *state;
	size_t linecap = 0, nstr = 0, want = 0;
	char *linebuf = NULL, version[64] = "?";
	int ended = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	while (getline(&linebuf, &linecap, f) > 0) {
		linebuf[strcspn(linebuf, "\n")] = '\0';
		if (!strncmp(linebuf, "python ", 7)) {
			snprintf(version, sizeof(version), "%s", linebuf + 7);
		} else if (!strncmp(linebuf, "str ", 4)) {
			check_str_record(linebuf + 4);
			nstr++;
		} else if (!strncmp(linebuf, "end ", 4)) {
			if (sscanf(linebuf + 4, "%*u %*u %zu", &want) != 1)
				fail_msg("bad end record: %s", linebuf);
			ended = 1;
		}
	}
	free(linebuf);
	fclose(f);
	if (!ended)
		fail_msg("%s: no end record: the fixture is truncated", path);
	assert_int_equal(nstr, want);
	printf("fixture %s: python %s: checked %zu strings\n", path, version, nstr);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest synthetic[] = {
		cmocka_unit_test(test_ascii),
		cmocka_unit_test(test_latin1),
		cmocka_unit_test(test_ucs2),
		cmocka_unit_test(test_ucs4),
		cmocka_unit_test(test_surrogates),
		cmocka_unit_test(test_embedded_nul),
		cmocka_unit_test(test_unaligned),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_state_decode),
	};
	int failed;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [FIXTURE]\n", argv[0]);
		return 2;
	}
	failed = cmocka_run_group_tests_name("unicode", synthetic, NULL, NULL);
	if (argc == 2) {
		const struct CMUnitTest fixture[] = {
			cmocka_unit_test_prestate(test_fixture, argv[1]),
		};

		failed += cmocka_run_group_tests_name("unicode fixture", fixture, NULL, NULL);
	}
	return failed ? 1 : 0;
}
