// SPDX-License-Identifier: MIT
/* merge.c - see merge.h. */
#include "native/merge.h"

static void put(struct merge_item *out, uint32_t max, uint32_t *n, uint8_t kind, uint32_t idx)
{
	if (*n < max)
		out[(*n)++] = (struct merge_item){ kind, idx };
}

bool merge__stacks(const struct merge_native *nat, uint32_t nn, bool native_complete,
		   const uint32_t *run_len, uint32_t nruns, uint32_t npy,
		   struct merge_item *out, uint32_t max, uint32_t *n)
{
	uint32_t evals = 0, last_eval = 0, runs = 0, run = 0, py = 0;
	bool extra;

	*n = 0;
	for (uint32_t i = 0; i < nn; i++)
		if (nat[i].eval) {
			evals++;
			last_eval = i;
		}
	runs = nruns;
	/*
	 * One evaluation frame more than runs: the innermost call of the loop
	 * is being entered or left (its entry frame not linked yet, or
	 * unlinked already): an empty run of its own. Only the innermost call
	 * can be there; the others are suspended in calls.
	 */
	extra = evals == runs + 1;
	/*
	 * More evaluation frames than runs: they cannot be paired. The native
	 * frames up to the first evaluation frame are exact, as are the
	 * Python frames; nothing in between is guessed.
	 */
	if (evals > runs + extra || (native_complete && evals != runs + extra)) {
		for (uint32_t i = 0; i < nn && !nat[i].eval; i++)
			put(out, max, n, MERGE_NATIVE, i);
		put(out, max, n, MERGE_CUT, 0);
		for (; py < npy; py++)
			put(out, max, n, MERGE_PYTHON, py);
		return false;
	}
	for (uint32_t i = 0; i < nn; i++) {
		if (nat[i].eval) {
			if (extra) {
				extra = false;
				continue;
			}
			for (uint32_t j = 0; run < nruns && j < run_len[run]; j++)
				put(out, max, n, MERGE_PYTHON, py++);
			run++;
			continue;
		}
		/* The interpreter's frames below its outermost run are folded
		 * (known only when the unwind reached the stack's end). */
		if (native_complete && nat[i].interp && evals && i > last_eval)
			continue;
		put(out, max, n, MERGE_NATIVE, i);
	}
	if (native_complete)
		return true;
	/* The unwind stopped short: the runs it did not reach follow the cut. */
	put(out, max, n, MERGE_CUT, 0);
	for (; py < npy; py++)
		put(out, max, n, MERGE_PYTHON, py);
	return false;
}
