/* SPDX-License-Identifier: MIT */
/* text.c - see text.h. */
#include <stdio.h>
#include <string.h>
#include "util/text.h"

void put_clean(FILE *f, const char *s)
{
	put_clean_n(f, s, strlen(s));
}

void put_clean_n(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	while (p < end) {
		unsigned char c = *p;

		if (c < 0x20 || c == 0x7f) {
			fputc('?', f);
			p++;
		} else if (c < 0x80) {
			fputc(c, f);
			p++;
		} else {
			int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
			int ok = len > 0 && c < 0xf5 && end - p >= len;

			for (int i = 1; ok && i < len; i++)
				ok = (p[i] & 0xc0) == 0x80;
			if (ok && c == 0xc2 && p[1] < 0xa0)
				ok = 0;		/* C1 control */
			if (!ok) {
				fputc('?', f);
				p++;
				continue;
			}
			fwrite(p, 1, (size_t)len, f);
			p += len;
		}
	}
}
