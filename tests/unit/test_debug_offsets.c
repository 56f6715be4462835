// SPDX-License-Identifier: MIT
/*
 * _Py_DebugOffsets validation against the real tables of every CPython 3.13+
 * we have (read from the .PyRuntime section of their ELF files), and against
 * mutated copies of them: every mutation of a field we use must be rejected
 * with an error, and nothing may read out of bounds (this runs under ASan).
 *
 * Usage: test_debug_offsets [ELF...]; without arguments, the interpreters
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

#define MAX_FILES 16

static const char *files[MAX_FILES];
static int nfiles;

/* The first @len bytes of the .PyRuntime section of @path, in a buffer of
 * exactly that size (so ASan sees any over-read). */
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
		long want;

		gelf_getshdr(scn, &sh);
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".PyRuntime") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		assert_true(d->d_size >= DEBUG_OFFSETS_HEADER);
		want = debug_offsets__size(*(const uint64_t *)((const char *)d->d_buf + 8));
		assert_true(want > 0 && (size_t)want <= d->d_size);
		buf = malloc(want);
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

static void test_real_tables_parse(void **state)
{
	(void)state;
	for (int i = 0; i < nfiles; i++) {
		struct py_offsets o;
		char err[256] = "";
		size_t len;
		unsigned char *t = runtime_table(files[i], &len);
		int rc = debug_offsets__parse(t, len, &o, err, sizeof(err));

		if (rc)
			fail_msg("%s: %s", files[i], err);
		/* facts every 3.13+ build shares */
		assert_true(o.tstate_next != o.tstate_interp);
		assert_true(o.frame_size > o.frame_owner);
		assert_true(o.unicode_compact_data > o.unicode_ascii_data);
		assert_int_equal(o.frame_owner_interp_min, 3);
		printf("  %s: version 0x%x, %zu bytes, thread_state.native_thread_id=%llu\n",
		       files[i], o.version_hex, len, (unsigned long long)o.tstate_native_thread_id);
		free(t);
	}
}

static void test_truncated_tables_rejected(void **state)
{
	(void)state;
	for (int i = 0; i < nfiles; i++) {
		size_t len;
		unsigned char *t = runtime_table(files[i], &len);

		for (size_t cut = 0; cut < len; cut++) {
			unsigned char *c = malloc(cut ? cut : 1);
			struct py_offsets o;
			char err[256] = "";

			memcpy(c, t, cut);
			assert_int_not_equal(debug_offsets__parse(c, cut, &o, err, sizeof(err)), 0);
			assert_true(err[0] != '\0');
			free(c);
		}
		free(t);
	}
}

static void test_header_mutations(void **state)
{
	(void)state;
	for (int i = 0; i < nfiles; i++) {
		size_t len;
		unsigned char *t = runtime_table(files[i], &len);
		struct py_offsets o;
		char err[256];
		uint64_t v;

		t[0] ^= 0x20;	/* cookie */
		assert_int_equal(debug_offsets__parse(t, len, &o, err, sizeof(err)), -EPROTO);
		t[0] ^= 0x20;
		memcpy(&v, t + 8, 8);
		{
			uint64_t future = 0x031000f0;	/* 3.16 */

			memcpy(t + 8, &future, 8);
			assert_int_equal(debug_offsets__parse(t, len, &o, err, sizeof(err)), -ENOTSUP);
			assert_non_null(strstr(err, "3.16"));
		}
		memcpy(t + 8, &v, 8);
		t[16] = 1;	/* free_threaded */
		assert_int_equal(debug_offsets__parse(t, len, &o, err, sizeof(err)), -ENOTSUP);
		t[16] = 0;
		assert_int_equal(debug_offsets__parse(t, len, &o, err, sizeof(err)), 0);
		free(t);
	}
}

/*
 * Every field, set to values that are out of any struct: the parse either
 * rejects the table or, for a field we do not use, accepts a table whose
 * used offsets are unchanged. Sizes set to 0 or enormous are rejected.
 */
static void test_field_mutations(void **state)
{
	static const uint64_t bad[] = { 0xffffffffffffffffull, 1ull << 40, 1ull << 24, 65536, 4097 };

	(void)state;
	for (int i = 0; i < nfiles; i++) {
		size_t len, rejected = 0;
		unsigned char *t = runtime_table(files[i], &len);
		struct py_offsets good, o;
		char err[256];

		assert_int_equal(debug_offsets__parse(t, len, &good, err, sizeof(err)), 0);
		for (size_t off = DEBUG_OFFSETS_HEADER; off < len; off += 8) {
			uint64_t orig;

			memcpy(&orig, t + off, 8);
			for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
				int rc;

				memcpy(t + off, &bad[b], 8);
				err[0] = '\0';
				rc = debug_offsets__parse(t, len, &o, err, sizeof(err));
				if (rc) {
					assert_int_equal(rc, -EPROTO);
					assert_true(err[0] != '\0');
					rejected++;
				} else {
					/* accepted: then nothing we read may exceed our
					 * copy bound */
					assert_true(o.tstate_size <= PY_MAX_STRUCT_COPY);
					assert_true(o.frame_size <= PY_MAX_STRUCT_COPY);
					assert_true(o.code_size <= PY_MAX_STRUCT_COPY);
				}
			}
			memcpy(t + off, &orig, 8);
		}
		/* Our ~25 used fields times 5 values, at the least. */
		assert_true(rejected >= 100);
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
		cmocka_unit_test(test_real_tables_parse),
		cmocka_unit_test(test_truncated_tables_rejected),
		cmocka_unit_test(test_header_mutations),
		cmocka_unit_test(test_field_mutations),
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
			fprintf(stderr, "test_debug_offsets: the 3.13+ interpreters are missing "
				"(run scripts/provision-pythons.sh)\n");
			return 1;
		}
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
