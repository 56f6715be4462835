/* SPDX-License-Identifier: MIT */
/*
 * privileges.h - giving up what a recording no longer needs once attached.
 *
 * Root's full set would let a bug that a hostile target steers (its memory
 * and files are our input) load modules, mount, change ids or reconfigure
 * the network. Once the BPF program is loaded and attached, pyprof-bpf
 * keeps only what reading targets and following new ones takes:
 *   CAP_SYS_PTRACE          read (and, for 3.15's frame cache, write 16 bytes
 *                           of) a target's memory; its /proc/PID/root and mem
 *   CAP_DAC_READ_SEARCH     read a target's files whatever their mode
 *   CAP_DAC_OVERRIDE        write outputs (the agent's spool and files) where
 *                           the user asked
 *   CAP_CHECKPOINT_RESTORE  /proc/PID/map_files: the very file mapped
 *   CAP_BPF, CAP_PERFMON    attach the program to new threads' and CPUs' events
 *   CAP_SYSLOG              kernel symbol addresses (--kernel)
 *   CAP_KILL                only when it launched a command as another user
 *   CAP_SYS_ADMIN           only on kernels without CAP_BPF or
 *                           CAP_CHECKPOINT_RESTORE (before 5.8, 5.9), where
 *                           those need it
 * The rest leave the effective, permitted, inheritable, ambient and bounding
 * sets, and no_new_privs is set.
 */
#ifndef PYPROF_PRIVILEGES_H
#define PYPROF_PRIVILEGES_H

#include <stdbool.h>
#include <stdint.h>

/* The capabilities kept, as a mask of 1 << CAP_x (for tests and --verbose). */
uint64_t privileges__keep_mask(bool launched);

/*
 * Drop every capability outside privileges__keep_mask(@launched).
 * 0 (also when there was nothing to drop: not root), or -errno.
 */
int privileges__drop_after_attach(bool launched);

#endif
