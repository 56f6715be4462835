/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include "target/offsets_legacy.h"

/*
 * offsetof()/sizeof() in the internal headers of 3.11.7 and 3.12.1 (x86_64,
 * default build), checked against 3.11.2: _PyRuntimeState, PyInterpreterState,
 * PyThreadState, _PyCFrame, _PyInterpreterFrame, PyCodeObject, PyASCIIObject,
 * PyBytesObject (datastack_chunk also found in live 3.11.2, 3.11.7 and 3.12.1
 * processes: the field whose chunk holds the current frame). pyproc.c validates them with a round trip (a thread's interp
 * pointer leads back to its interpreter) before trusting them.
 *
 * The GIL and GC fields, from the same headers (struct _gil_runtime_state,
 * struct _gc_runtime_state): 3.11 embeds the one GIL in _PyRuntime
 * (ceval.gil); 3.12 gives each interpreter a pointer to the GIL it takes
 * (ceval.gil), which for the main interpreter is its own _gil (seen on a live
 * 3.12.1). pyproc__gil_gc() checks them once against the live target.
 */
static const struct py_offsets py311 = {
	.runtime_interpreters_head = 40,
	.interp_id = 48, .interp_next = 0, .interp_threads_head = 16,
	.tstate_next = 8, .tstate_interp = 16,
	.tstate_cframe = 56, .cframe_current_frame = 8, .cframe_previous = 16,
	.tstate_root_cframe = 336,
	.tstate_thread_id = 152, .tstate_native_thread_id = 160,
	.tstate_datastack_chunk = 296,
	.frame_previous = 48, .frame_executable = 32, .frame_instr_ptr = 56, .frame_owner = 69,
	.frame_owner_interp_min = 0,	/* 3.11 has no shim frames */
	.frame_is_entry = 68,
	.frame_instr_is_prev = true,
	.code_filename = 112, .code_name = 120, .code_qualname = 128, .code_linetable = 136,
	.code_firstlineno = 72, .code_adaptive = 184, .code_firsttraceable = 168,
	.ob_type = 8,
	.unicode_state = 32, .unicode_length = 16,
	.unicode_ascii_data = 48, .unicode_compact_data = 72,	/* 3.11 still has wstr */
	.bytes_size = 16, .bytes_sval = 32,
	.runtime_interpreters_main = 48, .runtime_gil = 360,
	.gil_size = PY_GIL_SIZE, .gil_last_holder = PY_GIL_LAST_HOLDER, .gil_locked = PY_GIL_LOCKED,
	.interp_gc_collecting = 848, .gc_collecting_size = 4,	/* gc at 648, collecting at 200 */
	.interp_modules = 888, .heaptype_cached_keys = 872,
	.tstate_exception = 96, .tstate_exc_info = 120,
	.frame_localsplus = 72, .code_localsplusnames = 96, .code_nlocalsplus = 76,
};

static const struct py_offsets py312 = {
	.runtime_interpreters_head = 40,
	.interp_id = 8, .interp_next = 0, .interp_threads_head = 72,
	.tstate_next = 8, .tstate_interp = 16,
	.tstate_cframe = 56, .cframe_current_frame = 0, .cframe_previous = 8,
	.tstate_root_cframe = 272,
	.tstate_thread_id = 136, .tstate_native_thread_id = 144,
	.tstate_status = 24,
	.tstate_datastack_chunk = 232,
	.frame_previous = 8, .frame_executable = 0, .frame_instr_ptr = 56, .frame_owner = 70,
	.frame_owner_interp_min = 3,	/* FRAME_OWNED_BY_CSTACK */
	.frame_owner_cstack = 3,
	.frame_instr_is_prev = true,
	.code_filename = 112, .code_name = 120, .code_qualname = 128, .code_linetable = 136,
	.code_firstlineno = 68, .code_adaptive = 192, .code_firsttraceable = 176,
	.code_version = 92,
	.ob_type = 8,
	.unicode_state = 32, .unicode_length = 16,
	.unicode_ascii_data = 40, .unicode_compact_data = 56,
	.bytes_size = 16, .bytes_sval = 32,
	.runtime_interpreters_main = 48, .interp_ceval_gil = 384, .interp_gil = 1040,
	.gil_size = PY_GIL_SIZE, .gil_last_holder = PY_GIL_LAST_HOLDER, .gil_locked = PY_GIL_LOCKED,
	.interp_gc_collecting = 312, .gc_collecting_size = 4,	/* gc at 112, collecting at 200 */
	.interp_modules = 944, .heaptype_cached_keys = 880,	/* imports.modules */
	.tstate_exception = 96, .tstate_exc_info = 104,
	.frame_localsplus = 72, .code_localsplusnames = 96, .code_nlocalsplus = 72,
};

int offsets_legacy__get(uint32_t version_hex, struct py_offsets *out)
{
	if ((version_hex >> 24) != 3)
		return -ENOTSUP;
	switch ((version_hex >> 16) & 0xff) {
	case 11:
		*out = py311;
		break;
	case 12:
		*out = py312;
		break;
	default:
		return -ENOTSUP;
	}
	out->version_hex = version_hex;
	py_offsets__fit_reads(out);
	return 0;
}
