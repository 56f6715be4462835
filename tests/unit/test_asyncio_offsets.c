// SPDX-License-Identifier: MIT
/*
 * .AsyncioDebug validation (user/asyncio/offsets.c) against the real tables and
 * mutated copies of them: every mutation is rejected with a message, or gives
 * a table whose every field still lies inside its struct, past the object
 * header, aligned and apart from the others. Runs under ASan/UBSan: the
 * buffers are exactly as long as the table, so an over-read is caught.
 *
 * The fixtures are the 104 bytes of the .AsyncioDebug sections of Debian sid's
 * builds (read with `objcopy -O binary --only-section=.AsyncioDebug`):
 *   3.14.10  /usr/lib/python3.14/lib-dynload/_asyncio.cpython-314-x86_64-linux-gnu.so
 *   3.14.10d /usr/lib/python3.14/lib-dynload/_asyncio.cpython-314d-x86_64-linux-gnu.so
 *   3.15.2   /usr/bin/python3.15 (the module is built in)
 * When the sid root is there (scripts/provision-minbase.sh), the same sections
 * are also read from those files now, and the interpreters' _Py_DebugOffsets
 * (their .PyRuntime section) are checked through asyncio_offsets__bind_debug().
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
#include "asyncio/asyncio.h"
#include "target/debug_offsets.h"

#define V314 0x030e0af0u
#define V315 0x030f02f0u

struct fixture {
	const char *what;
	uint32_t version;
	uint64_t v[13];
};

static const struct fixture fixtures[] = {
	{ "3.14.10", V314, { 168, 136, 96, 108, 109, 128, 152, 225864, 10880, 936, 864, 872, 880 } },
	{ "3.14.10d", V314, { 168, 136, 96, 108, 109, 128, 152, 225880, 10888, 936, 864, 872, 880 } },
	{ "3.15.2", V315, { 168, 136, 96, 108, 109, 128, 152, 226240, 10856, 1104, 1024, 1032, 1048 } },
};
#define NFIX (sizeof(fixtures) / sizeof(fixtures[0]))

/* Per slot: the struct's size slot, the field's width (0: a size), its
 * alignment, and the lowest offset it may have. */
static const struct {
	int size_slot;
	unsigned int width, align, floor;
} slot_rules[13] = {
	{ 0, 0, 8, 0 }, { 0, 8, 8, 16 }, { 0, 8, 8, 16 }, { 0, 1, 1, 16 }, { 0, 1, 1, 16 },
	{ 0, 8, 8, 16 }, { 0, 16, 8, 16 },
	{ 7, 0, 8, 0 }, { 7, 16, 8, 0 },
	{ 9, 0, 8, 0 }, { 9, 8, 8, 0 }, { 9, 8, 8, 0 }, { 9, 16, 8, 0 },
};

/* The invariants a table that passed must hold, checked here on our own. */
static void assert_sane(const uint64_t *v)
{
	for (int i = 0; i < 13; i++) {
		int s = slot_rules[i].size_slot;

		if (!slot_rules[i].width) {
			assert_true(v[i] >= 16 && v[i] % 8 == 0 && v[i] <= (16u << 20));
			if (i == 0)
				assert_true(v[i] <= 4096);
			continue;
		}
		assert_true(v[i] >= slot_rules[i].floor);
		assert_true(v[i] + slot_rules[i].width <= v[s]);
		assert_true(v[i] % slot_rules[i].align == 0);
		for (int k = 0; k < 13; k++) {
			if (k == i || !slot_rules[k].width || slot_rules[k].size_slot != s)
				continue;
			assert_true(v[i] + slot_rules[i].width <= v[k] ||
				    v[k] + slot_rules[k].width <= v[i]);
		}
	}
}

/* Parse @v (13 values) from a buffer of exactly @len bytes. */
static int parse(const uint64_t *v, size_t len, uint32_t version, struct asyncio_offsets *o,
		 char *err, size_t errlen)
{
	unsigned char *buf = malloc(len ? len : 1);
	int rc;

	memcpy(buf, v, len < ASYNCIO_DEBUG_SIZE ? len : ASYNCIO_DEBUG_SIZE);
	if (len > ASYNCIO_DEBUG_SIZE)
		memset(buf + ASYNCIO_DEBUG_SIZE, 0, len - ASYNCIO_DEBUG_SIZE);
	err[0] = '\0';
	rc = asyncio_offsets__parse_table(buf, len, version, o, err, errlen);
	free(buf);
	return rc;
}

static void test_fixtures_parse(void **state)
{
	(void)state;
	for (size_t i = 0; i < NFIX; i++) {
		struct asyncio_offsets o;
		char err[256];

		if (parse(fixtures[i].v, ASYNCIO_DEBUG_SIZE, fixtures[i].version, &o, err, sizeof(err)))
			fail_msg("%s: %s", fixtures[i].what, err);
		assert_int_equal(o.task_node, 152);
		assert_int_equal(o.tstate_tasks_head, fixtures[i].v[12]);
		assert_int_equal(o.awaited_slot, fixtures[i].version == V314 ? 1 : 2);
		assert_int_equal(o.state_cleared, fixtures[i].version == V314 ? 4 : 5);
		assert_sane(fixtures[i].v);
	}
}

static void test_length_and_version(void **state)
{
	(void)state;
	for (size_t i = 0; i < NFIX; i++) {
		struct asyncio_offsets o;
		char err[256];

		for (size_t len = 0; len < ASYNCIO_DEBUG_SIZE + 16; len++) {
			int rc = parse(fixtures[i].v, len, fixtures[i].version, &o, err, sizeof(err));

			if (len == ASYNCIO_DEBUG_SIZE) {
				assert_int_equal(rc, 0);
				continue;
			}
			assert_int_equal(rc, -EPROTO);
			assert_non_null(strstr(err, "104"));
		}
		/* no table before 3.14, none we know after 3.15 */
		assert_int_equal(parse(fixtures[i].v, ASYNCIO_DEBUG_SIZE, 0x030d00f0, &o, err,
				       sizeof(err)), -ENOTSUP);
		assert_non_null(strstr(err, "3.13"));
		assert_int_equal(parse(fixtures[i].v, ASYNCIO_DEBUG_SIZE, 0x031000a1, &o, err,
				       sizeof(err)), -ENOTSUP);
		assert_int_equal(parse(fixtures[i].v, ASYNCIO_DEBUG_SIZE, 0x020e00f0, &o, err,
				       sizeof(err)), -ENOTSUP);
	}
}

/* Each slot set to values that break it: rejected, with the field named. */
static void test_slot_mutations(void **state)
{
	(void)state;
	for (size_t i = 0; i < NFIX; i++) {
		size_t rejected = 0, accepted = 0;

		for (int s = 0; s < 13; s++) {
			const uint64_t orig = fixtures[i].v[s];
			const uint64_t size = fixtures[i].v[slot_rules[s].size_slot];
			const uint64_t bad[] = {
				0, 8, orig + 1, orig - 1, size, size - 1, 1ull << 40,
				0xffffffffffffffffull, 0x8000000000000000ull, 4097, 16u << 20,
				(16u << 20) + 8, orig + 4096,
			};

			for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
				uint64_t v[13];
				struct asyncio_offsets o;
				char err[256];
				int rc;

				memcpy(v, fixtures[i].v, sizeof(v));
				v[s] = bad[b];
				rc = parse(v, ASYNCIO_DEBUG_SIZE, fixtures[i].version, &o, err,
					   sizeof(err));
				if (rc) {
					assert_int_equal(rc, -EPROTO);
					assert_non_null(strstr(err, ".AsyncioDebug"));
					assert_non_null(strstr(err, "asyncio_"));
					rejected++;
				} else {
					assert_sane(v);
					accepted++;
				}
			}
		}
		/* the few accepted are moves into free room of the struct */
		assert_true(rejected >= 13 * 10);
		printf("  %s: %zu mutations rejected, %zu accepted (still sane)\n",
		       fixtures[i].what, rejected, accepted);
	}
}

/* Random tables around the real ones: whatever passes is sane. */
static void test_random_mutations(void **state)
{
	unsigned long long seed = 0x9e3779b97f4a7c15ull;
	size_t accepted = 0;

	(void)state;
	for (int round = 0; round < 200000; round++) {
		const struct fixture *f = &fixtures[round % NFIX];
		uint64_t v[13];
		struct asyncio_offsets o;
		char err[256];
		int nmut;

		memcpy(v, f->v, sizeof(v));
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		nmut = 1 + (int)(seed >> 62);
		for (int m = 0; m < nmut; m++) {
			int s;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			s = (int)((seed >> 33) % 13);
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			v[s] = (seed >> 60) ? (seed >> 20) % 1200 : seed;
		}
		if (parse(v, ASYNCIO_DEBUG_SIZE, f->version, &o, err, sizeof(err)) == 0) {
			assert_sane(v);
			accepted++;
		} else {
			assert_true(err[0] != '\0');
		}
	}
	printf("  200,000 random tables: %zu accepted, every one sane\n", accepted);
}

/* ---- the real files ---- */

static const char *cache_dir(void)
{
	const char *c = getenv("PYPROF_CACHE");

	return c ? c : "/var/cache/pyprof-bpf";
}

/* The section @name of @path, in a buffer of exactly its size; NULL when the
 * file or the section is not there. */
static unsigned char *section(const char *path, const char *name, size_t *len)
{
	unsigned char *buf = NULL;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, name) != 0)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		buf = malloc(d->d_size);
		memcpy(buf, d->d_buf, d->d_size);
		*len = d->d_size;
		break;
	}
	elf_end(elf);
	close(fd);
	return buf;
}

/* The _Py_DebugOffsets table at the start of @exe's .PyRuntime, exactly. */
static unsigned char *debug_table(const char *exe, size_t *len)
{
	size_t slen;
	unsigned char *s = section(exe, ".PyRuntime", &slen), *t;
	long want;

	if (!s)
		return NULL;
	assert_true(slen >= DEBUG_OFFSETS_HEADER);
	want = debug_offsets__size(*(const uint64_t *)(s + 8));
	assert_true(want > 0 && (size_t)want <= slen);
	t = malloc(want);
	memcpy(t, s, want);
	free(s);
	*len = (size_t)want;
	return t;
}

static const struct {
	const char *table_file, *exe;
	size_t fixture;
} real[] = {
	{ "sid/usr/lib/python3.14/lib-dynload/_asyncio.cpython-314-x86_64-linux-gnu.so",
	  "sid/usr/bin/python3.14", 0 },
	{ "sid/usr/lib/python3.14/lib-dynload/_asyncio.cpython-314d-x86_64-linux-gnu.so",
	  "sid/usr/bin/python3.14d", 1 },
	{ "sid/usr/bin/python3.15", "sid/usr/bin/python3.15", 2 },
};

static void test_real_files(void **state)
{
	int seen = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(real) / sizeof(real[0]); i++) {
		char p[512], q[512], err[256];
		unsigned char *tab, *dbg;
		size_t tlen, dlen;
		uint64_t version;
		struct asyncio_offsets o;

		snprintf(p, sizeof(p), "%s/%s", cache_dir(), real[i].table_file);
		snprintf(q, sizeof(q), "%s/%s", cache_dir(), real[i].exe);
		tab = section(p, ASYNCIO_DEBUG_SECTION, &tlen);
		dbg = debug_table(q, &dlen);
		if (!tab || !dbg) {
			/* make test provisions the sid root first: missing is a
			 * broken setup, not a reason to check nothing. */
			free(tab);
			free(dbg);
			fail_msg("%s or %s is missing: run scripts/provision-pythons.sh", p, q);
		}
		seen++;
		memcpy(&version, dbg + 8, 8);
		if (asyncio_offsets__parse_table(tab, tlen, (uint32_t)version, &o, err, sizeof(err)))
			fail_msg("%s: %s", p, err);
		if (asyncio_offsets__bind_debug(dbg, dlen, &o, err, sizeof(err)))
			fail_msg("%s: %s", q, err);
		assert_int_equal(tlen, ASYNCIO_DEBUG_SIZE);
		if (memcmp(tab, fixtures[real[i].fixture].v, ASYNCIO_DEBUG_SIZE))
			printf("  %s: differs from the fixture of %s (a newer build?)\n", p,
			       fixtures[real[i].fixture].what);
		assert_true(o.llist_next != o.llist_prev);
		/* every slot of _Py_DebugOffsets set out of any struct: the binding
		 * rejects it, or it was a slot we do not use */
		for (size_t off = DEBUG_OFFSETS_HEADER; off < dlen; off += 8) {
			const uint64_t bad[] = { 1ull << 40, 0xffffffffffffffffull, 4097 * 4096 };
			uint64_t orig;

			memcpy(&orig, dbg + off, 8);
			for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
				struct asyncio_offsets m = o;
				int rc;

				memcpy(dbg + off, &bad[b], 8);
				rc = asyncio_offsets__bind_debug(dbg, dlen, &m, err, sizeof(err));
				if (rc) {
					assert_int_equal(rc, -EPROTO);
					assert_non_null(strstr(err, "_Py_DebugOffsets"));
				} else {
					assert_memory_equal(&m, &o, sizeof(m));
				}
			}
			memcpy(dbg + off, &orig, 8);
		}
		printf("  %s: parsed and bound with %s\n", p, q);
		free(tab);
		free(dbg);
	}
	assert_int_equal(seen, sizeof(real) / sizeof(real[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures_parse),
		cmocka_unit_test(test_length_and_version),
		cmocka_unit_test(test_slot_mutations),
		cmocka_unit_test(test_random_mutations),
		cmocka_unit_test(test_real_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
