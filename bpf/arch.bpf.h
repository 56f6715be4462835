/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * arch.bpf.h - what the program reads differently on each architecture,
 * behind one header each (arch_ARCH.bpf.h): a task's thread pointer, what
 * its saved user registers say (user mode or not, stack pointer, system
 * call), the registers --native sends in DWARF order, the kernel stack's
 * size. A third architecture is a new file and a line here.
 */
#ifndef PYPROF_ARCH_BPF_H
#define PYPROF_ARCH_BPF_H

#if defined(__TARGET_ARCH_x86)
#include "arch_x86.bpf.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arch_arm64.bpf.h"
#else
#error "pyprof-bpf: no bpf/arch_*.bpf.h for this __TARGET_ARCH"
#endif

#endif
