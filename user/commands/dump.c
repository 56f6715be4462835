/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "asyncio/asyncio.h"
#include "commands/dump.h"
#include "commands/dump_core.h"
#include "commands/dump_source.h"
#include "output/json_writer.h"
#include "target/opcodes/opcode_read.h"
#include "target/opcodes/opnames.h"
#include "target/core_file.h"
#include "target/procfs.h"
#include "target/remote_mem.h"
#include "target/rootfs.h"
#include "target/pyproc.h"
#include "target/thread_names.h"
#include "target/thread_state.h"
#include "target/stack_read.h"
#include "target/thread_stop.h"
#include "offcpu/syscalls.h"
#include "symbols/symbolizer.h"
#include "symbols/threading_names.h"
#include "symbols/frame_locals.h"
#include "util/parse.h"
#include "util/text.h"

#define DUMP_MAX_THREADS 16384
#define DUMP_MAX_FRAMES 65536
/* dump_thread.truncated beside 1 and PY_WALK_LOOPED: cut at a read fault */
#define DUMP_CUT_FAULT 3
/* dump --core: the core holds zeros where the next frame is */
#define DUMP_CUT_CORE 4
/* --locals: names shown in one dump at most (LOCALS_MAX_PER_FRAME a frame) */
#define DUMP_MAX_LOCALS 4096
/* -a: processes looked at at most */
#define DUMP_MAX_PROCS 65536

struct dump_thread {
	struct py_thread t;
	struct py_sym *syms;
	size_t nframes;
	int truncated;
	char name[64];		/* the kernel's comm */
	char op[48];		/* --opcodes: "[op] NAME"; "": not read */
	const char *pyname;	/* threading's name, whole; NULL: not known */
	struct py_thread_state st;
	size_t nraw;			/* frames walked (syms: those shown) */
	bool torn;			/* its stack kept changing while read */
	struct dump_loc *locs;		/* per shown frame, as syms */
	const char *kstack;		/* --kernel: names innermost first, '\n' apart */
	int64_t interp_id;		/* its interpreter's id; -1: unread */
};

#define DUMP_KSTACK_LEN 2048		/* a thread's kernel stack names */

/* The kernel's state letter, said in words. */
static const char *kstate_word(char c)
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

/* "    state: asleep in [syscall] futex, waiting for the GIL" */
static void print_state(FILE *out, const struct py_thread_state *s)
{
	const char *sc = s->syscall >= 0 ? syscall__name(s->syscall) : NULL;

	fprintf(out, "    state: %s", kstate_word(s->kstate));
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
	if (s->has_exception)
		fputs(", has an exception", out);
	fputc('\n', out);
}

static void json_state(FILE *out, const struct py_thread_state *s)
{
	const char *sc = s->syscall >= 0 ? syscall__name(s->syscall) : NULL;

	fputs(", \"state\": ", out);
	json_write_string(out, kstate_word(s->kstate));
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

static void print_text(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th,
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

static void json_int_or_null(FILE *out, const char *key, int v)
{
	if (v >= 0)
		fprintf(out, ", \"%s\": %d", key, v);
	else
		fprintf(out, ", \"%s\": null", key);
}

/* A frame object of the JSON outputs: {"function", "file", "line"}. */
static void json_frame(FILE *out, const struct py_sym *s, int first)
{
	fprintf(out, "%s{\"function\": ", first ? "" : ", ");
	json_write_string(out, s->function);
	fputs(", \"file\": ", out);
	json_write_string(out, s->file);
	if (s->line >= 0)
		fprintf(out, ", \"line\": %d}", s->line);
	else
		fputs(", \"line\": null}", out);
}

/* dump's frame: json_frame's, with the whole location and the source line:
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

static void print_json(FILE *out, struct pyproc *p, pid_t pid, const struct dump_thread *th, size_t n,
		       int with_locals)
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

/* A running thread changes its stack while we read it: a walk whose frames do
 * not all resolve is taken again, a few times, before it is reported. */
#define DUMP_ATTEMPTS 20


/* --opcodes: the instruction @t's innermost frame (@raw[0], its walk's) is
 * at, read now: it runs on, so the one it has reached by then. */
static void thread_opcode(struct pyproc *p, struct dump_thread *t, const struct py_rawframe *raw)
{
	uint8_t op;

	if (t->nframes && !opcode_read(p, &raw[0], &op))
		opnames__leaf(pyproc__offsets(p)->version_hex, op, t->op, sizeof(t->op));
}

/*
 * Read @t's stack (@sr: the reader, @stopped: its thread stopped) at one
 * instant, as the remote backend does: two walks that agree, from a copy of
 * its stack chunks. 0 or -errno; *@nf frames in sr->frames.
 */
/* A core (dump --core) is never gone. */
static bool target_alive(const struct pyproc *p)
{
	return pyproc__pid(p) == REMOTE_MEM_CORE || procfs__alive(pyproc__pid(p));
}

static bool thread_alive(const struct pyproc *p, pid_t tid)
{
	return pyproc__pid(p) == REMOTE_MEM_CORE || procfs__thread_alive(pyproc__pid(p), tid);
}

static int walk_thread(struct pyproc *p, struct dump_thread *t, struct stack_read *sr,
		       bool stopped, size_t *nf)
{
	struct py_walk_cache wc = { 0 };
	int rc = stack_read__thread(sr, p, t->t.tstate, &wc, stopped);

	py_walk_cache__free(&wc);
	*nf = sr->n;
	t->truncated = sr->truncated;
	t->torn = sr->torn;
	return rc;
}

static int dump_thread(struct pyproc *p, struct symbolizer *sym, struct dump_thread *t,
		       struct stack_read *sr, bool stopped, int opcodes)
{
	struct py_rawframe *raw = sr->frames;
	size_t nf = 0, bad = 0;
	uint64_t h, last = 0;
	int rc = 0, stable = 0;

	for (int attempt = 0; attempt < DUMP_ATTEMPTS; attempt++) {
		rc = walk_thread(p, t, sr, stopped, &nf);
		if (rc == -ESRCH)
			return rc;
		if (rc || (t->torn && attempt + 1 < DUMP_ATTEMPTS)) {
			if (!target_alive(p))
				return -ESRCH;
			continue;
		}
		free(t->syms);
		t->syms = calloc(nf ? nf : 1, sizeof(*t->syms));
		if (!t->syms)
			return -ENOMEM;
		bad = 0;
		symbolizer__resolve_stack(sym, raw, nf, t->syms, &t->nframes, &bad);
		if (!bad)
			break;
		/* The same frames and code pointers twice: the stack is not
		 * moving, its code objects are unreadable (not code, unmapped:
		 * a corrupt target). Shown as they are, "<unknown>", rather
		 * than reported as a stack that kept changing. */
		h = 1469598103934665603ull ^ nf;
		for (size_t k = 0; k < nf; k++)
			h = (h ^ raw[k].frame ^ (raw[k].code << 1)) * 1099511628211ull;
		if (attempt && h == last) {
			stable = 1;
			break;
		}
		last = h;
		if (!target_alive(p))
			return -ESRCH;
	}
	if (rc == -EFAULT && nf && thread_alive(p, t->t.host_tid)) {
		/* Every walk of a live thread faulted at the same kind of place
		 * after nf frames: a link into unmapped memory (a corrupt
		 * chain). Its frames up to there, marked, rather than no dump
		 * of any thread. */
		free(t->syms);
		t->syms = calloc(nf, sizeof(*t->syms));
		if (!t->syms)
			return -ENOMEM;
		symbolizer__resolve_stack(sym, raw, nf, t->syms, &t->nframes, &bad);
		t->nraw = nf;
		t->truncated = DUMP_CUT_FAULT;
		return 0;
	}
	if (rc)
		return rc;
	if (bad && !stable)
		return -EAGAIN;
	t->nraw = nf;
	/* not one frame readable: a thread state being torn down as it ends
	 * also reads so; the caller tells that from a corrupt one */
	if (bad && bad == nf)
		return -ESTALE;
	if (opcodes)
		thread_opcode(p, t, raw);
	return 0;
}

/* ---- dump --async ---- */

static const char *const task_states[] = {
	[ASYNCIO_TASK_PENDING] = "pending", [ASYNCIO_TASK_RUNNING] = "running",
	[ASYNCIO_TASK_CREATED] = "created", [ASYNCIO_TASK_DONE] = "done",
};

static void print_async_json(FILE *out, struct pyproc *p, const struct asyncio_snapshot *s)
{
	fprintf(out, "{\"pid\": %d, \"python\": ", (int)pyproc__pid(p));
	json_write_string(out, pyproc__version(p));
	fprintf(out, ", \"torn\": %zu, \"finished_during_dump\": %zu, \"lists_truncated\": %zu, "
		"\"lists_torn\": %zu, \"tasks\": [", s->torn, s->finished, s->lists_cut,
		s->lists_torn);
	for (size_t i = 0; i < s->n; i++) {
		const struct asyncio_task *t = &s->tasks[i];

		fprintf(out, "%s{\"id\": %llu, \"name\": ", i ? ", " : "",
			(unsigned long long)t->addr);
		json_write_string(out, t->name);
		if (t->tid)
			fprintf(out, ", \"tid\": %d", (int)t->tid);
		else
			fputs(", \"tid\": null", out);
		fprintf(out, ", \"running\": %s, \"state\": \"%s\"",
			t->state == ASYNCIO_TASK_RUNNING ? "true" : "false", task_states[t->state]);
		if (t->torn)
			fputs(", \"torn\": true", out);
		if (t->chain_cut)
			fputs(", \"frames_truncated\": true", out);
		if (t->awaiters_cut)
			fputs(", \"awaited_by_truncated\": true", out);
		fputs(", \"frames\": [", out);
		for (size_t k = 0; k < t->nframes; k++)
			json_frame(out, &t->frames[k], k == 0);
		fputs("], \"awaited_by\": [", out);
		for (size_t k = 0; k < t->nawaited; k++)
			fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)t->awaited_by[k]);
		fputs("]}", out);
	}
	fputs("]}\n", out);
}

static void print_async_notes(FILE *f, const struct asyncio_snapshot *s)
{
	if (s->torn)
		fprintf(f, "[torn]: %zu task%s kept changing while read (%d tries); their frames "
			"end in [torn]\n", s->torn, s->torn == 1 ? "" : "s", ASYNCIO_ATTEMPTS);
	if (s->finished)
		fprintf(f, "%zu task%s ended while read and %s not shown\n", s->finished,
			s->finished == 1 ? "" : "s", s->finished == 1 ? "is" : "are");
	if (s->lists_cut)
		fprintf(f, "%zu task list%s longer than %d: the rest is not shown\n", s->lists_cut,
			s->lists_cut == 1 ? " is" : "s are", ASYNCIO_MAX_LIST);
	if (s->lists_torn)
		fprintf(f, "%zu task list%s kept changing: read as far as %s held\n",
			s->lists_torn, s->lists_torn == 1 ? "" : "s",
			s->lists_torn == 1 ? "it" : "they");
}

static int dump_async(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	struct asyncio_snapshot snap = { 0 };
	struct asyncio_offsets ao;
	struct symbolizer *sym = NULL;
	struct pyproc *p = NULL;
	int rc;

	rc = pyproc__open(o->pid, &p, err, errlen);
	if (rc)
		return rc;
	rc = asyncio_offsets__load(p, &ao, err, errlen);
	if (rc)
		goto out;
	rc = symbolizer__new(p, &sym);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = asyncio_snapshot__take(p, sym, &ao, &snap, err, errlen);
	if (rc)
		goto out;
	if (o->json) {
		print_async_json(out, p, &snap);
		print_async_notes(stderr, &snap);
	} else {
		fprintf(out, "Process %d: Python %s, %zu asyncio task%s\n", (int)o->pid,
			pyproc__version(p), snap.n, snap.n == 1 ? "" : "s");
		print_async_notes(out, &snap);
		fputc('\n', out);
		rc = asyncio_tree__print(out, &snap);
		if (rc) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if (fflush(out) || ferror(out)) {
		rc = -EIO;
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
	}
out:
	asyncio_snapshot__free(&snap);
	symbolizer__free(sym);
	pyproc__free(p);
	return rc;
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

static int write_dump(const struct dump_opts *o, FILE *out, const char *before,
		      struct pyproc *p, pid_t pid, const struct dump_thread *th, size_t n,
		      char *err, size_t errlen)
{
	print_notes(th, n);
	fputs(before, out);
	if (o->json)
		print_json(out, p, pid, th, n, o->locals);
	else
		print_text(out, p, pid, th, n);
	if (fflush(out) || ferror(out)) {
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

/* 1 while @tstate is still among the process's threads (or the list
 * cannot be read again: then it is shown as read). */
static int still_listed(struct pyproc *p, uint64_t tstate)
{
	struct py_thread *now = calloc(DUMP_MAX_THREADS, sizeof(*now));
	size_t n = 0;
	int found = 1;

	if (now && pyproc__threads(p, now, DUMP_MAX_THREADS, &n) == 0) {
		found = 0;
		for (size_t i = 0; i < n && !found; i++)
			found = now[i].tstate == tstate;
	}
	free(now);
	return found;
}

/* The one line of a thread's dump that failed for want of memory or of a
 * stack that held still. */
static void thread_error(pid_t pid, const struct dump_thread *t, int rc, char *err,
			 size_t errlen)
{
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else
		snprintf(err, errlen, "process %d: thread %d's stack kept changing while it was "
			 "read (%d tries); try again", (int)pid, (int)t->t.host_tid,
			 DUMP_ATTEMPTS);
}

/* Each shown frame's whole location and, unless --no-source, its line of
 * source, for the walk in @raw that gave t->syms. */
static int locate_frames(const struct dump_opts *o, const struct dump_core *core,
			 struct pyproc *p, struct symbolizer *sym, struct dump_thread *t,
			 const struct py_rawframe *raw, size_t *locals_left)
{
	int rootfd = core->cf ? core_file__root(core->cf) : -1;
	int64_t start_ns = core->mtime_ns;
	uid_t owner = core->cf ? core_file__uid(core->cf) : (uid_t)-1;

	t->locs = calloc(t->nframes ? t->nframes : 1, sizeof(*t->locs));
	if (!t->locs)
		return -ENOMEM;
	dump_source__locate(sym, raw, t->nraw, t->locs, t->nframes);
	if (!core->cf && procfs__start_ns(o->pid, &start_ns))
		start_ns = 0;	/* unknown: no file can be told newer */
	if (!core->cf && rootfs__owner(o->pid, &owner))
		owner = (uid_t)-1;	/* unknown: world-readable files only */
	for (size_t k = 0; k < t->nframes; k++) {
		struct dump_loc *l = &t->locs[k];

		if (l->line != t->syms[k].line)	/* the code moved on meanwhile */
			*l = (struct dump_loc){ t->syms[k].line, -1, -1, -1, NULL, false, l->raw };
		if (!o->no_source)
			dump_source__read(o->pid, rootfd, owner, start_ns, t->syms[k].file, l);
		if (!o->locals || !*locals_left)
			continue;
		l->locals = calloc(LOCALS_MAX_PER_FRAME, sizeof(*l->locals));
		if (!l->locals)
			return -ENOMEM;
		/* an unreadable frame shows no locals; the dump goes on */
		if (frame_locals__read(p, sym, &raw[l->raw], l->locals,
				       *locals_left < LOCALS_MAX_PER_FRAME ? *locals_left :
				       LOCALS_MAX_PER_FRAME, &l->nlocals))
			l->nlocals = 0;
		*locals_left -= l->nlocals;
	}
	return 0;
}

/*
 * Each thread's state, in one look, into @st; with --only-active only the
 * thread holding the GIL stays in @threads (none while no thread holds it).
 */
static int look_at_threads(const struct dump_opts *o, const struct dump_core *core,
			   struct pyproc *p, struct py_thread *threads, struct py_thread_state *st,
			   size_t *n)
{
	size_t k = 0;
	int rc = thread_state__look_core(p, core->cf, threads, *n, st);

	if (rc || !o->only_active)
		return rc;
	for (size_t i = 0; i < *n; i++) {
		if (!st[i].has_gil)
			continue;
		threads[k] = threads[i];
		st[k++] = st[i];
	}
	*n = k;
	return 0;
}

/*
 * The threads (*@n into @threads), their states (@st) in one look, and
 * their Python names into @names. 0, -ENOMEM, or a read error.
 */
static int list_threads(const struct dump_opts *o, const struct dump_core *core,
			struct pyproc *p, struct symbolizer *sym, struct thread_names *names,
			struct py_thread *threads, struct py_thread_state *st, size_t *n)
{
	int rc = 0;

	/* Threads that start or end while we walk the list make a read fail:
	 * take the list again. */
	for (int attempt = 0; attempt < DUMP_ATTEMPTS; attempt++) {
		rc = pyproc__threads(p, threads, DUMP_MAX_THREADS, n);
		if (rc != -EFAULT && rc != -EPROTO && rc != -ELOOP)
			break;
	}
	if (rc == -E2BIG) {
		fprintf(stderr, "pyprof-bpf: more than %d threads: showing the first %d\n",
			DUMP_MAX_THREADS, DUMP_MAX_THREADS);
		rc = 0;
	}
	if (!rc)
		rc = look_at_threads(o, core, p, threads, st, n);
	/* threading's own names: a record that does not read names no thread */
	if (!rc && threading_names__read(p, sym, threads, *n, names) == -ENOMEM)
		rc = -ENOMEM;
	return rc;
}

/*
 * --kernel: each waiting thread's kernel stack, read just after its state
 * (and before any --blocking stop, which would show the stop's own),
 * DUMP_KSTACK_LEN bytes a thread in *@out. A thread whose stack cannot be
 * read has none. 0 or -ENOMEM.
 */
static int kernel_stacks(pid_t pid, const struct py_thread *threads,
			 const struct py_thread_state *st, size_t n, char **out)
{
	char *ks = calloc(n ? n : 1, DUMP_KSTACK_LEN);

	if (!ks)
		return -ENOMEM;
	/* A running thread's is whatever interrupt met it there: none. */
	for (size_t i = 0; i < n; i++)
		if (st[i].kstate != 'R')
			procfs__task_kstack(pid, threads[i].host_tid, ks + i * DUMP_KSTACK_LEN,
					    DUMP_KSTACK_LEN);
	*out = ks;
	return 0;
}

/*
 * --blocking: the threads stopped for the walks (the list and states read
 * just before). 0, or -errno with @err.
 */
static int stop_threads(const struct dump_opts *o, struct thread_stop *ts, char *err,
			size_t errlen)
{
	int rc = thread_stop__init(ts, o->pid);

	if (!rc)
		rc = thread_stop__all(ts);
	if (rc == -EPERM)
		snprintf(err, errlen, "--blocking: cannot stop the threads of process %d (ptrace: "
			 "%s): another tracer holds them (a debugger, strace, py-spy), or "
			 "CAP_SYS_PTRACE is missing", (int)o->pid, strerror(-rc));
	else if (rc == -ESRCH)
		snprintf(err, errlen, "process %d exited during the dump", (int)o->pid);
	else if (rc)
		snprintf(err, errlen, "--blocking: cannot stop the threads of process %d: %s",
			 (int)o->pid, strerror(-rc));
	return rc;
}

/* What one process's dump holds while it is read. */
struct dump_ctx {
	struct pyproc *p;
	struct symbolizer *sym;
	struct thread_names *names;
	struct py_thread *threads;	/* DUMP_MAX_THREADS */
	struct py_thread_state *st;	/* as threads */
	struct dump_thread *th;		/* as threads: what is shown */
	char *kst;			/* --kernel: DUMP_KSTACK_LEN a thread */
	struct stack_read sr;
	struct thread_stop stop;	/* --blocking */
	struct dump_core core;		/* --core */
	pid_t pid;			/* the process (a core's, as it was) */
	size_t n;
	size_t locals_left;
};

/*
 * dump --core: an outermost frame that is all zeros is no frame but memory
 * the core did not get (gcore writes zeros where it cannot read): the
 * stack is cut there, and said so.
 */
static void cut_at_core_hole(struct dump_thread *t, const struct py_rawframe *raw)
{
	if (!t->nraw || !t->nframes || raw[t->nraw - 1].code ||
	    strcmp(t->syms[t->nframes - 1].function, "<unknown>") != 0)
		return;
	t->nraw--;
	t->nframes--;
	t->truncated = DUMP_CUT_CORE;
}

/* Thread @i left the list: it ended while we read it (not part of "now"). */
static void drop_thread(struct dump_ctx *c, size_t i)
{
	size_t after = c->n - i - 1;

	memmove(&c->threads[i], &c->threads[i + 1], after * sizeof(*c->threads));
	memmove(&c->st[i], &c->st[i + 1], after * sizeof(*c->st));
	if (c->kst)
		memmove(c->kst + i * DUMP_KSTACK_LEN, c->kst + (i + 1) * DUMP_KSTACK_LEN,
			after * DUMP_KSTACK_LEN);
	free(c->th[i].syms);
	c->th[i].syms = NULL;
	c->n--;
}

/*
 * Each listed thread's stack, names, source positions and locals into
 * c->th. 0; -errno with @err set (*@said) or a read error for the caller.
 */
static int read_stacks(const struct dump_opts *o, struct dump_ctx *c, char *err, size_t errlen,
		       bool *said)
{
	int rc;

	for (size_t i = 0; i < c->n; i++) {
		struct dump_thread *t = &c->th[i];

		t->t = c->threads[i];
		if (i && t->t.interp == c->th[i - 1].t.interp)
			t->interp_id = c->th[i - 1].interp_id;	/* listed by interpreter */
		else
			pyproc__interp_id(c->p, t->t.interp, &t->interp_id);
		if (!c->core.cf)
			procfs__comm(o->pid, t->t.host_tid, t->name, sizeof(t->name));
		else if (t->t.host_tid == c->pid)	/* a core names the process only */
			snprintf(t->name, sizeof(t->name), "%s", core_file__comm(c->core.cf));
		t->pyname = thread_names__python(c->names, t->t.host_tid);
		t->st = c->st[i];
		t->kstack = c->kst ? c->kst + i * DUMP_KSTACK_LEN : NULL;
		rc = dump_thread(c->p, c->sym, t, &c->sr, c->stop.threads || c->core.cf, o->opcodes);
		if (rc == -ESTALE)
			rc = still_listed(c->p, t->t.tstate) ? 0 : -ENOENT;
		if (rc && rc != -ESRCH && (rc == -ENOENT || !thread_alive(c->p, t->t.host_tid))) {
			drop_thread(c, i--);
			continue;
		}
		if (!rc && c->core.cf)
			cut_at_core_hole(t, c->sr.frames);
		if (!rc)
			rc = locate_frames(o, &c->core, c->p, c->sym, t, c->sr.frames, &c->locals_left);
		if (rc == -ENOMEM || rc == -EAGAIN) {
			thread_error(c->pid, t, rc, err, errlen);
			*said = true;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* The memory of a dump, and its reader. 0 or -ENOMEM (said in @err). */
static int dump_ctx__open(const struct dump_opts *o, struct dump_ctx *c, char *err,
			  size_t errlen)
{
	int rc = o->core ? dump_core__open(o, &c->core, &c->p, err, errlen) :
			   pyproc__open(o->pid, &c->p, err, errlen);

	if (rc)
		return rc;
	c->pid = c->core.cf ? core_file__pid(c->core.cf) : o->pid;
	c->locals_left = DUMP_MAX_LOCALS;
	c->threads = calloc(DUMP_MAX_THREADS, sizeof(*c->threads));
	c->th = calloc(DUMP_MAX_THREADS, sizeof(*c->th));
	c->st = calloc(DUMP_MAX_THREADS, sizeof(*c->st));
	rc = !c->threads || !c->th || !c->st ? -ENOMEM : stack_read__init(&c->sr, DUMP_MAX_FRAMES);
	if (!rc)
		rc = symbolizer__new(c->p, &c->sym);
	if (!rc)
		rc = thread_names__new(DUMP_MAX_THREADS, &c->names);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

static void dump_ctx__free(struct dump_ctx *c)
{
	thread_stop__free(&c->stop);
	for (size_t i = 0; c->th && i < c->n; i++) {
		free(c->th[i].syms);
		for (size_t k = 0; c->th[i].locs && k < c->th[i].nframes; k++)
			dump_loc__free(&c->th[i].locs[k]);
		free(c->th[i].locs);
	}
	free(c->th);
	free(c->st);
	free(c->threads);
	stack_read__free(&c->sr);
	free(c->kst);
	thread_names__free(c->names);
	symbolizer__free(c->sym);
	pyproc__free(c->p);
	dump_core__close(&c->core);
}

static int dump_one(const struct dump_opts *o, FILE *out, const char *before, char *err,
		    size_t errlen)
{
	struct dump_ctx c = { 0 };
	bool said = false;
	int rc;

	if (o->async)
		return dump_async(o, out, err, errlen);
	rc = dump_ctx__open(o, &c, err, errlen);
	if (rc)
		goto out;
	rc = list_threads(o, &c.core, c.p, c.sym, c.names, c.threads, c.st, &c.n);
	if (!rc && o->kernel)
		rc = kernel_stacks(o->pid, c.threads, c.st, c.n, &c.kst);
	if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (rc)
		goto fail_read;
	if (o->blocking && (rc = stop_threads(o, &c.stop, err, errlen)))
		goto out;
	rc = read_stacks(o, &c, err, errlen, &said);
	if (said)
		goto out;
	if (rc)
		goto fail_read;
	/* Running again before the output, which may wait on its reader. */
	thread_stop__free(&c.stop);
	rc = write_dump(o, out, before, c.p, c.pid, c.th, c.n, err, errlen);
	goto out;

fail_read:
	if (c.core.cf) {
		snprintf(err, errlen, "core %s: reading its stacks failed: %s", o->core,
			 rc == -EPROTO ? "its thread list is inconsistent" : strerror(-rc));
	} else if (rc == -ESRCH || !procfs__alive(o->pid)) {
		snprintf(err, errlen, "process %d exited during the dump", (int)o->pid);
		rc = -ESRCH;
	} else {
		snprintf(err, errlen, "process %d: reading its stacks failed: %s", (int)o->pid,
			 rc == -EPROTO ? "its thread list is inconsistent" : strerror(-rc));
	}
out:
	dump_ctx__free(&c);
	return rc;
}

/* The pids of every process of /proc but ours, at most @max. */
static size_t all_pids(pid_t *out, size_t max)
{
	struct dirent *de;
	size_t n = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return 0;
	while (n < max && (de = readdir(d))) {
		long v;

		if (parse_long(de->d_name, 1, INT_MAX, &v) == 0 && v != getpid())
			out[n++] = (pid_t)v;
	}
	closedir(d);
	return n;
}

/*
 * Several processes (-p a,b or -a): each dumped as one alone would be, the
 * text one after the other, the JSON as {"processes": [...]}. A process that
 * fails is told on stderr (with -a, one that is not Python is skipped
 * quietly) and the others are still dumped.
 */
static int dump_many(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	pid_t *pids = calloc(DUMP_MAX_PROCS, sizeof(*pids));
	size_t n = o->all ? 0 : o->npids, shown = 0, failed = 0;
	int rc = 0;

	if (!pids) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (o->all)
		n = all_pids(pids, DUMP_MAX_PROCS);
	else
		memcpy(pids, o->pids, n * sizeof(*pids));
	if (o->json)
		fputs("{\"processes\": [", out);
	for (size_t i = 0; i < n; i++) {
		struct dump_opts one = *o;
		char why[PYPROF_ERRLEN] = "";

		one.pid = pids[i];
		rc = dump_one(&one, out, !shown ? "" : o->json ? ", " : "\n", why, sizeof(why));
		if (!rc) {
			shown++;
			continue;
		}
		if (o->all && (rc == -ENOEXEC || rc == -ESRCH || rc == -ENOTSUP))
			continue;	/* not a Python we read, or gone */
		failed++;
		fprintf(stderr, "pyprof-bpf: %s\n", why[0] ? why : strerror(-rc));
	}
	if (o->json)
		fputs("]}\n", out);
	free(pids);
	rc = 0;
	if (fflush(out) || ferror(out)) {
		snprintf(err, errlen, "writing the dump: %s", strerror(errno));
		rc = -EIO;
	} else if (failed) {
		snprintf(err, errlen, "%zu of %zu processes could not be dumped", failed, n);
		rc = -EIO;
	}
	return rc;
}

int dump__run(const struct dump_opts *o, FILE *out, char *err, size_t errlen)
{
	if (o->all || o->npids > 1)
		return dump_many(o, out, err, errlen);
	return dump_one(o, out, "", err, errlen);
}
