// SPDX-License-Identifier: MIT
/*
 * stack_memo.c - each thread's previous stack, reused frame for frame from
 * the outermost (see stack_memo.h).
 *
 * Per thread: the previous raw frames stored outermost first (so a deeper
 * or shallower stack never moves them), how many symbols the outermost j
 * of them gave, and the symbols themselves, innermost first as the output
 * wants them (moved only when the number of inner symbols changes).
 * Threads live in an open-addressing table keyed by tid; entries are never
 * removed (a tid the kernel reuses only meets frames to compare, and equal
 * frames have equal symbols).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "symbols/stack_memo.h"

/* Threads with a memo; later ones are resolved without one. */
#define SM_MAX_THREADS	2048
#define SM_SLOTS	4096		/* power of two, 2x the above */

struct sm_thread {
	pid_t tid;			/* 0: free slot */
	struct py_rawframe *raw;	/* outermost first */
	uint32_t *cum;			/* cum[j]: symbols of the outermost j */
	struct py_sym *syms;		/* innermost first */
	uint32_t nraw, nsyms, cap;
	uint32_t clean;			/* outermost raw frames resolved cleanly */
};

struct stack_memo {
	unsigned int max_frames;
	struct sm_thread *slots;
	uint32_t nthreads;
	struct py_sym *scratch;		/* new symbols, outermost first */
	struct py_sym *fallback;	/* a thread without a memo */
	struct stack_memo_stats st;
};

int stack_memo__new(unsigned int max_frames, struct stack_memo **out)
{
	struct stack_memo *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->max_frames = max_frames ? max_frames : 1;
	m->slots = calloc(SM_SLOTS, sizeof(*m->slots));
	m->scratch = calloc(m->max_frames, sizeof(*m->scratch));
	m->fallback = calloc(m->max_frames, sizeof(*m->fallback));
	if (!m->slots || !m->scratch || !m->fallback) {
		stack_memo__free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void stack_memo__free(struct stack_memo *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; m->slots && i < SM_SLOTS; i++) {
		free(m->slots[i].raw);
		free(m->slots[i].cum);
		free(m->slots[i].syms);
	}
	free(m->slots);
	free(m->scratch);
	free(m->fallback);
	free(m);
}

void stack_memo__stats(const struct stack_memo *m, struct stack_memo_stats *st)
{
	*st = m->st;
}

static struct sm_thread *find_or_add(struct stack_memo *m, pid_t tid)
{
	uint32_t i = ((uint32_t)tid * 2654435761u) & (SM_SLOTS - 1);

	if (tid <= 0)
		return NULL;
	for (uint32_t k = 0; k < SM_SLOTS; k++, i = (i + 1) & (SM_SLOTS - 1)) {
		if (m->slots[i].tid == tid)
			return &m->slots[i];
		if (!m->slots[i].tid)
			break;
	}
	if (m->nthreads >= SM_MAX_THREADS || m->slots[i].tid)
		return NULL;
	m->slots[i].tid = tid;
	m->nthreads++;
	return &m->slots[i];
}

static int reserve(struct sm_thread *t, uint32_t n)
{
	uint32_t cap = t->cap ? t->cap : 32;
	void *p;

	/* Allocated at the first call even for no frame: cum[0] is written. */
	if (n <= t->cap && t->cum)
		return 0;
	while (cap < n)
		cap *= 2;
	/* cum has one more entry: the count of all frames. */
	if (!(p = realloc(t->raw, (size_t)cap * sizeof(*t->raw))))
		return -ENOMEM;
	t->raw = p;
	if (!(p = realloc(t->cum, ((size_t)cap + 1) * sizeof(*t->cum))))
		return -ENOMEM;
	t->cum = p;
	if (!(p = realloc(t->syms, (size_t)cap * sizeof(*t->syms))))
		return -ENOMEM;
	t->syms = p;
	t->cap = cap;
	return 0;
}

/* Same frame, same code object (the version says it is not a reused
 * address), same instruction: same symbol. */
static int same_frame(const struct py_rawframe *a, const struct py_rawframe *b)
{
	return a->code_version && a->frame == b->frame && a->code == b->code &&
	       a->instr == b->instr && a->code_version == b->code_version;
}

static int exact_frame(const struct py_rawframe *a, const struct py_rawframe *b)
{
	return a->frame == b->frame && a->code == b->code && a->instr == b->instr &&
	       a->code_version == b->code_version;
}

/* Outermost frames of @r's first @n (the ones kept, innermost first) that
 * are those of @t's previous stack. */
static uint32_t unchanged(const struct sm_thread *t, const struct raw_sample *r, uint32_t n)
{
	const struct py_rawframe *f = r->frames;
	uint32_t lim = n, u = 0, h = r->unchanged;

	if (lim > t->nraw)
		lim = t->nraw;
	if (lim > t->clean)
		lim = t->clean;
	/* The sampler's hint: its ends are checked, the rest trusted (the
	 * frame cache spliced them from the very frames compared here). */
	if (h && h <= lim && exact_frame(&f[n - 1], &t->raw[0]) &&
	    exact_frame(&f[n - h], &t->raw[h - 1]))
		u = h;
	while (u < lim && same_frame(&f[n - 1 - u], &t->raw[u]))
		u++;
	return u;
}

int stack_memo__resolve(struct stack_memo *m, struct symbolizer *sym,
			const struct raw_sample *r, const struct py_sym **syms,
			uint32_t *nsyms, uint32_t *same, size_t *unresolved)
{
	const struct py_rawframe *f = r->frames;
	uint32_t n = r->nframes, u, c, k = 0, clean;
	struct sm_thread *t;
	size_t got;
	int err = 0;

	if (n > m->max_frames)
		n = m->max_frames;
	*same = 0;
	m->st.frames += n;
	t = find_or_add(m, r->tid);
	if (t && (err = reserve(t, n)) != 0) {
		t->nraw = t->nsyms = t->clean = 0;
		t = NULL;
	}
	if (!t) {
		symbolizer__resolve_stack(sym, f, n, m->fallback, &got, unresolved);
		*syms = m->fallback;
		*nsyms = (uint32_t)got;
		return err;
	}

	t->cum[0] = 0;
	u = unchanged(t, r, n);
	c = t->cum[u];
	m->st.reused += u;

	/* The inner frames, outermost first, as they continue the kept ones. */
	symbolizer__next_sample(sym);
	clean = u;
	for (uint32_t j = u; j < n; j++) {
		const struct py_rawframe *rf = &f[n - 1 - j];
		int rc = symbolizer__resolve(sym, rf, &m->scratch[k]);

		t->raw[j] = *rf;
		if (rc == -ENOENT) {
			/* Dropped, as Python would: a clean non-symbol. */
		} else {
			if (rc) {
				m->scratch[k] = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
				(*unresolved)++;
			}
			k++;
		}
		t->cum[j + 1] = c + k;
		if (clean == j && (!rc || rc == -ENOENT))
			clean = j + 1;
	}
	/* Kept symbols go after the k new ones. */
	if (c && t->nsyms - c != k)
		memmove(t->syms + k, t->syms + (t->nsyms - c), (size_t)c * sizeof(*t->syms));
	for (uint32_t i = 0; i < k; i++)
		t->syms[i] = m->scratch[k - 1 - i];
	t->nraw = n;
	t->nsyms = k + c;
	t->clean = clean;
	*syms = t->syms;
	*nsyms = t->nsyms;
	*same = c;
	return 0;
}
