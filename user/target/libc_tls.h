/* SPDX-License-Identifier: MIT */
/*
 * libc_tls.h - how far below a thread's thread pointer glibc's
 * pthread_self() (CPython's thread_id) lies: 0 on x86-64,
 * sizeof(struct pthread) on AArch64 (libc_tls.c).
 */
#ifndef PYPROF_LIBC_TLS_H
#define PYPROF_LIBC_TLS_H

#include <stdint.h>
#include "target/procmaps.h"
#include "target/pyproc.h"

/* The distance for the target whose files @fs opens and whose mappings are
 * @maps: 0 on x86-64, or when its libc says nothing we can trust (musl, a
 * stripped or odd glibc). On AArch64 that 0 is wrong: the BPF backend then
 * finds no thread's state (its samples say [thread-exit]; #34). */
uint64_t libc_tls__thread_id_below_tp(const struct pyproc_files *fs, const struct procmaps *maps);

/* glibc's _thread_db_sizeof_pthread in the ELF file @fd (not closed):
 * 0, -ENOENT (no such symbol) or -ENOEXEC (unreadable, or implausible). */
int libc_tls__sizeof_pthread(int fd, uint32_t *out);

#endif
