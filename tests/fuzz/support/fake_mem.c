/* SPDX-License-Identifier: MIT */
/* fake_mem.c - remote_mem.h served from the fuzzer's bytes (fake_mem.h). */
#include <errno.h>
#include <string.h>
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

void fake_mem_reset(void)
{
	nregions = 0;
	nreads = 0;
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
	return -EFAULT;
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
