// SPDX-License-Identifier: MIT
/*
 * output_perf.c - `perf script` text, and the frame naming rule that every
 * text format (perf-script, collapsed, the flame graph's search) shares.
 *
 * THE PERF-SCRIPT OUTPUT
 *
 * One block per sample, exactly as `perf script` prints a callchain:
 *
 *   python3    1234/1240    [001]  5273.112233:   10101010 cpu-clock: 
 *   	d81f2ac02b9a7e63 py::Worker.hot:/app/work.py:42 (/app/work.py)
 *   	5ab15cd05f3d9e11 py::Worker.run:/app/work.py:30 (/app/work.py)
 *   	0f6e21a9f0c3b1d4 py::<module>:/app/work.py:77 (/app/work.py)
 *   (empty line)
 *
 * - Header: `%s %7d/%-7d [%03d] %12s: %10lu %s: `: comm, pid/tid, cpu, the
 *   sample's CLOCK_MONOTONIC time as secs.usecs, the period (nanoseconds of CPU
 *   the sample stands for; 1 when the recorder gave 0), the event name
 *   (cpu-clock). Times never go backwards: a sample older than the previous one
 *   is printed with the previous time (perf sorts its output; speedscope throws
 *   on time going backwards within a thread).
 * - The comm: every byte outside printable ASCII, and ';', becomes '_'; an
 *   empty comm is "unknown".
 * - Frames, leaf first: TAB, the address as 16-wide hex without 0x, a space,
 *   the symbol, a space, "(dso)". An empty line ends every sample, the last too.
 *
 * NATIVE AND KERNEL FRAMES (--native, --kernel, off-CPU stacks)
 *
 * As perf 6.1's `perf script` prints them here (checked against its output on
 * `perf record --call-graph dwarf` of python3.11 and libz):
 *
 *   	ffffffff81d33df7 read_zero+0x77 ([kernel.kallsyms])
 *   	          1064d6 read+0x16 (/usr/lib/x86_64-linux-gnu/libc.so.6)
 *   	            659c [unknown] (/usr/lib/x86_64-linux-gnu/libz.so.1.3.2)
 *
 * - A DSO's frame: its address relative to where the DSO's file offset 0 is
 *   mapped (what perf prints: map__map_ip, the file offset; the ELF address
 *   for common DSOs, 0x400000 less for a non-PIE executable), its symbol and
 *   "+0x<offset into it>", or "[unknown]" (no offset) without one, and the
 *   DSO's path as /proc/PID/maps gives it ("[vdso]"); "[unknown]" for both
 *   when the pc is in no file.
 * - A kernel frame: its address as is, "symbol+0xoff", "([kernel.kallsyms])".
 * - The symbol is escaped like a Python frame's (a C++ "f(int)" reads
 *   "f%28int%29"); the +0x suffix is what every consumer strips.
 * - A native frame whose address is not known (a raw recording of an older
 *   version) prints the FNV-1a address of its symbol and no offset.
 *
 * Collapsed stacks and the flame graph fold these frames as
 * stackcollapse-perf.pl --kernel does with this text: "[unknown]" becomes
 * "[<dso basename>]", and a frame whose dso is in brackets ([kernel.kallsyms],
 * [vdso]) gets "_[k]" (flamegraph.pl's kernel color). One difference: our
 * marker frames ([GIL wait], [unwind-failed]...: dso [pyprof-bpf]) get no
 * "_[k]", which stackcollapse-perf.pl --kernel would give them.
 *
 * FRAME NAMES
 *
 * A Python frame's symbol is
 *
 *   py::<qualname>:<filename>:<line>
 *
 * the shape CPython's own `-X perf` uses (py::<qualname>:<filename>) with the
 * line appended. <line> is the executing line (0 when unknown); with
 * --no-lines it is the function's first line (co_firstlineno), so that all
 * samples of a function share one frame. The dso is <filename> ("[python]"
 * when there is none). Parse a symbol back by taking the qualname up to the
 * first ':' after "py::", the line after the last ':', the filename between.
 *
 * To survive FlameGraph's stackcollapse-perf.pl (strips a trailing "+0x..",
 * cuts a symbol at its first '(', turns ';' into ':', deletes quotes, splits
 * on "->"), speedscope's importer (drops a frame whose dso has whitespace) and
 * the Firefox Profiler (a dso ends at the first ')'), <qualname> and
 * <filename> are percent-encoded (%XX, upper-case hex, as in URLs) where they
 * contain:
 *   - '%' itself, '(', ')', ';', '"', '\''
 *   - ASCII whitespace and control characters (0x00-0x20, 0x7f)
 *   - Unicode whitespace and C1 controls (U+0080-U+009F, U+00A0, U+1680,
 *     U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF)
 *   - bytes that are not valid UTF-8
 *   - a '>' right after a '-' (FlameGraph reads "->" as an inlining arrow)
 *   - ':' in <qualname> only (it ends the qualname)
 * Everything else, UTF-8 names included, is kept as is. The symbol never ends
 * in "+0x<hex>" (it ends in ":<line>"), so every consumer above shows exactly
 * this text, and decoding %XX gives back the original names.
 *
 * Frames that are not Python code are in brackets, with dso "[pyprof-bpf]",
 * escaped the same way (':' kept):
 *   [truncated]         outermost: the stack was deeper than the depth limit
 *   [read-fault]        outermost: reading the rest of the stack failed
 *   [no-python-state]   the thread had no Python thread state
 *   [no-python-frames]  the thread had a state but no Python frame
 *   [thread-start/exit] no state: a thread younger than 20 ms, starting or
 *                       (a short thread) already ending; a main thread
 *                       with under 100 ms of CPU time (starting)
 *   [thread-exit]       no state any more: the thread is ending
 *   [eval-entry]        3.11/3.12: entering an evaluation loop from C, its
 *                       frame not yet set: no stack at this instant
 *   [status-N]          a status this version does not know
 *   [<comm>:<pid>]      with comm_root: the process, outermost
 *   [<thread>:<tid>]    with --threads: the thread, below the process
 *
 * The address is the 64-bit FNV-1a hash of the symbol text: stable for a
 * (qualname, file, line) across runs and machines, and distinct in practice.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/output.h"

static int unicode_space(uint32_t c)
{
	return (c >= 0x80 && c <= 0xa0) || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
	       c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 ||
	       c == 0xfeff;
}

/*
 * Percent-encode @s as documented above into @out (NULL: only measure).
 * Returns the length written (without a NUL).
 */
static size_t escape(const char *s, int esc_colon, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;
	unsigned char prev = 0;

	while (*p) {
		uint32_t cp;
		int len = out_utf8_seq(p, &cp), enc;

		if (!len) {
			len = 1;
			enc = 1;
		} else if (len > 1) {
			enc = unicode_space(cp);
		} else {
			unsigned char c = *p;

			enc = c <= 0x20 || c == 0x7f || c == '%' || c == '(' || c == ')' ||
			      c == ';' || c == '"' || c == '\'' || (c == ':' && esc_colon) ||
			      (c == '>' && prev == '-');
		}
		for (int i = 0; i < len; i++) {
			if (enc) {
				if (out) {
					out[n] = '%';
					out[n + 1] = hex[p[i] >> 4];
					out[n + 2] = hex[p[i] & 15];
				}
				n += 3;
			} else {
				if (out)
					out[n] = (char)p[i];
				n++;
			}
		}
		prev = p[len - 1];
		p += len;
	}
	return n;
}

static char *escape_dup(const char *prefix, const char *s, int esc_colon, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix), n = escape(s, esc_colon, NULL);
	char *r = malloc(pl + n + sl + 1);

	if (!r)
		return NULL;
	memcpy(r, prefix, pl);
	escape(s, esc_colon, r + pl);
	memcpy(r + pl + n, suffix, sl + 1);
	return r;
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/*
 * A native or kernel frame as stackcollapse-perf.pl --kernel folds it: a
 * symbol [unknown] is "[<the dso's basename>]", and a frame whose dso is in
 * brackets ([kernel.kallsyms], [vdso]; not [unknown]) gets "_[k]".
 * fr->folded stays NULL when that is fr->text. 0 or -ENOMEM.
 */
static int name_folded(struct out_frame *fr)
{
	const char *base = strrchr(fr->dso, '/');
	int kernel = fr->dso[0] == '[' && !strstr(fr->dso, "unknown");
	size_t len;

	base = base ? base + 1 : fr->dso;
	if (strcmp(fr->text, "[unknown]") && !kernel)
		return 0;
	len = strlen(fr->text) + strlen(base) + 8;
	fr->folded = malloc(len);
	if (!fr->folded)
		return -ENOMEM;
	if (strcmp(fr->text, "[unknown]"))
		snprintf(fr->folded, len, "%s", fr->text);
	else if (!strcmp(fr->dso, "[unknown]"))
		snprintf(fr->folded, len, "[unknown]");
	else
		snprintf(fr->folded, len, "[%s]", base);
	if (kernel)
		strcat(fr->folded, "_[k]");
	return 0;
}

int output_perf__name_frame(struct out_frame *fr)
{
	char line[16];
	char *fn = NULL;

	fr->text = fr->dso = fr->folded = NULL;
	if (fr->kind == OUT_FRAME_PYTHON) {
		size_t a, b;

		fn = escape_dup("py::", fr->function, 1, ":");
		snprintf(line, sizeof(line), ":%d", fr->line);
		fr->dso = *fr->file ? escape_dup("", fr->file, 0, "") : strdup("[python]");
		if (!fn || !fr->dso)
			goto err;
		a = strlen(fn);
		b = escape(fr->file, 0, NULL);
		fr->text = malloc(a + b + strlen(line) + 1);
		if (!fr->text)
			goto err;
		memcpy(fr->text, fn, a);
		escape(fr->file, 0, fr->text + a);
		strcpy(fr->text + a + b, line);
		free(fn);
	} else if (fr->kind == OUT_FRAME_NATIVE) {
		/* As perf prints a native frame: the symbol, the DSO's path. */
		fr->text = escape_dup("", fr->function, 0, "");
		fr->dso = *fr->file ? escape_dup("", fr->file, 0, "") : strdup("[unknown]");
		if (!fr->text || !fr->dso || name_folded(fr))
			goto err;
	} else {
		fr->text = escape_dup("", fr->function, 0, "");
		fr->dso = strdup(fr->kind == OUT_FRAME_KERNEL ? "[kernel.kallsyms]" : "[pyprof-bpf]");
		if (!fr->text || !fr->dso)
			goto err;
		if (fr->kind == OUT_FRAME_KERNEL && name_folded(fr))
			goto err;
	}
	fr->addr = fnv1a(fr->text);
	return 0;
err:
	free(fn);
	free(fr->text);
	free(fr->dso);
	free(fr->folded);
	fr->text = fr->dso = fr->folded = NULL;
	return -ENOMEM;
}

/* The address perf script prints: a DSO's frames relative to where its
 * file offset 0 is mapped (map__map_ip), kernel and unknown ones as they are. */
static uint64_t perf_address(const struct out_addr *a)
{
	if (a->map_end && a->pc >= a->map_base)
		return a->pc - a->map_base;
	return a->pc;
}

struct perf_state {
	uint64_t last_ts;
	const char *event;
	/* By frame id: the frame's whole line (Python and marker frames, and
	 * frames with no address), or " (dso)\n" (native and kernel frames,
	 * whose address and offset change per sample); built on first use. */
	char **lines;
	uint32_t *lens;		/* bit 31: the line is the " (dso)\n" form */
	uint32_t nlines, cap;
	char *buf;		/* the sample's text, written with one fwrite */
	size_t buf_cap;
};

/* @v as perf's "%16lx": lower-case hex, right-aligned in 16 columns. */
static size_t put_hex16(char *p, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;

	do {
		tmp[n++] = hex[v & 15];
		v >>= 4;
	} while (v);
	memset(p, ' ', 16 - (size_t)n);
	for (int i = 0; i < n; i++)
		p[16 - 1 - i] = tmp[i];
	return 16;
}

/* "+0x<v>" */
static size_t put_off(char *p, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	size_t n = 0, k = 0;

	do {
		tmp[n++] = hex[v & 15];
		v >>= 4;
	} while (v);
	p[k++] = '+';
	p[k++] = '0';
	p[k++] = 'x';
	while (n)
		p[k++] = tmp[--n];
	return k;
}

/* The cached text of frame @id (see struct perf_state); NULL: ENOMEM. */
static const char *frame_line(struct perf_state *st, const struct out_frame *fr, uint32_t id,
			      int addressed, uint32_t *len)
{
	size_t n;
	char *l;

	if (id >= st->nlines) {
		uint32_t cap = st->cap, old = st->nlines;

		if (out_grow((void **)&st->lines, &cap, (uint64_t)id + 1, sizeof(*st->lines)) ||
		    out_grow((void **)&st->lens, &st->cap, (uint64_t)id + 1, sizeof(*st->lens)))
			return NULL;
		st->nlines = st->cap < cap ? st->cap : cap;
		memset(st->lines + old, 0, (st->nlines - old) * sizeof(*st->lines));
	}
	if (st->lines[id] && !(st->lens[id] >> 31) == !addressed) {
		*len = st->lens[id] & ~(1u << 31);
		return st->lines[id];
	}
	/* Not yet, or in the other form (a frame printed with and without an
	 * address: cannot be in one recording, but costs nothing to get right). */
	free(st->lines[id]);
	st->lines[id] = NULL;
	n = strlen(fr->text) + strlen(fr->dso) + 24;
	l = malloc(n);
	if (!l)
		return NULL;
	if (addressed)
		n = (size_t)snprintf(l, n, " (%s)\n", fr->dso);
	else
		n = (size_t)snprintf(l, n, "\t%16" PRIx64 " %s (%s)\n", fr->addr, fr->text, fr->dso);
	st->lines[id] = l;
	st->lens[id] = (uint32_t)n | (addressed ? 1u << 31 : 0);
	*len = (uint32_t)n;
	return l;
}

static int perf_add(struct output *o, const struct out_sample *s, uint32_t thread,
		    const uint32_t *stack, uint32_t n)
{
	struct perf_state *st = o->priv;
	const struct out_thread *t = &o->m.threads[thread];
	char ts[32], hdr[256];
	uint64_t when;
	size_t pos, need;
	int hl;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return -ENOMEM;
		st->event = o->opts.event && *o->opts.event ? o->opts.event : "cpu-clock";
		o->priv = st;
	}
	when = s->ts_ns / 1000 < st->last_ts ? st->last_ts : s->ts_ns / 1000;
	st->last_ts = when;
	snprintf(ts, sizeof(ts), "%" PRIu64 ".%06" PRIu64, when / 1000000, when % 1000000);
	hl = snprintf(hdr, sizeof(hdr), "%s %7d/%-7d [%03u] %12s: %10" PRIu64 " %s: \n",
		      t->comm, (int)s->pid, (int)s->tid, s->cpu, ts, out_weight(s),
		      s->event ? s->event : st->event);
	if (hl < 0)
		return -EINVAL;
	need = (size_t)hl + 2;
	for (uint32_t i = 0; i < n; i++) {
		const struct out_frame *fr = &o->m.frames[stack[i]];

		need += strlen(fr->text) + strlen(fr->dso) + 48;
	}
	if (need > st->buf_cap) {
		char *b = realloc(st->buf, need);

		if (!b)
			return -ENOMEM;
		st->buf = b;
		st->buf_cap = need;
	}
	if ((size_t)hl < sizeof(hdr))
		memcpy(st->buf, hdr, (size_t)hl);
	else
		snprintf(st->buf, need, "%s %7d/%-7d [%03u] %12s: %10" PRIu64 " %s: \n", t->comm,
			 (int)s->pid, (int)s->tid, s->cpu, ts, out_weight(s),
			 s->event ? s->event : st->event);
	pos = (size_t)hl;
	for (uint32_t i = n; i-- > 0;) {
		const struct out_frame *fr = &o->m.frames[stack[i]];
		const struct out_addr *a = NULL;
		struct out_addr ka;
		const char *line;
		uint32_t len;

		/* Native frames (s->frames, reversed) and leaf frames (last)
		 * carry their addresses. */
		if (fr->kind == OUT_FRAME_KERNEL && i + s->nleaf >= n) {
			const struct out_leaf *lf = &s->leaf[i - (n - s->nleaf)];

			if (lf->addr) {
				ka = (struct out_addr){ .pc = lf->addr, .symoff = lf->symoff };
				a = &ka;
			}
		} else if (fr->kind == OUT_FRAME_NATIVE && s->addrs && i + s->nleaf < n &&
			   n - s->nleaf - 1 - i < s->nframes) {
			a = &s->addrs[n - s->nleaf - 1 - i];
			if (!a->pc)
				a = NULL;
		}
		line = frame_line(st, fr, stack[i], a != NULL, &len);
		if (!line)
			return -ENOMEM;
		if (a) {
			size_t tl = strlen(fr->text);

			st->buf[pos++] = '\t';
			pos += put_hex16(st->buf + pos, perf_address(a));
			st->buf[pos++] = ' ';
			memcpy(st->buf + pos, fr->text, tl);
			pos += tl;
			if (strcmp(fr->text, "[unknown]"))
				pos += put_off(st->buf + pos, a->symoff);
		}
		memcpy(st->buf + pos, line, len);
		pos += len;
	}
	st->buf[pos++] = '\n';
	fwrite(st->buf, 1, pos, o->f);
	return output__check_io(o);
}

static void perf_free(struct output *o)
{
	struct perf_state *st = o->priv;

	if (st) {
		for (uint32_t i = 0; i < st->nlines; i++)
			free(st->lines[i]);
		free(st->lines);
		free(st->lens);
		free(st->buf);
		free(st);
	}
	o->priv = NULL;
}

const struct output_ops output_perf_ops = {
	.aggregate = 0,
	.add = perf_add,
	.finish = NULL,
	.free_priv = perf_free,
};
