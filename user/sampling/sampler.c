/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - one interface over the backends (sampler.h): the table of
 * backends, and each call handed to the one a sampler was opened with, so
 * that no command asks which it has.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sampling/backend.h"
#include "sampling/sampler.h"

/* Every backend, by id. A new one: its file, and a line here. */
static const struct sampler_ops *const backends[] = {
	&bpf_sampler_ops,
	&remote_sampler_ops,
};

struct sampler {
	const struct sampler_ops *ops;
	void *b;
};

static const struct sampler_ops *backend_of(const char *id)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->id, id))
			return backends[i];
	return NULL;
}

int sampler__available(const char *backend, char *why, size_t len)
{
	const struct sampler_ops *ops = backend_of(backend);

	if (!ops) {
		snprintf(why, len, "no backend named %s", backend);
		return -ENOENT;
	}
	return ops->available ? ops->available(why, len) : 0;
}

int sampler__open(const char *backend, struct pyproc *p, const struct sampler_opts *o,
		  struct sampler **out, char *err, size_t errlen)
{
	const struct sampler_ops *ops = backend_of(backend);
	struct sampler *s;
	int rc;

	*out = NULL;
	rc = sampler__available(backend, err, errlen);
	if (rc)
		return rc;
	if (!p && !(ops->caps & SAMPLER_CAP_PROCESSES)) {
		snprintf(err, errlen, "the %s backend needs a target", ops->name);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->ops = ops;
	rc = ops->open(p, o, &s->b, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

const char *sampler__name(const struct sampler *s)
{
	return s->ops->name;
}

const char *sampler__id(const struct sampler *s)
{
	return s->ops->id;
}

bool sampler__has(const struct sampler *s, unsigned int cap)
{
	return s && (s->ops->caps & cap) == cap;
}

int sampler__set_target(struct sampler *s, struct pyproc *p, char *err, size_t errlen)
{
	if (!s->ops->set_target) {
		snprintf(err, errlen, "the %s backend cannot be given a target later",
			 s->ops->name);
		return -EOPNOTSUPP;
	}
	return s->ops->set_target(s->b, p, err, errlen);
}

int sampler__add_process(struct sampler *s, struct pyproc *p, char *err, size_t errlen)
{
	if (!s->ops->add_process) {
		snprintf(err, errlen, "the %s backend samples one process", s->ops->name);
		return -EOPNOTSUPP;
	}
	return s->ops->add_process(s->b, p, err, errlen);
}

int sampler__track_process(struct sampler *s, pid_t pid)
{
	return s->ops->track_process ? s->ops->track_process(s->b, pid) : -EOPNOTSUPP;
}

void sampler__forget_process(struct sampler *s, pid_t pid)
{
	if (s->ops->forget_process)
		s->ops->forget_process(s->b, pid);
}

int sampler__set_async(struct sampler *s, pid_t pid, const struct sampler_async *a)
{
	return s->ops->set_async ? s->ops->set_async(s->b, pid, a) : -EOPNOTSUPP;
}

int sampler__set_stack_end(struct sampler *s, pid_t tid, uint64_t end)
{
	return s->ops->set_stack_end ? s->ops->set_stack_end(s->b, tid, end) : -EOPNOTSUPP;
}

int sampler__poll(struct sampler *s, const struct sampler_tool *t)
{
	return s->ops->poll(s->b, t);
}

double sampler__next_poll(struct sampler *s, double started)
{
	return s->ops->next_poll(s->b, started);
}

void sampler__refresh(struct sampler *s, double now)
{
	if (s->ops->refresh)
		s->ops->refresh(s->b, now);
}

void sampler__stats(const struct sampler *s, struct sampler_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->ops->stats)
		s->ops->stats(s->b, st);
}

void sampler__detail(const struct sampler *s, struct sampler_detail *d)
{
	memset(d, 0, sizeof(*d));
	if (s->ops->detail)
		s->ops->detail(s->b, d);
}

bool sampler__execed(const struct sampler *s)
{
	return s->ops->execed && s->ops->execed(s->b);
}

int sampler__finish(struct sampler *s, uint64_t end_ns, const struct sampler_tool *t)
{
	return s->ops->finish ? s->ops->finish(s->b, end_ns, t) : 0;
}

void sampler__close(struct sampler *s)
{
	if (!s)
		return;
	s->ops->close(s->b);
	free(s);
}
