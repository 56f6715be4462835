// SPDX-License-Identifier: MIT
/*
 * frame_name.c - the frame naming rule that every text format (perf-script,
 * collapsed, the flame graph and its search) shares: a frame's perf-script
 * symbol, its dso, and its text in collapsed stacks.
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
 * COLLAPSED STACKS ("frame;frame;... count") need much less: their readers
 * (flamegraph.pl, inferno, speedscope) split on ';' and take the count after
 * the last space, so a frame there is the same text with only '%', ';',
 * ASCII and C1 controls, U+2028, U+2029, U+FEFF, bytes that are not UTF-8
 * and ':' in <qualname> encoded: spaces, parentheses and quotes are kept
 * ("[GIL wait]", "<task render>"), and decoding %XX again gives the names.
 * The formats that carry names as strings (speedscope, pprof, the flame
 * graph's data, JSON) encode nothing.
 *
 * Frames that are not Python code are in brackets (or <...>), with dso
 * "[pyprof-bpf]", encoded the same way (':' kept):
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
 *
 * NATIVE AND KERNEL FRAMES (what output_perf.c prints of them is documented there)
 *
 * A native frame's symbol is its function's, escaped as above, its dso the
 * DSO's path ("[unknown]" without one); a kernel frame's dso is
 * "[kernel.kallsyms]".
 *
 * Collapsed stacks and the flame graph fold these frames as
 * stackcollapse-perf.pl --kernel does with this text: "[unknown]" becomes
 * "[<dso basename>]", and a frame whose dso is in brackets ([kernel.kallsyms],
 * [vdso]) gets "_[k]" (flamegraph.pl's kernel color). One difference: our
 * marker frames ([GIL wait], [unwind-failed]...: dso [pyprof-bpf]) get no
 * "_[k]", which stackcollapse-perf.pl --kernel would give them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "output/frame_name.h"
#include "types/raw_sample.h"

static int unicode_space(uint32_t c)
{
	return (c >= 0x80 && c <= 0xa0) || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
	       c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 ||
	       c == 0xfeff;
}

/* Which characters a text format encodes (see the rule above). */
enum esc_set {
	ESC_PERF,		/* perf-script: what any of its readers trips on */
	ESC_COLLAPSED,		/* collapsed: ';', '%', line breaks, controls */
};

static int c1_or_separator(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x2028 || c == 0x2029 || c == 0xfeff;
}

static int ascii_encoded(unsigned char c, unsigned char prev, int esc_colon, enum esc_set set)
{
	if (c < 0x20 || c == 0x7f || c == '%' || c == ';' || (c == ':' && esc_colon))
		return 1;
	return set == ESC_PERF && (c == ' ' || c == '(' || c == ')' || c == '"' || c == '\'' ||
				   (c == '>' && prev == '-'));
}

/*
 * Percent-encode @s as documented above into @out (NULL: only measure).
 * Returns the length written (without a NUL).
 */
static size_t escape(const char *s, int esc_colon, enum esc_set set, char *out)
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
			enc = set == ESC_PERF ? unicode_space(cp) : c1_or_separator(cp);
		} else {
			enc = ascii_encoded(*p, prev, esc_colon, set);
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

static char *escape_dup(const char *s, enum esc_set set)
{
	size_t n = escape(s, 0, set, NULL);
	char *r = malloc(n + 1);

	if (!r)
		return NULL;
	escape(s, 0, set, r);
	r[n] = '\0';
	return r;
}

/* "py::<qualname>:<filename>:<line>", encoded for @set; NULL: no memory. */
static char *python_text(const struct out_frame *fr, enum esc_set set)
{
	size_t a = escape(fr->function, 1, set, NULL), b = escape(fr->file, 0, set, NULL);
	char line[16];
	int ll = snprintf(line, sizeof(line), ":%d", fr->line);
	char *r = malloc(4 + a + 1 + b + (size_t)ll + 1);

	if (!r)
		return NULL;
	memcpy(r, "py::", 4);
	escape(fr->function, 1, set, r + 4);
	r[4 + a] = ':';
	escape(fr->file, 0, set, r + 5 + a);
	memcpy(r + 5 + a + b, line, (size_t)ll + 1);
	return r;
}

/*
 * A native or kernel frame @fn (of DSO @dso) as stackcollapse-perf.pl
 * --kernel folds it: a symbol [unknown] is "[<the dso's basename>]", and a
 * frame whose dso is in brackets ([kernel.kallsyms], [vdso]; not [unknown])
 * gets "_[k]". *out stays NULL when that is @fn itself. 0 or -ENOMEM.
 */
static int fold_native(const char *fn, const char *dso, char **out)
{
	const char *base = strrchr(dso, '/');
	int kernel = dso[0] == '[' && !strstr(dso, "unknown");
	size_t len;

	*out = NULL;
	base = base ? base + 1 : dso;
	if (strcmp(fn, "[unknown]") && !kernel)
		return 0;
	len = strlen(fn) + strlen(base) + 8;
	*out = malloc(len);
	if (!*out)
		return -ENOMEM;
	if (strcmp(fn, "[unknown]"))
		snprintf(*out, len, "%s", fn);
	else if (!strcmp(dso, "[unknown]"))
		snprintf(*out, len, "[unknown]");
	else
		snprintf(*out, len, "[%s]", base);
	if (kernel)
		strcat(*out, "_[k]");
	return 0;
}

/* fr->collapsed and fr->folded of a native or kernel frame, fr->dso set. */
static int name_native(struct out_frame *fr, const char *raw_dso)
{
	char *fn = escape_dup(fr->function, ESC_COLLAPSED);
	char *dso = escape_dup(raw_dso, ESC_COLLAPSED);
	int err = -ENOMEM;

	if (!fn || !dso)
		goto out;
	err = fold_native(fn, dso, &fr->collapsed);
	if (!err && !fr->collapsed) {
		fr->collapsed = fn;
		fn = NULL;
	}
	if (!err)
		err = fold_native(fr->function, raw_dso, &fr->folded);
out:
	free(fn);
	free(dso);
	return err;
}

int out_frame__name(struct out_frame *fr)
{
	fr->text = fr->dso = fr->folded = fr->collapsed = NULL;
	if (fr->kind == OUT_FRAME_PYTHON) {
		fr->text = python_text(fr, ESC_PERF);
		fr->collapsed = python_text(fr, ESC_COLLAPSED);
		fr->dso = *fr->file ? escape_dup(fr->file, ESC_PERF) : strdup("[python]");
		if (!fr->text || !fr->collapsed || !fr->dso)
			goto err;
	} else if (fr->kind == OUT_FRAME_NATIVE || fr->kind == OUT_FRAME_KERNEL) {
		/* As perf prints them: the symbol, the DSO's path. */
		const char *dso = fr->kind == OUT_FRAME_KERNEL ? "[kernel.kallsyms]" :
				  *fr->file ? fr->file : "[unknown]";

		fr->text = escape_dup(fr->function, ESC_PERF);
		fr->dso = escape_dup(dso, ESC_PERF);
		if (!fr->text || !fr->dso || name_native(fr, dso))
			goto err;
	} else {
		fr->text = escape_dup(fr->function, ESC_PERF);
		fr->collapsed = escape_dup(fr->function, ESC_COLLAPSED);
		fr->dso = strdup("[pyprof-bpf]");
		if (!fr->text || !fr->collapsed || !fr->dso)
			goto err;
	}
	fr->addr = out_fnv1a(fr->text);
	return 0;
err:
	free(fr->text);
	free(fr->dso);
	free(fr->folded);
	free(fr->collapsed);
	fr->text = fr->dso = fr->folded = fr->collapsed = NULL;
	return -ENOMEM;
}

const char *output__status_name(uint32_t status, char *buf, size_t len)
{
	switch (status) {
	case SAMPLE_TRUNCATED:
		return "[truncated]";
	case SAMPLE_NO_PYSTATE:
		return "[no-python-state]";
	case SAMPLE_READ_FAULT:
		return "[read-fault]";
	case SAMPLE_THREAD_YOUNG:
		return "[thread-start/exit]";
	case SAMPLE_THREAD_EXIT:
		return "[thread-exit]";
	case SAMPLE_EVAL_ENTRY:
		return "[eval-entry]";
	default:
		snprintf(buf, len, "[status-%u]", status);
		return buf;
	}
}
