// SPDX-License-Identifier: MIT
/*
 * json_writer.c - JSON string escaping (see json_writer.h).
 */
#include <errno.h>
#include <stdint.h>
#include "output/json_writer.h"
#include "output/utf8.h"

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
			len = out_utf8_seq(p, &cp);
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
