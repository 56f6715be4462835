// SPDX-License-Identifier: MIT
/*
 * frame_cache_anchor.c - the frame cache's writes into the running target
 * (see frame_cache.h): moving a thread's anchor up when that pays, and
 * clearing the anchors still ours when the recording ends.
 */
#include <errno.h>
#include <sys/uio.h>
#include "sampling/frame_cache_internal.h"
#include "target/remote_mem.h"
#include "util/clock.h"

/* ------------------------------------------------------------------------ */
/* Re-anchoring: one write into the running target, no stop. */

/*
 * The frame to anchor: the first Python frame below the innermost of the
 * thread's latest chain (the innermost changes fastest, and may be half-way
 * through a yield whose anchor check is done). 0: none.
 */
static uint64_t anchor_choice(const struct fc_thread *t, int32_t *idx)
{
	for (uint32_t i = 1; i < t->n; i++)
		if (!fc_is_interp(&t->chain[i])) {
			*idx = (int32_t)i;
			return t->chain[i].frame;
		}
	*idx = -1;
	return 0;
}

int frame_cache__reanchor(struct frame_cache *fc, pid_t tid, uint64_t tstate)
{
	struct fc_thread *t = fc->enabled ? fc_find(fc, tid) : NULL;
	uint64_t cur[2], want, addr;
	struct iovec local, remote;
	int32_t idx;
	ssize_t got;
	int err = 0;

	if (!t)
		return -ENOENT;
	if (!fc->reanchor_ok || !fc->seq_follows)
		return -EPERM;
	/* The caller has set the kernel's flag: walks are whole from now
	 * until one sees the new anchor. */
	t->walk_whole = true;
	want = anchor_choice(t, &idx);
	addr = tstate + fc->off_anchor;
	err = remote_read(tid, addr, cur, sizeof(cur));
	if (!err && want && want != cur[0]) {
		/* Anchor and sequence in one 16-byte write. The sequence jumps
		 * by 2^32 so that no chain cached before the write can ever
		 * validate an anchor seen after it (locate() takes the jump for
		 * 2^32 moves and refuses); only a whole walk that sees the new
		 * anchor caches again. */
		uint64_t v[2] = { want, cur[1] + FC_SEQ_JUMP };

		local = (struct iovec){ v, sizeof(v) };
		remote = (struct iovec){ (void *)(uintptr_t)addr, sizeof(v) };
		got = process_vm_writev(tid, &local, 1, &remote, 1, 0);
		if (got < 0)
			err = errno == ENOMEM ? -EFAULT : -errno;
		else if (got != (ssize_t)sizeof(v))
			err = -EFAULT;
		else
			fc->st.reanchors++;
		if (!err) {
			/* Ours from now on, until someone else writes it. The
			 * chain it was chosen from may be a little old: a move
			 * the next samples show that it cannot explain
			 * (fc_follows()) makes it not ours, never cleared rather
			 * than someone else's cleared. */
			t->wrote = true;
			t->own = true;
			t->own_tstate = tstate;
			t->own_anchor = v[0];
			t->own_seq = v[1];
			t->own_idx = t->tstate == tstate ? idx : -1;
		}
	}
	t->barrier_ns = mono_ns();
	t->reanchored_ns = t->barrier_ns;
	t->next_reanchor_ns = t->barrier_ns + t->interval_ns;
	if (err) {
		fc->st.reanchor_failures++;
		if (err == -EPERM)
			fc->reanchor_ok = false;
	}
	return err;
}

void frame_cache__set_reanchor(struct frame_cache *fc, bool allowed)
{
	fc->reanchor_ok = allowed;
}

/* ------------------------------------------------------------------------ */
/* On exit: clear the anchors that are still ours. */

static bool linked_in(const struct py_thread *l, size_t n, pid_t tid, uint64_t tstate)
{
	for (size_t i = 0; i < n; i++)
		if (l[i].tstate == tstate && l[i].host_tid == tid)
			return true;
	return false;
}

/*
 * Clear @t's anchor (thread @tid, state @tstate) if it is still ours: read
 * anchor and sequence afresh, and if fc_follows() says ours, write a zero
 * anchor, 8 bytes, the sequence left as it is, as CPython's own profiler
 * does on exit (clear_last_profiled_frames(), Modules/_remote_debugging/
 * frames.c): a zero anchor turns every profiler's cache lookup off, and
 * the next anchor written starts from the target's own sequence. The
 * interpreter popping our anchor between the read and the write is
 * harmless (its move goes, its sequence stays). Another profiler writing
 * its anchor in those microseconds would lose it to the zero; no write
 * from outside can exclude that (the target is not stopped, and there is
 * no compare-and-swap across processes), and it only costs that profiler
 * a cache miss: a zero anchor is never stopped at. Returns 1 (cleared),
 * 0 (already zero), 2 (not ours) or -errno.
 */
static int clear_one(struct frame_cache *fc, const struct fc_thread *t, pid_t tid,
		     uint64_t tstate)
{
	uint64_t cur[2], d, zero = 0, addr = tstate + fc->off_anchor;
	struct iovec local = { &zero, sizeof(zero) };
	struct iovec remote = { (void *)(uintptr_t)addr, sizeof(zero) };
	ssize_t got;
	int err;

	err = remote_read(tid, addr, cur, sizeof(cur));
	if (err)
		return err;
	if (!cur[0])
		return 0;
	if (!t->own || !fc_follows(t, cur[0], cur[1], &d))
		return 2;
	got = process_vm_writev(tid, &local, 1, &remote, 1, 0);
	if (got < 0)
		return errno == ENOMEM ? -EFAULT : -errno;
	return got == (ssize_t)sizeof(zero) ? 1 : -EFAULT;
}

int frame_cache__release(struct frame_cache *fc, const struct py_thread *linked, size_t n)
{
	int err, first_err = 0;

	if (!fc->enabled)
		return 0;
	for (size_t i = 0; i < FC_SLOTS + fc->ngone; i++) {
		struct fc_thread one, *t = &one;
		pid_t tid;
		uint64_t tstate;

		if (i < FC_SLOTS) {
			t = &fc->slots[i];
			if (!t->tid || !t->wrote)
				continue;
			tid = t->tid;
			tstate = t->own_tstate;
		} else {
			const struct fc_owned *o;

			if (i - FC_SLOTS >= FC_MAX_THREADS)
				break;
			o = &fc->gone[i - FC_SLOTS];
			/* Its chain is gone: only an unmoved anchor is known
			 * to be ours. */
			one = (struct fc_thread){ .own = o->own, .own_idx = -1,
						  .own_anchor = o->anchor, .own_seq = o->seq };
			tid = o->tid;
			tstate = o->tstate;
		}
		/* A thread state no longer in its interpreter's list may be
		 * freed memory: never written (and holds no anchor). */
		if (!linked_in(linked, n, tid, tstate))
			continue;
		err = clear_one(fc, t, tid, tstate);
		if (err == 1)
			fc->st.anchors_cleared++;
		else if (err)
			fc->st.anchors_left++;
		if (err < 0 && err != -ESRCH && !first_err)
			first_err = err;
	}
	return first_err;
}
