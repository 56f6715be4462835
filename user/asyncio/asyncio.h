/* SPDX-License-Identifier: MIT */
/*
 * asyncio/asyncio.h - the asyncio tasks of a CPython 3.14+ process, read from
 * outside with process_vm_readv.
 *
 * The stage, bottom up:
 *   offsets.c  the .AsyncioDebug table (_Py_AsyncioModuleDebugOffsets) and the
 *              _Py_DebugOffsets fields the walks need, validated as untrusted
 *              input before anything is read with them
 *   locate.c   where the table is in a live process (the _asyncio module's
 *              mapping on 3.14, the interpreter or libpython on 3.15)
 *   coro.c     one coroutine chain: a task's coroutine, what it awaits, ...
 *   tasks.c    every task of every thread (and of finished threads): name,
 *              state, coroutine stack, awaiters; torn reads retried, then
 *              marked
 *   index.c    the tasks of a snapshot by address, for the walks that
 *              follow awaiters
 *   tree.c     the await tree as text, cycles reported, not followed
 *
 * Every walk is iterative and bounded (the ASYNCIO_MAX_* limits below). A
 * task list, a coroutine chain or a set table read while the target changes
 * it is read again; what still does not hold together is counted and marked
 * "[torn]", never shown with a wrong parent. Functions return 0 or -errno.
 */
#ifndef PYPROF_ASYNCIO_H
#define PYPROF_ASYNCIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct pyproc;
struct symbolizer;
struct py_sym;
struct py_offsets;

/* Tasks read from one list (a thread's or the interpreter's). */
#define ASYNCIO_MAX_LIST 65536
/* Coroutines followed from one task (a coroutine awaiting a coroutine ...). */
#define ASYNCIO_MAX_CHAIN 1536
/* Awaiters of one task (entries of its awaited_by set). */
#define ASYNCIO_MAX_AWAITERS 16384
/* Tries of one read (a list, a task) that the target changed meanwhile. */
#define ASYNCIO_ATTEMPTS 5

/* sizeof(struct _Py_AsyncioModuleDebugOffsets) in 3.14 and 3.15: 13 u64. */
#define ASYNCIO_DEBUG_SIZE 104
#define ASYNCIO_DEBUG_SECTION ".AsyncioDebug"

struct asyncio_offsets {
	uint32_t version_hex;
	/* .AsyncioDebug: TaskObj */
	uint64_t task_size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set;
	uint64_t task_coro, task_node;
	/* .AsyncioDebug: PyInterpreterState, _PyThreadStateImpl */
	uint64_t interp_size, interp_tasks_head;
	uint64_t tstate_size, tstate_running_loop, tstate_running_task, tstate_tasks_head;
	/* _Py_DebugOffsets */
	uint64_t llist_next, llist_prev;
	uint64_t gen_iframe, gen_frame_state;
	uint64_t frame_stackpointer;
	uint64_t set_used, set_table, set_mask, set_read;	/* set_read: bytes read of a set */
	uint64_t type_flags;
	uint64_t long_lv_tag, long_digit;
	/* Facts of the version, not in any table (pycore_frame.h of each). */
	int8_t state_created, state_yield_from, state_yield_from_locked, state_executing;
	int8_t state_cleared;
	/* A suspended coroutine's awaited object: stackpointer[-awaited_slot]. */
	unsigned int awaited_slot;
	/* PyCoro_Type and PyAsyncGen_Type in the target (0: not found; then a
	 * chain follows coroutines of its first level's type only) */
	uint64_t coro_type, asyncgen_type;
};

/*
 * asyncio_offsets__parse_table() - validate the 104 bytes of a .AsyncioDebug
 * table (@len must be exactly that) of a target running @version_hex, and
 * fill the .AsyncioDebug and per-version parts of @out. -ENOTSUP for a
 * version without the table (before 3.14, or unknown), -EPROTO with the field
 * named in @err for a table that does not hold together: a size of 0 or
 * beyond reason, a field outside its struct, inside the object header,
 * misaligned, or overlapping another.
 */
int asyncio_offsets__parse_table(const void *buf, size_t len, uint32_t version_hex,
				 struct asyncio_offsets *out, char *err, size_t errlen);

/*
 * asyncio_offsets__bind_debug() - take the generic fields (llist nodes,
 * generators, frames' stackpointer, sets, type flags, ints) from the raw
 * _Py_DebugOffsets table @dbg (@len bytes, header included), each checked
 * against its struct's size. -EPROTO with the field named in @err.
 */
int asyncio_offsets__bind_debug(const void *dbg, size_t len, struct asyncio_offsets *out,
				char *err, size_t errlen);

/*
 * asyncio_offsets__load() - find the target's .AsyncioDebug table and read,
 * validate and bind everything. -ENOTSUP (3.11 to 3.13: no table; the message
 * says why), -ENOENT when asyncio is not imported (3.14: no _asyncio module
 * mapped yet), -EPROTO for tables that fail validation, read errors.
 */
int asyncio_offsets__load(struct pyproc *p, struct asyncio_offsets *out, char *err,
			  size_t errlen);

/* One level of a coroutine chain, as read. */
struct coro_level {
	uint64_t gen;		/* the coroutine object */
	uint64_t type;		/* its ob_type */
	uint64_t code, instr;	/* its frame's code object and instruction */
	uint64_t sp;		/* its frame's stackpointer */
	uint64_t awaited;	/* what it awaits (0: none, or not followed) */
	/* the object the awaited one holds first, whose type ended the chain
	 * (0: none looked at), and that type: verified with the level */
	uint64_t inner, inner_type;
	int8_t state;		/* gi_frame_state */
};

/* Bytes of a chain's level read at once: its object and, most often, its
 * frame's value stack. */
#define CORO_LEVEL_READ 512
/* Types of objects a chain's end was decided by (a future's loop, mostly):
 * one read saved per task, each use verified by coro_chain__verify(). And
 * the first level's bytes when the caller read them along with its own
 * (@pre_len of them, 0: none), used once. */
#define CORO_CACHE 8
struct coro_cache {
	uint64_t addr[CORO_CACHE], type[CORO_CACHE];
	unsigned int next;
	uint64_t pre_addr;
	size_t pre_len;
	unsigned char pre[CORO_LEVEL_READ];
};

/*
 * coro_chain__read() - the levels of a task's coroutine chain, outermost
 * first, at most @max (*cut: it went on past @max). A level is a coroutine
 * or an async generator with its own frame. @coro (the task's coroutine)
 * and then, after each level suspended in a yield-from, the object X it
 * awaits lead to the next level: X itself when it is a coroutine or an async
 * generator; the async generator an awaitable of one holds as its first
 * field (async_generator_asend, _athrow, anext_awaitable: what anext(),
 * asend(), athrow() and aclose() return); otherwise the chain ends. Without
 * the two types' addresses, a coroutine of the first level's type only.
 * *n = 0 when @coro leads to no level (finished, or not a coroutine).
 */
int coro_chain__read(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		     uint64_t coro, struct coro_level *out, size_t max, size_t *n, int *cut,
		     struct coro_cache *cache);

/* 0 when every level still reads the same (state, code, instruction, what it
 * awaits), -ESTALE when the chain moved, or a read error. */
int coro_chain__verify(pid_t pid, const struct py_offsets *po, const struct asyncio_offsets *ao,
		       const struct coro_level *lv, size_t n);

struct remote_iov;
/*
 * coro_chain__verify_along() - as coro_chain__verify(), in the same
 * process_vm_readv as the caller's reads @extra (at most 4, read first;
 * *extra_done of them read whole). -EFAULT when one of them could not be
 * read (the levels not compared), else as coro_chain__verify().
 */
int coro_chain__verify_along(pid_t pid, const struct py_offsets *po,
			     const struct asyncio_offsets *ao, const struct coro_level *lv,
			     size_t n, const struct remote_iov *extra, size_t nextra,
			     size_t *extra_done);

enum asyncio_task_state {
	ASYNCIO_TASK_PENDING,	/* suspended, waiting */
	ASYNCIO_TASK_RUNNING,	/* the running task of its thread */
	ASYNCIO_TASK_CREATED,	/* its coroutine has not started */
	ASYNCIO_TASK_DONE,	/* its coroutine finished (still listed) */
};

struct asyncio_task {
	uint64_t addr;		/* the task object: its id, as `python -m asyncio ps` */
	uint64_t tstate;	/* the thread state whose list holds it; 0: the interpreter's */
	pid_t tid;		/* that thread's tid in our namespace (0: unknown/finished) */
	char *name;		/* owned; "Task-N" for a task named by number */
	enum asyncio_task_state state;
	struct py_sym *frames;	/* innermost first; a cut chain starts with [truncated] */
	size_t nframes;
	uint64_t *awaited_by;	/* ids of the tasks or futures awaiting it */
	size_t nawaited;
	/* kept changing while read: frames end in [torn], no awaiters kept */
	unsigned int torn:1;
	unsigned int chain_cut:1;	/* coroutine chain longer than ASYNCIO_MAX_CHAIN */
	unsigned int awaiters_cut:1;	/* more than ASYNCIO_MAX_AWAITERS awaiters */
};

struct asyncio_snapshot {
	struct asyncio_task *tasks;
	size_t n, cap;
	size_t torn;		/* tasks marked [torn] */
	size_t finished;	/* tasks that ended while read (left out) */
	size_t lists_cut;	/* lists longer than ASYNCIO_MAX_LIST */
	size_t lists_torn;	/* lists that kept changing: read as far as they held */
	size_t threads;		/* thread lists read */
};

/*
 * asyncio_snapshot__take() - read every task of @p. 0, or -errno with one line
 * in @err (-ESRCH: the process ended).
 */
int asyncio_snapshot__take(struct pyproc *p, struct symbolizer *sym,
			   const struct asyncio_offsets *ao, struct asyncio_snapshot *out,
			   char *err, size_t errlen);
void asyncio_snapshot__free(struct asyncio_snapshot *s);

/* Index of the task @id in @s, or -1. Built lazily, freed with the snapshot. */
struct asyncio_index;
int asyncio_index__new(const struct asyncio_snapshot *s, struct asyncio_index **out);
long asyncio_index__find(const struct asyncio_index *ix, uint64_t id);
void asyncio_index__free(struct asyncio_index *ix);

/*
 * asyncio_tree__print() - the await tree as text, in the shape of
 * `python -m asyncio pstree`: each root task, under it its coroutine frames
 * (outermost first), under the innermost the tasks that it awaits. Cycles
 * are listed first ("cycle: a → b → a") and not followed; a task shown once
 * is later named, not shown again; deep trees go on at the left margin.
 */
int asyncio_tree__print(FILE *out, const struct asyncio_snapshot *s);

#endif
