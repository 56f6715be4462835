/* SPDX-License-Identifier: MIT */
/*
 * fuzz_stack_walk.c - a Python process's threads, frame chains and code
 * objects read from a fake address space (fake_target.h): pyproc__threads(),
 * pyproc__walk_cached() twice per thread (the second reads ahead what the
 * first saw), the symbolizer over every frame found, and pyproc__gil_gc().
 * Seeds: live 3.11 to 3.15 processes (FUZZ_CAPTURE, see fake_target.h).
 *
 * Invariants checked: outputs within their bounds, names valid UTF-8, and
 * the reads each step makes within what its documented limits allow (a walk
 * that does not end shows there first).
 */
#include <stdint.h>
#include <string.h>
#include "fake_mem.h"
#include "fake_target.h"
#include "symbols/symbolizer.h"
#include "target/pyproc.h"

#include "fuzz_check.h"

#define MAX_THREADS 8
#define MAX_FRAMES 64
/* pyproc.c: 256 interpreters (two reads each), 65,536 thread states, and a
 * second pass over the last list seen (3 reads and one per thread). */
#define THREADS_READS (1 + 2 * 256 + 65536 + 3 + MAX_THREADS)
/* pyproc.c: the walk visits at most WALK_BUDGET(max) frames, one read each;
 * the read-ahead reads as many frames and versions, the first frame pointer
 * two reads, the versions one per frame kept. */
#define WALK_BUDGET (4 * MAX_FRAMES + 64)
#define WALK_READS (4 + 3 * WALK_BUDGET + MAX_FRAMES)
/* symbolizer.c per frame: the object (twice), two strs (two reads each), the
 * location table (two), 3.11's identity (four). */
#define SYM_READS_PER_FRAME 16

/* Valid UTF-8 up to the NUL (shortest forms, no surrogates). */

static void resolve(struct symbolizer *sym, const struct py_rawframe *f, size_t n)
{
	struct py_sym out[MAX_FRAMES];
	size_t nout = 0, unresolved = 0;
	uint64_t r0 = fake_mem_reads();

	CHECK(symbolizer__resolve_stack(sym, f, n, out, &nout, &unresolved) == 0);
	CHECK(nout <= n && unresolved <= nout);
	CHECK(fake_mem_reads() - r0 <= SYM_READS_PER_FRAME * n);
	for (size_t i = 0; i < nout; i++) {
		CHECK(out[i].function && out[i].file);
		CHECK(out[i].line >= -1);
		check_utf8(out[i].function);
		check_utf8(out[i].file);
	}
}

/* The Python frames of a walk that kept the interpreter's links. */
static size_t python_only(struct py_rawframe *f, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!(f[i].reserved & PY_RAWFRAME_LINK))
			f[k++] = f[i];
	return k;
}

/*
 * Two walks as the remote sampler makes them without the frame cache, then
 * one as it makes them with it (3.15): the links kept, stopping at the
 * anchor the last walk read (the copy then goes no further down), or at a
 * frame that is not the anchor (the walk then goes whole).
 */
static void walk_thread(struct pyproc *p, struct symbolizer *sym, uint64_t tstate)
{
	struct py_walk_cache c = { 0 };
	struct py_rawframe f[MAX_FRAMES];
	uint64_t second = 0;

	for (int pass = 0; pass < 3; pass++) {
		uint64_t r0 = fake_mem_reads();
		size_t n = MAX_FRAMES + 1;
		int truncated;

		c.copy_budget = 4;	/* copies of the stack chunks this walk may make */
		if (pass == 2) {
			c.keep_links = true;
			c.stop_at = c.anchor_read && c.anchor ? c.anchor : second;
			c.stop_seq = c.seq;
		}
		pyproc__walk_cached(p, tstate, &c, f, MAX_FRAMES, &n, &truncated);
		CHECK(n <= MAX_FRAMES);
		CHECK(fake_mem_reads() - r0 <= WALK_READS);
		if (c.at_anchor)
			CHECK(pass == 2 && n && f[n - 1].frame == c.stop_at && !f[n - 1].reserved);
		if (pass == 2)
			n = python_only(f, n);
		else if (n > 1)
			second = f[1].frame;
		resolve(sym, f, n);
	}
	py_walk_cache__free(&c);
}

/* The GIL and the collector (off-CPU and GIL modes): 2 to 4 reads, then
 * remembered; what it gives lies where the offsets say. */
static void gil_gc(struct pyproc *p)
{
	const struct py_offsets *o = pyproc__offsets(p);
	struct py_gil_gc g;
	uint64_t r0 = fake_mem_reads();

	if (pyproc__gil_gc(p, &g) == 0) {
		CHECK(g.gil && g.gil_holder == g.gil + o->gil_last_holder);
		CHECK(g.gil_locked == g.gil + o->gil_locked && g.gc_collecting_size == 4);
		CHECK(pyproc__gil_gc(p, &g) == 0);
	}
	CHECK(fake_mem_reads() - r0 <= 4);
}

static void run(const struct fake_target_hdr *h, struct pyproc *p)
{
	struct py_thread th[MAX_THREADS];
	struct symbolizer *sym;
	size_t n = 0;

	(void)h;
	if (symbolizer__new(p, &sym))
		return;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t r0 = fake_mem_reads();

		pyproc__threads(p, th, MAX_THREADS, &n);
		CHECK(n <= MAX_THREADS);
		CHECK(fake_mem_reads() - r0 <= THREADS_READS);
	}
	for (size_t i = 0; i < n; i++)
		walk_thread(p, sym, th[i].tstate);
	symbolizer__free(sym);
	gil_gc(p);
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
