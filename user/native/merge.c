// SPDX-License-Identifier: MIT
/* merge.c - see merge.h. */
#include "native/merge.h"

static void put(struct merge_item *out, uint32_t max, uint32_t *n, uint8_t kind, uint32_t idx)
{
	if (*n < max)
		out[(*n)++] = (struct merge_item){ kind, idx };
}

/* What does not merge: the native frames up to the first evaluation frame
 * (exact), the cut, every Python frame. */
static bool disagree(const struct merge_native *nat, uint32_t nn, uint32_t npy,
		     struct merge_item *out, uint32_t max, uint32_t *n)
{
	*n = 0;
	for (uint32_t i = 0; i < nn && !nat[i].eval; i++)
		put(out, max, n, MERGE_NATIVE, i);
	put(out, max, n, MERGE_CUT, 0);
	for (uint32_t py = 0; py < npy; py++)
		put(out, max, n, MERGE_PYTHON, py);
	return false;
}

/* How evaluation frames pair with runs, for emit(). */
struct pairing {
	bool by_entry;		/* nat[].run1; else in order, by count */
	bool skip_first;	/* by count: the innermost evaluation frame has none */
	bool fold;		/* interpreter frames below fold_below are folded */
	uint32_t fold_below;	/* (on a complete unwind) */
};

/* The native frames innermost first, each evaluation frame replaced by its
 * run's Python frames (one with no run dropped); on a short unwind the
 * runs it did not reach follow the cut. */
static bool emit(const struct merge_native *nat, uint32_t nn, bool native_complete,
		 const uint32_t *run_len, uint32_t nruns, uint32_t npy, const struct pairing *p,
		 struct merge_item *out, uint32_t max, uint32_t *n)
{
	uint32_t run = 0, py = 0;
	bool skip = p->skip_first;

	*n = 0;
	for (uint32_t i = 0; i < nn; i++) {
		if (nat[i].eval) {
			uint32_t r;

			if (p->by_entry) {
				if (!nat[i].run1)
					continue;	/* no run of this chain (see merge.h) */
				r = nat[i].run1 - 1;
			} else if (skip) {
				skip = false;
				continue;
			} else {
				r = run++;
			}
			for (uint32_t j = 0; r < nruns && j < run_len[r]; j++)
				put(out, max, n, MERGE_PYTHON, py++);
			continue;
		}
		/* The interpreter's frames below its outermost run are folded
		 * (known only when the unwind reached the stack's end). */
		if (native_complete && p->fold && nat[i].interp && i > p->fold_below)
			continue;
		put(out, max, n, MERGE_NATIVE, i);
	}
	if (native_complete)
		return true;
	put(out, max, n, MERGE_CUT, 0);
	for (; py < npy; py++)
		put(out, max, n, MERGE_PYTHON, py);
	return false;
}

bool merge__stacks_by_entry(const struct merge_native *nat, uint32_t nn, bool native_complete,
			    const uint32_t *run_len, uint32_t nruns, uint32_t npy,
			    struct merge_item *out, uint32_t max, uint32_t *n)
{
	struct pairing p = { .by_entry = true };
	uint32_t next = 0;

	for (uint32_t i = 0; i < nn; i++) {
		if (!nat[i].run1)
			continue;
		/* innermost first on both sides: each run the next one */
		if (!nat[i].eval || nat[i].run1 - 1 != next++)
			return disagree(nat, nn, npy, out, max, n);
		p.fold = true;
		p.fold_below = i;
	}
	if (native_complete && next != nruns)
		return disagree(nat, nn, npy, out, max, n);
	return emit(nat, nn, native_complete, run_len, nruns, npy, &p, out, max, n);
}

bool merge__stacks(const struct merge_native *nat, uint32_t nn, bool native_complete,
		   const uint32_t *run_len, uint32_t nruns, uint32_t npy,
		   struct merge_item *out, uint32_t max, uint32_t *n)
{
	struct pairing p = { 0 };
	uint32_t evals = 0;

	for (uint32_t i = 0; i < nn; i++)
		if (nat[i].eval) {
			evals++;
			p.fold = true;
			p.fold_below = i;
		}
	/*
	 * One evaluation frame more than runs: the innermost call of the loop
	 * is being entered or left (its entry frame not linked yet, or
	 * unlinked already): an empty run of its own. Only the innermost call
	 * can be there; the others are suspended in calls.
	 */
	p.skip_first = evals == nruns + 1;
	/*
	 * More evaluation frames than runs: they cannot be paired. The native
	 * frames up to the first evaluation frame are exact, as are the
	 * Python frames; nothing in between is guessed.
	 */
	if (evals > nruns + p.skip_first || (native_complete && evals != nruns + p.skip_first))
		return disagree(nat, nn, npy, out, max, n);
	return emit(nat, nn, native_complete, run_len, nruns, npy, &p, out, max, n);
}
