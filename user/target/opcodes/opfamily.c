// SPDX-License-Identifier: MIT
/* opfamily.c - see opfamily.h. */
#include <stddef.h>
#include "target/opcodes/opfamily.h"

const struct opfamily *opfamily__table(uint32_t version_hex)
{
	if ((version_hex >> 24) != 3)
		return NULL;
	switch ((version_hex >> 16) & 0xff) {
	case 11: return opfamily_311;
	case 12: return opfamily_312;
	default: return NULL;
	}
}
