/* SPDX-License-Identifier: MIT */
/*
 * syscalls.h - x86-64 system call names by number, for off-CPU samples that
 * blocked in a system call. The table is generated at build time from the
 * kernel's uapi list (linux-libc-dev's asm/unistd_64.h).
 */
#ifndef PYPROF_OFFCPU_SYSCALLS_H
#define PYPROF_OFFCPU_SYSCALLS_H

/* The name of x86-64 system call @nr ("read" for 0), NULL when unknown. */
const char *syscall__name(long nr);

#endif
