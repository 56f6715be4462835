/* SPDX-License-Identifier: MIT */
/*
 * stack_memo.h - each thread's previous stack, so that a sample pays only
 * for the frames that changed since that thread's last sample.
 *
 * Consecutive samples of a thread mostly share their outer frames: a deep
 * stack whose leaf moves resolves and models the same callers every time.
 * A raw frame identical to the previous sample's (same frame address, code
 * object, co_version and instruction) has the same symbol, so the outermost
 * run of such frames keeps the symbols it had; only the inner frames go
 * through the symbolizer. Frames without a co_version (3.11, or unknown)
 * are never taken as identical: their code object's address may have been
 * reused. A frame that did not resolve cleanly is never reused either.
 *
 * The caller learns how many outermost symbols are those of the thread's
 * previous stack (struct out_sample.unchanged), so the output model can skip
 * them too. The sampler's hint (struct raw_sample.unchanged, from the 3.15
 * frame cache) spares even the comparison of the spliced callers.
 *
 * The steady state allocates nothing: a thread's buffers grow to its
 * deepest stack and are reused. Not thread-safe.
 */
#ifndef PYPROF_STACK_MEMO_H
#define PYPROF_STACK_MEMO_H

#include <stddef.h>
#include <stdint.h>
#include "types/raw_sample.h"
#include "symbols/symbolizer.h"

struct stack_memo;

/* @max_frames: the deepest stack a sample may hold. */
int stack_memo__new(unsigned int max_frames, struct stack_memo **out);
void stack_memo__free(struct stack_memo *m);

/*
 * Symbols of @r's frames, innermost first, in *syms (valid until the next
 * call): frames Python does not show are dropped, frames that cannot be read
 * become "<unknown>" and are counted in *unresolved (as
 * symbolizer__resolve_stack). *nsyms: how many. *same: how many of the
 * outermost are, symbol for symbol, those this function gave for the same
 * thread last time (0 when unknown). Returns 0 or -ENOMEM (then nothing is
 * reused for this thread, but *syms is still filled).
 */
int stack_memo__resolve(struct stack_memo *m, struct symbolizer *sym,
			const struct raw_sample *r, const struct py_sym **syms,
			uint32_t *nsyms, uint32_t *same, size_t *unresolved);

struct stack_memo_stats {
	uint64_t frames;	/* raw frames seen */
	uint64_t reused;	/* of which taken from the previous stack */
};
void stack_memo__stats(const struct stack_memo *m, struct stack_memo_stats *st);

#endif
