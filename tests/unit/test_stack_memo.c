// SPDX-License-Identifier: MIT
/*
 * test_stack_memo.c - user/symbols/stack_memo.c against a fake symbolizer: which
 * frames are resolved again and which keep their symbols, what `same` says,
 * the sampler's hint, and, over random sequences of stacks, that the symbols
 * are always those a resolution from scratch gives. Runs under ASan/UBSan.
 *
 * The symbolizer is faked here, so this test links stack_memo.o alone (see
 * the Makefile): the real one would need a live process.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "symbols/stack_memo.h"

/* ---- a fake symbolizer ---- */

/*
 * Code object i lives at CODE(i). A frame's symbol is a pure function of the
 * raw frame: function "c<i>_v<variant>", a file by i, a line from the
 * instruction's offset. The variant is the co_version, or for an unversioned
 * frame the symbolizer's generation, which a test bumps to play a code object
 * freed and another one allocated at the same address: the reason why an
 * unversioned frame is never taken as unchanged.
 *
 * Frames Python does not show (-ENOENT): code objects 13 mod 16, and any
 * frame whose instruction is its code's first byte (pushed, not started).
 * Unreadable code objects (-EFAULT): 7 mod 16 always, 11 mod 16 while
 * s->flaky is set (a read that fails once and succeeds the next time).
 */
#define NCODES		48
#define NVARIANTS	4
#define CODE_BASE	0x7f0000100000ull
#define CODE_SIZE	0x1000ull
#define CODE(i)		(CODE_BASE + (uint64_t)(i) * CODE_SIZE)
#define FRAME_BASE	0x7f5500000000ull
#define FRAME_SIZE	0x50ull
#define IS_ENOENT(i)	((i) % 16 == 13)
#define IS_EFAULT(i)	((i) % 16 == 7)
#define IS_FLAKY(i)	((i) % 16 == 11)

struct symbolizer {
	uint32_t generation;	/* what unversioned code addresses hold now */
	int flaky;		/* code objects 11 mod 16 cannot be read */
	uint64_t resolves;	/* symbolizer__resolve calls */
	uint64_t samples;	/* symbolizer__next_sample calls */
	uint64_t stacks;	/* symbolizer__resolve_stack calls */
};

static char fn_names[NCODES][NVARIANTS][16];
static const char *const files[] = { "/app/a.py", "/app/b.py", "/lib/c.py", "<frozen d>" };

/* What @s says of @f, counting nothing: the reference for every check. */
static int fake_symbol(const struct symbolizer *s, const struct py_rawframe *f,
		       struct py_sym *out)
{
	uint64_t i = (f->code - CODE_BASE) / CODE_SIZE, off = f->instr - f->code;
	uint32_t v = f->code_version ? f->code_version : s->generation;

	assert_true(f->code >= CODE_BASE && i < NCODES && f->instr >= f->code);
	if (IS_ENOENT(i) || !off)
		return -ENOENT;
	if (IS_EFAULT(i) || (IS_FLAKY(i) && s->flaky)) {
		/* What a failed read may leave behind: must not be used. */
		*out = (struct py_sym){ "garbage", "garbage", 999, 999 };
		return -EFAULT;
	}
	*out = (struct py_sym){
		.function = fn_names[i][v % NVARIANTS],
		.file = files[i % 4],
		.firstlineno = (int)i * 10 + 1,
		.line = (int)i * 10 + 1 + (int)(off / 2),
	};
	return 0;
}

void symbolizer__next_sample(struct symbolizer *s)
{
	s->samples++;
}

int symbolizer__resolve(struct symbolizer *s, const struct py_rawframe *f, struct py_sym *out)
{
	s->resolves++;
	return fake_symbol(s, f, out);
}

/* As the real one: a new sample, -ENOENT dropped, errors as "<unknown>". */
int symbolizer__resolve_stack(struct symbolizer *s, const struct py_rawframe *raw, size_t n,
			      struct py_sym *out, size_t *nout, size_t *unresolved)
{
	size_t k = 0;

	s->stacks++;
	symbolizer__next_sample(s);
	for (size_t i = 0; i < n; i++) {
		int rc = symbolizer__resolve(s, &raw[i], &out[k]);

		if (rc == -ENOENT)
			continue;
		if (rc) {
			out[k] = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
			(*unresolved)++;
		}
		k++;
	}
	*nout = k;
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	for (int i = 0; i < NCODES; i++)
		for (int v = 0; v < NVARIANTS; v++)
			snprintf(fn_names[i][v], sizeof(fn_names[i][v]), "c%d_v%d", i, v);
	return 0;
}

/* ---- the harness: every call checked against a resolution from scratch ---- */

#define MAX_DEPTH	64	/* deepest stack a test builds */

struct prev_syms {		/* what the memo gave a thread last time */
	pid_t tid;
	uint32_t n;
	struct py_sym syms[MAX_DEPTH];
};

struct harness {
	struct stack_memo *m;
	struct symbolizer sym;
	unsigned int max_frames;
	struct prev_syms *prev;
	size_t nprev, prev_cap;
};

/* What one stack_memo__resolve() call did. */
struct call {
	uint32_t nsyms, same;
	uint64_t resolved;	/* symbolizer__resolve calls */
	uint64_t stacks;	/* symbolizer__resolve_stack calls (no memo) */
	size_t unresolved;	/* frames counted as "<unknown>" */
	const struct py_sym *syms;
};

static int sym_eq(const struct py_sym *a, const struct py_sym *b)
{
	return !strcmp(a->function, b->function) && !strcmp(a->file, b->file) &&
	       a->line == b->line && a->firstlineno == b->firstlineno;
}

static struct harness *harness_new(unsigned int max_frames)
{
	struct harness *h = calloc(1, sizeof(*h));

	assert_non_null(h);
	assert_int_equal(stack_memo__new(max_frames, &h->m), 0);
	h->max_frames = max_frames ? max_frames : 1;	/* as the memo takes 0 */
	return h;
}

static void harness_free(struct harness *h)
{
	stack_memo__free(h->m);
	free(h->prev);
	free(h);
}

static struct prev_syms *prev_of(struct harness *h, pid_t tid)
{
	for (size_t i = 0; i < h->nprev; i++)
		if (h->prev[i].tid == tid)
			return &h->prev[i];
	return NULL;
}

static struct raw_sample raw(pid_t tid, const struct py_rawframe *f, uint32_t n, uint32_t hint)
{
	return (struct raw_sample){
		.tid = tid, .status = SAMPLE_COMPLETE, .nframes = n, .frames = f,
		.unchanged = hint,
	};
}

static struct call resolve(struct harness *h, const struct raw_sample *r)
{
	struct symbolizer before = h->sym;
	struct stack_memo_stats st0, st1;
	struct py_sym ref[MAX_DEPTH];
	uint32_t n = r->nframes < h->max_frames ? r->nframes : h->max_frames, nref = 0;
	size_t unresolved = 0, ref_unresolved = 0;
	struct prev_syms *p;
	struct call c;

	assert_true(n <= MAX_DEPTH);
	stack_memo__stats(h->m, &st0);
	assert_int_equal(stack_memo__resolve(h->m, &h->sym, r, &c.syms, &c.nsyms, &c.same,
					     &unresolved), 0);
	stack_memo__stats(h->m, &st1);
	c.resolved = h->sym.resolves - before.resolves;
	c.stacks = h->sym.stacks - before.stacks;
	c.unresolved = unresolved;

	/* From scratch: the innermost max_frames frames, each resolved. */
	for (uint32_t i = 0; i < n; i++) {
		int rc = fake_symbol(&h->sym, &r->frames[i], &ref[nref]);

		if (rc == -ENOENT)
			continue;
		if (rc) {
			ref[nref] = (struct py_sym){ "<unknown>", "<unknown>", -1, 0 };
			ref_unresolved++;
		}
		nref++;
	}
	assert_int_equal(c.nsyms, nref);
	for (uint32_t i = 0; i < nref; i++)
		if (!sym_eq(&c.syms[i], &ref[i]))
			fail_msg("tid %d: symbol %u of %u is %s (%s:%d), from scratch %s (%s:%d)",
				 (int)r->tid, i, nref, c.syms[i].function, c.syms[i].file,
				 c.syms[i].line, ref[i].function, ref[i].file, ref[i].line);
	assert_int_equal(c.unresolved, ref_unresolved);
	/* Always a new sample for the symbolizer, each frame resolved or reused once. */
	assert_int_equal(h->sym.samples - before.samples, 1);
	assert_int_equal(st1.frames - st0.frames, n);
	assert_int_equal((st1.reused - st0.reused) + c.resolved, n);

	/* `same` claims no more than is true. */
	assert_true(c.same <= c.nsyms);
	p = r->tid > 0 ? prev_of(h, r->tid) : NULL;
	if (!p) {
		assert_int_equal(c.same, 0);
	} else {
		assert_true(c.same <= p->n);
		for (uint32_t i = 0; i < c.same; i++)
			if (!sym_eq(&c.syms[c.nsyms - 1 - i], &p->syms[p->n - 1 - i]))
				fail_msg("tid %d: same=%u, but outer symbol %u is %s, was %s",
					 (int)r->tid, c.same, i, c.syms[c.nsyms - 1 - i].function,
					 p->syms[p->n - 1 - i].function);
	}
	if (r->tid > 0) {
		if (!p) {
			if (h->nprev == h->prev_cap) {
				h->prev_cap = h->prev_cap ? 2 * h->prev_cap : 16;
				h->prev = realloc(h->prev, h->prev_cap * sizeof(*h->prev));
				assert_non_null(h->prev);
			}
			p = &h->prev[h->nprev++];
			p->tid = r->tid;
		}
		p->n = c.nsyms;
		memcpy(p->syms, c.syms, c.nsyms * sizeof(*c.syms));
	}
	return c;
}

static struct call resolve_tid(struct harness *h, pid_t tid, const struct py_rawframe *f,
			       uint32_t n, uint32_t hint)
{
	struct raw_sample r = raw(tid, f, n, hint);

	return resolve(h, &r);
}

/* Frame at @depth from the outermost (its address set by the depth, as in
 * CPython's frame stack), running code @code at offset @off. */
static struct py_rawframe frame_at(uint32_t depth, unsigned code, uint64_t off, uint32_t version)
{
	return (struct py_rawframe){
		.frame = FRAME_BASE + depth * FRAME_SIZE, .code = CODE(code),
		.instr = CODE(code) + off, .code_version = version,
	};
}

/* A stack of @n frames, innermost first, whose frame at depth d runs
 * @codes[d % ncodes] (NULL: code d % 6, all plain). */
static void ladder(struct py_rawframe *f, uint32_t n, const unsigned *codes, uint32_t ncodes)
{
	for (uint32_t d = 0; d < n; d++)
		f[n - 1 - d] = frame_at(d, codes ? codes[d % ncodes] : d % 6, 8, 1);
}

/* The frame at depth @d of an @n-frame stack. */
#define AT(f, n, d) ((f)[(n) - 1 - (d)])

/* ---- tests ---- */

static void test_first_and_identical(void **state)
{
	struct harness *h = harness_new(100);
	struct py_rawframe f[4];
	struct stack_memo_stats st;
	struct call c;

	(void)state;
	ladder(f, 4, NULL, 0);
	c = resolve_tid(h, 100, f, 4, 0);
	assert_int_equal(c.resolved, 4);
	assert_int_equal(c.nsyms, 4);
	assert_int_equal(c.same, 0);
	assert_string_equal(c.syms[0].function, "c3_v1");	/* innermost first */
	assert_string_equal(c.syms[3].function, "c0_v1");

	c = resolve_tid(h, 100, f, 4, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.nsyms, 4);
	assert_int_equal(c.same, 4);
	stack_memo__stats(h->m, &st);
	assert_int_equal(st.frames, 8);
	assert_int_equal(st.reused, 4);
	harness_free(h);
}

static void test_leaf_moves(void **state)
{
	struct harness *h = harness_new(100);
	struct py_rawframe f[8];
	struct call c;

	(void)state;
	ladder(f, 4, NULL, 0);
	resolve_tid(h, 7, f, 4, 0);

	/* The leaf's line moves: only the leaf. */
	AT(f, 4, 3).instr += 2;
	c = resolve_tid(h, 7, f, 4, 0);
	assert_int_equal(c.resolved, 1);
	assert_int_equal(c.same, 3);

	/* A call: one more frame, only it resolved. */
	ladder(f, 5, NULL, 0);
	AT(f, 5, 3).instr += 2;
	c = resolve_tid(h, 7, f, 5, 0);
	assert_int_equal(c.resolved, 1);
	assert_int_equal(c.nsyms, 5);
	assert_int_equal(c.same, 4);

	/* Two returns: nothing to resolve, the callers' symbols stay. */
	ladder(f, 3, NULL, 0);
	c = resolve_tid(h, 7, f, 3, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.nsyms, 3);
	assert_int_equal(c.same, 3);

	/* The outermost frame changes: everything again. */
	AT(f, 3, 0).code = CODE(5);
	AT(f, 3, 0).instr = CODE(5) + 8;
	c = resolve_tid(h, 7, f, 3, 0);
	assert_int_equal(c.resolved, 3);
	assert_int_equal(c.same, 0);

	/* A caller in the middle moved (returned and called again): from it inward. */
	ladder(f, 8, NULL, 0);
	resolve_tid(h, 7, f, 8, 0);
	AT(f, 8, 5).instr += 4;
	c = resolve_tid(h, 7, f, 8, 0);
	assert_int_equal(c.resolved, 3);
	assert_int_equal(c.same, 5);
	harness_free(h);
}

static void test_deeper_shallower(void **state)
{
	static const struct {
		uint32_t n, resolved, same;
	} steps[] = {
		{ 3, 3, 0 }, { 40, 37, 3 }, { 2, 0, 2 }, { 40, 38, 2 }, { 40, 0, 40 },
		{ 1, 0, 1 }, { 0, 0, 0 }, { 5, 5, 0 }, { 5, 0, 5 },
	};
	struct harness *h = harness_new(100);
	struct py_rawframe f[40];

	(void)state;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct call c;

		ladder(f, steps[i].n, NULL, 0);
		c = resolve_tid(h, 42, f, steps[i].n, 0);
		assert_int_equal(c.nsyms, steps[i].n);
		assert_int_equal(c.resolved, steps[i].resolved);
		assert_int_equal(c.same, steps[i].same);
	}
	harness_free(h);
}

static void test_interleaved_threads(void **state)
{
	static const unsigned codes_b[] = { 3, 4, 5, 0, 1, 2 };
	struct harness *h = harness_new(100);
	struct py_rawframe a[11], b[10];
	struct call c;

	(void)state;
	ladder(a, 10, NULL, 0);
	ladder(b, 10, codes_b, 6);
	assert_int_equal(resolve_tid(h, 1001, a, 10, 0).resolved, 10);
	assert_int_equal(resolve_tid(h, 1002, b, 10, 0).resolved, 10);
	c = resolve_tid(h, 1001, a, 10, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.same, 10);
	AT(b, 10, 9).instr += 2;
	c = resolve_tid(h, 1002, b, 10, 0);
	assert_int_equal(c.resolved, 1);
	assert_int_equal(c.same, 9);
	ladder(a, 11, NULL, 0);
	c = resolve_tid(h, 1001, a, 11, 0);
	assert_int_equal(c.resolved, 1);
	assert_int_equal(c.same, 10);
	c = resolve_tid(h, 1002, b, 10, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.same, 10);
	/* Another thread's stack is not this thread's previous one. */
	c = resolve_tid(h, 1002, a, 11, 0);
	assert_int_equal(c.resolved, 11);
	assert_int_equal(c.same, 0);
	harness_free(h);
}

static void test_unversioned_never_reused(void **state)
{
	struct harness *h = harness_new(100);
	struct py_rawframe f[6];
	struct call c;

	(void)state;
	ladder(f, 6, NULL, 0);
	AT(f, 6, 2).code_version = 0;
	resolve_tid(h, 5, f, 6, 0);
	c = resolve_tid(h, 5, f, 6, 0);
	assert_int_equal(c.resolved, 4);	/* from the unversioned frame inward */
	assert_int_equal(c.same, 2);

	/* Its address now holds another code object: another symbol. */
	h->sym.generation = 2;
	c = resolve_tid(h, 5, f, 6, 0);
	assert_int_equal(c.resolved, 4);
	assert_string_equal(c.syms[3].function, "c2_v2");

	/* 3.11: no versions at all, nothing ever reused. */
	for (uint32_t d = 0; d < 6; d++)
		AT(f, 6, d).code_version = 0;
	for (int i = 0; i < 3; i++) {
		c = resolve_tid(h, 5, f, 6, 0);
		assert_int_equal(c.resolved, 6);
		assert_int_equal(c.same, 0);
	}
	harness_free(h);
}

static void test_unknown_never_reused(void **state)
{
	static const unsigned codes[] = { 0, 1, 2, 7, 4, 5 };	/* depth 3 unreadable */
	static const unsigned flaky[] = { 0, 11, 2, 3, 4, 5 };	/* depth 1, sometimes */
	struct harness *h = harness_new(100);
	struct py_rawframe f[6];
	struct call c;

	(void)state;
	ladder(f, 6, codes, 6);
	c = resolve_tid(h, 9, f, 6, 0);
	assert_int_equal(c.resolved, 6);
	assert_int_equal(c.unresolved, 1);
	assert_string_equal(c.syms[2].function, "<unknown>");
	for (int i = 0; i < 3; i++) {
		c = resolve_tid(h, 9, f, 6, 0);
		assert_int_equal(c.resolved, 3);	/* from the unknown frame inward */
		assert_int_equal(c.unresolved, 1);	/* counted every time */
		assert_int_equal(c.same, 3);
	}

	/* A read that failed once succeeds the next time: the symbol shows. */
	ladder(f, 6, flaky, 6);
	h->sym.flaky = 1;
	c = resolve_tid(h, 10, f, 6, 0);
	assert_int_equal(c.unresolved, 1);
	assert_string_equal(c.syms[4].function, "<unknown>");
	h->sym.flaky = 0;
	c = resolve_tid(h, 10, f, 6, 0);
	assert_int_equal(c.unresolved, 0);
	assert_int_equal(c.resolved, 5);
	assert_int_equal(c.same, 1);
	assert_string_equal(c.syms[4].function, "c11_v1");
	harness_free(h);
}

static void test_not_shown_dropped(void **state)
{
	static const unsigned codes[] = { 13, 1, 13, 3, 4, 5 };	/* depths 0 and 2 hidden */
	struct harness *h = harness_new(100);
	struct py_rawframe f[6];
	struct call c;

	(void)state;
	ladder(f, 6, codes, 6);
	AT(f, 6, 5).instr = AT(f, 6, 5).code;	/* the leaf, pushed but not started */
	c = resolve_tid(h, 3, f, 6, 0);
	assert_int_equal(c.resolved, 6);
	assert_int_equal(c.nsyms, 3);
	assert_int_equal(c.unresolved, 0);
	assert_string_equal(c.syms[0].function, "c4_v1");
	assert_string_equal(c.syms[2].function, "c1_v1");

	/* Hidden frames are clean: they are kept like the others. */
	c = resolve_tid(h, 3, f, 6, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.nsyms, 3);
	assert_int_equal(c.same, 3);

	/* The leaf starts: it shows, the rest stays. */
	AT(f, 6, 5).instr += 2;
	c = resolve_tid(h, 3, f, 6, 0);
	assert_int_equal(c.resolved, 1);
	assert_int_equal(c.nsyms, 4);
	assert_int_equal(c.same, 3);
	assert_string_equal(c.syms[0].function, "c5_v1");

	/* Only hidden frames: no symbols at all, twice. */
	ladder(f, 2, codes, 1);
	assert_int_equal(resolve_tid(h, 4, f, 2, 0).nsyms, 0);
	c = resolve_tid(h, 4, f, 2, 0);
	assert_int_equal(c.nsyms, 0);
	assert_int_equal(c.same, 0);
	harness_free(h);
}

static void test_sampler_hint(void **state)
{
	static const unsigned other[] = { 5, 1, 2, 3, 4, 5 };
	static const unsigned bad[] = { 0, 1, 7, 3, 4, 5 };	/* depth 2 unreadable */
	struct harness *h = harness_new(100);
	struct py_rawframe f[6];
	struct call c;

	(void)state;
	/* Unversioned callers: only the hint can spare them. */
	ladder(f, 6, NULL, 0);
	for (uint32_t d = 1; d <= 4; d++)
		AT(f, 6, d).code_version = 0;
	resolve_tid(h, 20, f, 6, 0);
	c = resolve_tid(h, 20, f, 6, 0);
	assert_int_equal(c.resolved, 5);
	c = resolve_tid(h, 20, f, 6, 6);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.same, 6);
	c = resolve_tid(h, 20, f, 6, 4);	/* then compared: stops at depth 4 */
	assert_int_equal(c.resolved, 2);
	assert_int_equal(c.same, 4);

	/* Its outer end is not the previous outermost frame: ignored. */
	ladder(f, 6, other, 6);
	for (uint32_t d = 1; d <= 4; d++)
		AT(f, 6, d).code_version = 0;
	c = resolve_tid(h, 20, f, 6, 6);
	assert_int_equal(c.resolved, 6);
	assert_int_equal(c.same, 0);

	/* Its inner end is not the previous frame at that depth: ignored. */
	AT(f, 6, 3).instr += 2;
	c = resolve_tid(h, 20, f, 6, 4);
	assert_int_equal(c.resolved, 5);	/* compared: stops at depth 1 */
	assert_int_equal(c.same, 1);

	/* Deeper than the previous stack: ignored. */
	ladder(f, 3, NULL, 0);
	resolve_tid(h, 21, f, 3, 0);
	ladder(f, 6, NULL, 0);
	c = resolve_tid(h, 21, f, 6, 6);
	assert_int_equal(c.resolved, 3);
	assert_int_equal(c.same, 3);

	/* Over a frame that did not resolve: not past it. */
	ladder(f, 6, bad, 6);
	resolve_tid(h, 22, f, 6, 0);
	c = resolve_tid(h, 22, f, 6, 6);
	assert_int_equal(c.resolved, 4);
	assert_int_equal(c.unresolved, 1);
	assert_int_equal(c.same, 2);

	/* A hint for a thread never seen: nothing to reuse. */
	c = resolve_tid(h, 23, f, 6, 6);
	assert_int_equal(c.resolved, 6);
	assert_int_equal(c.same, 0);
	harness_free(h);
}

/* Deeper than max_frames: the innermost max_frames are kept, and they are
 * what is compared (the whole stack's outermost frames, kept by nobody,
 * once matched the previous stack and lent their places to wrong symbols). */
static void test_deeper_than_max(void **state)
{
	struct harness *h = harness_new(8);
	struct py_rawframe f[12];
	struct call c;

	(void)state;
	ladder(f, 5, NULL, 0);
	resolve_tid(h, 30, f, 5, 0);
	ladder(f, 12, NULL, 0);
	c = resolve_tid(h, 30, f, 12, 0);	/* depths 4..11: nothing like before */
	assert_int_equal(c.nsyms, 8);
	assert_int_equal(c.resolved, 8);
	assert_int_equal(c.same, 0);
	c = resolve_tid(h, 30, f, 12, 0);
	assert_int_equal(c.resolved, 0);
	assert_int_equal(c.same, 8);
	c = resolve_tid(h, 30, f, 12, 12);	/* a hint past max_frames: harmless */
	assert_int_equal(c.resolved, 0);
	c = resolve_tid(h, 30, f, 12, 8);
	assert_int_equal(c.resolved, 0);
	ladder(f, 5, NULL, 0);
	c = resolve_tid(h, 30, f, 5, 0);
	assert_int_equal(c.resolved, 5);
	harness_free(h);
}

/* A thread first seen without frames (no Python state yet), then with. */
static void test_empty_first(void **state)
{
	struct harness *h = harness_new(100);
	struct py_rawframe f[3];
	struct raw_sample r = raw(50, f, 0, 0);
	struct call c;

	(void)state;
	r.status = SAMPLE_NO_PYSTATE;
	c = resolve(h, &r);
	assert_int_equal(c.nsyms, 0);
	assert_int_equal(c.same, 0);
	c = resolve(h, &r);
	assert_int_equal(c.nsyms, 0);
	ladder(f, 3, NULL, 0);
	c = resolve_tid(h, 50, f, 3, 3);
	assert_int_equal(c.resolved, 3);
	assert_int_equal(c.same, 0);
	harness_free(h);
}

/* No memo (tid 0, or more threads than the table holds): resolved whole. */
static void test_without_memo(void **state)
{
	enum { NTHREADS = 2500 };
	struct harness *h = harness_new(100);
	struct py_rawframe f[3];
	uint32_t fallbacks = 0;
	struct call c;

	(void)state;
	ladder(f, 3, NULL, 0);
	for (int i = 0; i < 2; i++) {
		c = resolve_tid(h, 0, f, 3, 3);
		assert_int_equal(c.stacks, 1);
		assert_int_equal(c.same, 0);
	}
	for (int round = 0; round < 2; round++) {
		for (pid_t i = 0; i < NTHREADS; i++) {
			c = resolve_tid(h, 1000 + 4096 * (i % 3) + 7 * i, f, 3, 0);
			if (c.stacks) {
				assert_int_equal(c.same, 0);
				fallbacks += round;
			} else if (round) {
				assert_int_equal(c.resolved, 0);
				assert_int_equal(c.same, 3);
			}
		}
	}
	assert_true(fallbacks > 0 && fallbacks < NTHREADS / 2);
	harness_free(h);
}

static void test_tiny(void **state)
{
	struct harness *h = harness_new(0);	/* 0: one frame */
	struct py_rawframe f[3];
	struct call c;

	(void)state;
	stack_memo__free(NULL);
	ladder(f, 3, NULL, 0);
	resolve_tid(h, 1, f, 3, 0);
	c = resolve_tid(h, 1, f, 3, 3);
	assert_int_equal(c.nsyms, 1);
	assert_int_equal(c.resolved, 0);
	assert_string_equal(c.syms[0].function, "c2_v1");
	harness_free(h);
}

/* ---- random sequences ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return n ? (uint32_t)((rng_state >> 11) % n) : 0;
}

struct rthread {
	pid_t tid;
	struct py_rawframe f[MAX_DEPTH];	/* outermost first */
	uint32_t n;
	/* The memo's view of its previous sample: innermost first, clipped. */
	struct py_rawframe last[MAX_DEPTH];
	uint32_t nlast;
	uint32_t generation;	/* the symbolizer's, at that sample */
};

static int exact(const struct py_rawframe *a, const struct py_rawframe *b)
{
	return a->frame == b->frame && a->code == b->code && a->instr == b->instr &&
	       a->code_version == b->code_version;
}

/* Unversioned and unreadable frames rare enough that many stacks have none. */
static struct py_rawframe random_frame(uint32_t depth)
{
	uint64_t off = rnd(10) ? 2 + 2 * rnd(20) : 0;
	unsigned code = rnd(NCODES);

	if (IS_EFAULT(code) && rnd(4))
		code = rnd(NCODES);
	return frame_at(depth, code, off, rnd(24) ? 1 + rnd(5) : 0);
}

static void mutate(struct rthread *t, struct symbolizer *s)
{
	uint32_t r = rnd(100), keep;

	if (r < 25) {
		return;				/* the same stack */
	} else if (r < 50) {
		if (t->n)			/* the leaf's line */
			t->f[t->n - 1].instr = t->f[t->n - 1].code + 2 + 2 * rnd(20);
		return;
	} else if (r < 55) {
		if (t->n) {			/* a caller, anything about it */
			uint32_t d = rnd(t->n);

			switch (rnd(3)) {
			case 0:
				t->f[d].instr = t->f[d].code + 2 * rnd(20);
				break;
			case 1:
				t->f[d].code_version = rnd(3) ? 1 + rnd(5) : 0;
				break;
			default:
				t->f[d] = random_frame(d);
			}
		}
		return;
	} else if (r < 58) {
		s->generation++;		/* unversioned addresses reused */
		return;
	}
	/* Returns, then calls: few usually, sometimes very deep. */
	keep = r < 90 ? (t->n > 4 ? t->n - rnd(5) : rnd(t->n + 1)) : rnd(t->n + 1);
	t->n = keep;
	for (uint32_t k = r < 95 ? rnd(6) : rnd(MAX_DEPTH); k > 0 && t->n < MAX_DEPTH; k--) {
		t->f[t->n] = random_frame(t->n);
		t->n++;
	}
}

/* How many outermost frames of @f (innermost first) are exactly @t's last ones. */
static uint32_t exact_outer(const struct rthread *t, const struct py_rawframe *f, uint32_t n)
{
	uint32_t u = 0;

	while (u < n && u < t->nlast && exact(&f[n - 1 - u], &t->last[t->nlast - 1 - u]))
		u++;
	return u;
}

static void random_run(uint64_t seed, unsigned int max_frames, uint32_t nthreads, int steps)
{
	struct harness *h = harness_new(max_frames);
	struct rthread *th = calloc(nthreads, sizeof(*th));
	struct py_rawframe f[MAX_DEPTH];
	uint64_t hinted = 0, reused_all = 0;

	assert_non_null(th);
	rng_state = seed;
	for (uint32_t i = 0; i < nthreads; i++)
		th[i].tid = 100 + (pid_t)i * 37;
	for (int step = 0; step < steps; step++) {
		struct rthread *t = &th[rnd(nthreads)];
		uint32_t n, nc, u, hint = 0;
		int plain = 1;
		struct raw_sample r;
		struct call c;

		mutate(t, &h->sym);
		n = t->n;
		for (uint32_t k = 0; k < n; k++)
			f[k] = t->f[n - 1 - k];
		nc = n < max_frames ? n : max_frames;
		u = exact_outer(t, f, nc);
		/* A hint is true of the live frames it covers, so only while
		 * no code object was freed since (unversioned frames would
		 * take another's symbol, as they should not). Sometimes a
		 * stale one, which the memo must notice at its ends. */
		if (t->generation == h->sym.generation && rnd(2))
			hint = rnd(u + 1);
		if (!rnd(10)) {
			uint32_t lim = nc < t->nlast ? nc : t->nlast, hi;

			if (lim > u) {
				hi = u + 1 + rnd(lim - u);
				if (!exact(&f[nc - 1], &t->last[t->nlast - 1]) ||
				    !exact(&f[nc - hi], &t->last[t->nlast - hi]))
					hint = hi;
			}
		}
		r = raw(rnd(50) ? t->tid : 0, f, n, hint);
		r.status = rnd(10) ? SAMPLE_COMPLETE : 1 + rnd(3);	/* the memo ignores it */
		c = resolve(h, &r);
		hinted += hint > 0;
		if (!r.tid)
			continue;

		/* Unchanged, versioned and readable: nothing resolved again. */
		for (uint32_t k = 0; k < nc; k++) {
			struct py_sym ps;

			if (!f[k].code_version || fake_symbol(&h->sym, &f[k], &ps) == -EFAULT)
				plain = 0;
		}
		if (t->generation == h->sym.generation && plain && u == nc && nc == t->nlast) {
			assert_int_equal(c.resolved, 0);
			assert_int_equal(c.same, c.nsyms);
			reused_all++;
		}
		memcpy(t->last, f, nc * sizeof(*f));
		t->nlast = nc;
		t->generation = h->sym.generation;
	}
	/* Not vacuous: hints given, and whole stacks reused. */
	assert_true(hinted > (uint64_t)steps / 10);
	assert_true(reused_all > (uint64_t)steps / 50);
	free(th);
	harness_free(h);
}

static void test_random_sequences(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		random_run(seed * 0x9e3779b97f4a7c15ull, 48, 5, 20000);
		random_run(seed * 0x2545f4914f6cdd1dull, 6, 3, 5000);	/* mostly clipped */
		random_run(seed * 0xda942042e4dd58b5ull, 64, 40, 10000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_and_identical),
		cmocka_unit_test(test_leaf_moves),
		cmocka_unit_test(test_deeper_shallower),
		cmocka_unit_test(test_interleaved_threads),
		cmocka_unit_test(test_unversioned_never_reused),
		cmocka_unit_test(test_unknown_never_reused),
		cmocka_unit_test(test_not_shown_dropped),
		cmocka_unit_test(test_sampler_hint),
		cmocka_unit_test(test_deeper_than_max),
		cmocka_unit_test(test_empty_first),
		cmocka_unit_test(test_without_memo),
		cmocka_unit_test(test_tiny),
		cmocka_unit_test(test_random_sequences),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
