/* SPDX-License-Identifier: MIT */
/*
 * fuzz_debug_offsets.c - _Py_DebugOffsets validation (debug_offsets.c) on any
 * bytes: the input is the table as read from the start of _PyRuntime.
 * Seeds: the tables of real 3.13, 3.14 and 3.15 interpreters.
 *
 * Invariant checked: offsets that pass are safe to use as the walkers use
 * them, i.e. every field read out of a struct copied whole (a thread state,
 * a frame, a code object, a str header) lies inside the bytes copied, and
 * those copies fit the PY_MAX_STRUCT_COPY buffers they go to.
 */
#include <stdint.h>
#include <string.h>
#include "target/debug_offsets.h"

#include "fuzz_check.h"

/* Field @off, @w bytes wide, inside a copy of @size bytes. */
static int inside(uint64_t off, uint64_t w, uint64_t size)
{
	return size <= PY_MAX_STRUCT_COPY && off <= size && w <= size - off;
}

static void check_offsets(const struct py_offsets *o)
{
	CHECK(inside(o->tstate_next, 8, o->tstate_size));
	CHECK(inside(o->tstate_interp, 8, o->tstate_size));
	CHECK(inside(o->tstate_current_frame, 8, o->tstate_size));
	CHECK(inside(o->tstate_thread_id, 8, o->tstate_size));
	CHECK(inside(o->tstate_native_thread_id, 8, o->tstate_size));
	CHECK(inside(o->frame_previous, 8, o->frame_size));
	CHECK(inside(o->frame_executable, 8, o->frame_size));
	CHECK(inside(o->frame_instr_ptr, 8, o->frame_size));
	CHECK(inside(o->frame_owner, 1, o->frame_size));
	CHECK(inside(o->ob_type, 8, o->code_size));
	CHECK(inside(o->code_filename, 8, o->code_size));
	CHECK(inside(o->code_qualname, 8, o->code_size));
	CHECK(inside(o->code_linetable, 8, o->code_size));
	CHECK(inside(o->code_firstlineno, 4, o->code_size));
	CHECK(inside(o->code_firsttraceable, 4, o->code_size));
	CHECK(!o->code_version || inside(o->code_version, 4, o->code_size));
	/* a str's header is read as unicode_ascii_data bytes */
	CHECK(inside(o->unicode_state, 4, o->unicode_ascii_data));
	CHECK(inside(o->unicode_length, 8, o->unicode_ascii_data));
	CHECK(o->unicode_compact_data <= PY_MAX_STRUCT_COPY);
	CHECK(o->bytes_sval <= PY_MAX_STRUCT_COPY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct py_offsets o;
	char err[256];
	uint64_t version, v, sec;
	long need;
	int rc;

	err[0] = '\0';
	rc = debug_offsets__parse(data, size, &o, err, sizeof(err));
	CHECK(rc <= 0 && (rc == 0 || err[0]));
	if (rc == 0)
		check_offsets(&o);
	if (size >= DEBUG_OFFSETS_HEADER) {
		memcpy(&version, data + 8, 8);
		need = debug_offsets__size(version);
		CHECK(need < 0 || need >= DEBUG_OFFSETS_HEADER);
		CHECK(rc != 0 || (need > 0 && size >= (size_t)need));
	}
	debug_offsets__field(data, size, "interpreter_frame.owner", &v, &sec);
	debug_offsets__field(data, size, "gc.frame", &v, &sec);
	debug_offsets__field(data, size, "nosuch", &v, &sec);
	return 0;
}
