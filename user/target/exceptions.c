// SPDX-License-Identifier: MIT
/* exceptions.c - see exceptions.h. */
#include <errno.h>
#include "target/exc_offsets.h"
#include "target/exceptions.h"
#include "target/remote_mem.h"

/* @obj's type when @obj is an exception instance, else 0. */
static int exception_type(const struct pyproc *p, uint64_t obj, uint64_t *type)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t t = 0, flags = 0;
	int rc;

	*type = 0;
	rc = remote_read_u64(pyproc__pid(p), obj + o->ob_type, &t);
	if (!rc && t)
		rc = remote_read_u64(pyproc__pid(p), t + o->type_tp_flags, &flags);
	if (!rc && (flags & EXC_TPFLAGS_BASE_EXC))
		*type = t;
	return rc;
}

/* exceptions__type(), and how many items of the stack it read (@depth). */
static int walk(const struct pyproc *p, uint64_t tstate, uint64_t *type, int *depth)
{
	const struct py_offsets *o = pyproc__offsets(p);
	pid_t pid = pyproc__pid(p);
	uint64_t cur = 0, item = 0, it[2], saved = 0;
	int rc, power = 1, lam = 0;

	*type = 0;
	*depth = 0;
	if (!o->tstate_exc_info)
		return -ENOTSUP;
	rc = remote_read_u64(pid, tstate + o->tstate_exc_current, &cur);
	if (!rc && cur)
		rc = exception_type(p, cur, type);
	if (rc || *type)
		return rc;
	rc = remote_read_u64(pid, tstate + o->tstate_exc_info, &item);
	for (int i = 0; !rc && item && i < EXC_CHAIN_MAX; i++) {
		rc = remote_read(pid, item, it, sizeof(it));
		*depth = i + 1;
		if (!rc && it[EXC_ITEM_VALUE / 8])
			rc = exception_type(p, it[EXC_ITEM_VALUE / 8], type);
		if (rc || *type)
			return rc;
		item = it[EXC_ITEM_PREVIOUS / 8];
		/* A chain that comes back to an item (a corrupted one: CPython's
		 * never does) ends here, as one too long to walk does (Brent). */
		if (item == saved)
			break;
		if (++lam == power) {
			saved = item;
			power <<= 1;
			lam = 0;
		}
	}
	if (!rc && item)
		*type = EXC_TYPE_CHAIN_CUT;
	return rc;
}

int exceptions__type(const struct pyproc *p, uint64_t tstate, uint64_t *type)
{
	int depth;

	return walk(p, tstate, type, &depth);
}

#define STEADY_TRIES 4

int exceptions__type_steady(struct pyproc *p, uint64_t tstate, uint64_t *type)
{
	uint64_t before, after, again, seen = 0;
	int rc = 0, depth, depth2;

	*type = 0;
	for (int i = 0; i < STEADY_TRIES; i++) {
		again = 0;
		rc = pyproc__current_frame(p, tstate, &before);
		if (!rc)
			rc = walk(p, tstate, type, &depth);
		if (!rc)
			rc = walk(p, tstate, &again, &depth2);
		if (!rc)
			rc = pyproc__current_frame(p, tstate, &after);
		/* Two walks that agree, the same frame around them. */
		if (!rc && before == after && again == *type && depth2 == depth)
			return 0;
		/* (a read that failed may be a torn walk's too: one more try) */
		seen = seen ? seen : *type ? *type : again;
	}
	if (rc && !seen)
		return rc;
	/* Never still: a torn walk misses an exception (it ends at an item
	 * just unlinked) far more easily than it makes one up (an item's
	 * exception must be an instance of an exception type), so one that
	 * any walk saw is the answer. */
	*type = seen;
	return 0;
}

int exceptions__type_name(const struct pyproc *p, uint64_t type, char *buf, size_t len)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t name = 0;
	size_t n = 0;
	int rc;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	rc = remote_read_u64(pyproc__pid(p), type + o->type_tp_name, &name);
	if (!rc && !name)
		rc = -EFAULT;
	/* One byte at a time would be slow; a name near a page's end may
	 * not be readable whole: shorter reads then. */
	for (size_t want = len - 1; !rc && want; want /= 2) {
		if (!remote_read(pyproc__pid(p), name, buf, want)) {
			buf[want] = '\0';
			break;
		}
		if (want == 1)
			rc = -EFAULT;
	}
	if (rc)
		return rc;
	while (buf[n] >= 0x20 && buf[n] < 0x7f)
		n++;
	buf[n] = '\0';
	return n ? 0 : -EILSEQ;
}
