/* SPDX-License-Identifier: MIT */
/*
 * merge.h - one sample's native and Python frames in true call order.
 *
 * The Python frames of a sample come in runs, one per call of the
 * interpreter's evaluation loop (_PyEval_EvalFrameDefault): Python calls
 * Python inside one run, and a call from C (sorted()'s key function, a
 * ctypes callback, re.sub with a function) starts a new run. The native
 * stack has one evaluation-loop frame per run, in the same order, so each
 * is replaced by its run's Python frames.
 *
 * Native frames outside the interpreter (extensions, libc, libffi, libz)
 * always show. The interpreter's own C frames show where they are the leaf
 * (the C code Python called: list.sort, dict resizing, the collector) or
 * stand between two runs (the C code that called back into Python); those
 * below the outermost run (main, Py_RunMain, the thread bootstrap) are
 * folded: they are the same in every sample and say nothing.
 */
#ifndef PYPROF_NATIVE_MERGE_H
#define PYPROF_NATIVE_MERGE_H

#include <stdbool.h>
#include <stdint.h>

/* A native frame, innermost first, as the merge needs to know it. */
struct merge_native {
	bool eval;		/* an evaluation loop's frame (or its .cold part) */
	bool interp;		/* in the interpreter's own binary or libpython */
	/* By entry (3.12+): 1 + the run whose entry frame lies in this frame's
	 * stack (between its sp and its caller's); 0: none */
	uint32_t run1;
};

enum merge_kind {
	MERGE_PYTHON,		/* idx: a Python frame */
	MERGE_NATIVE,		/* idx: a native frame */
	MERGE_CUT,		/* [unwind-failed]: what follows is not merged */
};

struct merge_item {
	uint8_t kind;		/* enum merge_kind */
	uint32_t idx;
};

/*
 * Merge @nn native frames (innermost first; @native_complete: unwound to
 * the stack's end) with @npy Python frames (innermost first) cut into
 * @nruns runs of run_len[] frames each (innermost run first; a run may be
 * empty: an evaluation loop's call whose frames are not pushed yet, or
 * popped already, pairs with its evaluation frame all the same). Writes at
 * most @max items, innermost first, into @out and their number into *n.
 * Returns true when the stacks agree; false when they do not (runs and
 * evaluation frames do not pair up, or the unwind stopped short): the
 * items are then the native frames up to where they agree, a MERGE_CUT,
 * and every Python frame not placed yet, so nothing is guessed or lost.
 */
bool merge__stacks(const struct merge_native *nat, uint32_t nn, bool native_complete,
		   const uint32_t *run_len, uint32_t nruns, uint32_t npy,
		   struct merge_item *out, uint32_t max, uint32_t *n);

/*
 * As merge__stacks(), when every run's entry frame is known (3.12+: the
 * interpreter frame that starts a run lives in its evaluation loop's C
 * frame) and nat[].run1 says which frame holds which: runs pair with
 * evaluation frames by address, not by count. An evaluation frame that
 * holds no run of the chain is dropped: its call is being entered or left,
 * or its Python frames are not this thread's current chain (a greenlet
 * runs on top of its parent's suspended C stack, whose evaluation loops
 * belong to the parent's frames). Runs out of order, or one whose frame
 * the unwind did not reach on a complete stack: the cut, as there.
 */
bool merge__stacks_by_entry(const struct merge_native *nat, uint32_t nn, bool native_complete,
			    const uint32_t *run_len, uint32_t nruns, uint32_t npy,
			    struct merge_item *out, uint32_t max, uint32_t *n);

#endif
