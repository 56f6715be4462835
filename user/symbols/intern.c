/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "symbols/intern.h"

struct intern {
	char **slots;		/* open addressing, power-of-two size */
	size_t cap, count;
};

static uint64_t hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

int intern__new(struct intern **out)
{
	struct intern *in = calloc(1, sizeof(*in));

	if (!in)
		return -ENOMEM;
	in->cap = 1024;
	in->slots = calloc(in->cap, sizeof(*in->slots));
	if (!in->slots) {
		free(in);
		return -ENOMEM;
	}
	*out = in;
	return 0;
}

void intern__free(struct intern *in)
{
	if (!in)
		return;
	for (size_t i = 0; i < in->cap; i++)
		free(in->slots[i]);
	free(in->slots);
	free(in);
}

static int grow(struct intern *in)
{
	size_t ncap = in->cap * 2;
	char **n = calloc(ncap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < in->cap; i++) {
		char *s = in->slots[i];
		size_t j;

		if (!s)
			continue;
		for (j = hash(s, strlen(s)) & (ncap - 1); n[j]; j = (j + 1) & (ncap - 1))
			;
		n[j] = s;
	}
	free(in->slots);
	in->slots = n;
	in->cap = ncap;
	return 0;
}

const char *intern__get(struct intern *in, const char *s, size_t len)
{
	size_t j;
	char *copy;

	if ((in->count + 1) * 4 > in->cap * 3 && grow(in))
		return NULL;
	for (j = hash(s, len) & (in->cap - 1); in->slots[j]; j = (j + 1) & (in->cap - 1)) {
		const char *t = in->slots[j];

		if (strncmp(t, s, len) == 0 && t[len] == '\0')
			return t;
	}
	copy = malloc(len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = '\0';
	in->slots[j] = copy;
	in->count++;
	return copy;
}
