// SPDX-License-Identifier: MIT
/*
 * chain_shape.c - whether a chain walked in a copy of a thread's stack
 * chunks has the shape a real one has (chain_shape.h): where a break is the
 * thread moving (a torn read, tried again) and where it is corruption.
 * Split from frame_walk.c, which walks and keeps; this file judges.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "target/call_sites.h"
#include "target/chain_shape.h"
#include "target/frame_sizes.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "target/stack_chunks.h"
#include "util/bytes.h"

/* A frame's owner (3.11 to 3.15): its thread's data stack, a generator, a
 * frame object; above, the interpreter's own frames (3, and 4 in 3.14). */
#define PY_FRAME_OWNED_BY_THREAD 0
#define PY_FRAME_OWNED_BY_GENERATOR 1
#define PY_FRAME_OWNER_MAX 4
/* Frames being cleared between two of a chain's (frame_reaches()). */
#define DYING_MAX 4

/*
 * Whether @frame (of @code) and the frames right above it on the data stack
 * that no chain reaches end at @end. Those are frames being cleared: a
 * function that returned is unlinked first (the current frame is its
 * parent's), then its locals are released, which may take long (freeing a
 * big structure) or run Python (a __del__, whose frame goes above it), and
 * only then popped. Each keeps its code until popped (2 hops on sympy; at
 * most DYING_MAX are followed).
 */
static int frame_reaches(struct pyproc *p, struct frame_sizes *fs, const struct stack_chunks *s,
			 uint64_t frame, uint64_t code, uint64_t end, int fresh)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t at = frame;
	uint32_t bytes;
	int apart, rc;

	for (int hop = 0; hop <= DYING_MAX; hop++) {
		const unsigned char *b;

		if (hop) {
			b = stack_chunks__find(s, at, o->frame_size, &apart);
			if (!b)
				return 0;
			code = get_u64(b, o->frame_executable) & ~o->executable_tag_mask;
		}
		rc = code ? frame_sizes__get(fs, pyproc__pid(p), o, pyproc__code_type(p), code,
					     fresh, &bytes, NULL) : -ENOENT;
		/* A chain frame whose code is unreadable or no code object
		 * (the target wrote it so, or a torn frame): its end cannot
		 * be checked, and it is shown <unknown>, not as someone's. */
		if (rc == -ENOMEM || (rc && hop))
			return 0;
		if (rc)
			return 1;
		at += bytes;
		if (at >= end)
			return at == end;
	}
	return 0;
}

static int frame_ends_at(struct pyproc *p, struct frame_sizes *fs, const struct stack_chunks *s,
			 uint64_t frame, uint64_t code, uint64_t end)
{
	/* a size kept for a code object since freed: read them again once */
	return frame_reaches(p, fs, s, frame, code, end, 0) ||
	       frame_reaches(p, fs, s, frame, code, end, 1);
}

/*
 * Whether the innermost frame on the data stack, @frame (of @code), ends at
 * its top: exactly or through frames being cleared (frame_ends_at()), or
 * under one frame being pushed or popped. CPython moves the top up before
 * it writes a new frame (the bytes there are then an older frame's, any of
 * them), and clears a returning frame's code before it moves the top down:
 * a thread between those instructions and the one that makes the new frame
 * current (or after the returning one stopped being current) shows the
 * chain under it, whole. A thread preempted there shows it in every copy
 * (0.1-0.7% of docutils_sections.py's samples with other work on the CPUs,
 * each given up as a corrupt chain before). The frame's room must hold a
 * frame's fixed part, which both copies of the newest chunk show alike. Or
 * the innermost frame begins at the top: popped, not yet replaced as the
 * current frame (its bytes, as every newest frame's, alike in both copies).
 */
static int frame_ends_at_top(struct pyproc *p, struct frame_sizes *fs,
			     const struct stack_chunks *s, uint64_t frame, uint64_t code)
{
	const struct py_offsets *o = pyproc__offsets(p);
	const unsigned char *b, *b2;
	uint64_t end;
	uint32_t bytes;
	int apart;

	/* popped while still current (RETURN_GENERATOR pops the frame it
	 * copied into the generator before it makes the caller current) */
	if (frame == s->top || frame_ends_at(p, fs, s, frame, code, s->top))
		return 1;
	if (frame_sizes__get(fs, pyproc__pid(p), o, pyproc__code_type(p), code, 0, &bytes, NULL))
		return 0;
	end = frame + bytes;
	if (end > s->top || s->top - end < o->frame_localsplus)
		return 0;
	b = stack_chunks__find(s, end, o->frame_localsplus, &apart);
	b2 = stack_chunks__again(s, end, o->frame_localsplus);
	return b && b2 && !memcmp(b, b2, o->frame_localsplus);
}

/*
 * A frame of the newest chunk, @b its bytes in the first copy: the second
 * copy has the same code and parent, and, for a caller (@caller), the same
 * instruction (only the innermost frame runs). A thread that went back to
 * the same current frame and top during the copy (a loop calling the same
 * chain again) shows callers whose instruction moved.
 */
static int same_in_both_copies(const struct py_offsets *o, const struct stack_chunks *s,
			       uint64_t frame, const unsigned char *b, int caller)
{
	const unsigned char *b2 = stack_chunks__again(s, frame, o->frame_size);

	return b2 && get_u64(b, o->frame_executable) == get_u64(b2, o->frame_executable) &&
	       get_u64(b, o->frame_previous) == get_u64(b2, o->frame_previous) &&
	       (!caller || get_u64(b, o->frame_instr_ptr) == get_u64(b2, o->frame_instr_ptr));
}

/*
 * A caller (@b its bytes, of @code) that has not gone past its first
 * instruction is a frame of another instant: the copy caught it being
 * pushed again. No function calls from there (its first instruction is
 * RESUME, or one that makes its cells); only the 3.13+ __init__ shim (a
 * trampoline) does. 3.11/3.12 point at the last instruction run (the one
 * before the first, for a frame just pushed), 3.13+ at the current one.
 */
static int never_started(struct pyproc *p, struct frame_sizes *fs, const unsigned char *b,
			 uint64_t code)
{
	const struct py_offsets *o = pyproc__offsets(p);
	uint64_t instr = get_u64(b, o->frame_instr_ptr);
	uint32_t bytes, flags;

	if (o->frame_instr_is_prev)
		return instr == code + o->code_adaptive - 2 || instr == code + o->code_adaptive;
	return instr == code + o->code_adaptive &&
	       !frame_sizes__get(fs, pyproc__pid(p), o, pyproc__code_type(p), code, 0, &bytes,
				 &flags) &&
	       !(flags & FRAME_SIZES_CO_NO_MONITORING);
}

/*
 * A caller (@b its bytes, of @code) that pushed its callee itself, at an
 * instruction that never pushes a frame (call_sites.h), is a frame of
 * another instant: a thread that runs the same chain again and again at
 * the same addresses shows the same current frame, top, codes and parents
 * in every pass, and a copy that spans two passes holds callers whose
 * instruction moved on (a loop's JUMP_BACKWARD under a live callee).
 */
static int not_a_call_site(struct pyproc *p, const unsigned char *b, uint64_t code)
{
	const struct py_offsets *o = pyproc__offsets(p);
	struct call_sites *cs = pyproc__call_sites(p);
	enum call_site site;

	return cs && !call_sites__at(cs, pyproc__pid(p), o, code, get_u64(b, o->frame_instr_ptr),
				     &site) && site == CALL_SITE_PLAIN;
}

/*
 * 0, or -EAGAIN when @frame (of @code, @b its bytes; @copied: the copy's)
 * cannot be where the copy has it. A frame apart from the chunks, read on
 * its own (an entry frame on the C stack, a generator's), is checked
 * through its neighbours: the next frame met in a chunk must still end
 * where the last one began.
 */
static int chain_shape__check(struct chain_shape *k, struct pyproc *p,
			      const struct stack_chunks *s, uint64_t frame, const unsigned char *b,
			      uint64_t code, uint8_t owner, int copied)
{
	const struct py_offsets *o = pyproc__offsets(p);
	int interp = o->frame_owner_interp_min && owner >= o->frame_owner_interp_min;
	int i;

	if (owner > PY_FRAME_OWNER_MAX || (!interp && !code))
		return -EAGAIN;	/* not a frame, or one being cleared */
	i = stack_chunks__chunk_of(s, frame);
	if (i < 0) {
		/* apart from the data stack: a generator's or an entry frame
		 * (a dead one on the C stack is anything) */
		return owner == PY_FRAME_OWNED_BY_GENERATOR || interp ? 0 : -EAGAIN;
	}
	if (!copied)
		return -EAGAIN;	/* on the data stack, past what was copied */
	if (i == 0 && !same_in_both_copies(o, s, frame, b, frame != k->current)) {
		k->moving = 1;	/* the two copies differ: no sign of corruption */
		return -EAGAIN;
	}
	if (frame != k->current && !interp && never_started(p, k->sizes, b, code))
		return -EAGAIN;
	if (owner != PY_FRAME_OWNED_BY_THREAD && !interp)
		return -EAGAIN;
	if (!k->newer) {
		/* the innermost frame on the data stack is in its newest chunk */
		if (i != 0 || !frame_ends_at_top(p, k->sizes, s, frame, code))
			return -EAGAIN;
	} else if (i == k->newer_chunk) {
		if (!frame_ends_at(p, k->sizes, s, frame, code, k->newer))
			return -EAGAIN;
	} else if (i < k->newer_chunk || !stack_chunks__is_first_frame(s, k->newer_chunk, k->newer)) {
		return -EAGAIN;
	}
	/* (last: it may read the code's instructions, once per call site) */
	if (frame != k->current && !interp && k->callee_inline && not_a_call_site(p, b, code))
		return -EAGAIN;
	k->newer = frame;
	k->newer_chunk = i;
	return 0;
}

int chain_shape__frame(struct chain_shape *k, struct pyproc *p,
			      const struct stack_chunks *s, uint64_t frame, const unsigned char *b,
			      uint64_t code, uint8_t owner, int copied)
{
	int rc;

	if (!k->sizes)
		return 0;
	rc = chain_shape__check(k, p, s, frame, b, code, owner, copied);
	k->callee_inline = !rc && call_sites__pushed_inline(pyproc__offsets(p), b, owner);
	return rc;
}

/*
 * The walk is over (@truncated: before its end): the chain reached the
 * bottom of the data stack, the first frame of its oldest chunk; a chain
 * with no frame on it is one of an empty stack. Else a frame read apart
 * (a dead entry frame on the C stack) cut it short: -EAGAIN.
 */
int chain_shape__end(const struct chain_shape *k, const struct stack_chunks *s,
			    int truncated)
{
	if (!k->sizes || truncated)
		return 0;
	if (!k->newer)
		return s->ncopied && stack_chunks__is_first_frame(s, 0, s->top) ? 0 : -EAGAIN;
	if ((size_t)k->newer_chunk + 1 != s->ncopied ||
	    !stack_chunks__is_first_frame(s, k->newer_chunk, k->newer))
		return -EAGAIN;
	return 0;
}
