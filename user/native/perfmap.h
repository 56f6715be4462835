/* SPDX-License-Identifier: MIT */
/*
 * perfmap.h - names for JIT code from the target's perf map, as perf
 * script gives them.
 *
 * A JIT that wants its code named by profilers writes /tmp/perf-PID.map
 * (PID as the process knows itself, in its own PID namespace): a line per
 * piece of code, "START SIZE NAME", START and SIZE in hex. CPython writes
 * one with -X perf (each trampoline copy is "py::qualname:filename"), and
 * so do other runtimes. perf reads it for addresses in anonymous memory and
 * prints the file as the frame's DSO; so does this. The file is opened
 * inside the target's root (its /tmp; rootfs.h), only when the target's
 * user owns it, and read again when an address is not found and the file
 * has changed since.
 *
 * Not thread-safe.
 */
#ifndef PYPROF_NATIVE_PERFMAP_H
#define PYPROF_NATIVE_PERFMAP_H

#include <stdint.h>
#include <sys/types.h>

struct perfmap;

/* 0, -ENOMEM; a process without a perf map is not an error (no names). */
int perfmap__new(pid_t pid, struct perfmap **out);
void perfmap__free(struct perfmap *m);
/*
 * The name of the code holding @addr and its start into *@start; NULL when
 * none. Later lines win over earlier ones for the same address (code
 * replaced). Names live until the map is freed.
 */
const char *perfmap__lookup(struct perfmap *m, uint64_t addr, uint64_t *start);
/* Lines of a map's text added as if read from the file (tests, fuzzing);
 * a last line without its newline is ignored. 0 or -ENOMEM. */
int perfmap__parse(struct perfmap *m, const char *text, size_t len);
/* The file as the target names it ("/tmp/perf-1234.map"). */
const char *perfmap__path(const struct perfmap *m);
/* Why the file was not read at the last try: -EPERM (not the target's
 * user's), -EINVAL (not a regular file), -ELOOP (a symlink to nothing in
 * its root), -EFBIG; 0 when it was, or there is none. */
int perfmap__refused(const struct perfmap *m);
/* Entries read (for tests and statistics). */
size_t perfmap__count(const struct perfmap *m);

#endif
