/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include "target/stack_read.h"

int stack_read__init(struct stack_read *r, size_t max)
{
	*r = (struct stack_read){ .max = max, .room = 2 * max + 16 };
	r->frames = calloc(r->room, sizeof(*r->frames));
	r->check = calloc(r->room, sizeof(*r->check));
	if (!r->frames || !r->check) {
		stack_read__free(r);
		return -ENOMEM;
	}
	return 0;
}

void stack_read__free(struct stack_read *r)
{
	free(r->frames);
	free(r->check);
	r->frames = r->check = NULL;
}

static bool same_stack(const struct py_rawframe *a, const struct py_rawframe *b, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (a[k].frame != b[k].frame || a[k].code != b[k].code ||
		    (k && a[k].instr != b[k].instr))
			return false;
	}
	return true;
}

/* Copies for the next read of the thread of @c, by how many of its
 * recent reads were given up (stack_read.h). */
static unsigned int copies_for(const struct py_walk_cache *c)
{
	const uint32_t busy = (uint32_t)(STACK_READ_BUSY * 65536);

	return c->torn_share < busy ? STACK_READ_COPIES :
	       c->torn_share < 4 * busy ? STACK_READ_COPIES_BUSY : STACK_READ_COPIES_MIN;
}

/* The thread of @c was read (@torn: given up): its moving average, over
 * ~32 reads. */
static void count_read(struct py_walk_cache *c, bool torn)
{
	int64_t share = c->torn_share;

	share += (((int64_t)torn << 16) - share) / 32;
	c->torn_share = (uint32_t)share;
}

int stack_read__thread(struct stack_read *r, struct pyproc *p, uint64_t tstate,
		       struct py_walk_cache *c, bool stopped)
{
	uint64_t bad = 0, top = 0, sig = 0;
	size_t n2;
	int rc = 0, t2, same = 0, pairs = 0;

	r->n = 0;
	r->truncated = 0;
	r->torn = false;
	if (c) {
		c->copy_budget = copies_for(c);
		c->stopped = stopped;
		c->max_py = r->max;
	}
	for (int try = 0; try < STACK_READ_TRIES; try++) {
		rc = pyproc__walk_cached(p, tstate, c, r->frames, r->room, &r->n, &r->truncated);
		/* A copy whose chain did not hold together (frame_sizes.h):
		 * torn, unless STACK_READ_CORRUPT copies running broke at the
		 * same link of the same chain, with the same bytes there,
		 * which is then the target's own (corrupt; a thread that
		 * repeats itself, as alternating.py's chains do, can break
		 * twice at the same place by chance): its frames up to there,
		 * as for a link that cannot be read, or up to the repeat of a
		 * chain that loops. */
		r->torn = rc == -EAGAIN;
		if (r->torn && c && c->bad_link) {
			/* (copies given up as moving, or with no sign of a
			 * corrupt chain, neither count nor break) */
			same = bad == c->bad_link && top == c->top_frame && sig == c->bad_sig ?
			       same + 1 : 1;
			bad = c->bad_link;
			top = c->top_frame;
			sig = c->bad_sig;
			if (same >= STACK_READ_CORRUPT) {
				r->torn = false;
				return r->truncated == PY_WALK_LOOPED ? 0 : -EFAULT;
			}
		}
		if (r->torn) {
			if (c && !c->copy_budget)
				break;	/* every copy allowed was made */
			continue;
		}
		/* One copy of the chunks, of one instant and in shape, or a
		 * thread that holds still: one walk. */
		if (rc || stopped || (c && c->exact))
			break;
		/* Else read frame by frame: no frame is a reading too: a busy
		 * thread read between two of its frames' links showed
		 * [no-python-frames] on a thread that always runs Python
		 * (0.3-0.8% of sympy's samples) until the second walk had to
		 * agree with it. */
		rc = pyproc__walk_cached(p, tstate, c, r->check, r->room, &n2, &t2);
		r->torn = rc == -EAGAIN || (!rc && !(n2 == r->n && same_stack(r->frames, r->check, n2)));
		if ((rc && rc != -EAGAIN) || !r->torn || ++pairs == STACK_READ_PAIRS)
			break;
	}
	if (c && !stopped)
		count_read(c, r->torn);
	if (r->torn)
		rc = 0;		/* r->frames: the last walk, as far as it went */
	return rc;
}
