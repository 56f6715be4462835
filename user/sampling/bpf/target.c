// SPDX-License-Identifier: MIT
/*
 * target.c - the main target named (bpf_sampler__set_target): its walk
 * configured (the 3.15 frame cache included), its threads found and given
 * their thread states (and, with per-thread events, their events), then its
 * entry written into the procs map, so that its first ticks find all that.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "sampling/bpf/internal.h"
#include "pyprof.skel.h"		/* after pyprof.h, whose types it uses */
#include "sampling/frame_cache.h"

/* The first event decides whether this kernel lets new threads inherit. */
static int probe_inherit(struct bpf_sampler *s, char *err, size_t errlen)
{
	struct bpf_link *link = NULL;
	int ret;

	s->inherit = true;
	ret = bpf_lifecycle__open_event(s, 0, s->pid, -1, &link);
	if (ret == -EINVAL) {
		s->inherit = false;
		ret = bpf_lifecycle__open_event(s, 0, s->pid, -1, &link);
	}
	bpf_link__destroy(link);
	if (ret == -ESRCH)
		snprintf(err, errlen, "process %d is gone", s->pid);
	else if (ret == -EACCES || ret == -EPERM)
		snprintf(err, errlen, "perf_event_open: permission denied (needs CAP_PERFMON)");
	else if (ret)
		snprintf(err, errlen, "cannot attach a %s event: %s", s->events[0].name,
			 strerror(-ret));
	return ret;
}

int bpf_sampler__set_target(struct bpf_sampler *s, struct pyproc *p, char *err, size_t errlen)
{
	int ret;

	if (s->proc) {
		snprintf(err, errlen, "the BPF sampler has a target already");
		return -EBUSY;
	}
	if (s->mode == SAMPLER_MODE_EXCEPTION && !pyproc__offsets(p)->tstate_exc_info) {
		snprintf(err, errlen, "--mode exception: where Python %s keeps its exceptions is "
			 "unknown", pyproc__version(p));
		return -ENOTSUP;
	}
	ret = bpf_config__fill(&s->main_cfg, p, s->max_frames, !s->no_frame_cache, err, errlen);
	if (ret)
		return ret;
	bpf_config__entries(s, &s->main_cfg, pyproc__offsets(p));
	bpf_config__offcpu(s, &s->main_cfg);
	s->cache = s->main_cfg.frame_cache;
	s->gil_known = bpf_config__gil(s, p, &s->main_cfg, &s->gil);
	ret = frame_cache__new(pyproc__pid(p), pyproc__offsets(p), s->max_frames, s->cache,
			       &s->fc);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	frame_cache__set_reanchor(s->fc, true);
	/* From here on the sampler's functions treat @p as the main target
	 * (refresh, the frame cache, the records of its pid). */
	s->proc = p;
	s->pid = pyproc__pid(p);
	ret = s->per_cpu ? 0 : probe_inherit(s, err, errlen);
	if (ret)
		goto err_untarget;
	/* Thread states first (the refresh), then the configuration, so that
	 * the first ticks find them. */
	ret = bpf_sampler__refresh(s);
	if (ret == -ESRCH) {
		snprintf(err, errlen, "process %d is gone", s->pid);
		goto err_untarget;
	}
	if (ret) {
		snprintf(err, errlen, "cannot attach to the threads of %d: %s", s->pid,
			 strerror(-ret));
		goto err_untarget;
	}
	ret = bpf_config__write_proc(s, s->pid, &s->main_cfg);
	if (ret) {
		snprintf(err, errlen, "cannot write the BPF process map: %s", strerror(-ret));
		goto err_untarget;
	}
	if (bpf_lifecycle__off_cpu(s))
		bpf_intervals__seed(s);
	/* The only process (a command tracked before its exec is this one):
	 * other tasks' ticks cost one comparison. */
	if (!s->skel->rodata->follow_children && !s->many_pids &&
	    (!s->other_pid || s->other_pid == s->pid))
		s->skel->bss->only_tgid = (__u32)s->pid;
	return 0;

err_untarget:
	/* Back to no target: the events and threads map entries the refresh
	 * made are released with the sampler, which can still be freed. */
	frame_cache__free(s->fc);
	s->fc = NULL;
	s->cache = false;
	s->proc = NULL;
	s->pid = 0;
	return ret;
}

int bpf_sampler__open(struct pyproc *p, const struct sampler_opts *o,
		      struct bpf_sampler **out, char *err, size_t errlen)
{
	struct bpf_sampler *s;
	int ret;

	*out = NULL;
	ret = bpf_sampler__load(o, &s, err, errlen);
	if (ret)
		return ret;
	ret = bpf_sampler__set_target(s, p, err, errlen);
	if (ret) {
		bpf_sampler__free(s);
		return ret;
	}
	*out = s;
	return 0;
}
