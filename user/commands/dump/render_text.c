/* SPDX-License-Identifier: MIT */
/* render_text.c - dump's text: each thread as a traceback, most recent call last. */
#include <stdio.h>
#include <string.h>
#include "commands/dump/internal.h"
#include "offcpu/syscalls.h"
#include "symbols/frame_locals.h"
#include "symbols/symbolizer.h"
#include "util/text.h"

/* "    state: asleep in [syscall] futex, waiting for the GIL" */
static void print_state(FILE *out, const struct py_thread_state *s)
{
	const char *sc = s->syscall >= 0 ? syscall__name(s->syscall) : NULL;

	fprintf(out, "    state: %s", dump_render__kstate_word(s->kstate));
	if (sc)
		fprintf(out, " in [syscall] %s", sc);
	else if (s->syscall >= 0)
		fprintf(out, " in [syscall] %ld", s->syscall);
	if (s->has_gil)
		fputs(", holds the GIL", out);
	if (s->gil_requested)
		fputs(", waiting for the GIL", out);
	if (s->in_gc)
		fputs(", in <GC>", out);
	if (s->exc_chain_cut)
		fputs(", [exception-chain-cut]", out);
	else if (s->has_exception)
		fputs(", has an exception", out);
	fputc('\n', out);
}

static void print_locals(FILE *out, const struct dump_loc *l)
{
	if (!l->locals || !l->nlocals)
		return;
	fputs("        locals:\n", out);
	for (size_t i = 0; i < l->nlocals; i++) {
		fputs("            ", out);
		put_clean(out, l->locals[i].name);
		fputs(" = ", out);
		put_clean(out, l->locals[i].repr);
		fputc('\n', out);
	}
}

/* --kernel: a thread's kernel functions, outermost first, after its frames. */
static void print_kstack(FILE *out, const char *ks)
{
	const char *end;
	int len;

	if (!ks || !*ks)
		return;
	end = ks + strlen(ks);
	while (end > ks) {
		const char *start = end;

		while (start > ks && start[-1] != '\n')
			start--;
		len = (int)(end - start);
		fprintf(out, "    [kernel] %.*s\n", len, start);
		end = start > ks ? start - 1 : ks;
	}
}

void dump_render__text(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th,
		       size_t n)
{
	fprintf(out, "Process %d: Python %s\n", (int)pid, pyproc__version(p));
	for (size_t i = 0; i < n; i++) {
		const struct dump_thread *t = &th[i];

		fprintf(out, "\nThread %d", (int)t->t.host_tid);
		if (t->pyname) {
			fputs(" \"", out);
			put_clean(out, t->pyname);
			fputs("\"", out);
			/* (a core keeps no thread's comm) */
			if (t->name[0]) {
				fputs(" (comm \"", out);
				put_clean(out, t->name);
				fputs("\")", out);
			}
		} else if (t->name[0]) {
			fputs(" \"", out);
			put_clean(out, t->name);
			fputs("\"", out);
		}
		/* a subinterpreter's thread state says so (a thread can run in
		 * several: it is shown under each) */
		if (t->interp_id > 0)
			fprintf(out, " [interpreter %lld]", (long long)t->interp_id);
		fprintf(out, "%s (most recent call last):%s\n",
			t->st.main_thread ? " [main thread]" : "",
			t->truncated == PY_WALK_LOOPED ? " [truncated: its frame chain loops]" :
			t->truncated == DUMP_CUT_FAULT || t->truncated == DUMP_CUT_CORE ?
			" [read-fault]" :
			t->truncated ? " [truncated]" : "");
		print_state(out, &t->st);
		if (t->nframes == 0)
			fprintf(out, "    (no Python frames)\n");
		for (size_t k = t->nframes; k-- > 0;) {
			const struct py_sym *s = &t->syms[k];

			fprintf(out, "    %s (%s:%d)%s%s\n", s->function, s->file, s->line,
				k == 0 && t->op[0] ? " " : "", k == 0 ? t->op : "");
			if (t->locs)
				dump_source__print(out, &t->locs[k], "        ");
			if (t->locs)
				print_locals(out, &t->locs[k]);
		}
		print_kstack(out, t->kstack);
	}
}
