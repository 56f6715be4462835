/* SPDX-License-Identifier: MIT */
/*
 * chain_shape.h - the shape check of a chain walked in a copy of a thread's
 * stack chunks (chain_shape.c), for frame_walk.c.
 */
#ifndef PYPROF_TARGET_CHAIN_SHAPE_H
#define PYPROF_TARGET_CHAIN_SHAPE_H

#include <stdint.h>

struct frame_sizes;
struct pyproc;
struct stack_chunks;

/*
 * The shape of a chain walked in a copy of the chunks (frame_sizes.h): going
 * from the innermost frame outwards, each frame met in a chunk ends where
 * the newer one met in a chunk begins (the first: at the data stack's top,
 * read with the current frame), or that newer one opens its chunk. Frames
 * apart from the chunks (entry frames on the C stack, generators') are not
 * on the data stack and are passed over.
 */
struct chain_shape {
	struct frame_sizes *sizes;	/* NULL: not checked */
	uint64_t current;		/* the innermost frame (the only one running) */
	uint64_t newer;			/* the last frame met in a chunk; 0: none yet */
	int newer_chunk;
	int callee_inline;		/* the last frame met was pushed by its caller's
					 * own instruction (call_sites.h) */
	int moving;			/* the chain broke because the thread moved */
};

/* One frame met in the walk: 0, or -EAGAIN when it cannot be where the
 * copy has it (the check's comment in chain_shape.c). */
int chain_shape__frame(struct chain_shape *k, struct pyproc *p,
			      const struct stack_chunks *s, uint64_t frame, const unsigned char *b,
			      uint64_t code, uint8_t owner, int copied);

/*
 * The walk is over (@truncated: before its end): the chain reached the
 * bottom of the data stack, the first frame of its oldest chunk; a chain
 * with no frame on it is one of an empty stack. Else a frame read apart
 * (a dead entry frame on the C stack) cut it short: -EAGAIN.
 */
int chain_shape__end(const struct chain_shape *k, const struct stack_chunks *s,
			    int truncated);

#endif
