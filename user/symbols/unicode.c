// SPDX-License-Identifier: MIT
/*
 * unicode.c - CPython compact str payloads to UTF-8, see unicode.h.
 */
#include <errno.h>
#include <string.h>
#include "symbols/unicode.h"

#define STATE_KIND_SHIFT	2
#define STATE_KIND_MASK		7u
#define STATE_COMPACT_BIT	(1u << 5)
#define STATE_ASCII_BIT		(1u << 6)

#define UNICODE_MAX		0x10ffffu
#define SURROGATE_FIRST		0xd800u
#define SURROGATE_LAST		0xdfffu
#define ASCII_LIMIT		0x80u

int pyunicode__state_decode(uint32_t state, unsigned int *kind, int *compact,
			    int *ascii)
{
	unsigned int k = (state >> STATE_KIND_SHIFT) & STATE_KIND_MASK;
	int is_ascii = !!(state & STATE_ASCII_BIT);

	if (k != PYUNICODE_KIND_1BYTE && k != PYUNICODE_KIND_2BYTE &&
	    k != PYUNICODE_KIND_4BYTE)
		return -EINVAL;
	if (is_ascii && k != PYUNICODE_KIND_1BYTE)
		return -EINVAL;
	if (kind)
		*kind = k;
	if (compact)
		*compact = !!(state & STATE_COMPACT_BIT);
	if (ascii)
		*ascii = is_ascii;
	return 0;
}

/*
 * Code point i of the payload. memcpy because the payload may sit at any
 * alignment in a buffer copied out of the target.
 */
static uint32_t code_point(unsigned int kind, const unsigned char *data, size_t i)
{
	uint16_t u16;
	uint32_t u32;

	switch (kind) {
	case PYUNICODE_KIND_1BYTE:
		return data[i];
	case PYUNICODE_KIND_2BYTE:
		memcpy(&u16, data + i * 2, sizeof(u16));
		return u16;
	default:
		memcpy(&u32, data + i * 4, sizeof(u32));
		return u32;
	}
}

/* Number of UTF-8 bytes for c, after surrogates were replaced. */
static size_t utf8_len(uint32_t c)
{
	if (c < 0x80)
		return 1;
	if (c < 0x800)
		return 2;
	if (c < 0x10000)
		return 3;
	return 4;
}

static void utf8_put(uint32_t c, char *p)
{
	unsigned char *u = (unsigned char *)p;

	switch (utf8_len(c)) {
	case 1:
		u[0] = (unsigned char)c;
		break;
	case 2:
		u[0] = (unsigned char)(0xc0 | (c >> 6));
		u[1] = (unsigned char)(0x80 | (c & 0x3f));
		break;
	case 3:
		u[0] = (unsigned char)(0xe0 | (c >> 12));
		u[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (c & 0x3f));
		break;
	default:
		u[0] = (unsigned char)(0xf0 | (c >> 18));
		u[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (c & 0x3f));
		break;
	}
}

/* c validated and with surrogates replaced, or -EINVAL. */
static int checked_point(unsigned int kind, int ascii, const unsigned char *data,
			 size_t i, uint32_t *out)
{
	uint32_t c = code_point(kind, data, i);

	if (ascii && c >= ASCII_LIMIT)
		return -EINVAL;
	if (c > UNICODE_MAX)
		return -EINVAL;
	if (c >= SURROGATE_FIRST && c <= SURROGATE_LAST)
		c = PYUNICODE_REPLACEMENT;
	*out = c;
	return 0;
}

int pyunicode__to_utf8(unsigned int kind, int ascii, const void *data,
		       size_t length, char *out, size_t outsz, size_t *outlen)
{
	const unsigned char *src = data;
	size_t i, need = 0, pos = 0;
	uint32_t c;
	int err;

	if (kind != PYUNICODE_KIND_1BYTE && kind != PYUNICODE_KIND_2BYTE &&
	    kind != PYUNICODE_KIND_4BYTE)
		return -EINVAL;
	if (ascii && kind != PYUNICODE_KIND_1BYTE)
		return -EINVAL;
	if ((!data && length) || (!out && outsz) || !outlen)
		return -EINVAL;
	/* at most 4 UTF-8 bytes per code point, plus the NUL */
	if (length > (SIZE_MAX - 1) / 4)
		return -EINVAL;

	/*
	 * Measure first: the whole payload is validated before anything is
	 * written, and a short buffer is reported with the size it needs.
	 */
	for (i = 0; i < length; i++) {
		err = checked_point(kind, ascii, src, i, &c);
		if (err)
			return err;
		need += utf8_len(c);
	}
	if (need >= outsz) {
		if (outsz)
			out[0] = '\0';
		*outlen = need;
		return -ENOSPC;
	}
	for (i = 0; i < length; i++) {
		/* validated above: cannot fail */
		checked_point(kind, ascii, src, i, &c);
		utf8_put(c, out + pos);
		pos += utf8_len(c);
	}
	out[pos] = '\0';
	*outlen = pos;
	return 0;
}
