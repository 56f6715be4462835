// SPDX-License-Identifier: MIT
/*
 * source.c - a frame's line of source, marked.
 *
 * The marker follows what CPython's traceback shows: the line without its
 * leading whitespace, and under it '^' from the expression's column to its
 * end column, converted from UTF-8 bytes to characters; none when the
 * expression spans several lines or is the whole line. (Newer tracebacks
 * draw part of the range as '~'; the range is the same.)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands/dump/source.h"
#include "symbols/linetable.h"
#include "symbols/symbolizer.h"
#include "target/pyproc.h"
#include "target/rootfs.h"
#include "util/text.h"

#define SOURCE_MAX_FILE (64u << 20)
#define SOURCE_MAX_LINE 4096	/* bytes kept of one line */

void dump_source__locate(struct symbolizer *sym, const struct py_rawframe *raw, size_t nraw,
			 struct dump_loc *locs, size_t nlocs)
{
	size_t k = 0;

	for (size_t i = 0; i < nraw && k < nlocs; i++) {
		struct linetable_range r;
		struct py_sym s;
		int rc = symbolizer__resolve(sym, &raw[i], &s);

		if (rc == -ENOENT)
			continue;	/* as resolve_stack: not a frame shown */
		/* an unreadable frame is shown <unknown>, at no line */
		locs[k] = (struct dump_loc){ rc ? -1 : s.line, -1, -1, -1, NULL, false, i, NULL, 0 };
		if (!rc && symbolizer__location(sym, &raw[i], &r) == 0 && r.line == s.line) {
			locs[k].end_line = r.end_line;
			locs[k].col = r.col;
			locs[k].end_col = r.end_col;
		}
		k++;
	}
}

/* Line @want of the open file @f, cut at SOURCE_MAX_LINE bytes. */
static char *line_of(FILE *f, int want)
{
	char *buf = NULL, *out;
	size_t cap = 0;
	ssize_t len;

	for (int n = 1; (len = getline(&buf, &cap, f)) >= 0; n++) {
		if (n < want)
			continue;
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
			len--;
		if (len > SOURCE_MAX_LINE)
			len = SOURCE_MAX_LINE;
		out = strndup(buf, (size_t)len);
		free(buf);
		return out;
	}
	free(buf);
	return NULL;
}

void dump_source__read(pid_t pid, int rootfd, uid_t owner, int64_t start_ns, const char *file,
		       struct dump_loc *l)
{
	struct stat st;
	FILE *f;
	int fd;

	if (l->line <= 0 || file[0] != '/')
		return;		/* "<string>", "<frozen ...>": no file */
	fd = rootfd >= 0 ? rootfs__open_at(rootfd, file, SOURCE_MAX_FILE, &st) :
			   rootfs__open(pid, file, SOURCE_MAX_FILE, &st);
	if (fd < 0)
		return;
	/* Only what the target's user may read itself: a process could name
	 * a root-only file as its code's (compile(src, "/etc/shadow", ...))
	 * and have a line of it printed. */
	if (st.st_uid != owner && !(st.st_mode & S_IROTH)) {
		close(fd);
		return;
	}
	/* newer than the process (by more than the start time's tick): what
	 * it says may not be the code running */
	if (start_ns && (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec >
			start_ns + 10000000ll) {
		l->changed = true;
		close(fd);
		return;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return;
	}
	l->source = line_of(f, l->line);
	fclose(f);
}

/* Characters (UTF-8 lead bytes) in @s[from, to). */
static int chars(const char *s, int from, int to)
{
	int n = 0;

	for (int i = from; i < to; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

void dump_source__print(FILE *out, const struct dump_loc *l, const char *indent)
{
	const char *s = l->source;
	int len, lead = 0, end;

	if (l->changed) {
		fprintf(out, "%s[source changed since the process started: not shown]\n", indent);
		return;
	}
	if (!s)
		return;
	len = (int)strlen(s);
	while (lead < len && (s[lead] == ' ' || s[lead] == '\t' || s[lead] == '\f'))
		lead++;
	end = len;
	while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t'))
		end--;
	if (lead == end)
		return;
	fputs(indent, out);
	put_clean_n(out, s + lead, (size_t)(end - lead));
	fputc('\n', out);
	if (l->col < lead || l->end_col <= l->col || l->end_col > len || l->end_line != l->line ||
	    (l->col == lead && l->end_col >= end))
		return;
	fprintf(out, "%s%*s", indent, chars(s, lead, l->col), "");
	for (int i = chars(s, l->col, l->end_col); i > 0; i--)
		fputc('^', out);
	fputc('\n', out);
}

void dump_loc__free(struct dump_loc *l)
{
	free(l->source);
	free(l->locals);
	l->source = NULL;
	l->locals = NULL;
}
