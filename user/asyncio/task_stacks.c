/* SPDX-License-Identifier: MIT */
/*
 * asyncio/task_stacks.c - task-aware stacks for `record --async` (see
 * task_stacks.h). The running task's part is the sample's own stack, as
 * consistent as the stack; the awaiters' names and frames come from the last
 * asyncio snapshot of the process, taken again (rate-limited) when a task
 * the sample names is not in it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include "asyncio/task_stacks.h"
#include "types/out_sample.h"
#include "target/py_offsets.h"
#include "target/pyproc.h"
#include "symbols/unicode.h"

#define TPFLAGS_LONG_SUBCLASS (1ul << 24)
#define TPFLAGS_UNICODE_SUBCLASS (1ul << 28)

/* Marker text of one task: "<task NAME>" or "<task NAME (N awaiters)>". */
#define MARKER_MAX 192

struct task_stacks {
	struct pyproc *p;
	struct symbolizer *sym;
	struct asyncio_offsets ao;
	struct asyncio_snapshot snap;	/* the last one (n == 0: none yet) */
	struct asyncio_index *ix;
	uint64_t snap_ns;		/* when it was taken; 0: never */
	/* The spliced stack being built, and its markers' texts (each
	 * MARKER_MAX bytes, one per task). */
	struct py_sym out[TASK_STACKS_MAX];
	uint8_t kinds[TASK_STACKS_MAX];
	char markers[SAMPLE_MAX_TASKS + 1][MARKER_MAX];
	struct task_stacks_stats st;
};

int task_stacks__new(struct pyproc *p, struct symbolizer *sym, const struct asyncio_offsets *ao,
		     struct task_stacks **out)
{
	struct task_stacks *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return -ENOMEM;
	ts->p = p;
	ts->sym = sym;
	ts->ao = *ao;
	*out = ts;
	return 0;
}

static void drop_snapshot(struct task_stacks *ts)
{
	asyncio_index__free(ts->ix);
	ts->ix = NULL;
	asyncio_snapshot__free(&ts->snap);
	memset(&ts->snap, 0, sizeof(ts->snap));
}

void task_stacks__free(struct task_stacks *ts)
{
	if (!ts)
		return;
	drop_snapshot(ts);
	free(ts);
}

/* The task @id of the last snapshot, taking a new one when it is missing
 * and the last is old enough. NULL: not known. */
static int take_snapshot(struct task_stacks *ts, uint64_t now_ns);

static const struct asyncio_task *find_task(struct task_stacks *ts, uint64_t id, uint64_t now_ns)
{
	long k;

	k = ts->ix ? asyncio_index__find(ts->ix, id) : -1;
	if (k >= 0)
		return &ts->snap.tasks[k];
	if (ts->snap_ns && now_ns - ts->snap_ns < TASK_STACKS_MIN_GAP_NS)
		return NULL;
	if (take_snapshot(ts, now_ns))
		return NULL;
	k = asyncio_index__find(ts->ix, id);
	return k >= 0 ? &ts->snap.tasks[k] : NULL;
}

/* Append one frame; false when the stack is full. */
static bool push(struct task_stacks *ts, uint32_t *n, const struct py_sym *f, uint8_t kind)
{
	if (*n >= TASK_STACKS_MAX)
		return false;
	ts->out[*n] = *f;
	ts->kinds[*n] = kind;
	(*n)++;
	return true;
}

static bool push_status(struct task_stacks *ts, uint32_t *n, const char *text)
{
	struct py_sym m = { .function = text, .file = "", .line = 0 };

	return push(ts, n, &m, OUT_FRAME_STATUS);
}

static bool push_marker(struct task_stacks *ts, uint32_t *n, uint32_t i, const char *text)
{
	struct py_sym m = { .function = ts->markers[i], .file = "", .line = 0 };

	snprintf(ts->markers[i], MARKER_MAX, "%s", text);
	return push(ts, n, &m, OUT_FRAME_STATUS);
}

/*
 * The name a sample copied of task @t: a compact str's text, or an int's
 * "Task-N" (the C Task names itself by number until asked). 0, or -EINVAL
 * when the copy says neither (not read, cut, or not a name).
 */
static int copied_name(const struct task_stacks *ts, const struct sample_task *t, char *out,
		       size_t outsz)
{
	const struct py_offsets *po = pyproc__offsets(ts->p);
	const uint8_t *b = t->name;
	size_t n = t->name_len, got;

	if (!n || !b)
		return -EINVAL;
	if (t->name_type_flags & TPFLAGS_UNICODE_SUBCLASS) {
		uint32_t state;
		uint64_t length, data;
		unsigned int kind;
		int compact, ascii;

		if (po->unicode_state + 4 > n || po->unicode_length + 8 > n)
			return -EINVAL;
		memcpy(&state, b + po->unicode_state, 4);
		memcpy(&length, b + po->unicode_length, 8);
		if (pyunicode__state_decode(state, &kind, &compact, &ascii) || !compact)
			return -EINVAL;
		data = ascii ? po->unicode_ascii_data : po->unicode_compact_data;
		if (data > n || length > (n - data) / kind)
			return -EINVAL;		/* longer than copied */
		return pyunicode__to_utf8(kind, ascii, b + data, length, out, outsz, &got);
	}
	if (t->name_type_flags & TPFLAGS_LONG_SUBCLASS) {
		uint64_t tag, nd;
		uint32_t d[2] = { 0, 0 };

		if (ts->ao.long_lv_tag + 8 > n || ts->ao.long_digit + 8 > n)
			return -EINVAL;
		memcpy(&tag, b + ts->ao.long_lv_tag, 8);
		/* lv_tag: digit count << 3, sign in the low bits (0 +, 1 zero, 2 -) */
		nd = tag >> 3;
		if ((tag & 3) == 1) {
			snprintf(out, outsz, "Task-0");
			return 0;
		}
		if (nd == 0 || nd > 2)
			return -EINVAL;
		memcpy(d, b + ts->ao.long_digit, nd * 4);
		snprintf(out, outsz, "Task-%s%" PRIu64, (tag & 3) == 2 ? "-" : "",
			 (uint64_t)d[0] | ((uint64_t)(nd > 1 ? d[1] : 0) << 30));
		return 0;
	}
	return -EINVAL;
}

/* Push raw frame @f symbolized; false when the stack is full. */
static bool push_raw(struct task_stacks *ts, uint32_t *n, const struct py_rawframe *f)
{
	struct py_sym s;

	if (symbolizer__resolve(ts->sym, f, &s) == -ENOENT)
		return true;
	if (!s.function) {
		s.function = "<unknown>";
		s.file = "<unknown>";
		s.line = -1;
	}
	return push(ts, n, &s, OUT_FRAME_PYTHON);
}

/*
 * An awaiting task's suspended frames, innermost first: those the sample
 * carries (read by the program at the sample), else a snapshot's @k. False
 * when neither has them, or the stack is full.
 */
static bool push_awaiter(struct task_stacks *ts, uint32_t *n, const struct sample_task *t,
			 const struct asyncio_task *k)
{
	if ((t->fflags & SAMPLE_LF_READ) && t->nframes) {
		ts->st.frames_read++;
		if ((t->fflags & SAMPLE_LF_CUT) && !push_status(ts, n, "[truncated]"))
			return false;
		for (uint32_t j = t->nframes; j-- > 0;)
			if (!push_raw(ts, n, &t->frames[j]))
				return false;
		return true;
	}
	if (!k)
		return false;
	ts->st.from_snapshot++;
	for (size_t j = 0; j < k->nframes; j++)
		if (!push(ts, n, &k->frames[j], OUT_FRAME_PYTHON))
			return false;
	return true;
}

/* Was the task of link @t met before in @r's chain? (The program's check
 * sees a cycle only within twice its length, and keeps the links it read
 * meanwhile: asked only of a chain it cut or found looping.) */
static bool met_before(const struct raw_sample *r, uint32_t t)
{
	for (uint32_t j = 0; j < t; j++)
		if (r->tasks[j].task == r->tasks[t].task)
			return true;
	return false;
}

/*
 * --native: the running task's part again, from the merged stack @m (@mk its
 * kinds): its frames up to the @npy-th Python one (the task's coroutine),
 * native ones between them included. Returns the frames now in ts->out.
 */
static uint32_t native_part(struct task_stacks *ts, uint32_t npy, const struct py_sym *m,
			    const uint8_t *mk, uint32_t nm)
{
	uint32_t n = 0, seen = 0;

	for (uint32_t i = 0; i < nm && seen < npy; i++) {
		if (mk[i] == OUT_FRAME_PYTHON)
			seen++;
		if (!push(ts, &n, &m[i], mk[i]))
			break;
	}
	return n;
}

int task_stacks__splice(struct task_stacks *ts, const struct raw_sample *r, uint64_t now_ns,
			const struct py_sym *merged, const uint8_t *mkinds, uint32_t nmerged,
			const struct py_sym **frames, const uint8_t **kinds, uint32_t *nout)
{
	/* The generator the running task runs (its coroutine, or the async
	 * generator its anext() drives) owns the frame where its part ends. */
	uint64_t frame = (r->tasks[0].gen ? r->tasks[0].gen : r->tasks[0].coro) + ts->ao.gen_iframe;
	uint32_t cut = UINT32_MAX, n = 0, ntasks = r->ntasks, flags = r->tasks_flags;
	char text[MARKER_MAX];

	if (ntasks > SAMPLE_MAX_TASKS)
		ntasks = SAMPLE_MAX_TASKS;
	/* The running task's coroutine frame: where its part of the stack
	 * ends. Not there: the loop runs between two of its steps. */
	for (uint32_t i = 0; i < r->nframes; i++) {
		if (r->frames[i].frame == frame) {
			cut = i;
			break;
		}
	}
	if (cut == UINT32_MAX || !r->tasks[0].coro) {
		ts->st.not_in_stack++;
		return 0;
	}
	symbolizer__next_sample(ts->sym);
	for (uint32_t i = 0; i <= cut; i++) {
		if (r->frames[i].reserved & SAMPLE_FF_INTERP)
			continue;
		if (!push_raw(ts, &n, &r->frames[i]))
			break;
	}
	if (mkinds)
		n = native_part(ts, n, merged, mkinds, nmerged);
	for (uint32_t t = 0; t < ntasks; t++) {
		const struct sample_task *st = &r->tasks[t];
		char copied[MARKER_MAX - 32];
		bool have = !copied_name(ts, st, copied, sizeof(copied));
		bool read = (st->fflags & SAMPLE_LF_READ) && st->nframes;
		/* The running task's frames are the sample's, an awaiter's
		 * came with it: the name is enough, and a short-lived task is
		 * gone before any snapshot. A snapshot is the fallback. */
		const struct asyncio_task *k = (t && !read) || !have ?
					       find_task(ts, st->task, now_ns) : NULL;
		const char *name = have ? copied : k && k->name ? k->name : NULL;

		if (t && (r->tasks_flags & (SAMPLE_TF_CUT | SAMPLE_TF_CYCLE)) && met_before(r, t)) {
			flags |= SAMPLE_TF_CYCLE;
			break;
		}
		if (!name)
			ts->st.unknown++;
		/* An awaiter whose frames neither the sample nor a snapshot
		 * had: its name, but not where it is suspended. Said, not
		 * left out silently. */
		if (t && !push_awaiter(ts, &n, st, k)) {
			ts->st.frames_unread++;
			if (!push_status(ts, &n, "[task-frames-unread]"))
				break;
		}
		if (r->tasks[t].nawaiters > 1)
			snprintf(text, sizeof(text), "<task %s (%u awaiters)>",
				 name ? name : "[unread]", r->tasks[t].nawaiters);
		else
			snprintf(text, sizeof(text), "<task %s>", name ? name : "[unread]");
		if (!push_marker(ts, &n, t, text))
			break;
	}
	if (flags & (SAMPLE_TF_CUT | SAMPLE_TF_CYCLE | SAMPLE_TF_FAULT)) {
		ts->st.cut++;
		push_marker(ts, &n, ntasks,
			    flags & SAMPLE_TF_CYCLE ? "[task-cycle]" :
			    flags & SAMPLE_TF_CUT ? "[tasks-truncated]" : "[torn]");
	}
	ts->st.samples++;
	*frames = ts->out;
	*kinds = ts->kinds;
	*nout = n;
	return 1;
}

/* Take a snapshot now (the splice's cache too). 0 or -errno. */
static int take_snapshot(struct task_stacks *ts, uint64_t now_ns)
{
	char err[256];
	int rc;

	drop_snapshot(ts);
	ts->snap_ns = now_ns;
	ts->st.snapshots++;
	rc = asyncio_snapshot__take(ts->p, ts->sym, &ts->ao, &ts->snap, err, sizeof(err));
	if (!rc)
		rc = asyncio_index__new(&ts->snap, &ts->ix);
	if (rc) {
		ts->st.snapshot_errors++;
		drop_snapshot(ts);
	}
	return rc;
}

/* The awaiter a chain follows: the lowest id of @t's awaiters that is a
 * task of the snapshot; -1 when none is. */
static long awaiter_of(const struct task_stacks *ts, const struct asyncio_task *t)
{
	long best = -1;

	for (size_t i = 0; i < t->nawaited; i++) {
		long k = asyncio_index__find(ts->ix, t->awaited_by[i]);

		if (k >= 0 && (best < 0 || ts->snap.tasks[k].addr < ts->snap.tasks[best].addr))
			best = k;
	}
	return best;
}

int task_stacks__pending(struct task_stacks *ts, uint64_t now_ns, task_stack_fn fn, void *ctx)
{
	char text[MARKER_MAX];
	int rc;

	rc = take_snapshot(ts, now_ns);
	if (rc)
		return rc;
	for (size_t i = 0; i < ts->snap.n; i++) {
		const struct asyncio_task *t = &ts->snap.tasks[i];
		long seen[SAMPLE_MAX_TASKS];
		uint32_t n = 0, depth = 0;
		long k = (long)i;

		if (t->state != ASYNCIO_TASK_PENDING && t->state != ASYNCIO_TASK_CREATED)
			continue;
		while (k >= 0) {
			const struct asyncio_task *a = &ts->snap.tasks[k];
			bool cycle = false;

			for (uint32_t j = 0; j < depth; j++)
				cycle |= seen[j] == k;
			if (cycle || depth == SAMPLE_MAX_TASKS) {
				push_marker(ts, &n, depth < SAMPLE_MAX_TASKS ? depth : SAMPLE_MAX_TASKS,
					    cycle ? "[task-cycle]" : "[tasks-truncated]");
				break;
			}
			seen[depth] = k;
			for (size_t j = 0; j < a->nframes; j++)
				if (!push(ts, &n, &a->frames[j], OUT_FRAME_PYTHON))
					break;
			if (a->nawaited > 1)
				snprintf(text, sizeof(text), "<task %s (%zu awaiters)>", a->name,
					 a->nawaited);
			else
				snprintf(text, sizeof(text), "<task %s>", a->name);
			if (!push_marker(ts, &n, depth, text))
				break;
			depth++;
			k = awaiter_of(ts, a);
		}
		ts->st.pending++;
		rc = fn(ctx, t, ts->out, ts->kinds, n);
		if (rc)
			return rc;
	}
	return 0;
}

void task_stacks__stats(const struct task_stacks *ts, struct task_stacks_stats *st)
{
	*st = ts->st;
}

void task_stacks_stats__add(struct task_stacks_stats *sum, const struct task_stacks_stats *st)
{
	sum->samples += st->samples;
	sum->not_in_stack += st->not_in_stack;
	sum->unknown += st->unknown;
	sum->frames_read += st->frames_read;
	sum->from_snapshot += st->from_snapshot;
	sum->frames_unread += st->frames_unread;
	sum->snapshots += st->snapshots;
	sum->snapshot_errors += st->snapshot_errors;
	sum->cut += st->cut;
	sum->pending += st->pending;
}
