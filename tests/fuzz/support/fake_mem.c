/* SPDX-License-Identifier: MIT */
/* fake_mem.c - remote_mem.h served from the fuzzer's bytes (fake_mem.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fake_mem.h"
#include "target/remote_mem.h"

#define MAX_REGIONS 64

struct region {
	uint64_t addr;
	const uint8_t *buf;
	size_t len;
};

static struct region regions[MAX_REGIONS];
static size_t nregions;
static uint64_t nreads;

/* Capture mode: the live process's memory, and the ranges read from it. */
struct span {
	uint64_t lo, hi;
};
static int cap_fd = -1;
static struct span *cap;
static size_t ncap, capcap;

void fake_mem_reset(void)
{
	nregions = 0;
	nreads = 0;
	if (cap_fd >= 0)
		close(cap_fd);
	cap_fd = -1;
	ncap = 0;
}

int fake_mem_capture(int pid)
{
	char fn[64];

	fake_mem_reset();
	snprintf(fn, sizeof(fn), "/proc/%d/mem", pid);
	cap_fd = open(fn, O_RDONLY | O_CLOEXEC);
	return cap_fd < 0 ? -errno : 0;
}

static int capture_read(uint64_t addr, void *buf, size_t len)
{
	if (pread(cap_fd, buf, len, (off_t)addr) != (ssize_t)len)
		return -EFAULT;
	if (ncap == capcap) {
		size_t n = capcap ? capcap * 2 : 256;
		struct span *c = realloc(cap, n * sizeof(*c));

		if (!c)
			return -ENOMEM;
		cap = c;
		capcap = n;
	}
	cap[ncap++] = (struct span){ addr, addr + len };
	return 0;
}

static int by_lo(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Merge the captured ranges closer than @gap; returns how many remain. */
static size_t merge(struct span *s, size_t n, uint64_t gap)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (k && s[i].lo <= s[k - 1].hi + gap) {
			if (s[i].hi > s[k - 1].hi)
				s[k - 1].hi = s[i].hi;
		} else {
			s[k++] = s[i];
		}
	}
	return k;
}

/* One region: the whole range when it reads, else only what was read
 * (zeros between, which the code under test never looked at). */
static int save_region(FILE *f, const struct span *r, const struct span *read, size_t nread)
{
	uint64_t len = r->hi - r->lo;
	uint32_t len32 = (uint32_t)len;
	unsigned char *b = calloc(1, len ? len : 1);

	if (!b || len > UINT32_MAX)
		return free(b), -ENOMEM;
	if (pread(cap_fd, b, len, (off_t)r->lo) != (ssize_t)len)
		for (size_t i = 0; i < nread; i++)
			if (read[i].lo >= r->lo && read[i].hi <= r->hi &&
			    pread(cap_fd, b + (read[i].lo - r->lo), read[i].hi - read[i].lo,
				  (off_t)read[i].lo) < 0)
				return free(b), -EFAULT;
	fwrite(&r->lo, 8, 1, f);
	fwrite(&len32, 4, 1, f);
	fwrite(b, 1, len, f);
	free(b);
	return 0;
}

int fake_mem_capture_save(const char *path, const void *hdr, size_t hlen)
{
	struct span *read = malloc((ncap ? ncap : 1) * sizeof(*read)), *m;
	size_t n = ncap;
	uint64_t gap = 0;
	FILE *f;
	int rc = 0;

	m = malloc((ncap ? ncap : 1) * sizeof(*m));
	if (!read || !m || cap_fd < 0)
		return free(read), free(m), -EINVAL;
	memcpy(read, cap, ncap * sizeof(*read));
	qsort(read, ncap, sizeof(*read), by_lo);
	/* widen the gap merged over until the regions fit */
	do {
		memcpy(m, read, ncap * sizeof(*m));
		n = merge(m, ncap, gap);
		gap = gap ? gap * 4 : 64;
	} while (n > MAX_REGIONS && gap <= (1u << 20));
	if (n > MAX_REGIONS)
		return free(read), free(m), -E2BIG;
	f = fopen(path, "wb");
	if (!f)
		return free(read), free(m), -errno;
	fwrite(hdr, 1, hlen, f);
	for (size_t i = 0; i < n && !rc; i++)
		rc = save_region(f, &m[i], read, ncap);
	if (fclose(f) && !rc)
		rc = -EIO;
	free(read);
	free(m);
	return rc;
}

uint64_t fake_mem_reads(void)
{
	return nreads;
}

int fake_mem_add(uint64_t addr, const void *buf, size_t len)
{
	if (nregions == MAX_REGIONS || !len || addr + len < addr)
		return -ENOSPC;
	regions[nregions++] = (struct region){ addr, buf, len };
	return 0;
}

int fake_mem_from_input(const uint8_t *data, size_t size)
{
	size_t off = 0;

	fake_mem_reset();
	while (off + 12 <= size && nregions < MAX_REGIONS) {
		uint64_t addr;
		uint32_t len;

		memcpy(&addr, data + off, 8);
		memcpy(&len, data + off + 8, 4);
		off += 12;
		if (len > size - off)
			len = (uint32_t)(size - off);
		if (len)
			fake_mem_add(addr, data + off, len);
		off += len;
	}
	if (off < size)
		fake_mem_add(FAKE_MEM_TAIL_ADDR, data + off, size - off);
	return (int)nregions;
}

int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	(void)pid;
	nreads++;
	if (!len)
		return 0;
	for (size_t i = 0; i < nregions; i++) {
		const struct region *r = &regions[i];

		if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
			memcpy(buf, r->buf + (addr - r->addr), len);
			return 0;
		}
	}
	return cap_fd >= 0 ? capture_read(addr, buf, len) : -EFAULT;
}

int remote_readv_prefix(pid_t pid, const struct remote_iov *iov, size_t n, size_t *done)
{
	*done = 0;
	for (size_t i = 0; i < n; i++) {
		if (remote_read(pid, iov[i].addr, iov[i].buf, iov[i].len))
			return -EFAULT;
		*done = i + 1;
	}
	return 0;
}

int remote_readv(pid_t pid, const struct remote_iov *iov, size_t n)
{
	size_t done;

	return remote_readv_prefix(pid, iov, n, &done);
}

int remote_read_u64(pid_t pid, uint64_t addr, uint64_t *val)
{
	return remote_read(pid, addr, val, sizeof(*val));
}
