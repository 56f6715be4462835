/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "native/symindex.h"

struct sym {
	uint64_t addr, end;
	const char *name;
	uint64_t reach;		/* the highest end of this and every lower symbol */
	int bind;
};

/* Names cut short of their version, in chunks that never move. */
struct name_chunk {
	struct name_chunk *next;
	size_t used, cap;
	char data[];
};

struct symindex {
	struct sym *syms;
	size_t n, cap;
	int finished;
	struct name_chunk *names;
	size_t names_bytes;
};

int symindex__new(struct symindex **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void symindex__free(struct symindex *idx)
{
	if (!idx)
		return;
	while (idx->names) {
		struct name_chunk *next = idx->names->next;

		free(idx->names);
		idx->names = next;
	}
	free(idx->syms);
	free(idx);
}

/* @name's first @len bytes, NUL-terminated, in the index's own arena. */
static const char *symindex__copy_name(struct symindex *idx, const char *name, size_t len)
{
	struct name_chunk *c = idx->names;
	char *p;

	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > 16384 ? len + 1 : 16384;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = idx->names;
		c->used = 0;
		c->cap = cap;
		idx->names = c;
		idx->names_bytes += sizeof(*c) + cap;
	}
	p = c->data + c->used;
	memcpy(p, name, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

int symindex__add(struct symindex *idx, uint64_t addr, uint64_t size, const char *name,
		  enum symindex_bind bind)
{
	const char *at;

	if (!size)
		size = 1;
	if (!name || !name[0] || addr + size < addr)
		return 0;
	at = strchr(name, '@');
	if (at && at != name) {
		name = symindex__copy_name(idx, name, (size_t)(at - name));
		if (!name)
			return -ENOMEM;
	}
	if (idx->n == idx->cap) {
		size_t cap = idx->cap ? idx->cap * 2 : 1024;
		struct sym *n = realloc(idx->syms, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		idx->syms = n;
		idx->cap = cap;
	}
	idx->syms[idx->n++] = (struct sym){ .addr = addr, .end = addr + size, .name = name,
					    .bind = (int)bind };
	idx->finished = 0;
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	int c;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->bind != y->bind)
		return x->bind < y->bind ? -1 : 1;
	/* then fewer leading underscores: of two globals, the public name */
	c = (int)strspn(x->name, "_") - (int)strspn(y->name, "_");
	if (c)
		return c;
	/* then by name: the same choice whatever order the table had */
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->end < y->end ? -1 : x->end > y->end;
}

int symindex__finish(struct symindex *idx)
{
	size_t w = 0;
	uint64_t reach = 0;

	if (idx->n)
		qsort(idx->syms, idx->n, sizeof(*idx->syms), sym_cmp);
	/* one entry per address: the preferred name, the longest alias's end */
	for (size_t r = 0; r < idx->n; r++) {
		if (w && idx->syms[w - 1].addr == idx->syms[r].addr) {
			if (idx->syms[r].end > idx->syms[w - 1].end)
				idx->syms[w - 1].end = idx->syms[r].end;
			continue;
		}
		idx->syms[w++] = idx->syms[r];
	}
	idx->n = w;
	for (size_t i = 0; i < idx->n; i++) {
		if (idx->syms[i].end > reach)
			reach = idx->syms[i].end;
		idx->syms[i].reach = reach;
	}
	if (idx->n < idx->cap) {
		/* give back the growth slack: the index lives as long as the module */
		struct sym *n = realloc(idx->syms, (idx->n ? idx->n : 1) * sizeof(*n));

		if (n) {
			idx->syms = n;
			idx->cap = idx->n ? idx->n : 1;
		}
	}
	idx->finished = 1;
	return 0;
}

const char *symindex__lookup(const struct symindex *idx, uint64_t addr, uint64_t *offset)
{
	size_t lo = 0, hi;

	if (!idx || !idx->finished || !idx->n)
		return NULL;
	/* the last symbol starting at or below addr */
	hi = idx->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (idx->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* walk down while a lower symbol may still contain addr (nested ones) */
	for (size_t i = lo; i-- > 0 && idx->syms[i].reach > addr;) {
		if (addr < idx->syms[i].end) {
			if (offset)
				*offset = addr - idx->syms[i].addr;
			return idx->syms[i].name;
		}
	}
	return NULL;
}

size_t symindex__count(const struct symindex *idx)
{
	return idx ? idx->n : 0;
}

size_t symindex__bytes(const struct symindex *idx)
{
	return idx ? sizeof(*idx) + idx->cap * sizeof(*idx->syms) + idx->names_bytes : 0;
}
