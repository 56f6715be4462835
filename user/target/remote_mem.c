/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <sys/uio.h>
#include "target/core_file.h"
#include "target/remote_mem.h"

/* The kernel takes at most IOV_MAX iovecs per call on each side. */
#define BATCH 1024

/* The core file REMOTE_MEM_CORE reads (dump --core, one per run). */
static struct core_file *core;

void remote_mem__set_core(struct core_file *cf)
{
	core = cf;
}

static int read_core(const struct remote_iov *iov, size_t n, size_t *whole)
{
	*whole = 0;
	if (!core)
		return -ESRCH;
	for (size_t i = 0; i < n; i++) {
		if (core_file__read(core, iov[i].addr, iov[i].buf, iov[i].len))
			return -EFAULT;
		(*whole)++;
	}
	return 0;
}

static int read_batch(pid_t pid, const struct remote_iov *iov, size_t n, size_t *whole)
{
	struct iovec local[BATCH], remote[BATCH];
	size_t want = 0;
	ssize_t got;

	if (pid == REMOTE_MEM_CORE)
		return read_core(iov, n, whole);
	for (size_t i = 0; i < n; i++) {
		local[i].iov_base = iov[i].buf;
		local[i].iov_len = iov[i].len;
		remote[i].iov_base = (void *)(uintptr_t)iov[i].addr;
		remote[i].iov_len = iov[i].len;
		want += iov[i].len;
	}
	got = process_vm_readv(pid, local, n, remote, n, 0);
	if (got < 0) {
		*whole = 0;
		return errno == ENOMEM ? -EFAULT : -errno;
	}
	/* A fault stops the transfer part-way: count the iovecs read whole. */
	*whole = 0;
	for (size_t i = 0, left = (size_t)got; i < n && left >= iov[i].len; i++) {
		left -= iov[i].len;
		(*whole)++;
	}
	return (size_t)got == want ? 0 : -EFAULT;
}

int remote_readv_prefix(pid_t pid, const struct remote_iov *iov, size_t n, size_t *done)
{
	*done = 0;
	while (*done < n) {
		size_t k = n - *done < BATCH ? n - *done : BATCH, whole;
		int err = read_batch(pid, iov + *done, k, &whole);

		*done += whole;
		if (err)
			return err;
	}
	return 0;
}

int remote_readv(pid_t pid, const struct remote_iov *iov, size_t n)
{
	size_t done;

	return remote_readv_prefix(pid, iov, n, &done);
}

int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct remote_iov v = { .addr = addr, .buf = buf, .len = len };

	if (len == 0)
		return 0;
	return remote_readv(pid, &v, 1);
}

int remote_read_u64(pid_t pid, uint64_t addr, uint64_t *val)
{
	return remote_read(pid, addr, val, sizeof(*val));
}
