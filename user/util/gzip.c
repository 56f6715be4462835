// SPDX-License-Identifier: MIT
/* gzip.c - whole buffers in and out of gzip (gzip.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>
#include "util/gzip.h"

int gzip__compress(const void *in, size_t n, uint8_t **out, size_t *outlen)
{
	z_stream zs = { 0 };
	uLong cap;
	uint8_t *buf;
	int zr;

	if (n > UINT_MAX)
		return -E2BIG;
	/* windowBits 15 + 16: a gzip wrapper, mtime 0. */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&zs, (uLong)n);
	buf = malloc(cap ? cap : 1);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)n;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	zr = deflate(&zs, Z_FINISH);
	*outlen = zs.total_out;
	deflateEnd(&zs);
	if (zr != Z_STREAM_END) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	return 0;
}

int gzip__decompress(const void *in, size_t n, size_t max, uint8_t **out, size_t *outlen)
{
	z_stream zs = { 0 };
	size_t cap = n * 4 + 4096, len = 0;
	uint8_t *buf = NULL, *nb;
	int zr = Z_OK, err = 0;

	if (n > UINT_MAX)
		return -E2BIG;
	if (inflateInit2(&zs, 15 + 16) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)n;
	while (!err && zr != Z_STREAM_END) {
		if (len == cap || !buf) {
			cap = buf ? 2 * cap : cap;
			if (cap > max + 1)
				cap = max + 1;
			if (len == cap) {
				err = -E2BIG;
				break;
			}
			if (!(nb = realloc(buf, cap))) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
		}
		zs.next_out = buf + len;
		zs.avail_out = (uInt)(cap - len > UINT_MAX ? UINT_MAX : cap - len);
		zr = inflate(&zs, Z_NO_FLUSH);
		len = zs.total_out;
		if (zr == Z_BUF_ERROR && zs.avail_in == 0)
			err = -EINVAL;
		else if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
			err = zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	}
	inflateEnd(&zs);
	if (!err && len > max)
		err = -E2BIG;
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*outlen = len;
	return 0;
}
