/* SPDX-License-Identifier: MIT */
/* push.c - the store kinds by name (push.h). */
#include <string.h>
#include "agent/push.h"

const struct push_kind *push__kind(const char *name)
{
	if (!strcmp(name, push_pyroscope.name))
		return &push_pyroscope;
	if (!strcmp(name, push_parca.name))
		return &push_parca;
	if (!strcmp(name, push_otlp.name))
		return &push_otlp;
	return NULL;
}
