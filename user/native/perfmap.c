/* SPDX-License-Identifier: MIT */
/* perfmap.c - see perfmap.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "native/perfmap.h"
#include "target/procfs.h"
#include "target/rootfs.h"

#define MAX_ENTRIES (1u << 20)	/* a runaway map is read this far */
#define MAX_FILE ((uint64_t)1 << 30)
#define MAX_READ (64u << 20)	/* per read: the rest waits for the next miss */

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
	pid_t pid;
	char path[48];		/* the target's, opened inside its root */
	int have_path;
	off_t read_to;		/* the file is appended to: read from here on */
	off_t size_seen;
	int refused;		/* why the file was last not read (not -ENOENT) */
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
		m->pid = pid;
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

/* Whole lines of @buf into the entries; *@consumed is what they took (a
 * line still being written is left for later). @buf is modified. */
static int add_lines(struct perfmap *m, char *buf, size_t len, size_t *consumed)
{
	struct name_block *b = malloc(sizeof(*b) + len + 1);
	size_t used = 0;
	char *p, *nl;
	int err = 0;

	*consumed = 0;
	if (!b)
		return -ENOMEM;
	for (p = buf; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1) {
		*nl = 0;
		err = add_line(m, p, b, &used);
		if (err)
			break;
	}
	*consumed = (size_t)(p - buf);
	if (used) {
		b->next = m->names;
		m->names = b;
		b = NULL;
		qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
	}
	free(b);
	return err;
}

int perfmap__parse(struct perfmap *m, const char *text, size_t len)
{
	size_t consumed;
	char *buf = malloc(len + 1);
	int err;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, text, len);
	buf[len] = 0;
	err = add_lines(m, buf, len, &consumed);
	free(buf);
	return err;
}

/*
 * The file, opened inside the target's root (rootfs.h: a symlink to a host
 * file, a FIFO or a device is refused), and only when the target's user
 * owns it, as perf requires: else any user could name code in another's
 * process, and a root-owned file is the target's only when it runs as root.
 */
static int open_map(struct perfmap *m, struct stat *st)
{
	uid_t owner;
	int fd, err;

	err = rootfs__owner(m->pid, &owner);
	if (err)
		return err;
	fd = rootfs__open(m->pid, m->path, MAX_FILE, st);
	if (fd >= 0 && st->st_uid != owner) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The lines appended since the last read (a file that shrank was
 * replaced: read from its start, the old names kept alive). */
static int read_more(struct perfmap *m)
{
	struct stat st;
	size_t len, consumed = 0;
	ssize_t got;
	char *buf;
	int fd, err;

	if (!m->have_path)
		return 0;
	fd = open_map(m, &st);
	if (fd < 0 && fd != -ENOENT)
		m->refused = fd;
	if (fd < 0)
		return fd;
	m->refused = 0;
	if (st.st_size == m->size_seen) {
		close(fd);
		return 0;
	}
	if (st.st_size < m->read_to) {
		m->read_to = 0;
		m->n = 0;
	}
	len = (size_t)(st.st_size - m->read_to);
	/* a read cut short is taken up again at the next miss */
	m->size_seen = len > MAX_READ ? -1 : st.st_size;
	if (len > MAX_READ)
		len = MAX_READ;
	buf = malloc(len + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	got = pread(fd, buf, len, m->read_to);
	err = got < 0 ? -errno : 0;
	close(fd);
	if (got > 0) {
		buf[got] = 0;
		err = add_lines(m, buf, (size_t)got, &consumed);
		m->read_to += (off_t)consumed;
	}
	free(buf);
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

int perfmap__refused(const struct perfmap *m)
{
	return m->refused;
}
