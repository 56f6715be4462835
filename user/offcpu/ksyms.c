/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "offcpu/ksyms.h"

struct ksym {
	uint64_t addr;
	uint32_t name;		/* offset into the arena */
	uint32_t rank;		/* preference among aliases; fills the padding */
};

struct ksyms {
	struct ksym *syms;	/* sorted by address, one per address */
	size_t nsyms, syms_cap;
	char *names;		/* every name, NUL-terminated, end to end */
	size_t names_len, names_cap;
};

/* Text symbols only, ranked for aliases: global, weak, local, local weak. */
static int type_rank(char type)
{
	switch (type) {
	case 'T': return 0;
	case 'W': return 1;
	case 't': return 2;
	case 'w': return 3;
	default: return -1;
	}
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	/* then file order (arena offsets grow with it): a deterministic sort */
	return x->name < y->name ? -1 : x->name > y->name;
}

static int ksyms__add(struct ksyms *k, uint64_t addr, int rank, const char *name, size_t len)
{
	/* 32-bit offsets keep an entry at 16 bytes; 4 GB of names is not a kernel */
	if (len >= UINT32_MAX - k->names_len)
		return -E2BIG;
	if (k->nsyms == k->syms_cap) {
		size_t cap = k->syms_cap ? k->syms_cap * 2 : 4096;
		struct ksym *n = realloc(k->syms, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		k->syms = n;
		k->syms_cap = cap;
	}
	if (k->names_cap - k->names_len < len + 1) {
		size_t cap = k->names_cap ? k->names_cap : 65536;
		char *n;

		while (cap - k->names_len < len + 1)
			cap *= 2;
		n = realloc(k->names, cap);
		if (!n)
			return -ENOMEM;
		k->names = n;
		k->names_cap = cap;
	}
	memcpy(k->names + k->names_len, name, len);
	k->names[k->names_len + len] = '\0';
	k->syms[k->nsyms++] = (struct ksym){
		.addr = addr, .name = (uint32_t)k->names_len, .rank = (uint32_t)rank,
	};
	k->names_len += len + 1;
	return 0;
}

/*
 * One line, "ADDR TYPE NAME[\t[MODULE]]": its text symbol added, or nothing
 * for other types and for a zero address (*zeros counts those).
 */
static int ksyms__parse_line(struct ksyms *k, char *line, size_t *zeros)
{
	uint64_t addr;
	size_t len;
	char *end;
	int rank;

	if (line[0] == '\n' || line[0] == '\0')
		return 0;
	errno = 0;
	addr = strtoull(line, &end, 16);
	if (errno || end == line || end[0] != ' ' || end[1] == '\0' || end[2] != ' ')
		return -EINVAL;
	rank = type_rank(end[1]);
	if (rank < 0)
		return 0;
	/* a module's "\t[name]" is dropped: the function name is what a stack shows */
	len = strcspn(end + 3, "\t\n");
	if (len == 0)
		return -EINVAL;
	if (addr == 0) {
		(*zeros)++;
		return 0;
	}
	return ksyms__add(k, addr, rank, end + 3, len);
}

/* Sorts, keeps the best-ranked symbol of each address, gives back the slack. */
static void ksyms__finish(struct ksyms *k)
{
	size_t out = 0;
	void *n;

	qsort(k->syms, k->nsyms, sizeof(*k->syms), ksym_cmp);
	for (size_t i = 0; i < k->nsyms; i++) {
		if (out && k->syms[out - 1].addr == k->syms[i].addr)
			continue;
		k->syms[out++] = k->syms[i];
	}
	k->nsyms = out;
	/* a failed shrink keeps the larger block, which is still valid */
	n = realloc(k->syms, k->nsyms * sizeof(*k->syms));
	if (n) {
		k->syms = n;
		k->syms_cap = k->nsyms;
	}
	n = realloc(k->names, k->names_len);
	if (n) {
		k->names = n;
		k->names_cap = k->names_len;
	}
}

int ksyms__load_file(const char *path, struct ksyms **out)
{
	struct ksyms *k;
	size_t zeros = 0, cap = 0;
	char *line = NULL;
	FILE *f;
	int err = 0;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	f = fopen(path, "re");
	if (!f) {
		err = -errno;
		goto err_free;
	}
	/* kallsyms is generated per read(): fewer, larger reads load faster */
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	while (getline(&line, &cap, f) >= 0) {
		err = ksyms__parse_line(k, line, &zeros);
		if (err)
			goto err_close;
	}
	if (ferror(f)) {
		err = errno ? -errno : -EIO;
		goto err_close;
	}
	if (k->nsyms == 0) {
		/* kptr_restrict shows every address as 0 to those it hides them from */
		err = zeros ? -EPERM : -ENODATA;
		goto err_close;
	}
	free(line);
	fclose(f);
	ksyms__finish(k);
	*out = k;
	return 0;

err_close:
	free(line);
	fclose(f);
err_free:
	ksyms__free(k);
	return err;
}

int ksyms__load(struct ksyms **out)
{
	return ksyms__load_file("/proc/kallsyms", out);
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

const char *ksyms__name(const struct ksyms *k, uint64_t addr, uint64_t *offset)
{
	size_t lo = 0, hi = k->nsyms;
	const struct ksym *s;

	/* the first symbol above addr; the one before it contains addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &k->syms[lo - 1];
	if (addr - s->addr > KSYMS_MAX_OFFSET)
		return NULL;
	if (offset)
		*offset = addr - s->addr;
	return k->names + s->name;
}

size_t ksyms__count(const struct ksyms *k)
{
	return k->nsyms;
}

size_t ksyms__bytes(const struct ksyms *k)
{
	return sizeof(*k) + k->syms_cap * sizeof(*k->syms) + k->names_cap;
}
