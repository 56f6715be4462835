/* SPDX-License-Identifier: MIT */
/*
 * asyncio/offsets.c - the .AsyncioDebug table and the _Py_DebugOffsets fields
 * the task walks use, validated once, before anything is read with them.
 *
 * .AsyncioDebug has no cookie and no version of its own: it is trusted only
 * for a target whose _Py_DebugOffsets already gave a version we know (3.14 or
 * 3.15: the same 13 u64 in both), and every value is checked against the
 * sizes it states.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "target/debug_offsets.h"

/* Bigger than any struct of CPython we read a field of (an interpreter state
 * is ~220 KB); only catches nonsense. */
#define MAX_STRUCT (16u << 20)
/* TaskObj is read whole into a local buffer. */
#define MAX_TASK_SIZE 4096
/* ob_refcnt and ob_type: no task field may lie there. */
#define PYOBJECT_HEAD 16

/* The table's fields, in order (Modules/_asynciomodule.c of 3.14 and 3.15). */
enum {
	T_SIZE, T_NAME, T_AWAITED_BY, T_IS_TASK, T_AWAITED_BY_IS_SET, T_CORO, T_NODE,
	I_SIZE, I_TASKS_HEAD,
	S_SIZE, S_RUNNING_LOOP, S_RUNNING_TASK, S_TASKS_HEAD,
	N_FIELDS
};

static const char *const field_names[N_FIELDS] = {
	"asyncio_task_object.size", "asyncio_task_object.task_name",
	"asyncio_task_object.task_awaited_by", "asyncio_task_object.task_is_task",
	"asyncio_task_object.task_awaited_by_is_set", "asyncio_task_object.task_coro",
	"asyncio_task_object.task_node",
	"asyncio_interpreter_state.size", "asyncio_interpreter_state.asyncio_tasks_head",
	"asyncio_thread_state.size", "asyncio_thread_state.asyncio_running_loop",
	"asyncio_thread_state.asyncio_running_task", "asyncio_thread_state.asyncio_tasks_head",
};

/* A field of @width bytes at @off in a struct of @size: inside it, past
 * @floor, aligned to @align. */
struct span {
	int field;
	unsigned int width, align;
};

static int check_span(const uint64_t *v, int size_field, const struct span *sp, uint64_t floor,
		      char *err, size_t errlen)
{
	uint64_t off = v[sp->field], size = v[size_field];

	if (off < floor || off > size || size - off < sp->width) {
		snprintf(err, errlen, ".AsyncioDebug: %s = %llu lies outside its struct "
			 "(%llu bytes, fields from %llu)", field_names[sp->field],
			 (unsigned long long)off, (unsigned long long)size,
			 (unsigned long long)floor);
		return -EPROTO;
	}
	if (off % sp->align) {
		snprintf(err, errlen, ".AsyncioDebug: %s = %llu is not %u-byte aligned",
			 field_names[sp->field], (unsigned long long)off, sp->align);
		return -EPROTO;
	}
	return 0;
}

/* No two of @n fields of one struct share a byte. */
static int check_disjoint(const uint64_t *v, const struct span *sp, size_t n, char *err,
			  size_t errlen)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = i + 1; k < n; k++) {
			uint64_t a = v[sp[i].field], b = v[sp[k].field];

			if (a < b + sp[k].width && b < a + sp[i].width) {
				snprintf(err, errlen,
					 ".AsyncioDebug: %s (%llu) and %s (%llu) overlap",
					 field_names[sp[i].field], (unsigned long long)a,
					 field_names[sp[k].field], (unsigned long long)b);
				return -EPROTO;
			}
		}
	return 0;
}

static int check_struct(const uint64_t *v, int size_field, uint64_t min, uint64_t max,
			const struct span *sp, size_t n, uint64_t floor, char *err, size_t errlen)
{
	int rc;

	if (v[size_field] < min || v[size_field] > max || v[size_field] % 8) {
		snprintf(err, errlen, ".AsyncioDebug: implausible %s %llu (expected %llu to %llu, "
			 "a multiple of 8)", field_names[size_field],
			 (unsigned long long)v[size_field], (unsigned long long)min,
			 (unsigned long long)max);
		return -EPROTO;
	}
	for (size_t i = 0; i < n; i++) {
		rc = check_span(v, size_field, &sp[i], floor, err, errlen);
		if (rc)
			return rc;
	}
	return check_disjoint(v, sp, n, err, errlen);
}

int asyncio_offsets__parse_table(const void *buf, size_t len, uint32_t version_hex,
				 struct asyncio_offsets *out, char *err, size_t errlen)
{
	/* a struct llist_node is two pointers */
	static const struct span task[] = {
		{ T_NAME, 8, 8 }, { T_AWAITED_BY, 8, 8 }, { T_IS_TASK, 1, 1 },
		{ T_AWAITED_BY_IS_SET, 1, 1 }, { T_CORO, 8, 8 }, { T_NODE, 16, 8 },
	};
	static const struct span interp[] = { { I_TASKS_HEAD, 16, 8 } };
	static const struct span thread[] = {
		{ S_RUNNING_LOOP, 8, 8 }, { S_RUNNING_TASK, 8, 8 }, { S_TASKS_HEAD, 16, 8 },
	};
	unsigned int minor = (version_hex >> 16) & 0xff;
	uint64_t v[N_FIELDS];
	int rc;

	if ((version_hex >> 24) != 3 || minor < 14 || minor > 15) {
		snprintf(err, errlen, "Python %u.%u has no .AsyncioDebug table we know "
			 "(pyprof-bpf reads it on 3.14 and 3.15)", version_hex >> 24, minor);
		return -ENOTSUP;
	}
	if (len != ASYNCIO_DEBUG_SIZE) {
		snprintf(err, errlen, ".AsyncioDebug: %zu bytes, expected %d (13 u64)", len,
			 ASYNCIO_DEBUG_SIZE);
		return -EPROTO;
	}
	memcpy(v, buf, sizeof(v));
	rc = check_struct(v, T_SIZE, PYOBJECT_HEAD + 8, MAX_TASK_SIZE, task,
			  sizeof(task) / sizeof(task[0]), PYOBJECT_HEAD, err, errlen);
	if (!rc)
		rc = check_struct(v, I_SIZE, 16, MAX_STRUCT, interp, 1, 0, err, errlen);
	if (!rc)
		rc = check_struct(v, S_SIZE, 16, MAX_STRUCT, thread,
				  sizeof(thread) / sizeof(thread[0]), 0, err, errlen);
	if (rc)
		return rc;

	memset(out, 0, sizeof(*out));
	out->version_hex = version_hex;
	out->task_size = v[T_SIZE];
	out->task_name = v[T_NAME];
	out->task_awaited_by = v[T_AWAITED_BY];
	out->task_is_task = v[T_IS_TASK];
	out->task_awaited_by_is_set = v[T_AWAITED_BY_IS_SET];
	out->task_coro = v[T_CORO];
	out->task_node = v[T_NODE];
	out->interp_size = v[I_SIZE];
	out->interp_tasks_head = v[I_TASKS_HEAD];
	out->tstate_size = v[S_SIZE];
	out->tstate_running_loop = v[S_RUNNING_LOOP];
	out->tstate_running_task = v[S_RUNNING_TASK];
	out->tstate_tasks_head = v[S_TASKS_HEAD];
	/* gi_frame_state, pycore_frame.h: 3.15 renumbered the states. */
	if (minor == 14) {
		out->state_created = -3;
		out->state_yield_from = -1;
		out->state_yield_from_locked = -1;
		out->state_executing = 0;
		out->state_cleared = 4;
		out->awaited_slot = 1;
	} else {
		out->state_created = 0;
		out->state_yield_from = 2;
		out->state_yield_from_locked = 3;
		out->state_executing = 4;
		out->state_cleared = 5;
		out->awaited_slot = 2;
	}
	return 0;
}

/* What we take from _Py_DebugOffsets: where it goes, its width. */
struct dbg_field {
	const char *name;
	size_t dest;
	unsigned int width;
};

#define AO(f) offsetof(struct asyncio_offsets, f)

static const struct dbg_field dbg_fields[] = {
	{ "llist_node.next", AO(llist_next), 8 },
	{ "llist_node.prev", AO(llist_prev), 8 },
	{ "gen_object.gi_iframe", AO(gen_iframe), 0 },
	{ "gen_object.gi_frame_state", AO(gen_frame_state), 1 },
	{ "interpreter_frame.stackpointer", AO(frame_stackpointer), 8 },
	{ "set_object.used", AO(set_used), 8 },
	{ "set_object.table", AO(set_table), 8 },
	{ "set_object.mask", AO(set_mask), 8 },
	{ "type_object.tp_flags", AO(type_flags), 8 },
	{ "long_object.lv_tag", AO(long_lv_tag), 8 },
	{ "long_object.ob_digit", AO(long_digit), 0 },
};

int asyncio_offsets__bind_debug(const void *dbg, size_t len, struct asyncio_offsets *out,
				char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(dbg_fields) / sizeof(dbg_fields[0]); i++) {
		const struct dbg_field *f = &dbg_fields[i];
		uint64_t v, size;
		int rc = debug_offsets__field(dbg, len, f->name, &v, &size);

		if (rc) {
			snprintf(err, errlen, "_Py_DebugOffsets: %s: %s", f->name,
				 rc == -ENOENT ? "not in this version's table" : strerror(-rc));
			return rc == -ENOTSUP ? rc : -EPROTO;
		}
		/* llist_node has no size field: its two pointers are all of it */
		if (!size)
			size = 16;
		if (size > MAX_STRUCT || v > size || size - v < f->width ||
		    (f->width == 8 && v % 8)) {
			snprintf(err, errlen, "_Py_DebugOffsets: %s = %llu lies outside its struct "
				 "(%llu bytes) or is misaligned", f->name, (unsigned long long)v,
				 (unsigned long long)size);
			return -EPROTO;
		}
		*(uint64_t *)((char *)out + f->dest) = v;
	}
	if (out->llist_next == out->llist_prev) {
		snprintf(err, errlen, "_Py_DebugOffsets: llist_node.next and .prev are one field");
		return -EPROTO;
	}
	if (out->gen_iframe < PYOBJECT_HEAD || out->gen_frame_state < PYOBJECT_HEAD ||
	    out->gen_iframe > MAX_TASK_SIZE) {
		snprintf(err, errlen, "_Py_DebugOffsets: gen_object.gi_iframe (%llu) or "
			 "gi_frame_state (%llu) is implausible",
			 (unsigned long long)out->gen_iframe,
			 (unsigned long long)out->gen_frame_state);
		return -EPROTO;
	}
	/* A set is read up to the last field we use. */
	out->set_read = out->set_used;
	if (out->set_table > out->set_read)
		out->set_read = out->set_table;
	if (out->set_mask > out->set_read)
		out->set_read = out->set_mask;
	out->set_read += 8;
	return 0;
}
