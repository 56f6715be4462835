/* SPDX-License-Identifier: MIT */
/*
 * py_offsets.c - what follows from a filled table of offsets, whichever
 * source filled it (debug_offsets.c, offsets_legacy.c): how many bytes of
 * each struct the walkers copy (py_offsets.h).
 */
#include <stdint.h>
#include "target/py_offsets.h"

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;

	return m > c ? m : c;
}

void py_offsets__fit_reads(struct py_offsets *o)
{
	/* Read only what we use: exact-size reads, no page-sized over-reads. */
	o->interp_size = max3(o->interp_id, o->interp_next, o->interp_threads_head) + 8;
	o->tstate_size = max3(max3(o->tstate_next, o->tstate_interp, o->tstate_current_frame),
			      max3(o->tstate_cframe, o->tstate_thread_id, o->tstate_native_thread_id),
			      max3(o->tstate_base_frame, o->tstate_last_profiled_frame,
				   o->tstate_last_profiled_frame_seq)) + 8;
	o->frame_size = max3(max3(o->frame_previous, o->frame_executable, o->frame_instr_ptr),
			     o->frame_owner, 0) + 8;
	/* co_version is read from the same copy (symbolizer.c): a table that
	 * puts it past the other fields must not make that copy too short. */
	o->code_size = max3(max3(o->code_filename, o->code_name, o->code_qualname),
			    max3(o->code_linetable, o->code_firstlineno, o->ob_type),
			    max3(o->code_firsttraceable, o->code_version, 0)) + 8;
}
