/* SPDX-License-Identifier: MIT */
/*
 * asyncio/tasks.c - every asyncio task of a process: each thread state's list
 * of its tasks, then the interpreter's (tasks of threads that ended), and for
 * each task its name, state, coroutine stack and awaiters.
 *
 * The target runs while we read. A list is walked node by node, each node
 * checked to be linked after the one before it (its prev pointer); where it
 * is not (a task unlinked itself, its memory reused) the walk goes back to the
 * last node still linked and goes on from there. A task is read whole, then
 * its object, coroutine chain and awaiter set are read again: what changed is
 * read anew (ASYNCIO_ATTEMPTS times), then kept and marked torn. A task that
 * ended meanwhile is left out and counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "target/procfs.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "symbols/symbolizer.h"
#include "util/bytes.h"

#define MAX_THREADS 16384
#define MAX_THREAD_FRAMES 4096
/* Entries of an awaiter set's table we read at most (1 MB). */
#define MAX_SET_ENTRIES 65536
#define TYPE_CACHE 8
#define TPFLAGS_LONG_SUBCLASS (1ul << 24)
#define TPFLAGS_UNICODE_SUBCLASS (1ul << 28)
#define MAX_TASK_BYTES 4096
#define SET_HEAD_BYTES 256
/* Resumes of one list walk: in a row at one place, in all. */
#define LIST_MAX_STUCK 64
#define LIST_MAX_RESUMES 4096

struct list_entry {
	uint64_t task;
	/* as the list walk read them: a task read later with another coroutine
	 * or type is not the one listed (freed: its memory reused, or filled
	 * with a debug build's pattern) */
	uint64_t coro, type;
};

struct thread_ctx {
	uint64_t tstate;	/* 0: the interpreter's list */
	pid_t tid;
	uint64_t running_task;	/* 0: none (no running loop) */
};

struct walk {
	struct pyproc *p;
	pid_t pid;
	const struct py_offsets *po;
	const struct asyncio_offsets *ao;
	struct symbolizer *sym;
	struct asyncio_snapshot *s;
	struct list_entry *list;
	size_t nlist, caplist;
	unsigned char *copies;		/* the list walk's copy of each task object */
	struct coro_level *chain;
	struct py_rawframe *raw;
	unsigned char *setbuf;
	uint64_t *aw;
	uint64_t type_addr[TYPE_CACHE], type_flags[TYPE_CACHE];
	unsigned int type_next;
	struct coro_cache coro_cache;
};

/* ---- the lists ---- */

static int list__push(struct walk *w, uint64_t task, const unsigned char *tb)
{
	if (w->nlist == w->caplist) {
		size_t cap = w->caplist ? w->caplist * 2 : 256;
		struct list_entry *n = realloc(w->list, cap * sizeof(*n));
		unsigned char *c;

		if (!n)
			return -ENOMEM;
		w->list = n;
		c = realloc(w->copies, cap * w->ao->task_size);
		if (!c)
			return -ENOMEM;
		w->copies = c;
		w->caplist = cap;
	}
	memcpy(w->copies + w->nlist * w->ao->task_size, tb, w->ao->task_size);
	w->list[w->nlist++] = (struct list_entry){ task, get_u64(tb, w->ao->task_coro),
						   get_u64(tb, w->po->ob_type) };
	return 0;
}

/* The node address of the last task kept, or the head. */
static uint64_t list__last_node(const struct walk *w, uint64_t head)
{
	return w->nlist ? w->list[w->nlist - 1].task + w->ao->task_node : head;
}

/*
 * Go back to the last node still linked (dropping the tasks that left the
 * list) and set *next to what follows it now.
 */
static int list__resume(struct walk *w, uint64_t head, uint64_t *next)
{
	const struct asyncio_offsets *ao = w->ao;
	unsigned char tb[MAX_TASK_BYTES];
	int rc;

	for (;;) {
		if (!w->nlist) {
			rc = remote_read_u64(w->pid, head + ao->llist_next, next);
			return rc ? rc : (*next ? 0 : -EPROTO);
		}
		{
			const struct list_entry *e = &w->list[w->nlist - 1];

			rc = remote_read(w->pid, e->task, tb, ao->task_size);
			if (rc == -ESRCH)
				return rc;
			*next = rc ? 0 : get_u64(tb, ao->task_node + ao->llist_next);
			if (*next && get_u64(tb, ao->task_coro) == e->coro &&
			    get_u64(tb, w->po->ob_type) == e->type)
				return 0;
		}
		w->nlist--;
		w->s->finished++;
	}
}

/* The tasks of the list at @head into w->list, with a copy of each task
 * object (the first read of task__read()). */
static int list__read(struct walk *w, uint64_t head)
{
	const struct asyncio_offsets *ao = w->ao;
	unsigned char tb[MAX_TASK_BYTES];
	size_t steps = 0, stuck = 0, resumes = 0;
	uint64_t next;
	int rc;

	w->nlist = 0;
	rc = remote_read_u64(w->pid, head + ao->llist_next, &next);
	if (rc)
		return rc;
	while (next != head) {
		uint64_t task = next - ao->task_node;

		if (w->nlist == ASYNCIO_MAX_LIST) {
			w->s->lists_cut++;
			break;
		}
		if (++steps > 4 * (size_t)ASYNCIO_MAX_LIST) {
			w->s->lists_torn++;
			break;
		}
		if (next && next % 8 == 0 && next > ao->task_node) {
			rc = remote_read(w->pid, task, tb, ao->task_size);
			if (rc == -ESRCH)
				return rc;
			if (!rc && get_u64(tb, ao->task_node + ao->llist_prev) ==
				   list__last_node(w, head)) {
				rc = list__push(w, task, tb);
				if (rc)
					return rc;
				next = get_u64(tb, ao->task_node + ao->llist_next);
				stuck = 0;
				continue;
			}
		}
		/* Not linked after the last node: the list changed under us. A
		 * list that keeps failing at one place (corrupt: a node leading
		 * back into the list) is read as far as it held. */
		if (++stuck > LIST_MAX_STUCK || ++resumes > LIST_MAX_RESUMES) {
			w->s->lists_torn++;
			break;
		}
		rc = list__resume(w, head, &next);
		if (rc == -EPROTO || rc == -EFAULT) {
			w->s->lists_torn++;
			break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- one task ---- */

static int type_flags(struct walk *w, uint64_t type, uint64_t *flags)
{
	int rc;

	for (unsigned int i = 0; i < TYPE_CACHE; i++)
		if (w->type_addr[i] == type) {
			*flags = w->type_flags[i];
			return 0;
		}
	rc = remote_read_u64(w->pid, type + w->ao->type_flags, flags);
	if (rc)
		return rc;
	w->type_addr[w->type_next] = type;
	w->type_flags[w->type_next] = *flags;
	w->type_next = (w->type_next + 1) % TYPE_CACHE;
	return 0;
}

/* Bytes of a name object read at once: its header and a short name's text
 * or digits (one read, not three, for most of 10,000 tasks' names). */
#define NAME_READ 96

/* A task's name: a str, or an int N (the name is made lazily: "Task-N").
 * @b: a copy of its first NAME_READ bytes, or NULL. */
static int name__read(struct walk *w, uint64_t obj, const unsigned char *b, char **out)
{
	const struct asyncio_offsets *ao = w->ao;
	size_t got = NAME_READ;
	uint64_t type, flags, tag;
	const char *s;
	char buf[48];
	int rc;

	*out = NULL;
	if (!obj)
		return -EFAULT;
	/* An object near the end of its mapping: its parts one by one. */
	if (!b || w->po->ob_type + 8 > NAME_READ) {
		got = 0;
		rc = remote_read_u64(w->pid, obj + w->po->ob_type, &type);
	} else {
		rc = 0;
		type = get_u64(b, w->po->ob_type);
	}
	if (!rc)
		rc = type_flags(w, type, &flags);
	if (rc)
		return rc;
	if (flags & TPFLAGS_UNICODE_SUBCLASS) {
		rc = got ? symbolizer__str_from_copy(w->sym, b, got, obj, &s) :
			   symbolizer__read_str(w->sym, obj, &s);
		if (rc)
			return rc;
		*out = strdup(s);
		return *out ? 0 : -ENOMEM;
	}
	if (!(flags & TPFLAGS_LONG_SUBCLASS))
		return -EINVAL;
	if (ao->long_lv_tag + 8 <= got)
		tag = get_u64(b, ao->long_lv_tag);
	else if ((rc = remote_read_u64(w->pid, obj + ao->long_lv_tag, &tag)))
		return rc;
	/* lv_tag: digit count << 3, sign in the low bits (0 +, 1 zero, 2 -) */
	if ((tag & 3) == 1) {
		snprintf(buf, sizeof(buf), "Task-0");
	} else {
		uint32_t d[2] = { 0, 0 };
		uint64_t nd = tag >> 3;

		if (nd == 0 || nd > 2)
			return -EINVAL;
		if (ao->long_digit + nd * 4 <= got)
			memcpy(d, b + ao->long_digit, nd * 4);
		else if ((rc = remote_read(w->pid, obj + ao->long_digit, d, nd * 4)))
			return rc;
		snprintf(buf, sizeof(buf), "Task-%s%" PRIu64, (tag & 3) == 2 ? "-" : "",
			 (uint64_t)d[0] | ((uint64_t)(nd > 1 ? d[1] : 0) << 30));
	}
	*out = strdup(buf);
	return *out ? 0 : -ENOMEM;
}

/* What a set's header says. */
struct set_head {
	uint64_t used, table, mask;
};

/* A set's header from a copy of its first set_read bytes. */
static int set__parse(const struct asyncio_offsets *ao, const unsigned char *b,
		      struct set_head *h)
{
	h->used = get_u64(b, ao->set_used);
	h->table = get_u64(b, ao->set_table);
	h->mask = get_u64(b, ao->set_mask);
	/* a table of mask + 1 entries, a power of two; used fits in it */
	if (!h->table || h->mask >= (1ull << 30) || ((h->mask + 1) & h->mask) ||
	    h->used > h->mask + 1)
		return -ESTALE;
	return 0;
}

static int set__head(struct walk *w, uint64_t set, struct set_head *h)
{
	unsigned char b[SET_HEAD_BYTES];
	const struct asyncio_offsets *ao = w->ao;
	int rc;

	if (ao->set_read > sizeof(b))
		return -EPROTO;
	rc = remote_read(w->pid, set, b, ao->set_read);
	return rc ? rc : set__parse(ao, b, h);
}

/* The awaiters of a task: none, one, or the entries of a set. */
static int awaiters__read(struct walk *w, uint64_t ab, int is_set, struct asyncio_task *t,
			  struct set_head *h)
{
	size_t n = 0, entries;
	int rc;

	memset(h, 0, sizeof(*h));
	t->nawaited = 0;
	t->awaiters_cut = 0;
	if (!ab)
		return 0;
	if (!is_set) {
		w->aw[n++] = ab;
		goto out;
	}
	rc = set__head(w, ab, h);
	if (rc)
		return rc;
	entries = h->mask + 1;
	if (entries > MAX_SET_ENTRIES) {
		entries = MAX_SET_ENTRIES;
		t->awaiters_cut = 1;
	}
	rc = remote_read(w->pid, h->table, w->setbuf, entries * 16);
	if (rc)
		return rc == -EFAULT ? -ESTALE : rc;
	for (size_t i = 0; i < entries; i++) {
		uint64_t key = get_u64(w->setbuf, i * 16);
		int64_t hash = (int64_t)get_u64(w->setbuf, i * 16 + 8);

		/* empty slots have no key; deleted ones the dummy key, hash -1 */
		if (!key || hash == -1)
			continue;
		if (n == ASYNCIO_MAX_AWAITERS) {
			t->awaiters_cut = 1;
			break;
		}
		w->aw[n++] = key;
	}
	if (!t->awaiters_cut && n != h->used)
		return -ESTALE;
out:
	t->awaited_by = malloc(n * sizeof(uint64_t) + 1);
	if (!t->awaited_by)
		return -ENOMEM;
	memcpy(t->awaited_by, w->aw, n * sizeof(uint64_t));
	t->nawaited = n;
	return 0;
}

/* The running task's frames: its thread's stack down to the frame of the
 * task's first level @gen (its coroutine, or the async generator of an
 * anext() or aclose() it was made from). 0 with *n = 0 when that frame is
 * not on the stack. */
static int running__frames(struct walk *w, const struct thread_ctx *th, uint64_t gen, size_t *n)
{
	uint64_t frame = gen + w->ao->gen_iframe;
	size_t nf = 0;
	int truncated, rc;

	*n = 0;
	rc = pyproc__walk(w->p, th->tstate, w->raw, MAX_THREAD_FRAMES, &nf, &truncated);
	if (rc)
		return rc;
	for (size_t i = 0; i < nf; i++)
		if (w->raw[i].frame == frame) {
			*n = i + 1;
			break;
		}
	/* The thread runs on while we read: a frame caught half-pushed (its
	 * code and instruction from two moments) does not resolve. Such a
	 * walk is taken again, as a task that changed is. */
	for (size_t i = 0; i < *n; i++) {
		struct py_sym sym;

		rc = symbolizer__resolve(w->sym, &w->raw[i], &sym);
		if (rc && rc != -ENOENT)
			return -EAGAIN;
	}
	return 0;
}

static void task__clear(struct asyncio_task *t)
{
	free(t->name);
	free(t->frames);
	free(t->awaited_by);
	t->name = NULL;
	t->frames = NULL;
	t->awaited_by = NULL;
	t->nframes = t->nawaited = 0;
}

/* Symbolize w->raw[0..n) (innermost first) into t->frames: first a
 * [truncated] frame when the chain was cut (its innermost part is missing),
 * last a [torn] frame when @torn. */
static int task__resolve(struct walk *w, struct asyncio_task *t, size_t n, int torn)
{
	t->frames = calloc(n + 2, sizeof(*t->frames));
	if (!t->frames)
		return -ENOMEM;
	if (t->chain_cut)
		t->frames[t->nframes++] = (struct py_sym){ "[truncated]", "", -1, 0 };
	for (size_t i = 0; i < n; i++) {
		struct py_sym *f = &t->frames[t->nframes];
		int rc = symbolizer__resolve(w->sym, &w->raw[i], f);

		/* -ENOENT: a coroutine not started yet still names its frame */
		if (rc && rc != -ENOENT)
			*f = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
		t->nframes++;
	}
	if (torn)
		t->frames[t->nframes++] = (struct py_sym){ "[torn]", "", -1, 0 };
	return 0;
}

/* The task object @tb is still the one the list walk saw, linked. */
static int task__same(const struct walk *w, const unsigned char *tb, const struct list_entry *e)
{
	uint64_t next = get_u64(tb, w->ao->task_node + w->ao->llist_next);

	return next && next % 8 == 0 && get_u64(tb, w->ao->task_coro) == e->coro &&
	       get_u64(tb, w->po->ob_type) == e->type;
}

/*
 * The task read again: does what task__read() took from @tb still hold?
 * 0 yes, 2 it changed (read it again), 1 it ended, -errno. The task, its
 * awaiter set's header and its coroutine chain are read in one
 * process_vm_readv.
 */
static int task__recheck(struct walk *w, const struct list_entry *e, const unsigned char *tb,
			 const struct set_head *h, const struct asyncio_task *t, size_t nlv)
{
	const struct asyncio_offsets *ao = w->ao;
	uint64_t ab = get_u64(tb, ao->task_awaited_by);
	int is_set = tb[ao->task_awaited_by_is_set];
	unsigned char again[MAX_TASK_BYTES], sb[SET_HEAD_BYTES];
	struct remote_iov extra[2] = { { e->task, again, ao->task_size },
				       { ab, sb, ao->set_read } };
	struct set_head h2;
	size_t done;
	int rc;

	if (ao->set_read > sizeof(sb))
		return -EPROTO;
	/* a running task's chain moves on: its frames are the thread's */
	rc = coro_chain__verify_along(w->pid, w->po, ao, w->chain,
				      t->state == ASYNCIO_TASK_RUNNING ? 0 : nlv, extra,
				      ab && is_set ? 2 : 1, &done);
	if (rc && rc != -EFAULT && rc != -ESTALE)
		return rc;
	if (done < 1 || !task__same(w, again, e))
		return 1;
	if (get_u64(again, ao->task_coro) != get_u64(tb, ao->task_coro) ||
	    get_u64(again, ao->task_awaited_by) != ab ||
	    again[ao->task_awaited_by_is_set] != is_set ||
	    get_u64(again, ao->task_name) != get_u64(tb, ao->task_name))
		return 2;
	if (ab && is_set && (done < 2 || set__parse(ao, sb, &h2) || memcmp(h, &h2, sizeof(h2))))
		return 2;
	return rc ? 2 : 0;
}

/* A task read (@ok: it held still), its coroutine chain @nlv levels deep
 * (@nraw frames of a running one already in w->raw): named and resolved. */
static int task__finish(struct walk *w, struct asyncio_task *t, int ok, int cut, size_t nlv,
			size_t nraw)
{
	const struct asyncio_offsets *ao = w->ao;

	if (!t->name)
		t->name = strdup("<unknown>");
	if (!t->name)
		return -ENOMEM;
	if (!ok) {
		/* what it awaits and who awaits it did not hold still: its
		 * awaiters are left out rather than shown maybe wrong */
		t->torn = 1;
		free(t->awaited_by);
		t->awaited_by = NULL;
		t->nawaited = 0;
	}
	t->chain_cut = cut;
	if (!nraw) {
		/* the chain, outermost first, as frames innermost first */
		for (size_t i = 0; i < nlv; i++) {
			const struct coro_level *lv = &w->chain[nlv - 1 - i];

			w->raw[i] = (struct py_rawframe){ lv->gen + ao->gen_iframe, lv->code,
							  lv->instr, 0, 0 };
		}
		nraw = nlv;
	}
	return task__resolve(w, t, nraw, t->torn);
}

/* The task's name object and its coroutine's first bytes, in one read:
 * the name into @nb, the coroutine into the chain's cache (see
 * coro_chain__read()). -errno when the name could not be read so. */
static int task__prefetch(struct walk *w, const unsigned char *tb, unsigned char *nb)
{
	struct coro_cache *c = &w->coro_cache;
	struct remote_iov iov[2] = {
		{ get_u64(tb, w->ao->task_name), nb, NAME_READ },
		{ get_u64(tb, w->ao->task_coro), c->pre, sizeof(c->pre) },
	};
	size_t done;
	int rc = remote_readv_prefix(w->pid, iov, iov[1].addr ? 2 : 1, &done);

	c->pre_addr = iov[1].addr;
	c->pre_len = done == 2 ? sizeof(c->pre) : 0;
	return done ? 0 : (rc ? rc : -EFAULT);
}

/*
 * Read the task @e into @t. 1 when it ended (left the list, or was freed)
 * meanwhile, 0 when read (t->torn set when it kept changing), -errno.
 */
static int task__read(struct walk *w, const struct thread_ctx *th, const struct list_entry *e,
		      const unsigned char *copy, struct asyncio_task *t)
{
	const uint64_t addr = e->task;
	const struct asyncio_offsets *ao = w->ao;
	unsigned char tb[MAX_TASK_BYTES], nb[NAME_READ];
	size_t nlv = 0, nraw = 0;
	int cut = 0, rc = 0, ok = 0, name_gone = 0, name_big = 0;

	memset(t, 0, sizeof(*t));
	t->addr = addr;
	t->tstate = th->tstate;
	t->tid = th->tid;
	for (int attempt = 0; attempt < ASYNCIO_ATTEMPTS && !ok; attempt++) {
		uint64_t coro, ab;
		struct set_head h;
		int is_set;

		task__clear(t);
		nraw = 0;
		rc = 0;
		/* the list walk's copy first: read again below in any case */
		if (attempt == 0)
			memcpy(tb, copy, ao->task_size);
		else
			rc = remote_read(w->pid, addr, tb, ao->task_size);
		if (rc == -EFAULT)
			return 1;	/* freed and unmapped */
		if (rc)
			return rc;
		if (!task__same(w, tb, e))
			return 1;	/* unlinked or freed: it ended */
		coro = get_u64(tb, ao->task_coro);
		ab = get_u64(tb, ao->task_awaited_by);
		is_set = tb[ao->task_awaited_by_is_set];
		if (tb[ao->task_is_task] > 1 || is_set > 1)
			continue;
		rc = name__read(w, get_u64(tb, ao->task_name),
				task__prefetch(w, tb, nb) ? NULL : nb, &t->name);
		if (rc == -ENOMEM || rc == -ESRCH)
			return rc;
		/* A name that cannot be read is being freed (with its task, or
		 * replaced by set_name): read again, and a task whose name never
		 * reads has ended. But a str too long to read (a task named with
		 * 100 MB) is alive: its task is shown, named "[unread]", as
		 * record does, when the rest of it holds (the recheck below). */
		name_big = rc == -EMSGSIZE;
		name_gone = rc && !name_big;
		if (name_gone)
			continue;
		nlv = 0;
		cut = 0;
		if (coro) {
			rc = coro_chain__read(w->pid, w->po, ao, coro, w->chain, ASYNCIO_MAX_CHAIN,
					      &nlv, &cut, &w->coro_cache);
			if (rc == -ESRCH)
				return rc;
		}
		rc = awaiters__read(w, ab, is_set, t, &h);
		if (rc == -ENOMEM || rc == -ESRCH)
			return rc;
		if (rc)
			continue;
		t->state = ASYNCIO_TASK_PENDING;
		if (!coro || nlv == 0)
			t->state = ASYNCIO_TASK_DONE;
		else if (w->chain[0].state == ao->state_created)
			t->state = ASYNCIO_TASK_CREATED;
		if (addr == th->running_task && nlv) {
			t->state = ASYNCIO_TASK_RUNNING;
			rc = running__frames(w, th, w->chain[0].gen, &nraw);
			if (rc == -ESRCH)
				return rc;
			if (rc == -EAGAIN)
				continue;
		}
		/* Read it all again: what we took must still hold. */
		rc = task__recheck(w, e, tb, &h, t, nlv);
		if (rc == 2) {
			/* a type remembered may be what changed: read anew */
			memset(w->coro_cache.addr, 0, sizeof(w->coro_cache.addr));
			continue;
		}
		if (rc)
			return rc;
		ok = 1;
	}
	/* A name too long to read says nothing of the task's end: one that
	 * never held still is shown torn, as any other task. */
	if (name_gone && !ok)
		return 1;	/* its name never read: it ended, left out */
	if (name_big && !t->name && !(t->name = strdup("[unread]")))
		return -ENOMEM;
	return task__finish(w, t, ok, cut, nlv, nraw);
}

static int snapshot__push(struct asyncio_snapshot *s, struct asyncio_task **t)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct asyncio_task *n = realloc(s->tasks, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->tasks = n;
		s->cap = cap;
	}
	*t = &s->tasks[s->n];
	memset(*t, 0, sizeof(**t));
	return 0;
}

/* Every task of one list. */
static int list__tasks(struct walk *w, const struct thread_ctx *th, uint64_t head)
{
	int rc = list__read(w, head);

	if (rc)
		return rc;
	for (size_t i = 0; i < w->nlist; i++) {
		struct asyncio_task *t;

		rc = snapshot__push(w->s, &t);
		if (rc)
			return rc;
		rc = task__read(w, th, &w->list[i], w->copies + i * w->ao->task_size, t);
		if (rc < 0) {
			task__clear(t);
			return rc;
		}
		if (rc == 1) {
			task__clear(t);
			w->s->finished++;
			continue;
		}
		if (t->torn)
			w->s->torn++;
		w->s->n++;
	}
	return 0;
}

static int thread__ctx(struct walk *w, const struct py_thread *pt, struct thread_ctx *th)
{
	uint64_t loop = 0, task = 0;
	struct remote_iov iov[2] = {
		{ pt->tstate + w->ao->tstate_running_loop, &loop, 8 },
		{ pt->tstate + w->ao->tstate_running_task, &task, 8 },
	};
	int rc = remote_readv(w->pid, iov, 2);

	th->tstate = pt->tstate;
	th->tid = pt->host_tid;
	th->running_task = loop ? task : 0;
	return rc;
}

void asyncio_snapshot__free(struct asyncio_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		task__clear(&s->tasks[i]);
	free(s->tasks);
	memset(s, 0, sizeof(*s));
}

static int take(struct walk *w, char *err, size_t errlen)
{
	struct py_thread *threads = calloc(MAX_THREADS, sizeof(*threads));
	uint64_t interps[8];
	size_t n = 0, ninterp = 0;
	int rc = -ENOMEM;

	if (!threads)
		goto out;
	/* Threads that start or end while we walk their list: take it again. */
	for (int attempt = 0; attempt < 20; attempt++) {
		rc = pyproc__threads(w->p, threads, MAX_THREADS, &n);
		if (rc != -EFAULT && rc != -EPROTO && rc != -ELOOP)
			break;
	}
	if (rc == -E2BIG)
		rc = 0;
	if (rc) {
		snprintf(err, errlen, "process %d: reading its thread list: %s", (int)w->pid,
			 strerror(-rc));
		goto out;
	}
	symbolizer__next_sample(w->sym);
	for (size_t i = 0; i < n; i++) {
		struct thread_ctx th;
		size_t k;

		rc = thread__ctx(w, &threads[i], &th);
		if (rc == -ESRCH)
			goto out;
		if (rc)
			continue;	/* the thread state went away: the thread ended */
		rc = list__tasks(w, &th, th.tstate + w->ao->tstate_tasks_head);
		if (rc == -ESRCH || rc == -ENOMEM)
			goto out;
		w->s->threads++;
		for (k = 0; k < ninterp && interps[k] != threads[i].interp; k++)
			;
		if (k == ninterp && ninterp < sizeof(interps) / sizeof(interps[0]))
			interps[ninterp++] = threads[i].interp;
	}
	/* Tasks of threads that ended move to their interpreter's list. */
	for (size_t k = 0; k < ninterp; k++) {
		struct thread_ctx th = { 0, 0, 0 };

		rc = list__tasks(w, &th, interps[k] + w->ao->interp_tasks_head);
		if (rc == -ESRCH || rc == -ENOMEM)
			goto out;
	}
	rc = 0;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc == -ESRCH || (rc && !procfs__alive(w->pid)))
		snprintf(err, errlen, "process %d exited during the dump", (int)w->pid);
	free(threads);
	return rc;
}

int asyncio_snapshot__take(struct pyproc *p, struct symbolizer *sym,
			   const struct asyncio_offsets *ao, struct asyncio_snapshot *out,
			   char *err, size_t errlen)
{
	struct walk w = {
		.p = p, .pid = pyproc__pid(p), .po = pyproc__offsets(p), .ao = ao,
		.sym = sym, .s = out,
	};
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	w.chain = calloc(ASYNCIO_MAX_CHAIN, sizeof(*w.chain));
	w.raw = calloc(MAX_THREAD_FRAMES > ASYNCIO_MAX_CHAIN ? MAX_THREAD_FRAMES :
		       ASYNCIO_MAX_CHAIN, sizeof(*w.raw));
	w.setbuf = malloc(MAX_SET_ENTRIES * 16);
	w.aw = malloc(ASYNCIO_MAX_AWAITERS * sizeof(*w.aw));
	if (!w.chain || !w.raw || !w.setbuf || !w.aw)
		snprintf(err, errlen, "out of memory");
	else
		rc = take(&w, err, errlen);
	free(w.chain);
	free(w.raw);
	free(w.setbuf);
	free(w.aw);
	free(w.list);
	free(w.copies);
	if (rc)
		asyncio_snapshot__free(out);
	return rc;
}
