// SPDX-License-Identifier: MIT
/*
 * json_writer.c - JSON string escaping (see json_writer.h).
 */
#include <errno.h>
#include <stdint.h>
#include "json_writer.h"

/* Length of the valid UTF-8 sequence at @s (2-4), 0 if invalid; sets *cp. */
static int utf8_multi(const unsigned char *s, uint32_t *cp)
{
	uint32_t c = s[0], min;
	int len;

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

static int write_string(FILE *f, const char *utf8, int html)
{
	const unsigned char *p = (const unsigned char *)utf8, *run;

	if (!utf8) {
		fputs("null", f);
		return ferror(f) ? -EIO : 0;
	}
	fputc('"', f);
	run = p;
	while (*p) {
		unsigned char c = *p;
		const char *esc = NULL;
		char buf[8];
		uint32_t cp;
		int len = 1;

		if (c < 0x80) {
			if (c == '"')
				esc = "\\\"";
			else if (c == '\\')
				esc = "\\\\";
			else if (c == '\n')
				esc = "\\n";
			else if (c == '\t')
				esc = "\\t";
			else if (c == '\r')
				esc = "\\r";
			else if (c == '\b')
				esc = "\\b";
			else if (c == '\f')
				esc = "\\f";
			else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&'))) {
				snprintf(buf, sizeof(buf), "\\u%04x", c);
				esc = buf;
			}
		} else {
			len = utf8_multi(p, &cp);
			if (!len) {
				len = 1;
				esc = "\\ufffd";
			} else if (html && (cp == 0x2028 || cp == 0x2029)) {
				snprintf(buf, sizeof(buf), "\\u%04x", cp);
				esc = buf;
			}
		}
		if (esc) {
			fwrite(run, 1, (size_t)(p - run), f);
			fputs(esc, f);
			p += len;
			run = p;
		} else {
			p += len;
		}
	}
	fwrite(run, 1, (size_t)(p - run), f);
	fputc('"', f);
	return ferror(f) ? -EIO : 0;
}

int json_write_string(FILE *f, const char *utf8)
{
	return write_string(f, utf8, 0);
}

int json_write_string_html(FILE *f, const char *utf8)
{
	return write_string(f, utf8, 1);
}
