/* SPDX-License-Identifier: MIT */
/* fake_target.c - a pyproc over fake_mem (fake_target.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_mem.h"
#include "fake_target.h"
#include "target/debug_offsets.h"
#include "target/offsets_legacy.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"

/* 3.13+: the table at the start of _PyRuntime, as pyproc__open() reads it. */
static int debug_offsets_at(int pid, uint64_t runtime, struct py_offsets *o)
{
	unsigned char hdr[DEBUG_OFFSETS_HEADER], *buf;
	char err[256];
	uint64_t version;
	long size;
	int rc;

	if (remote_read(pid, runtime, hdr, sizeof(hdr)))
		return -EFAULT;
	memcpy(&version, hdr + 8, 8);
	size = debug_offsets__size(version);
	if (size < 0)
		return (int)size;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	rc = remote_read(pid, runtime, buf, size);
	if (!rc)
		rc = debug_offsets__parse(buf, size, o, err, sizeof(err));
	free(buf);
	return rc;
}

static int open_hdr(int pid, const struct fake_target_hdr *h, struct pyproc **out)
{
	struct pyproc_image img = {
		.runtime = h->runtime, .code_type = h->code_type,
		.coro_type = h->coro_type, .asyncgen_type = h->asyncgen_type,
	};
	int rc;

	if (h->minor < 13)
		rc = offsets_legacy__get(0x030000f0u | (uint32_t)h->minor << 16, &img.off);
	else
		rc = debug_offsets_at(pid, h->runtime, &img.off);
	return rc ? rc : pyproc__from_image(pid, &img, out);
}

int fake_target_open(const uint8_t *data, size_t size, struct fake_target_hdr *h,
		     struct pyproc **out)
{
	if (size < sizeof(*h))
		return -EINVAL;
	memcpy(h, data, sizeof(*h));
	fake_mem_from_input(data + sizeof(*h), size - sizeof(*h));
	/* pid 0: no /proc entry, so no thread is matched to a host tid */
	return open_hdr(0, h, out);
}

void fake_target_capture_main(fake_target_fn run)
{
	const char *env = getenv("FUZZ_CAPTURE");
	struct fake_target_hdr h = { 0 };
	unsigned long long rt, code, coro, agen, extra;
	unsigned int minor;
	struct pyproc *p;
	char out[4096];
	int pid, rc;

	if (!env)
		return;
	if (sscanf(env, "%d %u %llx %llx %llx %llx %llx %4095s", &pid, &minor, &rt, &code, &coro,
		   &agen, &extra, out) != 8) {
		fprintf(stderr, "FUZZ_CAPTURE=\"PID MINOR RUNTIME CODE CORO ASYNCGEN EXTRA OUT\"\n");
		exit(2);
	}
	h = (struct fake_target_hdr){ .minor = (uint8_t)minor, .runtime = rt, .code_type = code,
				      .coro_type = coro, .asyncgen_type = agen, .extra = extra };
	rc = fake_mem_capture(pid);
	if (!rc)
		rc = open_hdr(pid, &h, &p);
	if (!rc) {
		run(&h, p);
		pyproc__free(p);
		rc = fake_mem_capture_save(out, &h, sizeof(h));
	}
	fprintf(stderr, "capture of %d into %s: %s\n", pid, out, rc ? strerror(-rc) : "done");
	exit(rc ? 1 : 0);
}
