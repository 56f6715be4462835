/* SPDX-License-Identifier: MIT */
/*
 * fake_mem.h - a target's address space made of the fuzzer's bytes.
 *
 * The harnesses link this in place of user/target/remote_mem.c: every
 * remote_read*() of the code under test is served from the regions added
 * here, and an address outside them is -EFAULT, as an unmapped page is.
 */
#ifndef PYPROF_FUZZ_FAKE_MEM_H
#define PYPROF_FUZZ_FAKE_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Forget every region (call at the start of each input). */
void fake_mem_reset(void);
/* Map len bytes of buf (not copied: must outlive the reads) at addr. */
int fake_mem_add(uint64_t addr, const void *buf, size_t len);
/* Reads served since the last reset (a walk that never ends shows here). */
uint64_t fake_mem_reads(void);

/*
 * Split the input into regions: each is [u64 addr][u32 len][len bytes];
 * a short tail becomes one region at FAKE_MEM_TAIL_ADDR. Returns the count.
 */
#define FAKE_MEM_TAIL_ADDR 0x7f0000000000ull
int fake_mem_from_input(const uint8_t *data, size_t size);

/*
 * Seeds from a live process (stopped, so that what is read stays put): until
 * the next reset, reads outside the regions are served from /proc/@pid/mem
 * and remembered. fake_mem_capture_save() then writes @hdr and those reads,
 * merged into at most the regions fake_mem_from_input() takes, in its format.
 */
int fake_mem_capture(int pid);
int fake_mem_capture_save(const char *path, const void *hdr, size_t hlen);

#endif
