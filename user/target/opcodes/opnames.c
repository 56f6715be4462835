// SPDX-License-Identifier: MIT
/* opnames.c - see opnames.h. */
#include <stdio.h>
#include "target/opcodes/opnames.h"

const char *opnames__name(uint32_t version_hex, uint8_t op)
{
	const char *const *t;

	if ((version_hex >> 24) != 3)
		return NULL;
	switch ((version_hex >> 16) & 0xff) {
	case 11: t = opnames_311; break;
	case 12: t = opnames_312; break;
	case 13: t = opnames_313; break;
	case 14: t = opnames_314; break;
	case 15: t = opnames_315; break;
	default: return NULL;
	}
	return t[op];
}

const char *opnames__leaf(uint32_t version_hex, uint8_t op, char *buf, size_t len)
{
	const char *name = opnames__name(version_hex, op);

	if (name)
		snprintf(buf, len, "[op] %s", name);
	else
		snprintf(buf, len, "[op] <%u>", op);
	return buf;
}
