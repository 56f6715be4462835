// SPDX-License-Identifier: MIT
/*
 * intervals.c - off-CPU and wall modes: a thread's switch-out opens an
 * interval holding its stack (walked then, or its last tick's), its switch
 * record says why it left (system call, kernel stack), and its switch-in
 * delivers the interval as one sample whose weight is its blocked and
 * runnable time. Threads already off the CPU when the recording starts are
 * seeded from /proc and a userspace read of their stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "sampling/bpf/internal.h"
#include "sampling/frame_cache.h"
#include "offcpu/intervals.h"
#include "target/procfs.h"
#include "target/thread_state.h"
#include "util/clock.h"

/* A thread left the CPU: its stack, kept until it is back. */
void bpf_intervals__open(struct bpf_sampler *s, const struct pyprof_sample *r,
			 const struct frame_cache_out *fo, const struct tick_tasks *tasks)
{
	struct offcpu_iv *iv;

	if (!s->ivs)
		return;
	iv = offcpu_ivs__get(s->ivs, (pid_t)r->tid, true);
	if (!iv) {
		s->lost_intervals++;
		return;
	}
	if (iv->open && !iv->seeded) {
		s->overwritten++;
		if (s->verbose)
			fprintf(stderr, "pyprof-bpf: tid %u left the CPU at %llu again, its interval "
				"from %llu never closed\n", r->tid, (unsigned long long)r->ts_ns,
				(unsigned long long)iv->out_ns);
	}
	iv->pid = (pid_t)r->pid;
	iv->cpu = r->cpu;
	iv->out_ns = r->ts_ns;
	iv->syscall_nr = -1;
	iv->syscall_arg0 = 0;
	iv->seeded = false;
	iv->open = true;
	/* Not walked: the thread's last stack stands (its kernel stack and
	 * system call, this wait's own, follow). */
	iv->nkstack = 0;
	if (r->flags & PYPROF_SF_REUSE) {
		if (!iv->nframes && iv->status == PYPROF_COMPLETE)
			iv->status = PYPROF_NO_PYSTATE;
		s->reused++;
		return;
	}
	iv->status = fo->status;
	iv->flags = bpf_records__sample_flags(r->flags);
	if (offcpu_iv__set_frames(iv, fo->frames, fo->nframes))
		iv->status = PYPROF_TRUNCATED;
	/* --async: its task chain as it left; without memory, none. */
	offcpu_iv__set_tasks(iv, tasks ? tasks->t : NULL, tasks ? tasks->n : 0,
			     tasks ? tasks->flags : 0);
}

/* A tick's stack is its thread's last, for a switch-out that is not
 * walked. */
void bpf_intervals__keep_last_stack(struct bpf_sampler *s, const struct pyprof_sample *r,
				    const struct frame_cache_out *fo)
{
	struct offcpu_iv *iv = offcpu_ivs__get(s->ivs, (pid_t)r->tid, true);

	if (!iv || iv->open)
		return;
	iv->pid = (pid_t)r->pid;
	iv->status = fo->status;
	iv->flags = bpf_records__sample_flags(r->flags) & ~(SAMPLE_F_GIL_KNOWN | SAMPLE_F_GIL_HELD);
	iv->nkstack = 0;
	if (offcpu_iv__set_frames(iv, fo->frames, fo->nframes))
		iv->status = PYPROF_TRUNCATED;
	offcpu_iv__set_tasks(iv, NULL, 0, 0);
}

/* Why a blocked thread left the CPU: follows its sample. */
void bpf_intervals__on_switch(struct bpf_sampler *s, const struct pyprof_switch *e)
{
	struct offcpu_iv *iv = s->ivs ? offcpu_ivs__get(s->ivs, (pid_t)e->tid, false) : NULL;
	uint32_t n = e->nkstack < OFFCPU_KSTACK_MAX ? e->nkstack : OFFCPU_KSTACK_MAX;

	if (!iv)
		return;
	iv->syscall_nr = e->syscall_nr;
	iv->syscall_arg0 = e->syscall_arg0;
	iv->nkstack = n;
	memcpy(iv->kstack, e->kstack, n * sizeof(iv->kstack[0]));
}

/*
 * Deliver @iv as one off-CPU sample: blocked from @off to @wake (to @in when
 * no wake-up was seen), runnable from @wake to @in, stamped @in. Returns 0
 * or the sample function's non-zero return.
 */
static int deliver_interval(struct bpf_sampler *s, const struct offcpu_iv *iv, uint64_t off,
			    uint64_t wake, uint64_t in)
{
	struct raw_sample rs = { 0 };

	if (in < off)
		in = off;
	if (wake && (wake < off || wake > in))
		wake = wake < off ? off : in;
	rs.pid = iv->pid;
	rs.tid = iv->tid;
	rs.cpu = iv->cpu;
	rs.ts_ns = in;
	rs.status = iv->status;
	rs.nframes = iv->nframes;
	rs.frames = iv->frames;
	rs.kind = SAMPLE_KIND_OFFCPU;
	rs.flags = iv->flags;
	rs.blocked_ns = (wake ? wake : in) - off;
	rs.runnable_ns = wake ? in - wake : 0;
	rs.syscall_nr = iv->syscall_nr;
	rs.syscall_arg0 = iv->syscall_arg0;
	rs.nkstack = iv->nkstack;
	rs.kstack = iv->kstack;
	rs.ntasks = iv->ntasks;
	rs.tasks_flags = iv->tasks_flags;
	rs.tasks = iv->tasks;
	/* Asleep on the GIL's condition or mutex: waiting to take it. */
	if (iv->pid == s->pid && s->gil_known &&
	    thread_state__gil_wait(&s->gil, iv->syscall_nr, iv->syscall_arg0))
		rs.flags |= SAMPLE_F_GIL_WAIT;
	sampler_stats__count(&s->counts, iv->status);
	return s->fn(s->fn_ctx, &rs);
}

/* A thread is back on a CPU: its interval, delivered. */
int bpf_intervals__on_switch_in(struct bpf_sampler *s, const struct pyprof_switch_in *e)
{
	struct offcpu_iv *iv = s->ivs ? offcpu_ivs__get(s->ivs, (pid_t)e->tid, false) : NULL;
	int ret;

	if (!iv || !iv->open) {
		/* Its stack's record was lost (ring full), or it left
		 * before the target was configured. */
		s->lost_intervals++;
		return 0;
	}
	ret = deliver_interval(s, iv, e->off_ns, e->wake_ns, e->in_ns);
	iv->open = false;
	iv->seeded = false;
	if (ret) {
		s->fn_ret = ret;
		return -ECANCELED;
	}
	return 0;
}

void bpf_intervals__prune(struct bpf_sampler *s)
{
	/* Other processes' are kept. */
	for (size_t k = 0; s->ivs && k < offcpu_ivs__count(s->ivs);) {
		struct offcpu_iv *iv = offcpu_ivs__at(s->ivs, k);

		if (!iv->open && iv->pid == s->pid && !bpf_threads__find(s->th, s->nth, iv->tid))
			offcpu_ivs__remove(s->ivs, iv->tid);
		else
			k++;
	}
}

int bpf_sampler__finish_intervals(struct bpf_sampler *s, uint64_t end_ns, sample_fn fn, void *ctx)
{
	int ret = 0;

	if (!s->ivs)
		return 0;
	s->fn = fn;
	s->fn_ctx = ctx;
	while (offcpu_ivs__count(s->ivs)) {
		struct offcpu_iv *iv = offcpu_ivs__at(s->ivs, 0);
		struct pyprof_offcpu o = { 0 };
		__u32 key = (__u32)iv->tid;
		pid_t tid = iv->tid;

		if (!iv->open) {
			offcpu_ivs__remove(s->ivs, tid);
			continue;
		}

		/* The wake-up, if any, is only in the map. */
		if (bpf_map_lookup_elem(s->offcpu_fd, &key, &o) || !o.off_ns)
			o.off_ns = iv->out_ns, o.wake_ns = 0;
		if (!ret && o.off_ns < end_ns)
			ret = deliver_interval(s, iv, o.off_ns, o.wake_ns < end_ns ? o.wake_ns : 0,
					       end_ns);
		offcpu_ivs__remove(s->ivs, tid);
	}
	return ret;
}

uint64_t bpf_sampler__lost_intervals(const struct bpf_sampler *s)
{
	return s->lost_intervals;
}

/* /proc/PID/task/TID/syscall: the call a blocked task is in, and its first
 * argument. -1 when it is in none (or running, or unreadable). */
static void task_syscall(pid_t pid, pid_t tid, int64_t *nr, uint64_t *arg0)
{
	char path[64], buf[256];
	long long n;
	unsigned long long a;
	FILE *f;

	*nr = -1;
	*arg0 = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%lld 0x%llx", &n, &a) == 2 && n >= 0) {
		*nr = n;
		*arg0 = a;
	}
	fclose(f);
}

/* The state letter of a task, read once (procfs parses the stat line). */
static int task_state(pid_t pid, pid_t tid, char *state)
{
	int fd = procfs__task_stat_open(pid, tid), err;

	if (fd < 0)
		return fd;
	err = procfs__stat_fd_state(fd, state);
	close(fd);
	return err;
}

/*
 * The Python stack of a seeded interval's thread, read from userspace. One
 * waiting for a CPU is read as one asleep is: it does not run meanwhile
 * (one that does is on a CPU already, and its switch-out drops the seed).
 */
static void seed_frames(struct bpf_sampler *s, struct offcpu_iv *iv, size_t npy)
{
	struct py_rawframe fr[256];
	size_t nf = 0;
	int truncated = 0;

	for (size_t k = 0; k < npy; k++) {
		if (s->pyth[k].host_tid != iv->tid)
			continue;
		if (!pyproc__walk(s->proc, s->pyth[k].tstate, fr, 256, &nf, &truncated)) {
			offcpu_iv__set_frames(iv, fr, (uint32_t)nf);
			iv->status = truncated ? PYPROF_TRUNCATED : PYPROF_COMPLETE;
		}
		return;
	}
}

/*
 * Seed thread @tid's interval as opened at @now. False: out of memory (no
 * more seeds).
 */
static bool seed_one(struct bpf_sampler *s, pid_t tid, uint64_t now, size_t npy)
{
	struct pyprof_offcpu o = { .off_ns = now }, cur;
	struct offcpu_iv *iv;
	char state = 0;
	__u32 key = (__u32)tid;

	/*
	 * The interval and its map entry first, the state after: a thread
	 * that runs again from then on closes the interval through the
	 * program (its target is configured already). An entry there already
	 * is the program's own: it saw the thread leave, and the seed is not
	 * needed.
	 */
	iv = offcpu_ivs__get(s->ivs, tid, true);
	if (!iv)
		return false;
	iv->pid = s->pid;
	iv->out_ns = now;
	iv->seeded = true;
	iv->open = true;
	iv->status = PYPROF_NO_PYSTATE;
	iv->nframes = 0;
	/* Its system call first: a thread still asleep after it is read was
	 * in it (read after, it may say the thread is running). */
	task_syscall(s->pid, tid, &iv->syscall_nr, &iv->syscall_arg0);
	if (bpf_map_update_elem(s->offcpu_fd, &key, &o, BPF_NOEXIST) ||
	    task_state(s->pid, tid, &state) || (state != 'S' && state != 'D')) {
		/* Running (its next switch-out says so), gone, or ours to take
		 * back: a runnable thread's time till it runs is runnable. */
		if (state == 'R' && !bpf_map_lookup_elem(s->offcpu_fd, &key, &cur) &&
		    cur.off_ns == now) {
			cur.wake_ns = now;
			bpf_map_update_elem(s->offcpu_fd, &key, &cur, BPF_EXIST);
			seed_frames(s, iv, npy);
			return true;
		}
		if (!bpf_map_lookup_elem(s->offcpu_fd, &key, &cur) && cur.off_ns == now)
			bpf_map_delete_elem(s->offcpu_fd, &key);
		offcpu_ivs__remove(s->ivs, tid);
		return true;
	}
	/* Running as its call was read, asleep since: in the call /proc says
	 * now (unless it woke again). */
	if (iv->syscall_nr < 0)
		task_syscall(s->pid, tid, &iv->syscall_nr, &iv->syscall_arg0);
	seed_frames(s, iv, npy);
	return true;
}

/*
 * A thread already off the CPU when the recording starts has its interval
 * opened now (the program saw it leave before it was loaded), with its
 * stack read from userspace (it is not running, so the read is consistent)
 * and its system call from /proc. A thread found running is opened as
 * runnable; either is dropped when the thread's first switch-out shows it
 * was on a CPU after all.
 */
void bpf_intervals__seed(struct bpf_sampler *s)
{
	size_t npy = 0;
	uint64_t now;

	if (bpf_threads__scan_py(s, &npy))
		npy = 0;
	now = mono_ns();
	for (size_t i = 0; i < s->nth; i++)
		if (!seed_one(s, s->th[i].tid, now, npy))
			return;
}
