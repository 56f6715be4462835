// SPDX-License-Identifier: MIT
/*
 * threads.c - the target's threads as the BPF program needs them: the
 * periodic scan (bpf_sampler__refresh) keeps the kernel's tid -> thread
 * state map current, gives an event to a new thread that has none, and
 * retires exited ones; the 3.15 anchors the frame cache asks for are
 * written here, and released at the end.
 *
 * An exited thread is retired (its frame cache forgotten, its map entry
 * deleted) only once a poll has consumed the ring past the point where the
 * scan found it gone: its last samples, taken just before it ended, may
 * still be in the ring, and a walk that stopped at its anchor needs the
 * cached callers to be spliced whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "sampling/frame_cache.h"
#include "target/procdir.h"
#include "target/procfs.h"

/*
 * A thread that appeared after attach and ran this many sampling periods of
 * CPU time without a single sample has no inherited event (it was created
 * while we were attaching): it gets its own.
 */
#define UNCOVERED_PERIODS	5

/* Nanoseconds @tid has spent on a CPU (needs CONFIG_SCHED_INFO). */
static int thread_runtime(pid_t pid, pid_t tid, uint64_t *ns)
{
	unsigned long long v;
	char path[64];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%llu", &v) == 1)
		*ns = v;
	else
		err = -EIO;
	fclose(f);
	return err;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static int cmp_thread(const void *key, const void *elem)
{
	pid_t x = *(const pid_t *)key, y = ((const struct bpf_thread *)elem)->tid;

	return (x > y) - (x < y);
}

struct bpf_thread *bpf_threads__find(struct bpf_thread *th, size_t n, pid_t tid)
{
	if (!n)
		return NULL;	/* th may be NULL then */
	return bsearch(&tid, th, n, sizeof(*th), cmp_thread);
}

int bpf_threads__grow(void *pp, size_t *cap, size_t want, size_t elem)
{
	void *p;
	size_t n = *cap ? *cap : 64;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	p = realloc(*(void **)pp, n * elem);
	if (!p)
		return -ENOMEM;
	*(void **)pp = p;
	*cap = n;
	return 0;
}

/* Is the target a zombie (it still lists its main thread: gone all the
 * same)? -ESRCH then, or when it is gone; 0 or -errno. */
static int check_alive(pid_t pid)
{
	char path[64], state = 0, buf[512];
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* Whole, not up to a newline: a comm may hold one, and "x) Z\n"
	 * made a live target look like a zombie (no BPF sampling). */
	got = read(fd, buf, sizeof(buf));
	close(fd);
	if (got > 0)
		procfs__stat_state(buf, (size_t)got, &state);
	return state == 'Z' || state == 'X' ? -ESRCH : 0;
}

/* Sorted tids of the target's live threads into s->tids. */
static int scan_tasks(struct bpf_sampler *s, size_t *n)
{
	struct procdir it;
	size_t cnt = 0;
	pid_t tid;
	int err;

	err = check_alive(s->pid);
	if (err)
		return err;
	err = procdir__open_tids(&it, s->pid);
	if (err)
		return err;
	while (procdir__next(&it, &tid)) {
		err = bpf_threads__grow(&s->tids, &s->cap_tids, cnt + 1, sizeof(*s->tids));
		if (err)
			break;
		s->tids[cnt++] = tid;
	}
	procdir__close(&it);
	if (err)
		return err;
	qsort(s->tids, cnt, sizeof(*s->tids), cmp_tid);
	*n = cnt;
	return 0;
}

int bpf_threads__scan_py(struct bpf_sampler *s, size_t *n)
{
	size_t want = s->cap_pyth ? s->cap_pyth : 256;
	int err;

	for (;;) {
		err = bpf_threads__grow(&s->pyth, &s->cap_pyth, want, sizeof(*s->pyth));
		if (err)
			return err;
		err = pyproc__threads(s->proc, s->pyth, s->cap_pyth, n);
		/* More threads than the map holds: the first ones will do. */
		if (err != -E2BIG || s->cap_pyth >= THREADS_MAP_ENTRIES)
			return err == -E2BIG ? 0 : err;
		want = s->cap_pyth * 2;
	}
}

static void retire_thread(struct bpf_sampler *s, struct bpf_thread *t)
{
	__u32 key = t->tid;

	frame_cache__forget(s->fc, t->tid);
	if (t->in_map)
		bpf_map_delete_elem(s->threads_fd, &key);
	if (s->native_stack)
		bpf_sampler__set_stack_end(s, t->tid, 0);
	if (!t->link)
		return;
	if (bpf_threads__grow(&s->retired, &s->cap_retired, s->nretired + 1,
			      sizeof(*s->retired))) {
		/* Out of memory: closing it may cost inherited copies their
		 * event for a refresh or two, leaking it would cost more. */
		bpf_link__destroy(t->link);
		return;
	}
	s->retired[s->nretired++] = t->link;
}

/* Thread @t was found gone when the ring's producer was at @pos: retired
 * once the polls have consumed that far. */
static void queue_dying(struct bpf_sampler *s, struct bpf_thread *t, uint64_t pos)
{
	if (bpf_threads__grow(&s->dying, &s->cap_dying, s->ndying + 1, sizeof(*s->dying))) {
		/* Out of memory: now (its last samples may then lack their
		 * cached callers). */
		retire_thread(s, t);
		return;
	}
	s->dying[s->ndying] = *t;
	s->dying[s->ndying++].gone_pos = pos;
}

/* A new thread has the tid of one still to retire: the tid was reused,
 * and the old thread's state goes now, before the new one's is made. */
static void retire_reused(struct bpf_sampler *s, pid_t tid)
{
	for (size_t i = 0; i < s->ndying; i++) {
		if (s->dying[i].tid != tid)
			continue;
		retire_thread(s, &s->dying[i]);
		s->dying[i] = s->dying[--s->ndying];
		return;
	}
}

void bpf_threads__retire_due(struct bpf_sampler *s, uint64_t consumed)
{
	size_t i, k = 0;

	for (i = 0; i < s->ndying; i++) {
		if ((int64_t)(consumed - s->dying[i].gone_pos) >= 0)
			retire_thread(s, &s->dying[i]);
		else
			s->dying[k++] = s->dying[i];
	}
	s->ndying = k;
}

/*
 * Write @t's thread state to the map, keeping what the program keeps there.
 * The program finds thread states itself (a thread created since the last
 * scan, or one whose state changed): a state it found is not replaced by
 * "none" from a scan that predates it, as it checks its states at every use.
 */
static int update_map(struct bpf_sampler *s, struct bpf_thread *t, uint64_t tstate)
{
	struct pyprof_thread v = {};
	__u32 key = t->tid;
	bool had;

	/* The scan says what it said last time: nothing to reconcile (no
	 * syscall per thread per refresh). */
	if (t->in_map && t->scanned == tstate)
		return 0;
	had = !bpf_map_lookup_elem(s->threads_fd, &key, &v);
	t->scanned = tstate;
	if (had && (v.tstate == tstate || (!tstate && v.tstate))) {
		t->in_map = true;
		t->tstate = v.tstate;
		return 0;
	}
	v.tstate = tstate;
	v.lookup_ns = 0;
	v.misses = 0;
	v.nstates = 0;	/* unknown: the program looks when it is not active */
	if (tstate)
		v.had_state = 1;
	/* Nothing cached for this thread state: walk whole until there is. */
	v.walk_whole = 1;
	frame_cache__forget(s->fc, t->tid);
	if (bpf_map_update_elem(s->threads_fd, &key, &v, BPF_ANY))
		return -errno;
	t->in_map = true;
	t->tstate = tstate;
	return 0;
}

/* Does pending thread @t need an event of its own? */
static bool uncovered(struct bpf_sampler *s, struct bpf_thread *t)
{
	struct pyprof_thread v = {};
	__u32 key = t->tid;
	uint64_t now;

	if (t->in_map && !bpf_map_lookup_elem(s->threads_fd, &key, &v) && v.samples) {
		t->kind = THREAD_INHERITED;
		return false;
	}
	if (thread_runtime(s->pid, t->tid, &now))
		return false;
	if (!t->runtime_known) {
		t->runtime0 = now;
		t->runtime_known = true;
		return false;
	}
	return now - t->runtime0 >= UNCOVERED_PERIODS * (1000000000ULL / s->freq_hz);
}

int bpf_threads__carry_over(struct bpf_sampler *s, size_t ntids, uint64_t pos, bool *changed)
{
	struct bpf_thread *next, *t;
	size_t i;

	next = calloc(ntids ? ntids : 1, sizeof(*next));
	if (!next)
		return -ENOMEM;
	/* Carry known threads over (s->th stays sorted), add new ones. */
	for (i = 0; i < ntids; i++) {
		t = bpf_threads__find(s->th, s->nth, s->tids[i]);
		if (t) {
			next[i] = *t;
			t->tid = 0;	/* carried over */
			continue;
		}
		*changed = true;
		retire_reused(s, s->tids[i]);
		next[i].tid = s->tids[i];
		if (!s->attached || !s->inherit) {
			next[i].kind = THREAD_OWN;
		} else {
			next[i].kind = THREAD_PENDING;
			next[i].runtime_known = !thread_runtime(s->pid, s->tids[i],
								&next[i].runtime0);
		}
	}
	for (i = 0; i < s->nth; i++)
		if (s->th[i].tid) {
			*changed = true;
			queue_dying(s, &s->th[i], pos);
		}
	free(s->th);
	s->th = next;
	s->nth = ntids;
	return 0;
}

/* The scan's thread states into the map. Returns the first error. */
static int update_states(struct bpf_sampler *s, bool have_py, size_t npy, bool *changed)
{
	struct bpf_thread *t;
	int err, first_err = 0;
	size_t i;

	for (i = 0; i < s->nth; i++)
		s->th[i].next_tstate = have_py ? 0 : s->th[i].tstate;
	for (i = 0; have_py && i < npy; i++) {
		t = bpf_threads__find(s->th, s->nth, s->pyth[i].host_tid);
		if (t)
			t->next_tstate = s->pyth[i].tstate;
	}
	for (i = 0; i < s->nth; i++) {
		if (!s->th[i].in_map || s->th[i].scanned != s->th[i].next_tstate)
			*changed = true;
		err = update_map(s, &s->th[i], s->th[i].next_tstate);
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
}

/* Per-thread events: one for every thread that has none (nor an inherited
 * one). Returns the first error. */
static int open_events(struct bpf_sampler *s)
{
	struct bpf_thread *t;
	int err, first_err = 0;

	for (size_t i = 0; !s->per_cpu && i < s->nth; i++) {
		t = &s->th[i];
		if (t->kind == THREAD_PENDING && uncovered(s, t))
			t->kind = THREAD_OWN;
		if (t->kind != THREAD_OWN || t->link)
			continue;
		/* per-thread scope: one event (several are per CPU) */
		err = bpf_lifecycle__open_event(s, 0, t->tid, -1, &t->link);
		/* A thread that exited meanwhile goes at the next scan. */
		if (err && err != -ESRCH && !first_err)
			first_err = err;
	}
	return first_err;
}

int bpf_sampler__refresh(struct bpf_sampler *s)
{
	size_t ntids, npy = 0;
	bool have_py, changed = false;
	uint64_t pos;
	int err, first_err;

	s->unknown_tid = false;
	s->settled = false;
	if (!s->proc)	/* no target yet (bpf_sampler__set_target) */
		return 0;
	/* A command started: its GIL comes a moment after its runtime. */
	if (!s->gil_known && bpf_config__gil(s, s->proc, &s->main_cfg, &s->gil)) {
		s->gil_known = true;
		bpf_config__write_proc(s, s->pid, &s->main_cfg);
	}
	bpf_intervals__prune(s);
	err = scan_tasks(s, &ntids);
	if (err)
		return err;
	/* Read after the scan: a thread it found gone wrote its samples
	 * before this position. */
	pos = bpf_lifecycle__ring_produced(s);
	err = bpf_threads__scan_py(s, &npy);
	if (err == -ESRCH)
		return err;
	/* A torn read of the target's lists: keep the states we had. */
	have_py = !err;
	err = bpf_threads__carry_over(s, ntids, pos, &changed);
	if (err)
		return err;
	/* Thread states before events, so the first samples find them. */
	first_err = update_states(s, have_py, npy, &changed);
	err = open_events(s);
	if (err && !first_err)
		first_err = err;
	s->attached = true;
	s->settled = have_py && !changed && !first_err;
	return first_err;
}

bool bpf_sampler__settled(const struct bpf_sampler *s)
{
	return s->settled;
}

bool bpf_sampler__unknown_tid(const struct bpf_sampler *s)
{
	return s->unknown_tid;
}

/* Read-modify-write: the program counts samples in the same value. */
int bpf_threads__set_walk_whole(struct bpf_sampler *s, pid_t tid, bool on)
{
	struct pyprof_thread v;
	__u32 key = tid;

	if (bpf_map_lookup_elem(s->threads_fd, &key, &v))
		return -errno;
	v.walk_whole = on;
	if (bpf_map_update_elem(s->threads_fd, &key, &v, BPF_EXIST))
		return -errno;
	return 0;
}

/* Is (@tid, @tstate) among the @n threads the target lists right now? */
static bool still_linked(const struct py_thread *pyth, size_t n, pid_t tid, uint64_t tstate)
{
	for (size_t i = 0; i < n; i++)
		if (pyth[i].tstate == tstate && pyth[i].host_tid == tid)
			return true;
	return false;
}

/*
 * Move the anchors the frame cache asked for (one write each, no stop).
 * The map's thread states may be up to a refresh old, and a write into a
 * thread state freed meanwhile would land in whatever the target allocated
 * there since: each is first found again, linked in its interpreter's list,
 * by a fresh read of the lists just before the writes.
 */
void bpf_threads__reanchor(struct bpf_sampler *s)
{
	size_t npy = 0;

	if (bpf_threads__scan_py(s, &npy))
		npy = 0;	/* unreadable now: write nothing */
	for (size_t i = 0; i < s->nreanchor; i++) {
		pid_t tid = s->reanchor[i];
		struct bpf_thread *t = bpf_threads__find(s->th, s->nth, tid);

		if (!t || !t->tstate || !still_linked(s->pyth, npy, tid, t->tstate) ||
		    bpf_threads__set_walk_whole(s, tid, true))
			continue;
		frame_cache__reanchor(s->fc, tid, t->tstate);
	}
	s->nreanchor = 0;
}

/*
 * Zero the anchors we wrote that are still ours (anchor only, the sequence
 * kept: frame_cache__release()), in thread states found again, linked in
 * their interpreter's list, by a fresh read of the lists just before, as
 * bpf_threads__reanchor() does. The target gone, or its lists unreadable:
 * nothing is written. The samples still in the ring need no anchor in the
 * target: their walks are done, and their callers are in the frame cache.
 */
void bpf_threads__release_anchors(struct bpf_sampler *s)
{
	size_t npy = 0;

	if (s->released)
		return;
	s->released = true;
	if (!s->fc || !s->cache)
		return;
	if (!bpf_threads__scan_py(s, &npy))
		frame_cache__release(s->fc, s->pyth, npy);
}

int bpf_sampler__set_stack_end(struct bpf_sampler *s, pid_t tid, uint64_t end)
{
	size_t nslots = sizeof(s->ustack_ends) / sizeof(s->ustack_ends[0]);
	struct stack_end *slot = &s->ustack_ends[(uint32_t)tid % nslots];
	__u32 key = (__u32)tid;
	__u64 had = 0;
	int err;

	if (!end) {
		if (slot->tid == tid)
			slot->tid = 0;
		err = bpf_map_delete_elem(s->ustack_end_fd, &key);
		return err && errno != ENOENT ? -errno : 0;
	}
	if (slot->tid == tid && slot->end >= end)
		return 0;
	/* not ours to lower: another slot's thread may have set it higher */
	if (slot->tid != tid && !bpf_map_lookup_elem(s->ustack_end_fd, &key, &had) && had >= end) {
		*slot = (struct stack_end){ tid, had };
		return 0;
	}
	if (bpf_map_update_elem(s->ustack_end_fd, &key, &end, BPF_ANY))
		return -errno;
	*slot = (struct stack_end){ tid, end };
	return 0;
}
