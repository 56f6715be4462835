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
#include "sampling/sampler.h"

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

int out_frame__name(struct out_frame *fr)
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
	fr->addr = out_fnv1a(fr->text);
	return 0;
err:
	free(fn);
	free(fr->text);
	free(fr->dso);
	free(fr->folded);
	fr->text = fr->dso = fr->folded = NULL;
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
