// SPDX-License-Identifier: MIT
/*
 * rawrec_input.c - a raw recording's bytes (rawrec_input.h): the gzip (or
 * plain) stream read ahead, cut into records whose lengths are checked, and
 * the bounded cursor the reader parses each payload with.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "output/rawrec.h"
#include "output/rawrec_format.h"
#include "output/rawrec_input.h"
#include "util/errbuf.h"

#define IN_BUFFER (64u * 1024)

/* Read more decompressed data. 1: some; 0: no more (r->cut: stopped short); -errno. */
static int fill(struct rawrec_input *r, char *err, size_t errlen)
{
	const char *msg;
	int n, zerr, e;

	if (r->eof)
		return 0;
	if (r->in_pos) {
		memmove(r->in, r->in + r->in_pos, r->in_len - r->in_pos);
		r->in_off += r->in_pos;
		r->in_len -= r->in_pos;
		r->in_pos = 0;
	}
	errno = 0;
	n = gzread(r->gz, r->in + r->in_len, (unsigned int)(IN_BUFFER - r->in_len));
	if (n > 0) {
		r->in_len += (size_t)n;
		return 1;
	}
	e = errno;
	msg = gzerror(r->gz, &zerr);
	r->eof = 1;
	switch (zerr) {
	case Z_OK:
		return 0;
	case Z_BUF_ERROR:	/* zlib's "unexpected end of file" */
		r->cut = 1;
		return 0;
	case Z_ERRNO:
		seterr(err, errlen, "reading %s: %s", r->name, strerror(e ? e : EIO));
		return e ? -e : -EIO;
	case Z_MEM_ERROR:
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	default:
		seterr(err, errlen, "%s is corrupt: its compressed data is damaged (zlib: %s)",
		       r->name, msg ? msg : "error");
		return -EBADMSG;
	}
}

/* Copy up to @n bytes into @dst; *got says how many came (fewer: the data ended). */
static int take(struct rawrec_input *r, unsigned char *dst, size_t n, size_t *got,
		char *err, size_t errlen)
{
	size_t k;
	int rc;

	*got = 0;
	while (*got < n) {
		if (r->in_pos == r->in_len) {
			rc = fill(r, err, errlen);
			if (rc <= 0)
				return rc;
		}
		k = r->in_len - r->in_pos;
		if (k > n - *got)
			k = n - *got;
		memcpy(dst + *got, r->in + r->in_pos, k);
		r->in_pos += k;
		*got += k;
	}
	return 0;
}

int rawrec_input__corrupt(struct rawrec_input *r, const char *what, char *err, size_t errlen)
{
	seterr(err, errlen, "%s is corrupt: %s (record at byte %llu of its data)", r->name, what,
	       (unsigned long long)r->rec_off);
	return -EBADMSG;
}

/*
 * Read one record into r->rec. 1: a record of type *type; 0: the data ended,
 * *boundary says whether between records; -errno.
 */
int rawrec_input__record(struct rawrec_input *r, int *type, int *boundary, char *err,
			 size_t errlen)
{
	unsigned char b;
	uint64_t len = 0;
	size_t got;
	int rc;

	*boundary = 0;
	r->rec_off = r->in_off + r->in_pos;
	rc = take(r, &b, 1, &got, err, errlen);
	if (rc || !got) {
		*boundary = 1;
		return rc;
	}
	*type = b;
	for (int shift = 0;; shift += 7) {
		rc = take(r, &b, 1, &got, err, errlen);
		if (rc || !got)
			return rc;
		if (shift == 63 && b > 1)
			return rawrec_input__corrupt(r, "a record length does not fit 64 bits",
						     err, errlen);
		len |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	if (len > RAWREC_MAX_RECORD)
		return rawrec_input__corrupt(r, "a record longer than the format allows",
					     err, errlen);
	if (len > r->rec_cap) {
		unsigned char *n = realloc(r->rec, len);

		if (!n) {
			seterr(err, errlen, "out of memory");
			return -ENOMEM;
		}
		r->rec = n;
		r->rec_cap = (uint32_t)len;
	}
	rc = take(r, r->rec, len, &got, err, errlen);
	if (rc || got < len)
		return rc;
	r->rec_len = (uint32_t)len;
	return 1;
}

uint64_t rawrec_cur__u(struct rawrec_cur *c)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		unsigned char b;

		if (c->p == c->end)
			break;
		b = *c->p++;
		if (shift == 63 && b > 1)
			break;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

int64_t rawrec_cur__s(struct rawrec_cur *c)
{
	return unzigzag(rawrec_cur__u(c));
}

char *rawrec_cur__str(struct rawrec_cur *c, int *nomem)
{
	uint64_t len = rawrec_cur__u(c);
	char *s;

	if (c->bad || len > (uint64_t)(c->end - c->p) || memchr(c->p, 0, len)) {
		c->bad = 1;
		return NULL;
	}
	s = strndup((const char *)c->p, len);
	if (!s)
		*nomem = 1;
	c->p += len;
	return s;
}

int rawrec_input__open(struct rawrec_input *r, const char *path, char *err, size_t errlen)
{
	int from_stdin = !strcmp(path, "-"), fd;

	if (!(r->name = strdup(from_stdin ? "stdin" : path)) ||
	    !(r->in = malloc(IN_BUFFER)) || !(r->rec = malloc(4096))) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->rec_cap = 4096;
	/* gzclose() closes the descriptor it was given: stdin gets a copy. */
	if (from_stdin)
		fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
	else
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		seterr(err, errlen, "cannot open %s: %s", r->name, strerror(e));
		return -e;
	}
	r->gz = gzdopen(fd, "rb");
	if (!r->gz) {
		close(fd);
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	gzbuffer(r->gz, GZ_BUFFER);
	return 0;
}

int rawrec_input__magic(struct rawrec_input *r, unsigned int *version_out, char *err,
			size_t errlen)
{
	static const unsigned char gzip_magic[2] = { 0x1f, 0x8b };
	unsigned char head[sizeof(rawrec_magic) + 2];
	unsigned int version;
	size_t got;
	int rc;

	rc = take(r, head, sizeof(head), &got, err, errlen);
	if (rc)
		return rc;
	if (got < sizeof(head)) {
		/* A recording killed right away: nothing, or part of the first bytes. */
		if (!got && !r->cut) {
			seterr(err, errlen, "%s is empty: not a raw recording", r->name);
			return -ENODATA;
		} else if (r->cut || !memcmp(head, rawrec_magic, got < 8 ? got : 8) ||
			   (gzdirect(r->gz) && got < 2 && !memcmp(head, gzip_magic, got))) {
			seterr(err, errlen, "%s is truncated before its header: no samples "
			       "in it", r->name);
			return -ENODATA;
		}
		seterr(err, errlen, "%s is not a pyprof-bpf raw recording", r->name);
		return -EPROTO;
	}
	if (memcmp(head, rawrec_magic, sizeof(rawrec_magic))) {
		seterr(err, errlen, "%s is not a pyprof-bpf raw recording%s", r->name,
		       gzdirect(r->gz) ? "" : " (it is gzip-compressed, but holds something else)");
		return -EPROTO;
	}
	version = head[8] | (unsigned int)head[9] << 8;
	*version_out = version;
	if (version > RAWREC_VERSION || version < RAWREC_VERSION_OLDEST) {
		seterr(err, errlen, "%s is a version %u raw recording; this pyprof-bpf reads "
		       "versions %u to %u%s", r->name, version, RAWREC_VERSION_OLDEST, RAWREC_VERSION,
		       version > RAWREC_VERSION ? ": use a newer pyprof-bpf" : "");
		return version > RAWREC_VERSION ? -ENOTSUP : -EBADMSG;
	}
	return 0;
}

struct rawrec_cur rawrec_input__cur(const struct rawrec_input *r)
{
	return (struct rawrec_cur){ r->rec, r->rec + r->rec_len, 0 };
}

void rawrec_input__close(struct rawrec_input *r)
{
	if (r->gz)
		gzclose(r->gz);
	free(r->rec);
	free(r->in);
	free(r->name);
	memset(r, 0, sizeof(*r));
}
