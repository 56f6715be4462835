/* SPDX-License-Identifier: MIT */
/*
 * fuzz_code_snapshot.c - the symbolizer's code snapshots (symbolizer__add_code,
 * the sampler's copies of a code object, its names and its location table,
 * read back where cut) and symbolizer__str_from_copy(), then frames of that
 * code resolved, over a fake process (fake_target.h).
 * Input: [u16 obj][u16 qualname][u16 filename][u16 linetable][u8 cuts]
 *        [u8 from_input][u16 instr] (then, with from_input, the four copies
 *        of those lengths), then the fake target. Without from_input the
 *        copies are the fake memory's own first bytes (0: the whole part),
 *        of the code object at hdr.extra or, when 0, the first thread's
 *        innermost frame's.
 *
 * Invariants checked: names valid UTF-8, lines >= -1, nothing read beyond
 * a few reads per part.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fake_mem.h"
#include "fake_target.h"
#include "fuzz_check.h"
#include "symbols/symbolizer.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "util/bytes.h"

#define PREFIX 12
#define PART_MAX 4096

struct snap {
	uint16_t len[4];	/* obj, qualname, filename, linetable */
	uint8_t cuts, from_input;
	uint16_t instr;
	uint8_t buf[4][PART_MAX];
};

/* The code object of the first thread's innermost frame, 0 if none. */
static uint64_t first_code(struct pyproc *p)
{
	struct py_thread th;
	struct py_rawframe f;
	size_t n = 0;
	int truncated;

	if (pyproc__threads(p, &th, 1, &n) < 0 && n == 0)
		return 0;
	if (!n || pyproc__walk(p, th.tstate, &f, 1, &n, &truncated) || !n)
		return 0;
	return f.code;
}

/* Part @i from the target: the first len[i] bytes there (0: all we read). */
static size_t from_target(uint64_t addr, uint64_t want, uint8_t *buf)
{
	size_t n = want && want < PART_MAX ? want : PART_MAX;

	while (n && remote_read(0, addr, buf, n))
		n /= 2;
	return n;
}

static void snapshot_of_target(struct pyproc *p, uint64_t code, struct snap *s, size_t *len)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t lt = 0, parts[4] = { code, 0, 0, 0 };

	len[0] = from_target(code, s->len[0] ? s->len[0] : o->code_size, s->buf[0]);
	if (len[0] >= o->code_size) {
		parts[1] = get_u64(s->buf[0], o->code_qualname);
		parts[2] = get_u64(s->buf[0], o->code_filename);
		lt = get_u64(s->buf[0], o->code_linetable);
		parts[3] = lt ? lt + o->bytes_sval : 0;
	}
	for (int i = 1; i < 4; i++)
		len[i] = parts[i] ? from_target(parts[i], s->len[i], s->buf[i]) : 0;
}

static void run_snapshot(struct pyproc *p, uint64_t code, struct snap *s)
{
	struct symbolizer *sym;
	struct raw_code rc = { .code = code };
	struct py_rawframe f;
	struct py_sym out;
	const char *str;
	size_t len[4];
	uint64_t r0;

	if (!code || symbolizer__new(p, &sym))
		return;
	if (s->from_input)
		for (int i = 0; i < 4; i++)
			len[i] = s->len[i];
	else
		snapshot_of_target(p, code, s, len);
	rc.obj = s->buf[0];
	rc.obj_len = len[0];
	rc.qualname = s->buf[1];
	rc.qualname_len = len[1];
	rc.filename = s->buf[2];
	rc.filename_len = len[2];
	rc.linetable = s->buf[3];
	rc.linetable_len = len[3];
	rc.linetable_size = s->cuts & 8 ? len[3] + s->instr : len[3];
	rc.qualname_cut = s->cuts & 1;
	rc.filename_cut = s->cuts & 2;
	rc.linetable_cut = s->cuts & 4;
	if (len[0] >= pyproc__offsets(p)->code_version + 4 && pyproc__offsets(p)->code_version)
		memcpy(&rc.version, s->buf[0] + pyproc__offsets(p)->code_version, 4);
	r0 = fake_mem_reads();
	symbolizer__add_code(sym, &rc);
	/* the snapshot's parts, each read again at most (str: 2, table: 2,
	 * the object to vouch for it: 1) */
	CHECK(fake_mem_reads() - r0 <= 8);
	if (symbolizer__str_from_copy(sym, s->buf[1], len[1], 0, &str) == 0)
		check_utf8(str);
	for (int k = 0; k < 3; k++) {
		f = (struct py_rawframe){ .frame = 1, .code = code,
					  .instr = code + pyproc__offsets(p)->code_adaptive +
						   (k == 0 ? s->instr : k == 1 ? 0 : 2 * s->instr),
					  .code_version = rc.version,
					  .reserved = k == 2 ? PY_RAWFRAME_NO_SNAPSHOT : 0 };
		symbolizer__next_sample(sym);
		out = (struct py_sym){ 0 };
		if (symbolizer__resolve(sym, &f, &out) == 0) {
			CHECK(out.function && out.file && out.line >= -1);
			check_utf8(out.function);
			check_utf8(out.file);
		}
	}
	symbolizer__free(sym);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fake_target_hdr h;
	struct pyproc *p;
	struct snap *s;
	size_t need = PREFIX;

	if (size < PREFIX)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return 0;
	memcpy(s->len, data, 8);
	s->cuts = data[8];
	s->from_input = data[9] & 1;
	memcpy(&s->instr, data + 10, 2);
	for (int i = 0; s->from_input && i < 4; i++) {
		s->len[i] %= PART_MAX;
		if (size - need < s->len[i])
			goto out;
		memcpy(s->buf[i], data + need, s->len[i]);
		need += s->len[i];
	}
	if (fake_target_open(data + need, size - need, &h, &p) == 0) {
		run_snapshot(p, h.extra ? h.extra : first_code(p), s);
		pyproc__free(p);
	}
out:
	free(s);
	return 0;
}
