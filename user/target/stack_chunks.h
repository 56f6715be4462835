/* SPDX-License-Identifier: MIT */
/*
 * stack_chunks.h - a thread's data stack copied in one read (3.11+).
 *
 * CPython 3.11+ keeps a thread's interpreter frames in "stack chunks"
 * (_PyStackChunk: previous, size, top, then the frames), linked from the
 * thread state's datastack_chunk. Reading each frame on its own while the
 * thread runs gives stacks torn between instants; copying the chunks in one
 * process_vm_readv, with the current frame and the data stack's top read
 * before, between and after two copies of the newest chunk (only up to its
 * top), gives the frames of one instant when none of those moved and the
 * two copies agree (frame_walk.c checks the chain in them).
 *
 * The chunks to copy are predicted from the last copy of the same thread
 * (their addresses and sizes rarely change); a copy is "whole" only when the
 * prediction held: the thread state named the first chunk, each copied
 * chunk's previous is the next one copied, the last has none, and the
 * current frame pointer and the data stack's top (datastack_top) were the
 * same before and after. Every size read
 * from the target is bounded.
 *
 * 3.15 frame cache: with a floor (the thread's anchor, a frame of a chunk
 * copied last time), only the chunks from the newest down to the floor's
 * are copied, that one from the floor up (its header read apart): the
 * frames below are the frame cache's (user/sampling/frame_cache.h). The
 * anchor and its sequence are read in each of the three readings of the
 * thread state, and must agree too.
 */
#ifndef PYPROF_STACK_CHUNKS_H
#define PYPROF_STACK_CHUNKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/remote_mem.h"

#define STACK_CHUNKS_MAX 32		/* chunks copied per thread */
#define STACK_CHUNK_HEADER 24		/* previous, size, top */
#define STACK_CHUNK_DEFAULT (16u << 10)	/* _PY_DATA_STACK_CHUNK_SIZE */
#define STACK_CHUNK_MAX (1u << 20)	/* bytes copied of one chunk */
#define STACK_CHUNKS_BYTES (4u << 20)	/* bytes copied of one thread */
#define STACK_TOP_SLACK 2048		/* copied past the newest chunk's top */

struct stack_chunk {
	uint64_t addr;
	size_t want;		/* bytes to copy: its size, as it last said (the
				 * newest chunk: up to its top and some) */
	size_t len;		/* bytes of it in buf from the last copy */
	size_t size;		/* its size, as the last copy said */
	size_t from;		/* buf holds its bytes from here (0, or a floor's) */
	unsigned char hdr[STACK_CHUNK_HEADER];	/* read apart when from > 0 */
	unsigned char *buf;
	size_t cap;
};

/* The thread state's fields a copy reads with the current frame (3.15; 0:
 * none): base_frame, and last_profiled_frame with its sequence after it. */
struct stack_anchor_fields {
	uint64_t base;
	uint64_t anchor;
};

/* Frames outside the chunks (3.12+ evaluation loops' entry frames live on
 * the C stack, generators' in the generator) that the last walk met: read in
 * the same call, at their addresses of last time. */
#define STACK_APART_MAX 8
#define STACK_APART_BYTES 128

struct stack_chunks {
	struct stack_chunk c[STACK_CHUNKS_MAX];
	uint64_t apart[STACK_APART_MAX];
	unsigned char apart_buf[STACK_APART_MAX][STACK_APART_BYTES];
	size_t napart;		/* to read next time */
	size_t apart_read;	/* apart[0..apart_read) hold the last copy */
	uint64_t apart_new[STACK_APART_MAX];	/* the walk's list for next time */
	size_t apart_next;
	size_t n;		/* chunks to copy next time */
	size_t ncopied;		/* chunks c[0..ncopied) hold the last copy */
	uint64_t top;		/* datastack_top, read with the current frame */
	unsigned char *again;	/* the newest chunk copied a second time */
	size_t again_len, again_cap;
	int whole;		/* the last copy was of one instant, every chunk */
	int moved;		/* ... but the current frame or the top moved */
	int relearned;		/* not whole, as the chunks were not as predicted:
				 * the next copy is as they are now */
	/* In: where to read the anchor (3.15), and the floor: copy no
	 * further down than this frame (0: whole). */
	struct stack_anchor_fields fields;
	uint64_t floor;
	/* Out: the floor was used (the oldest chunk copied is the floor's),
	 * and the anchor, sequence and base frame read with the copy
	 * (anchor_read: in all three readings, the same). */
	int floored;
	int anchor_read;
	uint64_t anchor, seq, base;
};

/*
 * Copy the chunks of the thread whose datastack_chunk field is at
 * @chunk_field, in one read with the @nhead iovecs of @head (the current
 * frame pointer's, last) before them and the last of them again after.
 * Sets s->whole; *frame_after gets the current frame pointer read after the
 * chunks. Returns 0 (the head iovecs read), -ESRCH, or another -errno (the
 * head could not be read: nothing copied).
 */
int stack_chunks__copy(pid_t pid, uint64_t chunk_field, const struct remote_iov *head,
		       size_t nhead, struct stack_chunks *s, uint64_t *frame_after);

/* @len bytes at @addr in the last copy, or NULL when they are not all there;
 * *apart: the frame is not in a chunk copied (so the walk notes it). */
const unsigned char *stack_chunks__find(const struct stack_chunks *s, uint64_t addr, size_t len,
					int *apart);

/* @len bytes at @addr in the second copy of the newest chunk, or NULL. */
const unsigned char *stack_chunks__again(const struct stack_chunks *s, uint64_t addr, size_t len);

/* The chunk of the last copy (0: the newest) whose range holds @addr, copied
 * or not; -1 if none. */
int stack_chunks__chunk_of(const struct stack_chunks *s, uint64_t addr);
/* Whether @addr is where the first frame of chunk @i goes. */
int stack_chunks__is_first_frame(const struct stack_chunks *s, int i, uint64_t addr);

/* The walk met a frame at @addr apart from the chunks: read it with the next copy. */
void stack_chunks__note_apart(struct stack_chunks *s, uint64_t addr);
/* The walk is over: what it met apart is what the next copy reads. */
void stack_chunks__walked(struct stack_chunks *s);

void stack_chunks__free(struct stack_chunks *s);

#endif
