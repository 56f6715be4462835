/* SPDX-License-Identifier: MIT */
/*
 * fuzz_asyncio_tasks.c - the asyncio walks over a fake 3.14+ process
 * (fake_target.h; hdr.extra: its .AsyncioDebug table): every task list,
 * each task's coroutine chain (coro.c) and awaiters (tasks.c), then the
 * await tree as text (tree.c) and the task index.
 * Seeds: live 3.14 and 3.15 asyncio programs (FUZZ_CAPTURE).
 *
 * Invariants checked: tasks, frames and awaiters within the ASYNCIO_MAX_*
 * bounds asyncio.h promises, names valid UTF-8, every task found by its id
 * in the index; a walk that does not end is a libFuzzer timeout.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "fake_target.h"
#include "fuzz_check.h"
#include "symbols/symbolizer.h"
#include "target/debug_offsets.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"

/* What asyncio_offsets__load() does, with the table where the header says. */
static int load_offsets(const struct fake_target_hdr *h, struct pyproc *p,
			struct asyncio_offsets *ao)
{
	unsigned char table[ASYNCIO_DEBUG_SIZE], *dbg;
	long len = debug_offsets__size(pyproc__offsets(p)->version_hex);
	char err[256];
	int rc;

	if (len < 0 || remote_read(pyproc__pid(p), h->extra, table, sizeof(table)))
		return -EINVAL;
	rc = asyncio_offsets__parse_table(table, sizeof(table), pyproc__offsets(p)->version_hex,
					  ao, err, sizeof(err));
	if (rc)
		return rc;
	ao->coro_type = pyproc__coro_type(p);
	ao->asyncgen_type = pyproc__asyncgen_type(p);
	dbg = malloc(len);
	if (!dbg)
		return -ENOMEM;
	rc = remote_read(pyproc__pid(p), pyproc__runtime(p), dbg, len);
	if (!rc)
		rc = asyncio_offsets__bind_debug(dbg, len, ao, err, sizeof(err));
	free(dbg);
	return rc;
}

static void check_snapshot(const struct asyncio_snapshot *s)
{
	struct asyncio_index *ix = NULL;

	CHECK(s->n <= s->cap && s->torn <= s->n);
	if (asyncio_index__new(s, &ix))
		ix = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct asyncio_task *t = &s->tasks[i];
		long k;

		CHECK(t->name);
		check_utf8(t->name);
		/* a chain's levels, or a running task's thread walk (tasks.c:
		 * 4,096 frames), plus [truncated] and [torn] */
		CHECK(t->nframes <= (ASYNCIO_MAX_CHAIN > 4096 ? ASYNCIO_MAX_CHAIN : 4096) + 2);
		CHECK(t->nawaited <= ASYNCIO_MAX_AWAITERS);
		for (size_t f = 0; f < t->nframes; f++) {
			CHECK(t->frames[f].function && t->frames[f].file);
			check_utf8(t->frames[f].function);
		}
		if (ix) {
			k = asyncio_index__find(ix, t->addr);
			CHECK(k >= 0 && (size_t)k < s->n && s->tasks[k].addr == t->addr);
		}
	}
	asyncio_index__free(ix);
}

static void run(const struct fake_target_hdr *h, struct pyproc *p)
{
	struct asyncio_snapshot s = { 0 };
	struct asyncio_offsets ao;
	struct symbolizer *sym;
	char err[256];
	FILE *out;

	if (load_offsets(h, p, &ao) || symbolizer__new(p, &sym))
		return;
	if (asyncio_snapshot__take(p, sym, &ao, &s, err, sizeof(err)) == 0) {
		check_snapshot(&s);
		out = fopen("/dev/null", "w");
		if (out) {
			asyncio_tree__print(out, &s);
			fclose(out);
		}
	}
	asyncio_snapshot__free(&s);
	symbolizer__free(sym);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fake_target_capture_main(run);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fake_target_hdr h;
	struct pyproc *p;

	if (fake_target_open(data, size, &h, &p))
		return 0;
	run(&h, p);
	pyproc__free(p);
	return 0;
}
