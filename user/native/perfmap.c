/* SPDX-License-Identifier: MIT */
/* perfmap.c - see perfmap.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "native/perfmap.h"
#include "target/procfs.h"

#define MAX_ENTRIES (1u << 20)	/* a runaway map is read this far */

struct pm_entry {
	uint64_t start, size;
	uint32_t seq;		/* line order: the later wins */
	const char *name;
};

/* Names are never moved nor freed before the map: rows keep them. */
struct name_block {
	struct name_block *next;
	char text[];
};

struct perfmap {
	char fs_path[96];	/* ours: /proc/PID/root/tmp/perf-N.map */
	char path[48];		/* the target's */
	int have_path;
	off_t read_to;		/* the file is appended to: read from here on */
	off_t size_seen;
	struct pm_entry *e;
	size_t n, cap;
	uint32_t seq;
	struct name_block *names;
};

int perfmap__new(pid_t pid, struct perfmap **out)
{
	struct perfmap *m = calloc(1, sizeof(*m));
	pid_t ns;

	*out = m;
	if (!m)
		return -ENOMEM;
	if (procfs__nspid(pid, 0, &ns) == 0) {
		snprintf(m->path, sizeof(m->path), "/tmp/perf-%d.map", (int)ns);
		snprintf(m->fs_path, sizeof(m->fs_path), "/proc/%d/root%s", (int)pid, m->path);
		m->have_path = 1;
	}
	return 0;
}

void perfmap__free(struct perfmap *m)
{
	if (!m)
		return;
	while (m->names) {
		struct name_block *b = m->names;

		m->names = b->next;
		free(b);
	}
	free(m->e);
	free(m);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One "START SIZE NAME" line (its newline cut) into the entries. */
static int add_line(struct perfmap *m, char *line, struct name_block *b, size_t *used)
{
	uint64_t start, size;
	char *p = line, *end;
	size_t len;

	start = strtoull(p, &end, 16);
	if (end == p || *end != ' ')
		return 0;	/* not a line of the format: skipped */
	p = end + 1;
	size = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || !size)
		return 0;
	p = end + 1;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct pm_entry *e;

		if (m->n >= MAX_ENTRIES)
			return 0;
		e = realloc(m->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		m->e = e;
		m->cap = cap;
	}
	len = strlen(p);
	memcpy(b->text + *used, p, len + 1);
	m->e[m->n++] = (struct pm_entry){ start, size, m->seq++, b->text + *used };
	*used += len + 1;
	return 0;
}

/* The lines appended since the last read (a file that shrank was
 * replaced: read from its start, the old names kept alive). */
static int read_more(struct perfmap *m)
{
	struct name_block *b;
	struct stat stb;
	size_t len, used = 0;
	char *buf, *p, *nl;
	FILE *f;
	int err = 0;

	if (!m->have_path || stat(m->fs_path, &stb) || stb.st_size == m->size_seen)
		return 0;
	m->size_seen = stb.st_size;
	if (stb.st_size < m->read_to) {
		m->read_to = 0;
		m->n = 0;
	}
	if (stb.st_size - m->read_to > 64 << 20)
		return -EFBIG;
	len = (size_t)(stb.st_size - m->read_to);
	f = fopen(m->fs_path, "re");
	if (!f)
		return -errno;
	buf = malloc(len + 1);
	b = malloc(sizeof(*b) + len + 1);
	if (!buf || !b) {
		err = -ENOMEM;
		goto out;
	}
	if (fseeko(f, m->read_to, SEEK_SET) || (len = fread(buf, 1, len, f)) == 0)
		goto out;
	buf[len] = 0;
	/* whole lines only: the writer may be in the middle of one */
	for (p = buf; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1) {
		*nl = 0;
		err = add_line(m, p, b, &used);
		if (err)
			goto out;
	}
	m->read_to += p - buf;
	if (used) {
		b->next = m->names;
		m->names = b;
		b = NULL;
		qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
	}
out:
	free(b);
	free(buf);
	fclose(f);
	return err;
}

static const struct pm_entry *find(const struct perfmap *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* the last entry starting at or below addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr - m->e[lo - 1].start >= m->e[lo - 1].size)
		return NULL;
	return &m->e[lo - 1];
}

const char *perfmap__lookup(struct perfmap *m, uint64_t addr, uint64_t *start)
{
	const struct pm_entry *e = find(m, addr);

	if (!e && read_more(m) == 0)
		e = find(m, addr);
	if (!e)
		return NULL;
	*start = e->start;
	return e->name;
}

const char *perfmap__path(const struct perfmap *m)
{
	return m->path;
}

size_t perfmap__count(const struct perfmap *m)
{
	return m->n;
}
