/* SPDX-License-Identifier: MIT */
/*
 * py_offsets.h - the flat table of CPython struct offsets the walkers use.
 *
 * One structure for every supported version: 3.13+ fill it from the target's
 * own _Py_DebugOffsets (debug_offsets.c, validated as untrusted input), 3.11
 * and 3.12 from our tables derived from those versions' headers
 * (offsets_legacy.c). Nothing else in the project knows a CPython layout.
 */
#ifndef PYPROF_PY_OFFSETS_H
#define PYPROF_PY_OFFSETS_H

#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>

/* Upper bound on any struct we copy whole into a local buffer. */
#define PY_MAX_STRUCT_COPY 4096

struct py_offsets {
	uint32_t version_hex;		/* PY_VERSION_HEX of the target */

	uint64_t runtime_interpreters_head;

	uint64_t interp_size;		/* bytes we read of an interpreter state */
	uint64_t interp_id;
	uint64_t interp_next;
	uint64_t interp_threads_head;
	/* interp->threads.main (3.14+ tables; 0: unknown): the interpreter's
	 * main thread, which CPython's _remote_debugging marks as such. */
	uint64_t interp_threads_main;

	uint64_t tstate_size;		/* bytes we read of a thread state */
	uint64_t tstate_next;
	uint64_t tstate_interp;
	/* 3.13+: tstate->current_frame. 3.11/3.12: tstate->cframe, then
	 * cframe->current_frame (tstate_cframe != 0 says which). */
	uint64_t tstate_current_frame;
	uint64_t tstate_cframe;
	uint64_t cframe_current_frame;
	uint64_t cframe_previous;
	/* 3.11/3.12: the thread state's own C frame record (root_cframe),
	 * tstate->cframe while the thread runs no evaluation loop; 0 unknown. */
	uint64_t tstate_root_cframe;
	uint64_t tstate_thread_id;
	uint64_t tstate_native_thread_id;
	/* _status bitfield word (3.12+; 0: absent): says which of a thread's
	 * thread states is active (subinterpreters). */
	uint64_t tstate_status;
	/* 3.11+: the thread's newest stack chunk (stack_chunks.h); 0 unknown. */
	uint64_t tstate_datastack_chunk;
	/* 3.15+ only (0 when absent): the frame cache protocol. */
	uint64_t tstate_base_frame;
	uint64_t tstate_last_profiled_frame;
	uint64_t tstate_last_profiled_frame_seq;

	uint64_t frame_size;		/* bytes we read of an interpreter frame */
	uint64_t frame_previous;
	uint64_t frame_executable;	/* f_code before 3.13 */
	uint64_t frame_instr_ptr;	/* prev_instr before 3.13 */
	uint64_t frame_owner;		/* one byte */
	/* Frames whose owner is >= this value belong to the interpreter (C
	 * entry/shim frames) and are skipped; 0 means no such frames (3.11). */
	uint8_t frame_owner_interp_min;
	/* The owner value of an evaluation loop's entry frame (3 on 3.12 to
	 * 3.15: FRAME_OWNED_BY_CSTACK, then _INTERPRETER); 0: none. */
	uint8_t frame_owner_cstack;
	/* 3.11: offset of the frame's is_entry byte (the first frame of an
	 * evaluation loop's run); 0: none. */
	uint64_t frame_is_entry;
	/* 3.11 and 3.12: instr points at the last executed instruction. */
	bool frame_instr_is_prev;
	/* Bits to clear from f_executable (a tagged _PyStackRef since 3.14). */
	uint64_t executable_tag_mask;

	uint64_t code_size;		/* bytes we read of a code object */
	uint64_t code_filename;
	uint64_t code_name;
	uint64_t code_qualname;
	uint64_t code_linetable;
	uint64_t code_firstlineno;	/* int */
	uint64_t code_adaptive;		/* co_code_adaptive: first instruction */
	/* _co_firsttraceable (int): frames whose instruction lies before it
	 * were just pushed (or are the 3.13 __init__ shim) and are not shown,
	 * as sys._current_frames() does not show them. */
	uint64_t code_firsttraceable;
	/* co_version (uint32, 3.12+; 0: absent): unique per code object, so
	 * (address, version) survives the address being reused. */
	uint64_t code_version;

	uint64_t ob_type;

	/* --mode exception (target/exc_offsets.h): the exception in flight
	 * (3.12+ current_exception, 3.11 curexc_value), the top of the
	 * exception stack (exc_info), a type's name (char *) and flags. */
	uint64_t tstate_exc_current;
	uint64_t tstate_exc_info;
	uint64_t type_tp_name;
	uint64_t type_tp_flags;

	uint64_t unicode_state;		/* 32-bit bitfield word */
	uint64_t unicode_length;
	uint64_t unicode_ascii_data;	/* sizeof(PyASCIIObject) */
	uint64_t unicode_compact_data;	/* sizeof(PyCompactUnicodeObject) */

	uint64_t bytes_size;		/* ob_size */
	uint64_t bytes_sval;

	/*
	 * The GIL and the collector of the main interpreter, for the off-CPU
	 * and GIL modes (every field 0: unknown, the target is still read).
	 * pyproc__gil_gc() turns them into addresses in the target.
	 */
	/* _PyRuntime.interpreters.main (PyInterpreterState *) */
	uint64_t runtime_interpreters_main;
	/* 3.11: the GIL is embedded in _PyRuntime at this offset (ceval.gil). */
	uint64_t runtime_gil;
	/* 3.12+: interp->ceval.gil, the pointer to the GIL an interpreter
	 * takes, and interp->_gil, an interpreter's own GIL: the one the main
	 * interpreter's pointer points at. */
	uint64_t interp_ceval_gil;
	uint64_t interp_gil;
	/* sizeof(struct _gil_runtime_state): the cond and mutex a thread
	 * waiting for the GIL sleeps on (a futex) lie inside it. */
	uint64_t gil_size;
	uint64_t gil_last_holder;	/* PyThreadState *, from the GIL's start */
	uint64_t gil_locked;		/* int, from the GIL's start */
	/* interp->gc.collecting: non-zero while a collection runs. */
	uint64_t interp_gc_collecting;
	uint64_t gc_collecting_size;	/* its width in bytes (an int: 4) */
	/* 3.15+ (0 before): interp->gc.frame, the _PyInterpreterFrame * of
	 * the frame that started the running collection (NULL when none, or
	 * when no Python frame started it). */
	uint64_t interp_gc_frame;

	/*
	 * Objects read from outside (dump's Python thread names): the
	 * interpreter's modules dict (PyObject *), and where a heap type keeps
	 * the keys its instances' attribute values share. 0: unknown.
	 */
	uint64_t interp_modules;
	uint64_t heaptype_cached_keys;

	/*
	 * What a thread is doing, for dump (0: unknown): the exception being
	 * raised (3.12+ current_exception, 3.11 curexc_type), and the ints
	 * that say it holds (3.14+) or asks for (3.15+) the GIL. (The
	 * _PyErr_StackItem * of the one being handled is tstate_exc_info.)
	 */
	uint64_t tstate_exception;
	uint64_t tstate_holds_gil;
	uint64_t tstate_gil_requested;

	/* A frame's locals (dump --locals; 0: unknown): the frame's localsplus
	 * array, the code's co_localsplusnames (tuple; co_localspluskinds,
	 * bytes, follows it) and co_nlocalsplus (int). */
	uint64_t frame_localsplus;
	uint64_t code_localsplusnames;
	uint64_t code_nlocalsplus;
};

/*
 * sizeof(struct _gil_runtime_state) in a GIL build of 3.11 to 3.15 (all build
 * FORCE_SWITCHING): interval, last_holder, locked, switch_number (32 bytes on
 * LP64), then cond, mutex, switch_cond and switch_mutex, pthread types of the
 * target's libc, which is ours (208 bytes on x86_64 glibc). last_holder is at
 * 8 and locked at 16 in every one of them.
 */
#define PY_GIL_SIZE (32 + 2 * (sizeof(pthread_cond_t) + sizeof(pthread_mutex_t)))
#define PY_GIL_LAST_HOLDER 8
#define PY_GIL_LOCKED 16

/* Set @o's *_size read sizes from the highest field the walkers use: exact
 * copies, whichever source (debug_offsets.c, offsets_legacy.c) filled @o. */
void py_offsets__fit_reads(struct py_offsets *o);

#endif
