/* SPDX-License-Identifier: MIT */
/*
 * spool.h - profiles waiting on disk for their stores.
 *
 * A spool is a directory (0700) with one queue (a subdirectory) per store
 * and a .tmp/ where profiles are written. An entry is named after its
 * window's start and its process, "<from, ms, 13 digits>-<pid, 10 digits>",
 * so a queue's entries sorted by name are in the order they must be
 * delivered. An entry is two files: ENTRY.meta (its labels and times,
 * "key=value" lines) and ENTRY.pb.gz (the gzip'd pprof); the profile is
 * linked into a queue last, so a queue lists only whole entries. Queues
 * outlive the agent: the next one with the same spool delivers them.
 *
 * The bounds (total bytes, age) hold across all queues: past them the
 * oldest entries are dropped, and counted.
 */
#ifndef PYPROF_AGENT_SPOOL_H
#define PYPROF_AGENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPOOL_ENTRY_LEN 32	/* "<13>-<10>" and a NUL, with room */
#define SPOOL_META_MAX (64 * 1024)
#define SPOOL_BODY_MAX (256u << 20)	/* no pprof of one window is near this */

struct spool;

/* Open (create) the spool at @dir with bounds @max_bytes and @max_age_s;
 * files half-written by an agent that died are removed. 0 or -errno with
 * one line in @err. */
int spool__open(const char *dir, uint64_t max_bytes, uint64_t max_age_s, struct spool **out,
		char *err, size_t errlen);
void spool__free(struct spool *s);

/* The queue named @name (created): its directory into @path. 0 or -errno. */
int spool__queue(struct spool *s, const char *name, char *path, size_t len);

/* The entry of window @from_ms's profile of @pid, into @entry. */
void spool__entry_name(uint64_t from_ms, pid_t pid, char *entry, size_t len);
/* Where the profile of @entry is written before spool__publish(). */
void spool__tmp_path(const struct spool *s, const char *entry, char *path, size_t len);

/*
 * Put @entry (its profile written at its tmp path, @meta its text) into
 * every queue of @queues (directories from spool__queue()), then remove
 * the tmp file. 0 or -errno: a queue it could not be put in misses it (the
 * caller says so).
 */
int spool__publish(struct spool *s, const char *entry, const char *meta,
		   char *const *queues, size_t nqueues);

/* Drop the oldest entries of all queues while the spool is past a bound
 * (@now_s: UNIX time); *dropped counts them. 0 or -errno. */
int spool__enforce(struct spool *s, uint64_t now_s, uint64_t *dropped);

/* ---- A queue, for its sender (any thread: these touch only @qdir) ---- */

/* An entry's name. */
struct spool_entry {
	char name[SPOOL_ENTRY_LEN];
};
/*
 * The entries of @qdir, oldest first: *out (malloc'd; NULL when empty), *n.
 * Entries published later sort after these (a window closes after those
 * before it), so a sender delivers a listing to its end before the next.
 * 0 or -errno.
 */
int spool_queue__list(const char *qdir, struct spool_entry **out, size_t *n);
/* @entry's profile (*body, *blen) and meta text (*meta, NUL-terminated),
 * malloc'd. 0 or -errno (-ENOENT: dropped meanwhile). */
int spool_queue__read(const char *qdir, const char *entry, void **body, size_t *blen,
		      char **meta);
/* Remove @entry (delivered or refused for good). */
void spool_queue__remove(const char *qdir, const char *entry);

/* The value of @key in meta text @meta into @out; -ENOENT when absent. */
int spool_meta__get(const char *meta, const char *key, char *out, size_t len);

#endif
