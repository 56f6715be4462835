/* SPDX-License-Identifier: MIT */
/* render_json.c - dump's JSON: one object a process, its threads and their frames. */
#include <stdio.h>
#include <string.h>
#include "commands/dump/internal.h"
#include "offcpu/syscalls.h"
#include "output/json_writer.h"
#include "symbols/frame_locals.h"
#include "symbols/symbolizer.h"

static void json_state(FILE *out, const struct py_thread_state *s)
{
	const char *sc = s->syscall >= 0 ? syscall__name(s->syscall) : NULL;

	fputs(", \"state\": ", out);
	json_write_string(out, dump_render__kstate_word(s->kstate));
	if (sc) {
		fputs(", \"syscall\": ", out);
		json_write_string(out, sc);
	} else if (s->syscall >= 0) {
		fprintf(out, ", \"syscall\": \"%ld\"", s->syscall);
	} else {
		fputs(", \"syscall\": null", out);
	}
	fprintf(out, ", \"status\": {\"on_cpu\": %s, \"has_gil\": %s, \"gil_requested\": %s, "
		"\"has_exception\": %s, \"main_thread\": %s}, \"in_gc\": %s",
		s->on_cpu ? "true" : "false", s->has_gil ? "true" : "false",
		s->gil_requested ? "true" : "false", s->has_exception ? "true" : "false",
		s->main_thread ? "true" : "false", s->in_gc ? "true" : "false");
	if (s->exc_chain_cut)	/* has_exception is true: a guess, said */
		fputs(", \"exception_chain_cut\": true", out);
}

/* --kernel, JSON: "kernel_stack": [names, innermost first]. */
static void json_kstack(FILE *out, const char *ks)
{
	char name[256];

	if (!ks)
		return;
	fputs(", \"kernel_stack\": [", out);
	for (const char *p = ks; *p;) {
		size_t len = strcspn(p, "\n");

		snprintf(name, sizeof(name), "%.*s", (int)len, p);
		if (p != ks)
			fputs(", ", out);
		json_write_string(out, name);
		p += len + (p[len] == '\n');
	}
	fputc(']', out);
}

static void json_int_or_null(FILE *out, const char *key, int v)
{
	if (v >= 0)
		fprintf(out, ", \"%s\": %d", key, v);
	else
		fprintf(out, ", \"%s\": null", key);
}

/* dump's frame: async.c's json_frame's, with the whole location and the source line:
 * {"function", "file", "line", "end_line", "column", "end_column",
 *  "source", "source_changed"} */
static void json_dump_frame(FILE *out, const struct py_sym *s, const struct dump_loc *l,
			    int first, int with_locals)
{
	static const struct dump_loc none = { -1, -1, -1, -1, NULL, false, 0, NULL, 0 };

	if (!l)
		l = &none;
	fprintf(out, "%s{\"function\": ", first ? "" : ", ");
	json_write_string(out, s->function);
	fputs(", \"file\": ", out);
	json_write_string(out, s->file);
	json_int_or_null(out, "line", s->line);
	json_int_or_null(out, "end_line", l->end_line);
	json_int_or_null(out, "column", l->col);
	json_int_or_null(out, "end_column", l->end_col);
	fputs(", \"source\": ", out);
	if (l->source)
		json_write_string(out, l->source);
	else
		fputs("null", out);
	fprintf(out, ", \"source_changed\": %s", l->changed ? "true" : "false");
	if (with_locals) {
		fputs(", \"locals\": [", out);
		for (size_t i = 0; l->locals && i < l->nlocals; i++) {
			fputs(i ? ", {\"name\": " : "{\"name\": ", out);
			json_write_string(out, l->locals[i].name);
			fputs(", \"repr\": ", out);
			json_write_string(out, l->locals[i].repr);
			fputc('}', out);
		}
		fputc(']', out);
	}
	fputc('}', out);
}

void dump_render__json(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th,
		       size_t n, int with_locals)
{
	fprintf(out, "{\"pid\": %d, \"python\": ", (int)pid);
	json_write_string(out, pyproc__version(p));
	fputs(", \"threads\": [", out);
	for (size_t i = 0; i < n; i++) {
		const struct dump_thread *t = &th[i];

		fprintf(out, "%s{\"tid\": %d, \"name\": ", i ? ", " : "", (int)t->t.host_tid);
		json_write_string(out, t->pyname ? t->pyname : t->name);
		fputs(", \"comm\": ", out);
		json_write_string(out, t->name);
		if (t->interp_id >= 0)
			fprintf(out, ", \"interpreter\": %lld", (long long)t->interp_id);
		else
			fputs(", \"interpreter\": null", out);
		json_state(out, &t->st);
		json_kstack(out, t->kstack);
		/* only when cut: "loop", "read-fault" (a corrupt chain) or "depth" */
		if (t->truncated)
			fprintf(out, ", \"truncated\": \"%s\"",
				t->truncated == PY_WALK_LOOPED ? "loop" :
				t->truncated == DUMP_CUT_FAULT || t->truncated == DUMP_CUT_CORE ? "read-fault" : "depth");
		if (t->op[0]) {
			fputs(", \"opcode\": ", out);
			json_write_string(out, t->op + 5);	/* after "[op] " */
		}
		fputs(", \"frames\": [", out);
		for (size_t k = 0; k < t->nframes; k++)
			json_dump_frame(out, &t->syms[k], t->locs ? &t->locs[k] : NULL, k == 0,
					with_locals);
		fputs("]}", out);
	}
	fputs("]}\n", out);
}
