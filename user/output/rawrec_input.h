/* SPDX-License-Identifier: MIT */
/*
 * rawrec_input.h - a raw recording's bytes, for its reader (rawrec_reader.c):
 * the gzip stream (or a plain file) read ahead, cut into records (type and
 * length checked against RAWREC_MAX_RECORD), and a bounded cursor over a
 * record's payload. What the records mean is the reader's business.
 */
#ifndef PYPROF_OUTPUT_RAWREC_INPUT_H
#define PYPROF_OUTPUT_RAWREC_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

struct rawrec_input {
	gzFile gz;
	char *name;		/* the path, for messages */
	unsigned char *in;	/* decompressed bytes read ahead */
	size_t in_len, in_pos;
	uint64_t in_off;	/* offset of in[0] in the decompressed data */
	int eof;		/* gzread() has nothing more */
	int cut;		/* ... because the compressed stream stopped short */
	unsigned char *rec;	/* the payload of the current record */
	uint32_t rec_len, rec_cap;
	uint64_t rec_off;	/* its record's offset, for messages */
};

/*
 * Open @path ("-": stdin) into @r (zeroed) as a gzip (or plain) stream. 0 or
 * -errno with one line in @err; rawrec_input__close() frees what was taken
 * either way.
 */
int rawrec_input__open(struct rawrec_input *r, const char *path, char *err, size_t errlen);
/* The magic and the version (into *version), or why the file is not a raw
 * recording we read: -ENODATA, -EPROTO, -ENOTSUP, -EBADMSG, a read error. */
int rawrec_input__magic(struct rawrec_input *r, unsigned int *version, char *err,
			size_t errlen);
/*
 * Read one record into r->rec. 1: a record of type *type; 0: the data ended,
 * *boundary says whether between records; -errno.
 */
int rawrec_input__record(struct rawrec_input *r, int *type, int *boundary, char *err,
			 size_t errlen);
/* -EBADMSG, with "@name is corrupt: @what" and the current record's offset in @err. */
int rawrec_input__corrupt(struct rawrec_input *r, const char *what, char *err, size_t errlen);
void rawrec_input__close(struct rawrec_input *r);

/* A bounded cursor over a payload: reading past its end sets bad. */
struct rawrec_cur {
	const unsigned char *p, *end;
	int bad;
};

/* A cursor over the current record's payload. */
struct rawrec_cur rawrec_input__cur(const struct rawrec_input *r);
/* An unsigned varint (rawrec.h's "u"); 0 with bad set when it does not fit. */
uint64_t rawrec_cur__u(struct rawrec_cur *c);
/* A zigzag-encoded signed varint ("s"). */
int64_t rawrec_cur__s(struct rawrec_cur *c);
/* A string field as a new C string; NULL with c->bad set when it does not fit
 * or holds a NUL, or with *nomem set when out of memory. */
char *rawrec_cur__str(struct rawrec_cur *c, int *nomem);

#endif
