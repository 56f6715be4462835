/* SPDX-License-Identifier: MIT */
/*
 * remote_mem.h - the one module that reads the target's memory.
 *
 * Reads are exact: a short read is an error (-EFAULT), never a partly filled
 * buffer. Many regions can be read in one process_vm_readv() call.
 */
#ifndef PYPROF_REMOTE_MEM_H
#define PYPROF_REMOTE_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct remote_iov {
	uint64_t addr;
	void *buf;
	size_t len;
};

/* 0, or -ESRCH (gone), -EPERM (no permission), -EFAULT (unmapped/short). */
int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int remote_readv(pid_t pid, const struct remote_iov *iov, size_t n);
int remote_read_u64(pid_t pid, uint64_t addr, uint64_t *val);
/*
 * As remote_readv(), but a fault is not the end: *done says how many of the
 * iovecs, from the first, were read whole (the rest are garbage). Returns 0
 * when all were, -EFAULT when some were not, -ESRCH/-EPERM as above.
 */
int remote_readv_prefix(pid_t pid, const struct remote_iov *iov, size_t n, size_t *done);

/*
 * dump --core: reads of pid REMOTE_MEM_CORE are served from @cf
 * (core_file.h) instead of a process, so that every reader of a target
 * reads a core the same way. NULL: none (reads of it fail, -ESRCH).
 */
#define REMOTE_MEM_CORE ((pid_t)-2)
struct core_file;
void remote_mem__set_core(struct core_file *cf);

#endif
