// SPDX-License-Identifier: MIT
/* record_hold.c - records held between polls (record_hold.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "commands/record_hold.h"

static struct held *slot(struct record_hold *h)
{
	struct held *v;
	size_t cap;

	if (h->head == h->n)
		h->head = h->n = 0;
	if (h->n == h->cap) {
		cap = h->cap ? h->cap * 2 : 64;
		v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		h->v = v;
		h->cap = cap;
	}
	memset(&h->v[h->n], 0, sizeof(h->v[h->n]));
	return &h->v[h->n];
}

/* @len bytes of @src at *@at in @blob; the copy's address (NULL for none). */
static void *put(uint8_t *blob, size_t *at, const void *src, size_t len)
{
	void *dst = blob + *at;

	if (!src || !len)
		return NULL;
	memcpy(dst, src, len);
	*at += (len + 7) & ~(size_t)7;
	return dst;
}

static size_t rounded(size_t len)
{
	return (len + 7) & ~(size_t)7;
}

static size_t sample_bytes(const struct raw_sample *r)
{
	size_t n = rounded(r->nframes * sizeof(*r->frames)) +
		   rounded(r->nkstack * sizeof(*r->kstack)) +
		   (r->uregs ? rounded(SAMPLE_NREGS * sizeof(*r->uregs)) : 0) +
		   rounded(r->ustack ? r->ustack_len : 0) +
		   rounded(r->ntasks * sizeof(*r->tasks));

	for (uint32_t i = 0; r->tasks && i < r->ntasks; i++)
		n += rounded(r->tasks[i].nframes * sizeof(*r->tasks[i].frames)) +
		     rounded(r->tasks[i].name ? r->tasks[i].name_len : 0);
	return n;
}

/* Room for @bytes more? Counted as lost by the caller if not. */
static bool fits(const struct record_hold *h, size_t bytes)
{
	return h->bytes + bytes <= HOLD_MAX_BYTES;
}

int record_hold__sample(struct record_hold *h, const struct raw_sample *r)
{
	size_t bytes = sample_bytes(r), at = 0;
	struct held *e = fits(h, bytes) ? slot(h) : NULL;
	struct sample_task *tasks;
	uint8_t *blob;

	blob = e ? malloc(bytes ? bytes : 1) : NULL;
	if (!blob) {
		sampler_stats__count(&h->lost, r->status);
		return e ? -ENOMEM : -ENOSPC;
	}
	e->kind = HELD_SAMPLE;
	e->s = *r;
	e->s.frames = put(blob, &at, r->frames, r->nframes * sizeof(*r->frames));
	e->s.kstack = put(blob, &at, r->kstack, r->nkstack * sizeof(*r->kstack));
	e->s.uregs = r->uregs ? put(blob, &at, r->uregs, SAMPLE_NREGS * sizeof(*r->uregs)) :
		     NULL;
	e->s.ustack = r->ustack ? put(blob, &at, r->ustack, r->ustack_len) : NULL;
	tasks = put(blob, &at, r->tasks, r->ntasks * sizeof(*r->tasks));
	for (uint32_t i = 0; tasks && i < r->ntasks; i++) {
		tasks[i].frames = put(blob, &at, r->tasks[i].frames,
				      r->tasks[i].nframes * sizeof(*r->tasks[i].frames));
		tasks[i].name = r->tasks[i].name ? put(blob, &at, r->tasks[i].name,
						       r->tasks[i].name_len) : NULL;
	}
	e->s.tasks = tasks;
	e->blob = blob;
	e->bytes = bytes;
	h->bytes += bytes;
	h->n++;
	return 0;
}

int record_hold__code(struct record_hold *h, const struct raw_code *c)
{
	size_t bytes = rounded(c->obj_len) + rounded(c->qualname_len) +
		       rounded(c->filename_len) + rounded(c->linetable_len), at = 0;
	struct held *e = fits(h, bytes) ? slot(h) : NULL;
	uint8_t *blob;

	blob = e ? malloc(bytes ? bytes : 1) : NULL;
	if (!blob) {
		h->lost_code++;
		return e ? -ENOMEM : -ENOSPC;
	}
	e->kind = HELD_CODE;
	e->c = *c;
	e->c.obj = put(blob, &at, c->obj, c->obj_len);
	e->c.qualname = put(blob, &at, c->qualname, c->qualname_len);
	e->c.filename = put(blob, &at, c->filename, c->filename_len);
	e->c.linetable = put(blob, &at, c->linetable, c->linetable_len);
	e->blob = blob;
	e->bytes = bytes;
	h->bytes += bytes;
	h->n++;
	return 0;
}

int record_hold__proc(struct record_hold *h, enum sampler_proc_event ev, pid_t pid, pid_t ppid,
		      uint64_t ts_ns)
{
	struct held *e = slot(h);

	if (!e) {
		h->lost_events++;
		return -ENOMEM;
	}
	e->kind = HELD_PROC;
	e->p.ev = ev;
	e->p.pid = pid;
	e->p.ppid = ppid;
	e->p.ts_ns = ts_ns;
	h->n++;
	return 0;
}

struct held *record_hold__peek(struct record_hold *h)
{
	return h->head < h->n ? &h->v[h->head] : NULL;
}

void record_hold__pop(struct record_hold *h)
{
	struct held *e = &h->v[h->head++];

	h->bytes -= e->bytes;
	free(e->blob);
	e->blob = NULL;
	if (h->head == h->n)
		h->head = h->n = 0;
}

void record_hold__free(struct record_hold *h)
{
	while (record_hold__peek(h))
		record_hold__pop(h);
	free(h->v);
	h->v = NULL;
	h->cap = 0;
}
