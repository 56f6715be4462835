// SPDX-License-Identifier: MIT
/*
 * call_sites.c - a caller's instruction, as one that may push a frame or
 * not (call_sites.h).
 */
#include <errno.h>
#include "target/call_sites.h"
#include "target/remote_mem.h"

int call_sites__pushed_inline(const struct py_offsets *o, const unsigned char *b, uint8_t owner)
{
	if (!o->frame_instr_is_prev || owner != 0)
		return 0;
	/* 3.12: an entry frame (the interpreter's) sits between C and its callee */
	if (o->frame_owner_interp_min)
		return 1;
	/* 3.11: no is_entry known, no telling */
	return o->frame_is_entry && o->frame_is_entry < o->frame_size && !b[o->frame_is_entry];
}

void call_sites__init(struct call_sites *cs, uint32_t version_hex)
{
	cs->table = opfamily__table(version_hex);
	cs->plain = 0;
	for (size_t i = 0; i < CALL_SITES_SLOTS; i++)
		cs->code[i] = 0;
}

enum call_site call_sites__decode(const struct opfamily *t, const unsigned char *code,
				  size_t len, size_t unit)
{
	size_t at = 0;

	if (!t)
		return CALL_SITE_UNKNOWN;
	/* Instruction by instruction: an opcode byte (then its argument),
	 * then its family's cache units, whose bytes are data. */
	while (at <= unit && 2 * at < len) {
		const struct opfamily *f = &t[code[2 * at]];

		if (!(f->flags & OPFAMILY_KNOWN))
			return CALL_SITE_UNKNOWN;
		at += 1 + (size_t)f->caches;
		if (unit < at)
			return f->flags & OPFAMILY_MAY_PUSH ? CALL_SITE_CALLS : CALL_SITE_PLAIN;
	}
	return CALL_SITE_UNKNOWN;	/* the bytes end before the unit */
}

static size_t slot_of(uint64_t code, uint32_t unit)
{
	/* code objects are 16-byte aligned: mix the bits above, and the unit */
	uint64_t k = (code >> 4) ^ ((uint64_t)unit << 40);

	return (size_t)(k * 0x9e3779b97f4a7c15ull >> 54) & (CALL_SITES_SLOTS - 1);
}

int call_sites__at(struct call_sites *cs, pid_t pid, const struct py_offsets *o, uint64_t code,
		   uint64_t instr, enum call_site *site)
{
	uint64_t first = code + o->code_adaptive, len;
	size_t i;
	uint32_t unit;
	int rc;

	*site = CALL_SITE_UNKNOWN;
	/* Before the first instruction: a frame just pushed (never_started()
	 * in frame_walk.c says what that means); an odd address: not one. */
	if (!cs->table || !code || !o->code_adaptive || instr < first || (instr - first) % 2)
		return 0;
	len = instr - first + 2;
	if (len > CALL_SITES_MAX_BYTES)
		return 0;
	unit = (uint32_t)((instr - first) / 2);
	i = slot_of(code, unit);
	if (cs->code[i] == code && cs->unit[i] == unit) {
		*site = cs->site[i];
		return 0;
	}
	rc = remote_read(pid, first, cs->buf, len);
	if (rc == -ESRCH)
		return rc;
	if (!rc)
		*site = call_sites__decode(cs->table, cs->buf, len, unit);
	/* An unreadable code stays unknown: not read again for every sample. */
	if (*site == CALL_SITE_PLAIN) {
		cs->plain++;
	} else {
		cs->code[i] = code;
		cs->unit[i] = unit;
		cs->site[i] = (uint8_t)*site;
	}
	return 0;
}
