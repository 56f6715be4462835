/* SPDX-License-Identifier: MIT */
/* render.c - what dump's text and JSON share: the state words, the notes on
 * stderr, the choice between them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "commands/dump/internal.h"

const char *dump_render__kstate_word(char c)
{
	switch (c) {
	case 'R': return "running";	/* on a CPU or runnable: /proc does not tell */
	case 'S': return "asleep";
	case 'D': return "in uninterruptible wait";
	case 'T': case 't': return "stopped";
	case 'Z': return "zombie";
	case 0: return "unknown";
	default: return "other";
	}
}

/* What was not whole in a dump that is written: said once it is (a target
 * that exits during the dump gets that said, not what its end looked like). */
static void print_notes(const struct dump_thread *th, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct dump_thread *t = &th[i];
		int tid = (int)t->t.host_tid;

		if (t->truncated == DUMP_CUT_FAULT)
			fprintf(stderr, "pyprof-bpf: thread %d: a frame could not be read "
				"(corrupt chain): shown up to it\n", tid);
		else if (t->truncated == DUMP_CUT_CORE)
			fprintf(stderr, "pyprof-bpf: thread %d: the core holds zeros where its next "
				"frame is (memory its dumper could not read: gcore cannot read the "
				"stacks of threads that glibc 2.42+ guards): shown up to there\n", tid);
		else if (t->truncated == PY_WALK_LOOPED)
			fprintf(stderr, "pyprof-bpf: thread %d: its frame chain loops (corrupt): "
				"shown up to the repeat\n", tid);
		else if (t->truncated)
			fprintf(stderr, "pyprof-bpf: thread %d: stack deeper than %d frames, the "
				"outermost are not shown\n", tid, DUMP_MAX_FRAMES);
		if (t->torn)
			fprintf(stderr, "pyprof-bpf: thread %d: its stack kept changing while "
				"read: shown as last read (--blocking stops the threads for the "
				"reads)\n", tid);
	}
}

int dump_render__write(const struct dump_opts *o, FILE *out, const char *before,
		       struct pyproc *p, pid_t pid, const struct dump_thread *th, size_t n,
		       char *err, size_t errlen)
{
	print_notes(th, n);
	fputs(before, out);
	if (o->json)
		dump_render__json(out, p, pid, th, n, o->locals);
	else
		dump_render__text(out, p, pid, th, n);
	if (fflush(out) || ferror(out)) {
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}
