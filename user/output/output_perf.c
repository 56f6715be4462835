// SPDX-License-Identifier: MIT
/*
 * output_perf.c - `perf script` text. Its frames' symbols and dsos are named
 * by the rule every text format shares (frame_name.c).
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
 * How each frame's symbol, dso and address are made is documented at the top
 * of frame_name.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "output/internal.h"

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

/*
 * Where frame @i of the sample's @n-frame stack is, when the sample says:
 * native frames (s->frames, reversed) and leaf frames (last) carry their
 * addresses (a leaf's is built in @ka). NULL: not known.
 */
static const struct out_addr *frame_address(const struct out_sample *s,
					    const struct out_frame *fr, uint32_t i, uint32_t n,
					    struct out_addr *ka)
{
	const struct out_addr *a = NULL;

	if (fr->kind == OUT_FRAME_KERNEL && i + s->nleaf >= n) {
		const struct out_leaf *lf = &s->leaf[i - (n - s->nleaf)];

		if (lf->addr) {
			*ka = (struct out_addr){ .pc = lf->addr, .symoff = lf->symoff };
			a = ka;
		}
	} else if (fr->kind == OUT_FRAME_NATIVE && s->addrs && i + s->nleaf < n &&
		   n - s->nleaf - 1 - i < s->nframes) {
		a = &s->addrs[n - s->nleaf - 1 - i];
		if (!a->pc)
			a = NULL;
	}
	return a;
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
	/* Several events: the header names the sample's; its root frame
	 * ("[page-faults]", stack[0]) is the other formats'. */
	for (uint32_t i = n; i-- > (o->opts.nevents > 1 && n > 1);) {
		const struct out_frame *fr = &o->m.frames[stack[i]];
		struct out_addr ka;
		const struct out_addr *a = frame_address(s, fr, i, n, &ka);
		const char *line;
		uint32_t len;

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
