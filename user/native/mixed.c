/* SPDX-License-Identifier: MIT */
/* mixed.c - --native: Python and native frames as one stack (mixed.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pyprof.h"		/* PYPROF_USTACK_MAX, PYPROF_USTACK_REDZONE, PYPROF_PAGE */
#include "native/merge.h"
#include "native/mixed.h"
#include "native/unwind.h"
#include "types/out_sample.h"

#define NATIVE_MAX 256		/* native frames kept per sample */
#define MERGE_PY_MAX 4096	/* Python frames a merged stack holds */
#define MERGED_MAX (NATIVE_MAX + MERGE_PY_MAX + 1)

struct native_mixer {
	/* One unwinder per process, made at its first sample. */
	struct native_proc {
		pid_t pid;
		struct native_unwinder *u;	/* NULL: could not be made */
	} *procs;
	size_t nprocs;
	/* The last sample's Python frames without the interpreter's entry
	 * frames (which only say where to merge), the lengths of its runs
	 * (one per evaluation loop's call) and its entry frames' addresses
	 * (3.12+: on the C stack). */
	struct py_rawframe *pyonly;
	uint32_t cap;
	uint32_t *runs;
	uint32_t nruns;
	uint64_t *entries;
	uint32_t nentries;
	/* What a merged stack is made of. */
	struct native_frame nat[NATIVE_MAX];
	struct merge_native mnat[NATIVE_MAX];
	struct merge_item items[MERGED_MAX];
	struct py_sym merged[MERGED_MAX];
	uint8_t kinds[MERGED_MAX];
	struct out_addr addrs[MERGED_MAX];
	uint32_t stack_bytes;	/* --stack-size: the whole copy */
	struct native_mixer_stats st;
};

int native_mixer__new(uint32_t stack_bytes, struct native_mixer **out)
{
	struct native_mixer *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->stack_bytes = stack_bytes < PYPROF_USTACK_MAX ? stack_bytes : PYPROF_USTACK_MAX;
	*out = m;
	return 0;
}

void native_mixer__free(struct native_mixer *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nprocs; i++)
		native_unwinder__free(m->procs[i].u);
	free(m->procs);
	free(m->pyonly);
	free(m->runs);
	free(m->entries);
	free(m);
}

static int reserve(struct native_mixer *m, uint32_t n)
{
	struct py_rawframe *f;
	uint32_t *runs;
	uint64_t *entries;

	if (n <= m->cap)
		return 0;
	f = realloc(m->pyonly, n * sizeof(*f));
	if (f)
		m->pyonly = f;
	runs = realloc(m->runs, n * sizeof(*runs));
	if (runs)
		m->runs = runs;
	entries = realloc(m->entries, n * sizeof(*entries));
	if (entries)
		m->entries = entries;
	if (!f || !runs || !entries)
		return -ENOMEM;
	m->cap = n;
	return 0;
}

/*
 * An entry frame (3.12+, an interpreter frame) ends the run inside it, an
 * entry-flagged Python frame (3.11) is the last of its run.
 */
int native_mixer__strip(struct native_mixer *m, const struct raw_sample *r,
			struct raw_sample *out)
{
	uint32_t n = 0, run = 0;
	int rc = reserve(m, r->nframes + 1);

	if (rc)
		return rc;
	m->nruns = 0;
	m->nentries = 0;
	for (uint32_t i = 0; i < r->nframes; i++) {
		uint32_t fl = r->frames[i].reserved;

		if ((fl & SAMPLE_FF_INTERP) && (fl & SAMPLE_FF_ENTRY))
			m->entries[m->nentries++] = r->frames[i].frame;
		if (!(fl & SAMPLE_FF_INTERP)) {
			m->pyonly[n++] = r->frames[i];
			run++;
		}
		if (fl & SAMPLE_FF_ENTRY) {
			m->runs[m->nruns++] = run;
			run = 0;
		}
	}
	m->runs[m->nruns++] = run;
	/*
	 * Runs are Python frames above an entry frame, one per evaluation
	 * loop's call; an empty one is a call whose frames are not pushed yet
	 * or already popped. Empty segments below the outermost entry (the
	 * end of the chain, 3.15's base frame) are no call.
	 */
	while (m->nruns && !m->runs[m->nruns - 1])
		m->nruns--;
	*out = *r;
	out->frames = m->pyonly;
	out->nframes = n;
	out->unchanged = 0;
	return 0;
}

/* The unwinder of @pid, made at its first sample; NULL when it cannot be. */
static struct native_unwinder *unwinder_of(struct native_mixer *m, pid_t pid)
{
	struct native_proc *p;

	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid)
			return m->procs[i].u;
	p = realloc(m->procs, (m->nprocs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	m->procs = p;
	p = &m->procs[m->nprocs++];
	p->pid = pid;
	p->u = NULL;
	if (native_unwinder__new(pid, &p->u))
		p->u = NULL;
	return p->u;
}

/* libpython or the interpreter's executable: "python3.14", "libpython3.12.so.1.0". */
static bool interp_module(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && (!strncmp(b, "libpython", 9) || !strncmp(b, "python", 6));
}

static bool eval_symbol(const char *sym)
{
	static const char eval[] = "_PyEval_EvalFrameDefault";

	return sym && !strncmp(sym, eval, sizeof(eval) - 1) &&
	       (!sym[sizeof(eval) - 1] || sym[sizeof(eval) - 1] == '.');
}

/* Did @r's stack copy stop short of the whole --stack-size (at the end
 * learnt for its thread, or an unreadable page)? The program copies page
 * by page and stops once within a page of the 32 KB buffer's end. */
static bool copy_cut_short(const struct native_mixer *m, const struct raw_sample *r)
{
	uint32_t whole = m->stack_bytes < PYPROF_USTACK_MAX ? m->stack_bytes :
			 PYPROF_USTACK_MAX - PYPROF_PAGE + 1;

	return r->ustack_len < whole;
}

/*
 * A thread's stack copy needs to reach its outermost frame, whose place is
 * the same in all its samples: found by a complete unwind, it bounds the
 * program's next copies of that thread; a copy that came out short of a
 * stack's end gets the whole size again.
 */
static void learn_stack_end(const struct native_mixer *m, const struct raw_sample *r,
			    const struct native_regs *regs, const struct native_unwind_info *li,
			    bool complete, struct stack_end *end)
{
	/* a few words past the last one read: the outermost frame's CFI may
	 * read a slot above another time (a signal frame's) */
	const uint64_t slack = 256;

	if (complete)
		*end = (struct stack_end){ true, r->tid,
					   regs->r[NATIVE_REG_SP] + li->stack_used + slack };
	else if (li->end == NATIVE_END_STACK && copy_cut_short(m, r))
		*end = (struct stack_end){ true, r->tid, 0 };
}

/* The symbolizer drops frames Python would not show (pushed, not yet
 * started): the newest, the innermost run's. The runs follow suit. */
static void trim_runs(struct native_mixer *m, uint32_t npy)
{
	uint32_t sum = 0, drop;

	for (uint32_t k = 0; k < m->nruns; k++)
		sum += m->runs[k];
	drop = sum > npy ? sum - npy : 0;
	for (uint32_t k = 0; drop && k < m->nruns; k++) {
		uint32_t d = m->runs[k] < drop ? m->runs[k] : drop;

		m->runs[k] -= d;
		drop -= d;
	}
}

_Static_assert(SAMPLE_NREGS == NATIVE_REG_COUNT, "a sample's registers are the unwinder's");

/* @r's native frames, innermost first, into m->nat: how many; *complete
 * when the unwind reached the stack's end. */
static size_t unwind(struct native_mixer *m, struct native_unwinder *u,
		     const struct raw_sample *r, int *complete, struct stack_end *end)
{
	struct native_regs regs;
	struct native_stack st;
	size_t nn = 0;

	native_regs__from_dwarf(&regs, r->uregs);
	m->st.copied += r->ustack_len;
	st = (struct native_stack){ r->ustack, r->uregs[NATIVE_REG_SP] - PYPROF_USTACK_REDZONE,
				    r->ustack_len };
	if (native_unwinder__unwind(u, &regs, &st, m->nat, NATIVE_MAX, &nn, complete))
		return 0;
	learn_stack_end(m, r, &regs, native_unwinder__last(u), *complete, end);
	return nn;
}

/* What the merge needs to know of each native frame: an evaluation loop's
 * (its name, or, in stripped binaries such as Debian's, an entry frame
 * among its locals, 3.12+), the interpreter's own. */
static void classify(struct native_mixer *m, size_t nn)
{
	for (size_t i = 0; i < nn; i++) {
		uint64_t lo = m->nat[i].sp, hi = i + 1 < nn ? m->nat[i + 1].sp : UINT64_MAX;
		bool eval = eval_symbol(m->nat[i].symbol);
		uint32_t run1 = 0;

		for (uint32_t k = 0; !run1 && k < m->nentries; k++)
			if (m->entries[k] >= lo && m->entries[k] < hi)
				run1 = k + 1;
		m->mnat[i] = (struct merge_native){
			eval || run1, interp_module(m->nat[i].module) ||
				      (m->nat[i].flags & NATIVE_FRAME_TRAMPOLINE), run1 };
	}
}

/* The merged items as output frames, in m->merged/kinds/addrs. */
static void fill_frames(struct native_mixer *m, const struct out_sample *s, uint32_t ni)
{
	for (uint32_t i = 0; i < ni; i++) {
		const struct merge_item *it = &m->items[i];

		if (it->kind == MERGE_PYTHON && it->idx < s->nframes) {
			m->merged[i] = s->frames[it->idx];
			m->kinds[i] = OUT_FRAME_PYTHON;
		} else if (it->kind == MERGE_NATIVE) {
			const struct native_frame *f = &m->nat[it->idx];

			m->merged[i] = (struct py_sym){ f->symbol ? f->symbol : "[unknown]",
							f->module ? f->module : "", 0, 0 };
			m->kinds[i] = OUT_FRAME_NATIVE;
			m->addrs[i] = (struct out_addr){ f->pc, f->symbol ? f->offset : 0,
							 f->module ? f->module_base : 0,
							 f->module ? f->module_end : 0,
							 f->module_base, f->build_id,
							 f->build_id_len };
		} else {
			/* a cut, or (cannot be: the runs fit) a Python index past the frames */
			m->merged[i] = (struct py_sym){ "[unwind-failed]", "", 0, 0 };
			m->kinds[i] = OUT_FRAME_STATUS;
		}
	}
}

void native_mixer__merge(struct native_mixer *m, const struct raw_sample *r,
			 struct out_sample *s, struct stack_end *end)
{
	struct native_unwinder *u = unwinder_of(m, r->pid);
	uint32_t ni = 0, npy = s->nframes < MERGE_PY_MAX ? s->nframes : MERGE_PY_MAX;
	size_t nn = 0;
	int complete = 0;
	bool merged;

	*end = (struct stack_end){ 0 };
	m->st.samples++;
	trim_runs(m, s->nframes);
	if (!u)
		m->st.no_unwinder++;
	else
		nn = unwind(m, u, r, &complete, end);
	classify(m, nn);
	/* 3.12+: every run's entry frame known, runs pair by address */
	merged = m->nruns && m->nentries >= m->nruns ?
		 merge__stacks_by_entry(m->mnat, (uint32_t)nn, complete, m->runs, m->nruns, npy,
					m->items, MERGED_MAX, &ni) :
		 merge__stacks(m->mnat, (uint32_t)nn, complete, m->runs, m->nruns, npy, m->items,
			       MERGED_MAX, &ni);
	if (!merged) {
		m->st.unwind_failed++;
		if (u && !complete && native_unwinder__last(u)->end == NATIVE_END_STACK) {
			if (copy_cut_short(m, r))
				m->st.cut_by_end++;	/* the learnt end: learnt again */
			else
				m->st.cut_by_copy++;
		}
	}
	fill_frames(m, s, ni);
	s->frames = m->merged;
	s->nframes = ni;
	s->kinds = m->kinds;
	s->addrs = m->addrs;
	s->unchanged = 0;
}

void native_mixer__stats(const struct native_mixer *m, struct native_mixer_stats *st)
{
	*st = m->st;
}

/* A target's perf map not read is said, with why: its JIT frames stay unnamed. */
void native_mixer__print_warnings(const struct native_mixer *m, FILE *f)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct native_unwinder_stats ns;
		int err;

		if (!m->procs[i].u)
			continue;
		native_unwinder__stats(m->procs[i].u, &ns);
		err = ns.perfmap_refused;
		if (!err)
			continue;
		fprintf(f, "pyprof-bpf: warning: pid %d: its perf map %s was not read: %s\n",
			(int)m->procs[i].pid, ns.perfmap_path,
			err == -EPERM ? "not owned by the process's user" :
			err == -EINVAL ? "not a regular file" :
			err == -ELOOP ? "a symbolic link to nothing inside the process's root" :
			strerror(-err));
	}
}

void native_mixer__print_unwinders(const struct native_mixer *m, FILE *f)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct native_unwinder_stats ns;

		if (!m->procs[i].u)
			continue;
		native_unwinder__stats(m->procs[i].u, &ns);
		fprintf(f, "pyprof-bpf: pid %d: %llu unwinds, %llu complete; ends:",
			(int)m->procs[i].pid, (unsigned long long)ns.unwinds,
			(unsigned long long)ns.complete);
		for (int k = 0; k < NATIVE_END__COUNT; k++)
			if (ns.ends[k])
				fprintf(f, " %s %llu", native_end__name(k),
					(unsigned long long)ns.ends[k]);
		fputc('\n', f);
	}
}
