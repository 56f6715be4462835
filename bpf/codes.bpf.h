/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * codes.bpf.h - code objects: each frame's co_version (or, on 3.11, an
 * identity computed from what the object owns), and the snapshot of a code
 * object met for the first time (struct pyprof_code: the object's head, its
 * qualname, filename and line table), sent before the sample that holds it
 * so that code freed before userspace reads it is named all the same.
 */
#ifndef PYPROF_CODES_BPF_H
#define PYPROF_CODES_BPF_H

#include "maps.bpf.h"

/*
 * 3.11 has no co_version. What tells a code object from the one freed before
 * at its address: the objects it owns (co_filename, co_name, co_qualname,
 * co_linetable), which a new object may get at the same addresses too, and
 * their contents' heads (the qualname's and filename's length, kind and
 * first characters; the table's length and first bytes), which differ
 * between generated functions and between modules (pyprof_ident311(),
 * which userspace computes alike). Nothing that changes while the object
 * lives: a str's cached hash is -1 until first asked for, so a class body's
 * qualname hashed between two samples gave its frames two identities.
 */
static __always_inline __u32 ident311(struct scratch *sc, __u64 code)
{
	/* In the scratch: 160 bytes on the stack of every frame's walk. */
	struct ident_reads *r = &sc->id311;

	__builtin_memset(r, 0, sizeof(*r));
	bpf_probe_read_user(r->q, sizeof(r->q), (const void *)(code + sc->cfg.code_ident));
	if (r->q[2])
		bpf_probe_read_user(r->qs, sizeof(r->qs),
				    (const void *)(r->q[2] + sc->cfg.unicode_length));
	if (r->q[0])
		bpf_probe_read_user(r->fs, sizeof(r->fs),
				    (const void *)(r->q[0] + sc->cfg.unicode_length));
	if (r->q[3])
		bpf_probe_read_user(r->ls, sizeof(r->ls),
				    (const void *)(r->q[3] + sc->cfg.bytes_size));
	return pyprof_ident311(r->q, r->qs, r->fs, r->ls);
}

/*
 * co_version of @code, read once per sample and code object. *ident is what
 * tells this code object from an earlier one at the same address, for the
 * tables of code objects sent: co_version itself on 3.12+; on 3.11, which
 * has none, ident311(), computed only when snapshots are on, and then also
 * what the frame carries as its version (userspace names the frame from the
 * snapshot of that identity, never from what the address holds later).
 * *fresh is false when this sample met @code before: its snapshot is
 * settled (a recursion's frames check it once).
 */
static __always_inline __u32 code_version(struct scratch *sc, __u64 code, __u32 *ident,
					   bool *fresh)
{
	struct walk *w = &sc->w;
	struct memo *m = &sc->memo[(code >> 4) & (PYPROF_VERSION_MEMO - 1)];
	__u32 v = 0;

	*ident = 0;
	*fresh = true;
	if (!sc->cfg.code_version && !(sc->cfg.snapshots && sc->cfg.code_ident))
		return 0;
	if (m->gen == w->gen && m->code == code) {
		*ident = m->ident;
		*fresh = false;
		return m->version;
	}
	count(PYPROF_CNT_VERSION_READS);
	/* A fault leaves 0: "unknown". */
	if (sc->cfg.code_version) {
		bpf_probe_read_user(&v, sizeof(v), (const void *)(code + sc->cfg.code_version));
		*ident = v;
	} else {
		*ident = ident311(sc, code);
		v = *ident;	/* the frame carries it: userspace matches on it */
	}
	m->code = code;
	m->version = v;
	m->ident = *ident;
	m->gen = w->gen;
	return v;
}

/*
 * Copy the str object at @addr (header and payload, compact strings only)
 * into @dst, at most @max bytes. Returns the bytes copied; *cut says the
 * string is longer (or not compact), *fault that nothing could be read.
 */
static __always_inline __u32 copy_str(struct scratch *sc, __u8 *dst, __u32 max, __u64 addr,
				      bool *cut, bool *fault)
{
	__u64 hdr = sc->cfg.unicode_ascii_data, length, total;
	__u32 state, kind;

	*cut = false;
	*fault = false;
	if (hdr > 64)
		hdr = 64;
	/* The clamped value from here on: clang spilled the unclamped one
	 * before the compare, and 5.10's verifier bounds no copy of it. */
	barrier_var(hdr);
	if (!addr || bpf_probe_read_user(dst, hdr, (const void *)addr)) {
		*fault = true;
		return 0;
	}
	/* PEP 393 state: kind in bits 2-4, compact bit 5, ascii bit 6. */
	state = *(const __u32 *)(dst + (sc->cfg.unicode_state & 63));
	length = *(const __u64 *)(dst + (sc->cfg.unicode_length & 63));
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || length > max) {
		*cut = true;
		return hdr;
	}
	total = ((state & (1u << 6)) ? sc->cfg.unicode_ascii_data : sc->cfg.unicode_compact_data) +
		length * kind;
	if (total > max) {
		*cut = true;
		total = max;
	}
	if (total <= hdr)
		return total;
	if (bpf_probe_read_user(dst + hdr, (total - hdr) & (PYPROF_CODE_FILE_MAX - 1),
				(const void *)(addr + hdr))) {
		*fault = true;
		return 0;
	}
	return total;
}

/* A pointer field of the copy of a code object (its offset masked in bounds). */
static __always_inline __u64 obj64(const struct pyprof_code *c, __u64 off)
{
	return *(const __u64 *)(c->obj + (off & (PYPROF_CODE_OBJ_MAX - 8)));
}

/* Send what naming code object @code takes. Returns 0 when sent. */
static __always_inline long send_code(struct scratch *sc, __u64 code, __u32 version)
{
	struct pyprof_code *c = &sc->code;
	__u32 len = sc->cfg.code_size;
	__u64 lt, size;
	bool cut, fault;

	if (len > PYPROF_CODE_OBJ_MAX)
		len = PYPROF_CODE_OBJ_MAX;
	if (bpf_probe_read_user(c->obj, len, (const void *)code))
		return -1;
	c->kind = PYPROF_REC_CODE;
	c->flags = 0;
	c->code = code;
	c->version = version;
	c->pid = sc->s.pid;
	c->obj_len = len;
	c->qual_len = copy_str(sc, c->qual, PYPROF_CODE_QUAL_MAX, obj64(c, sc->cfg.code_qualname),
			       &cut, &fault);
	c->flags |= (cut ? PYPROF_CF_QUAL_CUT : 0) | (fault ? PYPROF_CF_QUAL_FAULT : 0);
	c->file_len = copy_str(sc, c->file, PYPROF_CODE_FILE_MAX, obj64(c, sc->cfg.code_filename),
			       &cut, &fault);
	c->flags |= (cut ? PYPROF_CF_FILE_CUT : 0) | (fault ? PYPROF_CF_FILE_FAULT : 0);

	c->lt_len = 0;
	c->lt_size = 0;
	lt = obj64(c, sc->cfg.code_linetable);
	if (!lt ||
	    bpf_probe_read_user(&size, sizeof(size), (const void *)(lt + sc->cfg.bytes_size))) {
		c->flags |= PYPROF_CF_LT_FAULT;
	} else {
		c->lt_size = size;
		if (size > PYPROF_CODE_LT_MAX) {
			size = PYPROF_CODE_LT_MAX;
			c->flags |= PYPROF_CF_LT_CUT;
		}
		if (bpf_probe_read_user(c->lt, size, (const void *)(lt + sc->cfg.bytes_sval)))
			c->flags |= PYPROF_CF_LT_FAULT;
		else
			c->lt_len = size;
	}
	len = c->lt_len;
	if (len > PYPROF_CODE_LT_MAX)
		len = PYPROF_CODE_LT_MAX;
	if (bpf_ringbuf_output(&samples, c, PYPROF_CODE_SIZE(len), BPF_RB_NO_WAKEUP)) {
		count(PYPROF_CNT_CODES_LOST);
		return -1;
	}
	count(PYPROF_CNT_CODES_SENT);
	return 0;
}

/*
 * First sighting of (@code, @version)? Then send its snapshot; false when
 * it could not be sent (tried again at the next sighting). A per-CPU
 * direct-mapped table answers most frames with one comparison; the shared
 * LRU table makes one sighting send once across CPUs.
 */
static __always_inline bool note_code(struct scratch *sc, __u64 code, __u32 version,
				      __u32 ident)
{
	struct seen *e = &sc->seen[((code >> 4) ^ (code >> 14)) & (PYPROF_SEEN_L1 - 1)];
	struct code_key key = { .code = code, .tgid = sc->s.pid };
	/* What was sent under an earlier configuration counts as unsent. */
	__u32 tag = ident ^ (sc->cfg.snap_gen * 0x9e3779b1u);
	__u32 *last;

	if (e->tgid == sc->s.pid && e->code == code && e->version == tag)
		return true;
	last = bpf_map_lookup_elem(&codes_seen, &key);
	if (!last || *last != tag) {
		if (send_code(sc, code, version))
			return false;
		bpf_map_update_elem(&codes_seen, &key, &tag, BPF_ANY);
	}
	e->code = code;
	e->version = tag;
	e->tgid = sc->s.pid;
	return true;
}

#endif
