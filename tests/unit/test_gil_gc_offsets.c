// SPDX-License-Identifier: MIT
/*
 * The GIL and GC offsets of struct py_offsets: from the real _Py_DebugOffsets
 * of every CPython 3.13+ we have (read from the .PyRuntime section of their
 * ELF files) and from the 3.11/3.12 tables, against the values measured with
 * offsetof() on those versions' internal headers; and, for the table, that a
 * value which does not hold together leaves all of them unknown (0) while the
 * rest of the table is still accepted.
 *
 * Live checks (who holds the GIL, collecting while gc.collect() runs, futex
 * addresses inside the GIL) need a running target: see the commit message.
 *
 * Usage: test_gil_gc_offsets [ELF...]; without arguments, the interpreters
 * provisioned by scripts/provision-pythons.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "target/debug_offsets.h"
#include "target/offsets_legacy.h"

#define MAX_FILES 16

static const char *files[MAX_FILES];
static int nfiles;

/* The table at the start of @path's .PyRuntime section, in a buffer of
 * exactly the size the parser reads (so ASan sees any over-read). */
static unsigned char *runtime_table(const char *path, size_t *len)
{
	unsigned char *buf = NULL;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		uint64_t version;
		long want;

		gelf_getshdr(scn, &sh);
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".PyRuntime") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		assert_true(d->d_size >= DEBUG_OFFSETS_HEADER);
		memcpy(&version, (const char *)d->d_buf + 8, 8);
		want = debug_offsets__size(version);
		assert_true(want > 0 && (size_t)want <= d->d_size);
		buf = malloc(want);
		assert_non_null(buf);
		memcpy(buf, d->d_buf, want);
		*len = want;
		break;
	}
	elf_end(elf);
	close(fd);
	if (!buf)
		fail_msg("%s: no .PyRuntime section", path);
	return buf;
}

/*
 * offsetof() on the internal headers of these exact releases (x86_64, GIL
 * build): PyInterpreterState _gil and gc.collecting (and gc.frame), and
 * _PyRuntimeState interpreters.main. Another release of the same minor
 * version is checked for the invariants only.
 */
static const struct known {
	uint32_t version_hex;
	uint64_t interp_gil, interp_gc_collecting, interp_gc_frame, runtime_interpreters_main;
} known[] = {
	{ 0x030d00f0, 7752, 7600, 0, 640 },	/* 3.13.0 (pyenv) */
	{ 0x030d12f0, 7752, 7600, 0, 640 },	/* 3.13.18 (sid) */
	{ 0x030e0af0, 7784, 7600, 0, 816 },	/* 3.14.10 (sid, and its debug build) */
	{ 0x030f02f0, 7736, 7512, 7520, 944 },	/* 3.15.2 (sid) */
};

/* What every GIL build of 3.11 to 3.15 shares. */
static void check_invariants(const struct py_offsets *o)
{
	unsigned int minor = (o->version_hex >> 16) & 0xff;

	assert_int_equal(o->gil_size, PY_GIL_SIZE);
	assert_int_equal(o->gil_last_holder, 8);
	assert_int_equal(o->gil_locked, 16);
	assert_int_equal(o->gc_collecting_size, 4);
	assert_int_equal(o->runtime_interpreters_main, o->runtime_interpreters_head + 8);
	assert_true(o->interp_gc_collecting != 0);
	if (minor == 11) {
		assert_true(o->runtime_gil != 0);
		assert_int_equal(o->interp_ceval_gil, 0);
	} else {
		assert_int_equal(o->runtime_gil, 0);
		assert_true(o->interp_ceval_gil != 0 && o->interp_gil != 0);
		/* the pointer is not inside the GIL it points at */
		assert_true(o->interp_ceval_gil + 8 <= o->interp_gil ||
			    o->interp_ceval_gil >= o->interp_gil + o->gil_size);
	}
	if (minor >= 15)
		assert_int_equal(o->interp_gc_frame, o->interp_gc_collecting + 8);
	else
		assert_int_equal(o->interp_gc_frame, 0);
}

static void test_real_tables(void **state)
{
	(void)state;
	for (int i = 0; i < nfiles; i++) {
		struct py_offsets o;
		char err[256] = "";
		size_t len;
		unsigned char *t = runtime_table(files[i], &len);
		int exact = 0;

		if (debug_offsets__parse(t, len, &o, err, sizeof(err)))
			fail_msg("%s: %s", files[i], err);
		check_invariants(&o);
		for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
			if (known[k].version_hex != o.version_hex)
				continue;
			assert_int_equal(o.interp_gil, known[k].interp_gil);
			assert_int_equal(o.interp_gc_collecting, known[k].interp_gc_collecting);
			assert_int_equal(o.interp_gc_frame, known[k].interp_gc_frame);
			assert_int_equal(o.runtime_interpreters_main, known[k].runtime_interpreters_main);
			exact = 1;
		}
		printf("  %s: 0x%x: main at runtime+%llu, ceval.gil at +%llu -> _gil at +%llu "
		       "(%llu bytes), gc.collecting at +%llu, gc.frame at +%llu%s\n", files[i],
		       o.version_hex, (unsigned long long)o.runtime_interpreters_main,
		       (unsigned long long)o.interp_ceval_gil, (unsigned long long)o.interp_gil,
		       (unsigned long long)o.gil_size, (unsigned long long)o.interp_gc_collecting,
		       (unsigned long long)o.interp_gc_frame, exact ? "" : " (release not in the "
		       "known list: invariants only)");
		free(t);
	}
}

static void test_legacy_tables(void **state)
{
	struct py_offsets o;

	(void)state;
	assert_int_equal(offsets_legacy__get(0x030b07f0, &o), 0);	/* 3.11.7 */
	check_invariants(&o);
	assert_int_equal(o.runtime_gil, 360);
	assert_int_equal(o.interp_gc_collecting, 848);

	assert_int_equal(offsets_legacy__get(0x030c01f0, &o), 0);	/* 3.12.1 */
	check_invariants(&o);
	assert_int_equal(o.interp_ceval_gil, 384);
	assert_int_equal(o.interp_gil, 1040);
	assert_int_equal(o.interp_gc_collecting, 312);
}

static int gil_gc_unknown(const struct py_offsets *o)
{
	return !o->runtime_interpreters_main && !o->interp_ceval_gil && !o->interp_gil &&
	       !o->gil_size && !o->gil_last_holder && !o->gil_locked &&
	       !o->interp_gc_collecting && !o->gc_collecting_size && !o->interp_gc_frame;
}

/*
 * Every field of the table set to values out of any struct: the parse
 * either rejects the table, or accepts it with the GIL and GC fields all
 * valid (the field was not one of theirs) or all unknown, never half.
 */
static void test_mutations_all_or_nothing(void **state)
{
	static const uint64_t bad[] = { 0xffffffffffffffffull, 1ull << 40, 1ull << 24, 65536,
					4097, 0 };

	(void)state;
	for (int i = 0; i < nfiles; i++) {
		size_t len, dropped = 0, kept = 0;
		unsigned char *t = runtime_table(files[i], &len);
		struct py_offsets good, o;
		char err[256];

		assert_int_equal(debug_offsets__parse(t, len, &good, err, sizeof(err)), 0);
		for (size_t off = DEBUG_OFFSETS_HEADER; off < len; off += 8) {
			uint64_t orig;

			memcpy(&orig, t + off, 8);
			for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
				if (bad[b] == orig)
					continue;
				memcpy(t + off, &bad[b], 8);
				if (debug_offsets__parse(t, len, &o, err, sizeof(err)))
					continue;
				if (gil_gc_unknown(&o)) {
					dropped++;
					continue;
				}
				/* Not one of theirs, or a value no bound catches (an
				 * offset moved within its struct: pyproc__gil_gc()'s
				 * round trip is what catches those). Either way, all
				 * of them hold together. */
				check_invariants(&o);
				if (o.interp_gil == good.interp_gil &&
				    o.interp_ceval_gil == good.interp_ceval_gil &&
				    o.interp_gc_collecting == good.interp_gc_collecting &&
				    o.runtime_interpreters_main == good.runtime_interpreters_main)
					kept++;
			}
			memcpy(t + off, &orig, 8);
		}
		/* gil_runtime_state, _locked, _holder, ceval_gil, gc, gc.size,
		 * gc.collecting, interpreter_state.size: each drops them for
		 * most of the bad values. */
		assert_true(dropped >= 20);
		assert_true(kept > 0);
		free(t);
	}
}

static void add_default(const char *path)
{
	if (nfiles < MAX_FILES && access(path, R_OK) == 0)
		files[nfiles++] = strdup(path);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_tables),
		cmocka_unit_test(test_legacy_tables),
		cmocka_unit_test(test_mutations_all_or_nothing),
	};

	if (argc > 1) {
		for (int i = 1; i < argc && nfiles < MAX_FILES; i++)
			files[nfiles++] = argv[i];
	} else {
		const char *cache = getenv("PYPROF_CACHE");
		char p[512];

		cache = cache ? cache : "/var/cache/pyprof-bpf";
		for (int m = 13; m <= 15; m++) {
			snprintf(p, sizeof(p), "%s/sid/usr/bin/python3.%d", cache, m);
			add_default(p);
		}
		snprintf(p, sizeof(p), "%s/sid/usr/bin/python3.14d", cache);
		add_default(p);
		add_default("/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0");
		if (nfiles < 4) {
			fprintf(stderr, "test_gil_gc_offsets: the 3.13+ interpreters are missing "
				"(run scripts/provision-pythons.sh)\n");
			return 1;
		}
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
