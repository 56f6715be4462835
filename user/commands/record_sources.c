// SPDX-License-Identifier: MIT
/* record_sources.c - source files noted from the samples, read from a target's root
 * between polls (record_sources.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands/record_sources.h"
#include "output/tables.h"
#include "target/rootfs.h"

/* All of @fd's @size bytes into a new buffer; -EIO when the file changed size. */
static int read_all(int fd, size_t size, char **out)
{
	char *buf = malloc(size + 1);
	size_t got = 0;

	if (!buf)
		return -ENOMEM;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

/*
 * Only what the target's user may read itself: a file it owns, or anyone
 * may read. Else a process could name a root-only file as its code's file
 * (compile(src, "/etc/shadow", "exec")) and have us copy it into the profile.
 */
static int readable_by(pid_t pid, const struct stat *st)
{
	uid_t owner;

	if (rootfs__owner(pid, &owner))
		return 0;
	return st->st_uid == owner || (st->st_mode & S_IROTH);
}

/*
 * Read @path as @pid sees it into @out: path copied, text malloc'd, or no
 * text with a flag saying why (a relative or pseudo path like "<string>" is
 * not read; more than @budget bytes is OUT_SRC_TOO_BIG). OUT_SRC_CHANGED
 * when its mtime is after @start_ns. Returns 0 or -ENOMEM; free the fields
 * with release().
 */
static int read_source(pid_t pid, const char *path, uint64_t start_ns, uint64_t budget,
		       struct out_source *out)
{
	struct stat st;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	out->path = strdup(path);
	if (!out->path)
		return -ENOMEM;
	out->flags = OUT_SRC_UNREADABLE;
	if (path[0] != '/')
		return 0;
	fd = rootfs__open(pid, path, OUT_SRC_MAX_FILE, &st);
	if (fd == -EFBIG)
		out->flags = OUT_SRC_TOO_BIG;
	if (fd < 0)
		return 0;
	if (!readable_by(pid, &st)) {
		close(fd);
		return 0;
	}
	out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
	if ((uint64_t)st.st_size > budget) {
		out->flags = OUT_SRC_TOO_BIG;
		close(fd);
		return 0;
	}
	rc = read_all(fd, (size_t)st.st_size, &out->text);
	close(fd);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return 0;	/* it changed while read: unreadable */
	out->len = (size_t)st.st_size;
	out->flags = out->mtime_ns > start_ns ? OUT_SRC_CHANGED : 0;
	if (memchr(out->text, 0, out->len)) {
		free(out->text);
		out->text = NULL;
		out->len = 0;
		out->flags = OUT_SRC_BINARY;
	}
	return 0;
}

static void release(struct out_source *src)
{
	free(src->path);
	free(src->text);
	src->path = src->text = NULL;
}

int record_sources__note(struct record_sources *rs, const struct out_sample *s)
{
	uint32_t n = s->unchanged < s->nframes ? s->nframes - s->unchanged : 0;

	for (uint32_t i = 0; i < n; i++) {
		const char *file = s->frames[i].file;
		struct out_source seen = { .path = (char *)file };
		int rc;

		if ((s->kinds && s->kinds[i] != OUT_FRAME_PYTHON) || !file || file[0] != '/' ||
		    rs->seen.n >= OUT_SRC_MAX_FILES ||
		    out_sources__find(&rs->seen, file) != OUT_NONE)
			continue;
		rc = out_grow((void **)&rs->todo, &rs->todo_cap, (uint64_t)rs->ntodo + 1,
			      sizeof(*rs->todo));
		if (!rc)
			rc = out_sources__add(&rs->seen, &seen);
		if (rc)
			return rc;
		rs->todo[rs->ntodo++] = (struct record_source_todo){ s->pid, rs->seen.n - 1 };
	}
	return 0;
}

int record_sources__read_noted(struct record_sources *rs, record_source_fn fn, void *ctx)
{
	int rc = 0;

	for (uint32_t i = 0; i < rs->ntodo && !rc; i++) {
		const struct record_source_todo *t = &rs->todo[i];
		struct out_source src;

		rc = read_source(t->pid, rs->seen.v[t->seen].path, rs->start_ns,
				 OUT_SRC_MAX_ALL - rs->bytes, &src);
		if (rc) {
			release(&src);
			break;
		}
		rs->bytes += src.len;
		rc = fn(ctx, &src);
		release(&src);
	}
	rs->ntodo = 0;
	return rc;
}

void record_sources__free(struct record_sources *rs)
{
	out_sources__clear(&rs->seen);
	free(rs->todo);
	rs->todo = NULL;
	rs->ntodo = rs->todo_cap = 0;
	rs->bytes = 0;
}
