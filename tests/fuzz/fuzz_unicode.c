/* SPDX-License-Identifier: MIT */
/*
 * fuzz_unicode.c - str payloads and state words from a target turned into
 * UTF-8 (symbols/unicode.c) on any bytes.
 * Input: [u8 kind][u8 ascii][u16 outsz][u32 state][payload...].
 *
 * Invariants checked (unicode.h): success gives valid UTF-8 (NULs allowed)
 * of *outlen bytes, NUL-terminated inside @outsz; -ENOSPC says the size
 * needed, and a retry with it succeeds with that length.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "symbols/unicode.h"

#include "fuzz_check.h"

/* Length of the valid UTF-8 sequence at @s (shortest form, no surrogates,
 * at most U+10FFFF), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void check_utf8_n(const char *s, size_t n)
{
	for (size_t i = 0, k; i < n; i += k) {
		k = utf8_seq((const unsigned char *)s + i, n - i);
		CHECK(k);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int kinds[] = { 1, 2, 4, 0, 3 };
	unsigned int kind, dkind;
	uint16_t outsz;
	uint32_t state;
	size_t len, outlen = 0, again;
	int ascii, compact, dascii, rc;
	char *out;

	if (size < 8)
		return 0;
	kind = kinds[data[0] % 5];
	ascii = data[1] & 1;
	memcpy(&outsz, data + 2, 2);
	memcpy(&state, data + 4, 4);
	data += 8;
	size -= 8;

	rc = pyunicode__state_decode(state, &dkind, &compact, &dascii);
	CHECK(rc == 0 || rc == -EINVAL);
	if (rc == 0)
		CHECK((dkind == 1 || dkind == 2 || dkind == 4) && (!dascii || dkind == 1));

	len = kind ? size / kind : size;
	out = malloc(outsz ? outsz : 1);
	if (!out)
		return 0;
	rc = pyunicode__to_utf8(kind, ascii, data, len, outsz ? out : NULL, outsz, &outlen);
	if (rc == 0) {
		CHECK(outlen < outsz && out[outlen] == '\0' && outlen <= 4 * len);
		check_utf8_n(out, outlen);
	} else if (rc == -ENOSPC) {
		char *big = malloc(outlen + 1);

		CHECK(outlen + 1 > outsz);
		CHECK(outsz == 0 || out[0] == '\0');
		if (big) {
			CHECK(pyunicode__to_utf8(kind, ascii, data, len, big, outlen + 1, &again) == 0);
			CHECK(again == outlen);
			check_utf8_n(big, again);
			free(big);
		}
	} else {
		CHECK(rc == -EINVAL);
	}
	free(out);
	return 0;
}
