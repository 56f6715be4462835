/* SPDX-License-Identifier: MIT */
/*
 * core_file.h - a process's memory and threads as a core file keeps them
 * (gcore, systemd-coredump, the kernel's own), read through libelf, for
 * `dump --core` (issue #25 item 6).
 *
 * What a Linux core holds (x86-64's, or AArch64's in an arm64 build: the
 * build's own architecture): PT_LOAD segments (the memory dumped; a
 * segment with less in the file than in memory was not dumped past that:
 * read-only file mappings usually, as coredump_filter leaves them out), and
 * PT_NOTE notes: NT_PRSTATUS per thread (its tid and registers), NT_PRPSINFO
 * (the process: pid, command name), NT_AUXV, and NT_FILE (every file
 * mapping: start, end, file offset, path). Memory the core did not dump is
 * read from the file NT_FILE names for it, as gdb does: under a root
 * directory (the target's file system, as a kernel's core names files the
 * way the process saw them), else on this host (gcore names them as the
 * debugger saw them), and only from an ELF file: a core names what paths
 * it likes.
 *
 * Every byte of a core is untrusted: counts, offsets and sizes are checked
 * against the file before use, and a core cut short (a full disk, a dump
 * killed part way) is said as such, not read past.
 */
#ifndef PYPROF_CORE_FILE_H
#define PYPROF_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/procmaps.h"

struct core_file;

/*
 * One thread of the core (NT_PRSTATUS). The system call a thread was in:
 * x86-64 keeps it (orig_rax, its first argument in rdi); an AArch64 core
 * does not (the kernel forgets the number when it stops a thread in a
 * system call, and moves pc back onto the svc to restart it): there a pc
 * on `svc #0` says the thread was in system call x8, with argument x0.
 */
struct core_thread {
	pid_t tid;
	int64_t syscall;	/* the system call it was in, or -1 */
	uint64_t arg0;		/* its first argument */
	uint64_t pc, sp;
};

#define CORE_FILE_MAX_THREADS 4096
#define CORE_FILE_MAX_SEGMENTS 65536

/*
 * Open core file @path; @root: where the files it maps are found (NULL:
 * "/"). 0, or -errno with a line in @err: -ENOEXEC (not an ELF core of
 * the build's architecture), -EPROTO (its notes malformed), -EIO (truncated), -ENOENT...
 */
int core_file__open(const char *path, const char *root, struct core_file **out, char *err,
		    size_t errlen);
/* The same from an open descriptor (kept open by the core file). */
int core_file__open_fd(int fd, const char *root, struct core_file **out, char *err,
		       size_t errlen);
void core_file__free(struct core_file *cf);

/* @len bytes at @addr: from the core, else from the file mapped there.
 * 0, or -EFAULT when some byte is in neither. */
int core_file__read(struct core_file *cf, uint64_t addr, void *buf, size_t len);

pid_t core_file__pid(const struct core_file *cf);
/* The process's user (NT_PRPSINFO), (uid_t)-1 if the core does not say. */
uid_t core_file__uid(const struct core_file *cf);
/* The command name (NT_PRPSINFO's, 15 characters at most); "" if none. */
const char *core_file__comm(const struct core_file *cf);
/* The executable's path as the process saw it (the file mapping that holds
 * AT_PHDR), "" if unknown. */
const char *core_file__exe(const struct core_file *cf);
/* Its file mappings (NT_FILE), as /proc/PID/maps would show them. */
const struct procmaps *core_file__maps(const struct core_file *cf);
const struct core_thread *core_file__threads(const struct core_file *cf, size_t *n);
/* The descriptor of @map's file under the root (an ELF regular file), or
 * -errno; the caller closes it. */
int core_file__open_mapped(const struct core_file *cf, const struct mapping *map);
/* The root directory its files are found in (an O_PATH descriptor). */
int core_file__root(const struct core_file *cf);

#endif
