// SPDX-License-Identifier: MIT
/*
 * pyobject.c - dicts, instance attributes and ints read from another process.
 *
 * The offsets below are the same in every default LP64 build from 3.11 to
 * 3.15 (offsetof() in each version's internal headers); what changed between
 * versions, where an instance keeps its attribute values, is told apart by
 * the version.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "target/pyobject.h"
#include "target/remote_mem.h"

/* PyDictObject */
#define DICT_KEYS	32
#define DICT_VALUES	40
/* PyDictKeysObject */
#define KEYS_LOG2_SIZE	8
#define KEYS_LOG2_INDEX	9
#define KEYS_KIND	10
#define KEYS_NENTRIES	24
#define KEYS_INDICES	32
#define KEYS_KIND_GENERAL 0	/* entries hold (hash, key, value); else (key, value) */
/* PyTypeObject */
#define TYPE_BASICSIZE	32
#define TYPE_FLAGS	168
#define TPFLAGS_INLINE_VALUES	(1ul << 2)	/* 3.13+ */
#define TPFLAGS_MANAGED_DICT	(1ul << 4)
#define TPFLAGS_HEAPTYPE	(1ul << 9)
/* An instance's managed dict pointer (3.12: dict or tagged values), and
 * 3.11's values pointer just before it, lie before the object. */
#define MANAGED_DICT	24
#define MANAGED_VALUES_311 32
/* PyLongObject: ob_size (3.11) or lv_tag (3.12+), then 30-bit digits. */
#define LONG_SIZE	16
#define LONG_DIGITS	24

static unsigned int minor(const struct py_offsets *o)
{
	return (o->version_hex >> 16) & 0xff;
}

/* Where a keys table's entries start, how many and how wide. */
struct keys_view {
	uint64_t entries;
	uint64_t n;
	unsigned int width;
};

static int keys_view(pid_t pid, uint64_t keys, struct keys_view *v)
{
	unsigned char h[KEYS_INDICES];
	uint64_t nentries;
	int rc;

	if (!keys)
		return -EPROTO;
	rc = remote_read(pid, keys, h, sizeof(h));
	if (rc)
		return rc;
	memcpy(&nentries, h + KEYS_NENTRIES, 8);
	/* index bytes: 1 to 8 per slot, so log2 of their size is the size's
	 * plus 0 to 3; a table is never more than 2^30 slots */
	if (h[KEYS_LOG2_SIZE] > 30 || h[KEYS_LOG2_INDEX] < h[KEYS_LOG2_SIZE] ||
	    h[KEYS_LOG2_INDEX] > h[KEYS_LOG2_SIZE] + 3 || h[KEYS_KIND] > 2 ||
	    nentries > (1ull << h[KEYS_LOG2_SIZE]))
		return -EPROTO;
	v->entries = keys + KEYS_INDICES + (1ull << h[KEYS_LOG2_INDEX]);
	v->n = nentries;
	v->width = h[KEYS_KIND] == KEYS_KIND_GENERAL ? 24 : 16;
	return 0;
}

/*
 * Items of a keys table, their values in the entries (@values 0) or in a
 * separate array (split tables: the shared keys of instances).
 */
static int items_of(pid_t pid, uint64_t keys, uint64_t values, struct pyobj_item *out,
		    size_t max, size_t *n)
{
	struct keys_view v;
	uint64_t *vals = NULL;
	unsigned char *ents;
	size_t want, k = 0;
	int rc;

	*n = 0;
	rc = keys_view(pid, keys, &v);
	if (rc)
		return rc;
	want = v.n < max ? v.n : max;
	if (want > PYOBJ_MAX_ITEMS)
		want = PYOBJ_MAX_ITEMS;
	if (!want)
		return 0;
	ents = malloc(want * v.width);
	if (values)
		vals = malloc(want * 8);
	if (!ents || (values && !vals)) {
		rc = -ENOMEM;
		goto out;
	}
	rc = remote_read(pid, v.entries, ents, want * v.width);
	if (!rc && values)
		rc = remote_read(pid, values, vals, want * 8);
	if (rc)
		goto out;
	for (size_t i = 0; i < want; i++) {
		const unsigned char *e = ents + i * v.width + (v.width == 24 ? 8 : 0);
		struct pyobj_item it;

		memcpy(&it.key, e, 8);
		if (values)
			it.value = vals[i];
		else
			memcpy(&it.value, e + 8, 8);
		if (it.key && it.value)	/* deleted or unset: skipped */
			out[k++] = it;
	}
	*n = k;
	rc = v.n > want ? -E2BIG : 0;
out:
	free(ents);
	free(vals);
	return rc;
}

/* The values array's first slot: 3.13 put a 8-byte header before it. */
static uint64_t values_array(const struct py_offsets *o, uint64_t values)
{
	return values + (minor(o) >= 13 ? 8 : 0);
}

int pyobj__dict_items(pid_t pid, const struct py_offsets *o, uint64_t dict,
		      struct pyobj_item *out, size_t max, size_t *n)
{
	uint64_t kv[2];
	int rc;

	*n = 0;
	if (!dict)
		return -EPROTO;
	rc = remote_read(pid, dict + DICT_KEYS, kv, sizeof(kv));
	if (rc)
		return rc;
	return items_of(pid, kv[0], kv[1] ? values_array(o, kv[1]) : 0, out, max, n);
}

/* An instance without a dict keeps its values against its type's shared
 * keys. */
static int shared_items(pid_t pid, const struct py_offsets *o, uint64_t type, uint64_t values,
			struct pyobj_item *out, size_t max, size_t *n)
{
	uint64_t keys;
	int rc;

	if (!o->heaptype_cached_keys)
		return -ENOTSUP;
	rc = remote_read_u64(pid, type + o->heaptype_cached_keys, &keys);
	return rc ? rc : items_of(pid, keys, values_array(o, values), out, max, n);
}

int pyobj__attr_items(pid_t pid, const struct py_offsets *o, uint64_t obj,
		      struct pyobj_item *out, size_t max, size_t *n)
{
	uint64_t type, flags, word, vptr, basic;
	unsigned char valid[4];
	int rc;

	*n = 0;
	if (obj < MANAGED_VALUES_311)
		return -EPROTO;
	rc = remote_read_u64(pid, obj + o->ob_type, &type);
	if (!rc)
		rc = remote_read_u64(pid, type + TYPE_FLAGS, &flags);
	if (!rc)
		rc = remote_read_u64(pid, obj - MANAGED_DICT, &word);
	if (rc)
		return rc;
	if (!(flags & TPFLAGS_MANAGED_DICT) || !(flags & TPFLAGS_HEAPTYPE))
		return -ENOTSUP;
	if (minor(o) == 12) {
		/* a dict, or (low bit set) its values pointer minus one */
		if (word & 1)
			return shared_items(pid, o, type, word + 1, out, max, n);
		return word ? pyobj__dict_items(pid, o, word, out, max, n) : 0;
	}
	if (word)
		return pyobj__dict_items(pid, o, word, out, max, n);
	if (minor(o) == 11) {
		rc = remote_read_u64(pid, obj - MANAGED_VALUES_311, &vptr);
		if (rc || !vptr)
			return rc;
		return shared_items(pid, o, type, vptr, out, max, n);
	}
	/* 3.13+: the values inline after the object's fixed part, while valid */
	if (!(flags & TPFLAGS_INLINE_VALUES))
		return 0;
	rc = remote_read_u64(pid, type + TYPE_BASICSIZE, &basic);
	if (!rc && (basic < 16 || basic > PY_MAX_STRUCT_COPY))
		rc = -EPROTO;
	if (!rc)
		rc = remote_read(pid, obj + basic, valid, sizeof(valid));
	if (rc || !valid[3])
		return rc;
	return shared_items(pid, o, type, obj + basic, out, max, n);
}

int pyobj__long(pid_t pid, const struct py_offsets *o, uint64_t addr, uint64_t *mag, int *neg)
{
	uint32_t digits[3];
	uint64_t tag, nd;
	int rc;

	rc = remote_read_u64(pid, addr + LONG_SIZE, &tag);
	if (rc)
		return rc;
	if (minor(o) == 11) {
		*neg = (int64_t)tag < 0;
		nd = *neg ? -tag : tag;
	} else {
		/* lv_tag: digits << 3 | sign (0 positive, 1 zero, 2 negative) */
		if ((tag & 3) == 3)
			return -EPROTO;
		*neg = (tag & 3) == 2;
		nd = tag >> 3;
	}
	if (nd > 3)
		return -ERANGE;
	*mag = 0;
	if (!nd)
		return 0;
	rc = remote_read(pid, addr + LONG_DIGITS, digits, nd * 4);
	if (rc)
		return rc;
	for (size_t i = nd; i-- > 0;) {
		if (digits[i] >> 30)
			return -EPROTO;
		if (i == 2 && digits[i] >> 4)
			return -ERANGE;	/* past 64 bits */
		*mag = *mag << 30 | digits[i];
	}
	return 0;
}
