// SPDX-License-Identifier: MIT
/*
 * verifier.c - what the kernel's verifier said of the programs it loaded.
 *
 * Each program is loaded with the verifier's statistics log
 * (BPF_LOG_STATS: a few lines, no instruction trace), into a buffer of
 * its own. A program accepted says how many instructions the verifier
 * processed against the kernel's limit, and its stack depth (its own frame
 * and each subprogram's, "stack depth 320+0+48"); a program rejected ends its
 * log with why. -v prints the figures of every program loaded (issue #33:
 * each kernel of the test matrix is checked for headroom), a rejection's
 * error carries its reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/bpf/internal.h"

/* The stack every call chain of a program shares (the kernel's MAX_BPF_STACK). */
#define BPF_STACK_LIMIT 512

int verifier__parse(const char *log, struct verifier_figures *f)
{
	const char *p = strstr(log, "processed ");
	const char *st;
	unsigned long insns, limit;

	memset(f, 0, sizeof(*f));
	if (!p || sscanf(p, "processed %lu insns (limit %lu)", &insns, &limit) != 2 || !limit)
		return -ENOENT;
	f->insns = insns;
	f->limit = limit;
	f->stack_limit = BPF_STACK_LIMIT;
	st = strstr(log, "stack depth ");
	if (st) {
		/* "stack depth 320+0+48": the main program's frame, then each
		 * subprogram's. The verifier itself refuses a call chain past
		 * 512 bytes; the headroom left is the largest frame's. */
		char *end;

		st += strlen("stack depth ");
		for (;;) {
			unsigned long v = strtoul(st, &end, 10);

			if (end == st)
				break;
			if (v > f->stack)
				f->stack = v;
			f->subprogs++;
			if (*end != '+')
				break;
			st = end + 1;
		}
	}
	f->known = true;
	return 0;
}

void verifier__reason(const char *log, char *out, size_t len)
{
	const char *end = log + strlen(log), *line;

	/* The last line that is not a statistic, nor a global function's
	 * check passed (5.10 logs those at any level): the verdict. */
	while (end > log) {
		while (end > log && (end[-1] == '\n' || end[-1] == ' '))
			end--;
		line = end;
		while (line > log && line[-1] != '\n')
			line--;
		if (end > line && strncmp(line, "processed ", 10) && strncmp(line, "stack depth", 11) &&
		    strncmp(line, "verification time", 17) && strncmp(line, "Func#", 5) &&
		    strncmp(line, "Validating ", 11)) {
			snprintf(out, len, "%.*s", (int)(end - line), line);
			return;
		}
		end = line;
	}
	if (len)
		out[0] = '\0';
}

bool verifier__near_limit(const struct verifier_figures *f, unsigned int pct)
{
	return f->known && (f->insns * 100 >= (unsigned long)(100 - pct) * f->limit ||
			    (f->stack_limit &&
			     f->stack * 100 >= (unsigned long)(100 - pct) * f->stack_limit));
}

int verifier__describe(const char *prog, const struct verifier_figures *f, char *out, size_t len)
{
	if (!f->known)
		return snprintf(out, len, "%s: no figures", prog);
	if (!f->stack_limit)		/* from the program's info: no stack figure */
		return snprintf(out, len, "%s %lu insns of %lu (%.1f%%), stack not said", prog,
				f->insns, f->limit, 100.0 * (double)f->insns / (double)f->limit);
	return snprintf(out, len, "%s %lu insns of %lu (%.1f%%), stack %lu of %u bytes", prog,
			f->insns, f->limit, 100.0 * (double)f->insns / (double)f->limit, f->stack,
			f->stack_limit);
}
