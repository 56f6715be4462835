// SPDX-License-Identifier: MIT
/*
 * output_utf8.c - UTF-8 as the writers need it: one sequence decoded and
 * checked, and a copy with the invalid bytes replaced.
 */
#include <stdlib.h>
#include <string.h>
#include "output/utf8.h"

int out_utf8_seq(const unsigned char *s, uint32_t *cp)
{
	uint32_t c = s[0], min;
	int len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		c &= 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;	/* also stops at the NUL */
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

char *out_utf8_clean(const char *s)
{
	const unsigned char *p;
	size_t n = 0;
	uint32_t cp;
	char *r, *w;
	int len;

	for (p = (const unsigned char *)s; *p;) {
		len = out_utf8_seq(p, &cp);
		n += len ? (size_t)len : 3;
		p += len ? len : 1;
	}
	r = malloc(n + 1);
	if (!r)
		return NULL;
	w = r;
	for (p = (const unsigned char *)s; *p;) {
		len = out_utf8_seq(p, &cp);
		if (len) {
			memcpy(w, p, (size_t)len);
			w += len;
			p += len;
		} else {
			memcpy(w, "\xef\xbf\xbd", 3);	/* U+FFFD */
			w += 3;
			p++;
		}
	}
	*w = '\0';
	return r;
}
