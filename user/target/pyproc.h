/* SPDX-License-Identifier: MIT */
/*
 * pyproc.h - an attached Python process: where its runtime is, which version
 * it runs, the offsets to read it with, and its threads.
 *
 * pyproc__open() does all the one-time work (maps, ELF, debug offsets) and
 * validates it; nothing on the sampling path re-reads /proc or ELF files.
 */
#ifndef PYPROF_PYPROC_H
#define PYPROF_PYPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/py_offsets.h"
#include "target/stack_chunks.h"
#include "types/raw_sample.h"

struct remote_iov;

struct pyproc;

/* Space for one clear error line, filled by functions that take it. */
#define PYPROF_ERRLEN 512

/*
 * Attach to @pid. On failure returns -errno and writes one line saying what
 * is wrong into @err: -ESRCH no such process, -EPERM no permission,
 * -ENOEXEC not a Python process, -ENOTSUP unsupported Python version,
 * -EPROTO the target's tables failed validation.
 */
int pyproc__open(pid_t pid, struct pyproc **out, char *err, size_t errlen);
void pyproc__free(struct pyproc *p);

/*
 * How a target's files are opened: a process's through /proc, a core's
 * under the root it ran in (core_file.h).
 */
struct procmaps;
struct mapping;
struct pyproc_files {
	pid_t pid;		/* what its memory is read as (REMOTE_MEM_CORE: a core) */
	const char *what;	/* "process 123", "core FILE": for error lines */
	int (*open)(void *ctx, const struct mapping *m);	/* an fd or -errno */
	void *ctx;
};

/*
 * Attach to a target that is not a live process (a core file): its file
 * mappings @maps, executable @exe, thread ids @tids; its memory is read
 * as pid fs->pid. Errors as pyproc__open()'s.
 */
int pyproc__open_files(const struct pyproc_files *fs, const char *exe,
		       const struct procmaps *maps, const pid_t *tids, size_t ntids,
		       struct pyproc **out, char *err, size_t errlen);

/*
 * What pyproc__open() learns from a process's files and tables before it
 * walks anything: where the runtime and the types are, and the offsets.
 */
struct pyproc_image {
	uint64_t runtime;		/* _PyRuntime */
	uint64_t code_type;		/* PyCode_Type; 0: unknown */
	uint64_t coro_type, asyncgen_type;	/* 0: unknown */
	struct py_offsets off;		/* validated (debug_offsets__parse, offsets_legacy__get) */
};

/*
 * A process whose image is already known, for callers that serve the
 * target's memory some other way than pyproc__open() finds it (the fuzz
 * harnesses' fake address spaces): nothing is read or checked here; the
 * first pyproc__threads() is the first read. 0 or -ENOMEM.
 */
int pyproc__from_image(pid_t pid, const struct pyproc_image *img, struct pyproc **out);

pid_t pyproc__pid(const struct pyproc *p);
const struct py_offsets *pyproc__offsets(const struct pyproc *p);
/* "3.14.10" */
const char *pyproc__version(const struct pyproc *p);
/* Address of PyCode_Type in the target (0 if unknown). */
uint64_t pyproc__code_type(const struct pyproc *p);
/* PyCoro_Type and PyAsyncGen_Type in the target; 0: not found. */
uint64_t pyproc__coro_type(const struct pyproc *p);
uint64_t pyproc__asyncgen_type(const struct pyproc *p);
/* How far below a thread's thread pointer its thread_id lies (libc_tls.h). */
uint64_t pyproc__thread_id_below_tp(const struct pyproc *p);
/* The process's frame sizes per code object (frame_sizes.h); NULL when its
 * offsets cannot give them or memory ran out. */
struct frame_sizes;
struct frame_sizes *pyproc__frame_sizes(struct pyproc *p);
/* Its callers' instructions, as ones that may push a frame or not
 * (call_sites.h); NULL but on 3.11/3.12, or when memory ran out. */
struct call_sites;
struct call_sites *pyproc__call_sites(struct pyproc *p);
/* The copies its call sites refused so far, without making them (-v). */
unsigned long pyproc__call_sites_refused(const struct pyproc *p);
/* Address of _PyRuntime in the target. */
uint64_t pyproc__runtime(const struct pyproc *p);

/*
 * Addresses in the target that say who holds the main interpreter's GIL and
 * whether its collector runs. A thread waiting for the GIL sleeps on a futex
 * inside [gil, gil + gil_size) (its cond or mutex).
 */
struct py_gil_gc {
	uint64_t interp;	/* the main PyInterpreterState */
	uint64_t gil;		/* its struct _gil_runtime_state */
	uint64_t gil_size;
	uint64_t gil_holder;	/* &gil->last_holder: PyThreadState * */
	uint64_t gil_locked;	/* &gil->locked: int, 1 while held */
	uint64_t gc_collecting;	/* &interp->gc.collecting: non-zero while collecting */
	uint64_t gc_collecting_size;	/* its width in bytes (4) */
	uint64_t gc_frame;	/* 3.15+: &interp->gc.frame (_PyInterpreterFrame *); else 0 */
};

/*
 * Fill @out. The first success reads the target (the main interpreter, the
 * GIL pointer 3.12+ keeps in it, and checks locked and collecting hold 0 or
 * 1) and is remembered: later calls read nothing. -ENOTSUP when the offsets
 * for this version are unknown, -EAGAIN while the runtime has no main
 * interpreter or GIL yet, -EPROTO when the target disagrees with the
 * offsets, or a read error (-ESRCH, -EFAULT, -EPERM).
 */
int pyproc__gil_gc(struct pyproc *p, struct py_gil_gc *out);

struct py_thread {
	uint64_t tstate;	/* PyThreadState address in the target */
	uint64_t interp;	/* its interpreter */
	uint64_t thread_id;	/* pthread id (threading.get_ident()) */
	uint64_t native_tid;	/* tid as the target sees it (its PID namespace) */
	pid_t host_tid;		/* tid in our namespace; 0 if not found */
};

/*
 * Snapshot of every thread of every interpreter, at most @max. Sets *n to the
 * number found; returns -E2BIG (with the first @max filled) when there were
 * more, -EFAULT when the target's lists could not be read (it is exiting or
 * its memory is corrupt), -ESRCH when it is gone.
 */
int pyproc__threads(struct pyproc *p, struct py_thread *out, size_t max, size_t *n);

/* The id of interpreter @interp (PyInterpreterState.id: 0 the main one, then
 * each subinterpreter's, as CPython's _remote_debugging reports it). */
int pyproc__interp_id(struct pyproc *p, uint64_t interp, int64_t *id);

/*
 * Walk @tstate's frame chain, innermost first, skipping interpreter-owned
 * frames. Fills at most @max frames; *truncated says the chain went on:
 * PY_WALK_LOOPED when it came back to a frame it had visited (a corrupt
 * chain: the frames up to the repeat are kept), else 1.
 */
#define PY_WALK_LOOPED 2
int pyproc__walk(struct pyproc *p, uint64_t tstate, struct py_rawframe *out,
		 size_t max, size_t *n, int *truncated);

/*
 * What the last walk of one thread saw, owned by the caller (one per thread):
 * the next walk reads the same frames and code versions ahead in one
 * process_vm_readv when the thread's innermost frame has not moved, and
 * falls back to one read per frame where the chain differs.
 */
struct py_walk_cache {
	uint64_t *frames;	/* frames visited, innermost first */
	uint64_t *codes;
	size_t n, cap;
	uint64_t cframe;	/* 3.11/3.12: the C frame it was found through */
	/* prefetch scratch, reused from one walk to the next */
	uint32_t *foff;		/* per frame: its bytes in buf */
	uint32_t *fiov;		/* per frame: the iovec (range) that holds it */
	uint32_t *viov;		/* per frame: the iovec of its code's co_version */
	uint32_t *versions;	/* per version iovec */
	size_t vdone, vbase;	/* iovecs read whole; first version iovec */
	struct remote_iov *iov;
	unsigned char *buf;
	size_t bufcap;
	/* 3.11+: the thread's stack chunks, copied at one instant (made at
	 * the first walk: a cache of a thread never walked stays small) */
	struct stack_chunks *chunks;
	/* The last walk is of one instant: every frame came from one whole
	 * copy of the chunks and the chain's shape held (frame_sizes.h). */
	int exact;
	/* Copies of the chunks the walks may still make before they give up
	 * on a thread that keeps moving (-EAGAIN); set by the caller, who
	 * keeps the share of the thread's recent reads given up in
	 * torn_share (a moving average, in 1/65536ths). */
	unsigned int copy_budget;
	uint32_t torn_share;
	bool stopped;		/* the thread holds still (thread_stop.h) */
	/* The last walk's current frame, and the frame where its copy's chain
	 * did not hold (1: at its end; 0: it held, or broke as a torn copy
	 * does: the thread moved between the two copies, or the frame was read
	 * apart from the copy) with a signature of its bytes: the same three
	 * times running, the thread holding still there, is a corrupt chain,
	 * not a torn one (stack_read.h). */
	uint64_t top_frame, bad_link, bad_sig;
	/*
	 * 3.15 frame cache (the remote sampler's; user/sampling/frame_cache.h).
	 * In: keep_links puts the interpreter's links in the output too
	 * (.reserved PY_RAWFRAME_LINK); stop_at, stop_seq: the walk ends at
	 * this Python frame when the thread state still shows it as the
	 * anchor with this sequence, and the copy goes no further down (0:
	 * whole); max_py: Python frames at most (0: the room given).
	 */
	bool keep_links;
	uint64_t stop_at, stop_seq;
	size_t max_py;
	/* Out, of the last walk: the anchor, sequence and base frame were read
	 * with a copy of one instant (anchor_read); the walk stopped at the
	 * anchor (at_anchor; anchor_prev: its caller); it met the anchor as a
	 * Python frame (seen); it ended at the base frame (at_base). */
	bool anchor_read, at_anchor, seen, at_base;
	uint64_t anchor, seq, anchor_prev;
};

/* py_rawframe.reserved of an interpreter's link (keep_links). */
#define PY_RAWFRAME_LINK 1u

int pyproc__walk_cached(struct pyproc *p, uint64_t tstate, struct py_walk_cache *c,
			struct py_rawframe *out, size_t max, size_t *n, int *truncated);
/* The frame thread state @tstate executes now (0: none). 0 or -errno. */
int pyproc__current_frame(struct pyproc *p, uint64_t tstate, uint64_t *frame);
/* A cache that now serves another thread: what it predicted is of no use. */
void py_walk_cache__forget(struct py_walk_cache *c);
void py_walk_cache__free(struct py_walk_cache *c);

#endif
