/* SPDX-License-Identifier: MIT */
/*
 * unicode.h - CPython str objects (PEP 393 compact strings) read from another
 * process, turned into UTF-8.
 *
 * The payload and the state word come from the target: they are untrusted,
 * every function here validates them and never writes past the output
 * buffer it is given.
 */
#ifndef PYPROF_UNICODE_H
#define PYPROF_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes per code point in a str payload (PyUnicode_*BYTE_KIND). */
#define PYUNICODE_KIND_1BYTE	1
#define PYUNICODE_KIND_2BYTE	2
#define PYUNICODE_KIND_4BYTE	4

/* What a surrogate code point (U+D800..U+DFFF) is written as. */
#define PYUNICODE_REPLACEMENT	0xfffdu

/*
 * pyunicode__to_utf8() - encode a str payload as UTF-8.
 * @kind:	1 (latin-1), 2 (UCS-2) or 4 (UCS-4)
 * @ascii:	the state's ascii bit: with it every byte must be < 0x80
 * @data:	the payload, @length * @kind bytes, any alignment
 * @length:	number of code points (ob_size of the str)
 * @out:	@outsz bytes; receives the UTF-8 bytes and a terminating NUL
 * @outlen:	out: the number of UTF-8 bytes without the NUL. On -ENOSPC it
 *		is the size needed (also without the NUL), so that the
 *		caller can retry with a buffer of *outlen + 1 bytes.
 *
 * A Python str may hold surrogate code points, which UTF-8 cannot encode;
 * each one, paired or not (Python does not combine surrogate pairs in a
 * str), becomes U+FFFD, so that the output is always valid UTF-8. An
 * embedded U+0000 is written as a 0 byte: *outlen, not strlen(), gives the
 * length.
 *
 * Returns 0; -EINVAL for a bad kind, a NULL pointer, an ascii payload with a
 * byte >= 0x80, or a code point above U+10FFFF; -ENOSPC when @out (including
 * the NUL) is too small: nothing is truncated silently, and @out then holds
 * an empty string when @outsz > 0.
 */
int pyunicode__to_utf8(unsigned int kind, int ascii, const void *data,
		       size_t length, char *out, size_t outsz, size_t *outlen);

/*
 * pyunicode__state_decode() - decode the state bit field of a
 * PyASCIIObject, read as a native-endian 32-bit word.
 *
 * Layout of the default (GIL) builds of 3.11 to 3.15, from each version's
 * cpython/unicodeobject.h: bits 0..1 interned, 2..4 kind, 5 compact,
 * 6 ascii, then (3.11) ready or (3.12+) statically_allocated. Free-threaded
 * builds (Py_GIL_DISABLED, 3.13+) make interned a whole byte, which moves
 * every other field up by 6 bits: this function does not decode those.
 *
 * Any of @kind, @compact, @ascii may be NULL. Returns 0, or -EINVAL when the
 * kind is not 1, 2 or 4 (including 3.11's not-ready legacy strings, kind 0)
 * or when ascii is set with a kind other than 1.
 */
int pyunicode__state_decode(uint32_t state, unsigned int *kind, int *compact,
			    int *ascii);

#endif /* PYPROF_UNICODE_H */
