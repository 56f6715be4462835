/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "target/debug_offsets.h"

/*
 * The fields of _Py_DebugOffsets after its header, in declaration order, as
 * "section.field", one uint64_t each. Taken from pycore_runtime.h (3.13) and
 * pycore_debug_offsets.h (3.14, 3.15) of those releases.
 */
static const char *const layout_313[] = {
	"runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
	"interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
	"interpreter_state.threads_head", "interpreter_state.gc",
	"interpreter_state.imports_modules", "interpreter_state.sysdict",
	"interpreter_state.builtins", "interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
	"thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
	"thread_state.current_frame", "thread_state.thread_id", "thread_state.native_thread_id",
	"thread_state.datastack_chunk", "thread_state.status",
	"interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
	"interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
	"code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
	"code_object.linetable", "code_object.firstlineno", "code_object.argcount",
	"code_object.localsplusnames", "code_object.localspluskinds",
	"code_object.co_code_adaptive",
	"pyobject.size", "pyobject.ob_type",
	"type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
	"tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
	"list_object.size", "list_object.ob_item", "list_object.ob_size",
	"dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
	"float_object.size", "float_object.ob_fval",
	"long_object.size", "long_object.lv_tag", "long_object.ob_digit",
	"bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
	"unicode_object.size", "unicode_object.state", "unicode_object.length",
	"unicode_object.asciiobject_size",
	"gc.size", "gc.collecting",
	NULL
};

static const char *const layout_314[] = {
	"runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
	"interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
	"interpreter_state.threads_head", "interpreter_state.threads_main", "interpreter_state.gc",
	"interpreter_state.imports_modules", "interpreter_state.sysdict",
	"interpreter_state.builtins", "interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
	"interpreter_state.code_object_generation", "interpreter_state.tlbc_generation",
	"thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
	"thread_state.current_frame", "thread_state.thread_id", "thread_state.native_thread_id",
	"thread_state.datastack_chunk", "thread_state.status",
	"interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
	"interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
	"interpreter_frame.stackpointer", "interpreter_frame.tlbc_index",
	"code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
	"code_object.linetable", "code_object.firstlineno", "code_object.argcount",
	"code_object.localsplusnames", "code_object.localspluskinds",
	"code_object.co_code_adaptive", "code_object.co_tlbc",
	"pyobject.size", "pyobject.ob_type",
	"type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
	"tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
	"list_object.size", "list_object.ob_item", "list_object.ob_size",
	"set_object.size", "set_object.used", "set_object.table", "set_object.mask",
	"dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
	"float_object.size", "float_object.ob_fval",
	"long_object.size", "long_object.lv_tag", "long_object.ob_digit",
	"bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
	"unicode_object.size", "unicode_object.state", "unicode_object.length",
	"unicode_object.asciiobject_size",
	"gc.size", "gc.collecting",
	"gen_object.size", "gen_object.gi_name", "gen_object.gi_iframe",
	"gen_object.gi_frame_state",
	"llist_node.next", "llist_node.prev",
	"debugger_support.eval_breaker", "debugger_support.remote_debugger_support",
	"debugger_support.remote_debugging_enabled", "debugger_support.debugger_pending_call",
	"debugger_support.debugger_script_path", "debugger_support.debugger_script_path_size",
	NULL
};

static const char *const layout_315[] = {
	"runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
	"interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
	"interpreter_state.threads_head", "interpreter_state.threads_main", "interpreter_state.gc",
	"interpreter_state.imports_modules", "interpreter_state.sysdict",
	"interpreter_state.builtins", "interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked", "interpreter_state.gil_runtime_state_holder",
	"interpreter_state.code_object_generation", "interpreter_state.tlbc_generation",
	"thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
	"thread_state.current_frame", "thread_state.base_frame",
	"thread_state.last_profiled_frame", "thread_state.last_profiled_frame_seq",
	"thread_state.thread_id", "thread_state.native_thread_id",
	"thread_state.datastack_chunk", "thread_state.status", "thread_state.holds_gil",
	"thread_state.gil_requested", "thread_state.current_exception", "thread_state.exc_state",
	"err_stackitem.exc_value",
	"interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
	"interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
	"interpreter_frame.stackpointer", "interpreter_frame.tlbc_index",
	"code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
	"code_object.linetable", "code_object.firstlineno", "code_object.argcount",
	"code_object.localsplusnames", "code_object.localspluskinds",
	"code_object.co_code_adaptive", "code_object.co_tlbc",
	"pyobject.size", "pyobject.ob_type",
	"type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
	"type_object.tp_basicsize", "type_object.tp_dictoffset",
	"heap_type_object.size", "heap_type_object.ht_cached_keys",
	"tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
	"list_object.size", "list_object.ob_item", "list_object.ob_size",
	"set_object.size", "set_object.used", "set_object.table", "set_object.mask",
	"dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
	"float_object.size", "float_object.ob_fval",
	"long_object.size", "long_object.lv_tag", "long_object.ob_digit",
	"bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
	"unicode_object.size", "unicode_object.state", "unicode_object.length",
	"unicode_object.asciiobject_size", "unicode_object.compactunicodeobject_size",
	"gc.size", "gc.collecting", "gc.frame", "gc.generation_stats_size", "gc.generation_stats",
	"gen_object.size", "gen_object.gi_name", "gen_object.gi_iframe",
	"gen_object.gi_frame_state",
	"llist_node.next", "llist_node.prev",
	"debugger_support.eval_breaker", "debugger_support.remote_debugger_support",
	"debugger_support.remote_debugging_enabled", "debugger_support.debugger_pending_call",
	"debugger_support.debugger_script_path", "debugger_support.debugger_script_path_size",
	NULL
};

static const char *const *layout_for(uint64_t version_hex)
{
	if ((version_hex >> 24) != 3)
		return NULL;
	switch ((version_hex >> 16) & 0xff) {
	case 13: return layout_313;
	case 14: return layout_314;
	case 15: return layout_315;
	default: return NULL;
	}
}

static size_t layout_len(const char *const *l)
{
	size_t n = 0;

	while (l[n])
		n++;
	return n;
}

long debug_offsets__size(uint64_t version_hex)
{
	const char *const *l = layout_for(version_hex);

	return l ? (long)(DEBUG_OFFSETS_HEADER + 8 * layout_len(l)) : -ENOTSUP;
}

#define OFF(f) offsetof(struct py_offsets, f)

/*
 * The fields we use: where each goes, how wide it is in the target, and the
 * struct it indexes. A field that indexes a struct we copy whole must lie
 * inside that struct's reported size, and that size must be one we accept.
 */
struct binding {
	const char *name;
	size_t dest;
	unsigned int width;
	int optional;		/* absent from older layouts */
};

static const struct binding bindings[] = {
	{ "runtime_state.interpreters_head", OFF(runtime_interpreters_head), 8 },
	{ "interpreter_state.id", OFF(interp_id), 8 },
	{ "interpreter_state.next", OFF(interp_next), 8 },
	{ "interpreter_state.threads_head", OFF(interp_threads_head), 8 },
	{ "interpreter_state.threads_main", OFF(interp_threads_main), 8, 1 },
	{ "thread_state.next", OFF(tstate_next), 8 },
	{ "thread_state.interp", OFF(tstate_interp), 8 },
	{ "thread_state.current_frame", OFF(tstate_current_frame), 8 },
	{ "thread_state.thread_id", OFF(tstate_thread_id), 8 },
	{ "thread_state.native_thread_id", OFF(tstate_native_thread_id), 8 },
	{ "thread_state.status", OFF(tstate_status), 4, 1 },
	{ "thread_state.datastack_chunk", OFF(tstate_datastack_chunk), 8, 1 },
	{ "thread_state.base_frame", OFF(tstate_base_frame), 8, 1 },
	{ "thread_state.last_profiled_frame", OFF(tstate_last_profiled_frame), 8, 1 },
	{ "thread_state.last_profiled_frame_seq", OFF(tstate_last_profiled_frame_seq), 8, 1 },
	{ "interpreter_frame.previous", OFF(frame_previous), 8 },
	{ "interpreter_frame.executable", OFF(frame_executable), 8 },
	{ "interpreter_frame.instr_ptr", OFF(frame_instr_ptr), 8 },
	{ "interpreter_frame.owner", OFF(frame_owner), 1 },
	{ "code_object.filename", OFF(code_filename), 8 },
	{ "code_object.name", OFF(code_name), 8 },
	{ "code_object.qualname", OFF(code_qualname), 8 },
	{ "code_object.linetable", OFF(code_linetable), 8 },
	{ "code_object.firstlineno", OFF(code_firstlineno), 4 },
	{ "code_object.co_code_adaptive", OFF(code_adaptive), 2 },
	{ "code_object.localsplusnames", OFF(code_version), 8 },
	{ "pyobject.ob_type", OFF(ob_type), 8 },
	{ "thread_state.current_exception", OFF(tstate_exc_current), 8, 1 },
	{ "unicode_object.state", OFF(unicode_state), 4 },
	{ "unicode_object.length", OFF(unicode_length), 8 },
	{ "unicode_object.asciiobject_size", OFF(unicode_ascii_data), 0 },
	{ "unicode_object.compactunicodeobject_size", OFF(unicode_compact_data), 0, 1 },
	{ "bytes_object.ob_size", OFF(bytes_size), 8 },
	{ "bytes_object.ob_sval", OFF(bytes_sval), 0 },
	{ "interpreter_state.imports_modules", OFF(interp_modules), 8, 1 },
	{ "heap_type_object.ht_cached_keys", OFF(heaptype_cached_keys), 8, 1 },
	{ "thread_state.current_exception", OFF(tstate_exception), 8, 1 },
	{ "interpreter_frame.localsplus", OFF(frame_localsplus), 0, 1 },
	{ "thread_state.holds_gil", OFF(tstate_holds_gil), 4, 1 },
	{ "thread_state.gil_requested", OFF(tstate_gil_requested), 4, 1 },
};

/* Structs we never copy whole may be big (an interpreter state is ~400 KB);
 * this only catches nonsense. */
#define MAX_STRUCT_SIZE (16u << 20)

static int find(const char *const *l, const uint64_t *vals, const char *name, uint64_t *out)
{
	for (size_t i = 0; l[i]; i++) {
		if (strcmp(l[i], name) == 0) {
			*out = vals[i];
			return 0;
		}
	}
	return -ENOENT;
}

/* The size field of the section @name belongs to. */
static int section_size(const char *const *l, const uint64_t *vals, const char *name,
			uint64_t *size)
{
	char sec[64];
	const char *dot = strchr(name, '.');

	if (!dot || (size_t)(dot - name) + sizeof(".size") > sizeof(sec))
		return -EINVAL;
	memcpy(sec, name, dot - name);
	strcpy(sec + (dot - name), ".size");
	return find(l, vals, sec, size);
}

/*
 * The GIL and the collector. The table gives interpreter_state.gil_runtime_state
 * as the offset of the interpreter's own, embedded GIL (_gil), and its
 * _locked and _holder relative to the interpreter, not to the GIL; ceval_gil
 * is the offset of the pointer to the GIL the interpreter takes; gc.* are
 * relative to interpreter_state.gc. Only the off-CPU and GIL modes use them:
 * values that do not hold together leave them unknown (0) instead of
 * refusing the target.
 */
static void bind_gil_gc(const char *const *l, const uint64_t *vals, struct py_offsets *out)
{
	uint64_t rsize, head, isize, gil, cgil, locked, holder, gc, gcsize, coll, frame = 0;
	const uint64_t gsize = PY_GIL_SIZE;

	if (find(l, vals, "runtime_state.size", &rsize) ||
	    find(l, vals, "runtime_state.interpreters_head", &head) ||
	    find(l, vals, "interpreter_state.size", &isize) ||
	    find(l, vals, "interpreter_state.ceval_gil", &cgil) ||
	    find(l, vals, "interpreter_state.gil_runtime_state", &gil) ||
	    find(l, vals, "interpreter_state.gil_runtime_state_locked", &locked) ||
	    find(l, vals, "interpreter_state.gil_runtime_state_holder", &holder) ||
	    find(l, vals, "interpreter_state.gc", &gc) ||
	    find(l, vals, "gc.size", &gcsize) ||
	    find(l, vals, "gc.collecting", &coll))
		return;
	/* None of them is the first field of its struct. */
	if (!head || !cgil || !gil || !gc || !coll)
		return;
	/* _PyRuntime.interpreters.main is the pointer after .head (3.11-3.15). */
	if (rsize > MAX_STRUCT_SIZE || head > rsize || rsize - head < 16)
		return;
	if (isize > MAX_STRUCT_SIZE || gil > isize || isize - gil < gsize ||
	    cgil > isize - 8 || (cgil + 8 > gil && cgil < gil + gsize))
		return;
	if (holder < gil || holder - gil > gsize - 8 || locked < gil || locked - gil > gsize - 4 ||
	    (holder < locked + 4 && locked < holder + 8))
		return;
	if (gcsize > isize || gc > isize - gcsize || gcsize < 4 || coll > gcsize - 4)
		return;
	if (find(l, vals, "gc.frame", &frame) == 0 &&
	    (!frame || gcsize < 8 || frame > gcsize - 8 || (frame < coll + 4 && coll < frame + 8)))
		return;
	out->runtime_interpreters_main = head + 8;
	out->interp_ceval_gil = cgil;
	out->interp_gil = gil;
	out->gil_size = gsize;
	out->gil_last_holder = holder - gil;
	out->gil_locked = locked - gil;
	out->interp_gc_collecting = gc + coll;
	out->gc_collecting_size = 4;	/* int collecting, 3.11 to 3.15 */
	out->interp_gc_frame = frame ? gc + frame : 0;
}

int debug_offsets__field(const void *buf, size_t len, const char *name, uint64_t *val,
			 uint64_t *section_size)
{
	const char *const *l;
	uint64_t version;
	size_t i;

	if (len < DEBUG_OFFSETS_HEADER)
		return -EPROTO;
	memcpy(&version, (const char *)buf + 8, 8);
	l = layout_for(version);
	if (!l)
		return -ENOTSUP;
	if (len < DEBUG_OFFSETS_HEADER + 8 * layout_len(l))
		return -EPROTO;
	for (i = 0; l[i] && strcmp(l[i], name) != 0; i++)
		;
	if (!l[i])
		return -ENOENT;
	memcpy(val, (const char *)buf + DEBUG_OFFSETS_HEADER + 8 * i, 8);
	*section_size = 0;
	for (size_t k = 0; l[k]; k++) {
		const char *dot = strchr(name, '.');

		if (dot && strncmp(l[k], name, dot - name + 1) == 0 &&
		    strcmp(l[k] + (dot - name + 1), "size") == 0) {
			memcpy(section_size, (const char *)buf + DEBUG_OFFSETS_HEADER + 8 * k, 8);
			break;
		}
	}
	return 0;
}

/* The header: cookie, a version we know, not free-threaded, and the whole
 * table there; its values into @vals, its layout into *@l. */
static int read_header(const void *buf, size_t len, uint64_t *version, const char *const **l,
		       uint64_t *vals, size_t nvals, char *err, size_t errlen)
{
	uint64_t free_threaded;
	size_t n;

	if (len < DEBUG_OFFSETS_HEADER || memcmp(buf, DEBUG_OFFSETS_COOKIE, 8) != 0) {
		snprintf(err, errlen, "_Py_DebugOffsets: bad cookie (not a CPython 3.13+ runtime)");
		return -EPROTO;
	}
	memcpy(version, (const char *)buf + 8, 8);
	memcpy(&free_threaded, (const char *)buf + 16, 8);
	*l = layout_for(*version);
	if (!*l) {
		snprintf(err, errlen, "unsupported Python %u.%u (version 0x%llx in _Py_DebugOffsets)",
			 (unsigned)(*version >> 24) & 0xff, (unsigned)(*version >> 16) & 0xff,
			 (unsigned long long)*version);
		return -ENOTSUP;
	}
	if (free_threaded) {
		snprintf(err, errlen, "unsupported Python %u.%u: free-threaded builds are not supported",
			 (unsigned)(*version >> 24) & 0xff, (unsigned)(*version >> 16) & 0xff);
		return -ENOTSUP;
	}
	n = layout_len(*l);
	if (n > nvals || len < DEBUG_OFFSETS_HEADER + 8 * n) {
		snprintf(err, errlen, "_Py_DebugOffsets: table truncated (%zu bytes, need %zu)",
			 len, DEBUG_OFFSETS_HEADER + 8 * n);
		return -EPROTO;
	}
	memcpy(vals, (const char *)buf + DEBUG_OFFSETS_HEADER, 8 * n);
	return 0;
}

/* Every binding's field, each checked to lie inside its struct. */
static int bind_fields(const char *const *l, const uint64_t *vals, struct py_offsets *out,
		       char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(bindings) / sizeof(bindings[0]); i++) {
		const struct binding *b = &bindings[i];
		uint64_t v, size;

		if (find(l, vals, b->name, &v)) {
			if (b->optional)
				continue;
			snprintf(err, errlen, "_Py_DebugOffsets: no field %s", b->name);
			return -EPROTO;
		}
		if (section_size(l, vals, b->name, &size) == 0) {
			if (size == 0 || size > MAX_STRUCT_SIZE) {
				snprintf(err, errlen, "_Py_DebugOffsets: implausible size %llu of the struct of %s",
					 (unsigned long long)size, b->name);
				return -EPROTO;
			}
			/* width 0: a size, which may equal the struct size */
			if (v > size || (b->width && v + b->width > size)) {
				snprintf(err, errlen,
					 "_Py_DebugOffsets: %s = %llu lies outside its struct (size %llu)",
					 b->name, (unsigned long long)v, (unsigned long long)size);
				return -EPROTO;
			}
		}
		*(uint64_t *)((char *)out + b->dest) = v;
	}
	return 0;
}

/* Layout facts not in the table, derived from it and checked. */
static int derive_code_and_str(struct py_offsets *out, char *err, size_t errlen)
{
	/* _co_firsttraceable sits 16 bytes before co_code_adaptive in every
	 * release from 3.11 to 3.15. */
	if (out->code_adaptive < 16 + 4 || out->code_adaptive - 16 < out->code_firstlineno) {
		snprintf(err, errlen, "_Py_DebugOffsets: co_code_adaptive at %llu is implausible",
			 (unsigned long long)out->code_adaptive);
		return -EPROTO;
	}
	out->code_firsttraceable = out->code_adaptive - 16;
	/* co_version is the uint32 just before co_localsplusnames (3.12-3.15). */
	if (out->code_version < 4) {
		snprintf(err, errlen, "_Py_DebugOffsets: code_object.localsplusnames is implausible");
		return -EPROTO;
	}
	out->code_version -= 4;
	if (!out->unicode_compact_data)	/* PyCompactUnicodeObject adds utf8_length, utf8 */
		out->unicode_compact_data = out->unicode_ascii_data + 16;
	/* A str's header is read as its first asciiobject_size bytes, state and
	 * length taken from that copy: both must lie inside it, and it inside
	 * the compact header (bounded below). */
	if (out->unicode_state + 4 > out->unicode_ascii_data ||
	    out->unicode_length + 8 > out->unicode_ascii_data ||
	    out->unicode_ascii_data > out->unicode_compact_data) {
		snprintf(err, errlen, "_Py_DebugOffsets: unicode_object.state (%llu) or .length "
			 "(%llu) lies outside asciiobject_size (%llu)",
			 (unsigned long long)out->unicode_state,
			 (unsigned long long)out->unicode_length,
			 (unsigned long long)out->unicode_ascii_data);
		return -EPROTO;
	}
	return 0;
}

int debug_offsets__parse(const void *buf, size_t len, struct py_offsets *out,
			 char *err, size_t errlen)
{
	uint64_t version, vals[160];
	const char *const *l;
	int rc;

	rc = read_header(buf, len, &version, &l, vals, sizeof(vals) / sizeof(vals[0]), err,
			 errlen);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->version_hex = (uint32_t)version;
	rc = bind_fields(l, vals, out, err, errlen);
	if (!rc)
		rc = derive_code_and_str(out, err, errlen);
	if (rc)
		return rc;
	bind_gil_gc(l, vals, out);
	out->frame_owner_interp_min = 3;	/* 3.13 CSTACK; 3.14+ INTERPRETER (and CSTACK 4) */
	/* An evaluation loop's entry frame: FRAME_OWNED_BY_CSTACK (3) on 3.13,
	 * FRAME_OWNED_BY_INTERPRETER (3) from 3.14 (4 is the base sentinel). */
	out->frame_owner_cstack = 3;
	out->frame_instr_is_prev = false;
	/* PyHeapTypeObject.ht_cached_keys, not in the 3.13 and 3.14 tables: 880
	 * in both (their headers, default build). */
	if (!out->heaptype_cached_keys)
		out->heaptype_cached_keys = 880;
	/* Not in the 3.13 and 3.14 tables either (their headers): the raised
	 * exception at 112, and 3.14's holds_gil at 36. exc_info follows the
	 * raised exception in 3.12 to 3.15. */
	if (!out->tstate_exception)
		out->tstate_exception = 112;
	if (!out->tstate_holds_gil && ((version >> 16) & 0xff) == 14)
		out->tstate_holds_gil = 36;
	out->tstate_exc_info = out->tstate_exception + 8;
	/* co_localsplusnames is in the table (taken for co_version above);
	 * co_nlocalsplus follows co_firstlineno in 3.13 to 3.15 (their
	 * headers; at 72 in their default builds) */
	out->code_localsplusnames = out->code_version + 4;
	out->code_nlocalsplus = out->code_firstlineno + 4;
	/* 3.14 made f_executable a _PyStackRef: its low bits are tags. */
	out->executable_tag_mask = ((version >> 16) & 0xff) >= 14 ? 7 : 0;

	py_offsets__fit_reads(out);
	if (out->tstate_size > PY_MAX_STRUCT_COPY || out->frame_size > PY_MAX_STRUCT_COPY ||
	    out->code_size > PY_MAX_STRUCT_COPY || out->unicode_compact_data > PY_MAX_STRUCT_COPY ||
	    out->bytes_sval > PY_MAX_STRUCT_COPY) {
		snprintf(err, errlen, "_Py_DebugOffsets: an offset is beyond %u bytes", PY_MAX_STRUCT_COPY);
		return -EPROTO;
	}
	return 0;
}
