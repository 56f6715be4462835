/* SPDX-License-Identifier: MIT */
/*
 * json_writer.h - writing JSON strings safely.
 */
#ifndef PYPROF_JSON_WRITER_H
#define PYPROF_JSON_WRITER_H

#include <stdio.h>

/*
 * Write @utf8 as a quoted JSON string: '"' and '\\' escaped, control
 * characters as \n, \t, ... or \u00XX, bytes that are not valid UTF-8 as
 * \ufffd (so the output is always valid UTF-8 JSON). NULL writes null.
 * Returns 0, or -EIO when the stream has an error.
 */
int json_write_string(FILE *f, const char *utf8);

/*
 * The same, also escaping '<', '>', '&', U+2028 and U+2029 as \uXXXX, so that
 * the string can sit inside an HTML <script> element or be eval'd by old
 * JavaScript engines.
 */
int json_write_string_html(FILE *f, const char *utf8);

#endif
