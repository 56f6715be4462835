/* SPDX-License-Identifier: MIT */
/*
 * rawrec.h - raw recordings: the symbolized samples of one recording, saved
 * so that `pyprof-bpf report` can write any output format later, without the
 * target. A reader gives back exactly the struct out_sample values the
 * writer was given, so the output writers (whose output depends only on
 * their samples and options) write the same bytes from either.
 *
 * THE FILE FORMAT (version 2: version 1 and 'C' records)
 *
 * A gzip stream (RFC 1952; an uncompressed file is read as well) of
 *
 *   magic     8 bytes: 0x89 'p' 'y' 'p' 'r' 'o' 'f' '\n'
 *   version   2 bytes, little-endian: 2 (1: no 'C' records; still read)
 *   records   each: type (1 byte), payload length (uvarint, at most
 *             RAWREC_MAX_RECORD), payload
 *
 * In payloads, "u" is an unsigned LEB128 varint (at most 10 bytes, at most
 * 2^64 - 1), "s" a zigzag-encoded signed varint, "str" a u length followed by
 * that many bytes. The records:
 *
 *   'H' header, first, once: u pid, str comm, str Python version, str backend
 *       ("bpf" or "remote"), u sampling rate (Hz), u period (ns), u depth
 *       limit, u start time (CLOCK_REALTIME ns), u start time
 *       (CLOCK_MONOTONIC ns, the samples' clock); then, each appended
 *       later (an older writer's header ends before it): str mode ("cpu",
 *       "off-cpu"...), str event (-e's, as perf names it; empty: the clock)
 *   'S' string: the payload is its bytes (any bytes but NUL). String ids
 *       count from 1 in the order the records come; id 0 means no string.
 *   'F' frame: u function string id, u file string id, s line,
 *       s first line. Frame ids count from 0 in order.
 *   'P' sample: u tid, u thread name string id, u cpu, s time minus the
 *       previous sample's time (the first: minus 0), u period (ns),
 *       u status (enum sample_status), u number of frames, then that many
 *       u frame ids, innermost first
 *   'N' a frame that is not Python code (--native), in the same id space
 *       as 'F': u kind (5: a native function, function = its symbol, file
 *       = its DSO's path; 1: a marker such as [unwind-failed]), u function
 *       string id, u file string id
 *   'X' extras of the sample that follows (written only when it has any):
 *       u event string id (0: the default, cpu-clock), u number of leaf
 *       frames, then per frame u kind (1: a marker such as [GIL wait],
 *       4: a kernel function) and u name string id, outermost first
 *   'M' a DSO's mapping, for the 'A' records after it (--native): u start,
 *       u end (its mappings, first to last), u base (where its file offset 0
 *       is mapped), str build id (raw bytes, at most 64; empty: none).
 *       Mapping ids count from 1 in order.
 *   'A' addresses of the sample that follows (written only when it has
 *       any): u number of its native frames (each frame of kind 5, in the
 *       sample's order; 0 or all of them), then per frame u pc, u offset
 *       into its symbol, u mapping id (0: none); then u number of leaf
 *       frames (0 or the 'X' record's count), per frame u address, u offset
 *       into its symbol (0, 0: unknown)
 *   'C' a source file of the Python frames (--format heatmap reads them):
 *       str path (as the frames' file string), u mtime (CLOCK_REALTIME ns,
 *       0: unknown), u flags (enum out_src_flags: changed since the
 *       recording started, unreadable, too big, binary), str text (at most
 *       OUT_SRC_MAX_FILE bytes, no NUL; empty when a flag says there is no
 *       text). Anywhere before 'E': the recorder reads a file between
 *       polls, so its record follows the samples of the poll that first
 *       named it (earlier recorders put it before them); a path has one
 *       'C' record at most, a recording OUT_SRC_MAX_FILES. Readers keep
 *       them until the end.
 *   'E' end, last: u number of 'P' records, u samples lost, u truncated,
 *       u errors, u unresolved frames, u duration (ns), u flags
 *       (RAWREC_END_*)
 *
 * A string or frame record comes before the first sample that uses it; a pid
 * or tid is stored as its 32-bit two's complement. Later writers of version
 * 1 may append fields to 'H' and 'E': readers skip what follows the fields
 * they know there. Anything else that does not fit (an id not yet defined,
 * bytes left over in a record, a second header...) is corruption.
 *
 * Readers of version 1 call an unknown record type corruption: a 'C' record
 * would stop them halfway, after some samples. So files with 'C' records
 * say version 2, which such a reader refuses at once ("use a newer
 * pyprof-bpf"). From version 2 on, a record whose type is a lower-case
 * letter is optional: a reader that does not know it skips it, so later
 * additions of that kind need no new version.
 *
 * A recording that was killed has no 'E' record (and its gzip stream stops
 * short): the reader returns every complete sample before the cut and says
 * that the file is truncated. The writer flushes its compressed stream about
 * once a second of samples, so a killed recording loses about that much.
 */
#ifndef PYPROF_RAWREC_H
#define PYPROF_RAWREC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "output/sources.h"		/* struct out_sources */
#include "types/out_sample.h"

#define RAWREC_VERSION 2
#define RAWREC_VERSION_OLDEST 1	/* the oldest version read */
#define RAWREC_MAX_RECORD (1u << 20)	/* payload bytes */

/* What the recording is of: the 'H' record. */
struct rawrec_info {
	pid_t pid;
	const char *comm;		/* the samples' comm */
	const char *python_version;	/* "3.14.0" */
	const char *backend;		/* "bpf" or "remote" */
	uint32_t freq_hz;
	uint64_t period_ns;
	uint32_t max_frames;
	uint64_t start_time_ns;		/* CLOCK_REALTIME at start (pprof's time) */
	uint64_t start_mono_ns;		/* CLOCK_MONOTONIC at start */
	const char *mode;		/* --mode: "cpu" ...; NULL (read: older files) */
	const char *event;		/* -e's event; NULL: the clock (and older files) */
};

#define RAWREC_END_TARGET_EXITED 1u	/* it stopped because the target exited */

/* How the recording ended: the 'E' record. */
struct rawrec_end {
	uint64_t samples;		/* samples in the file */
	uint64_t lost, truncated, errors;	/* struct sampler_stats */
	uint64_t unresolved;		/* frames the symbolizer could not read */
	uint64_t duration_ns;
	uint32_t flags;			/* RAWREC_END_* */
};

/* 1 when --format @format, or without one @path's extension (.pyprof), asks for a raw recording. */
int rawrec__wanted(const char *format, const char *path);

struct rawrec_writer;

/*
 * Create @path (NULL or "-": stdout, unless it is a terminal) and write the
 * header. On failure returns -errno and writes one line into @err.
 */
int rawrec_writer__open(const char *path, const struct rawrec_info *info,
			struct rawrec_writer **out, char *err, size_t errlen);
/*
 * Append one sample (the output.h contract: its strings need only live for
 * the call). Once the sample's strings and frames have been seen, this costs
 * no allocation. Returns 0, -ENOMEM, -E2BIG (a string longer than
 * RAWREC_MAX_RECORD) or the first write error, which every later call
 * returns too.
 */
int rawrec_writer__add(struct rawrec_writer *w, const struct out_sample *s);
/*
 * Append a 'C' record: @src's path, time, flags and text (any time before
 * rawrec_writer__close()). Returns 0, -ENOMEM, -E2BIG (text over
 * OUT_SRC_MAX_FILE) or the first write error.
 */
int rawrec_writer__add_source(struct rawrec_writer *w, const struct out_source *src);
/*
 * Write the end record (@end's samples field is ignored: the writer counts
 * them) and close the file. Returns 0 or the first error of the recording.
 * Call it once; without it the file stays a truncated recording.
 */
int rawrec_writer__close(struct rawrec_writer *w, const struct rawrec_end *end);
/* Frees (closing the file if rawrec_writer__close() was not called). Accepts NULL. */
void rawrec_writer__free(struct rawrec_writer *w);

struct rawrec_reader;

/*
 * Open @path ("-": stdin) and read its header. On failure returns -errno and
 * writes one line into @err: the open error, -EPROTO not a raw recording,
 * -ENOTSUP a newer format version, -ENODATA empty or truncated before the
 * header was complete, -EBADMSG corrupt, -ENOMEM.
 */
int rawrec_reader__open(const char *path, struct rawrec_reader **out, char *err,
			size_t errlen);
/* The header. Valid until rawrec_reader__free(). */
const struct rawrec_info *rawrec_reader__info(const struct rawrec_reader *r);
/*
 * Read the next sample into @s: its strings and frames stay valid until the
 * next call. Returns 1 for a sample; 0 when there are no more (the file is
 * complete, or truncated: see rawrec_reader__end()); or -errno with one line
 * in @err: -EBADMSG corrupt, -EIO, -ENOMEM. An error is final.
 */
int rawrec_reader__next(struct rawrec_reader *r, struct out_sample *s, char *err,
			size_t errlen);
/*
 * Once next() returned 0: the end record of a complete file, or NULL when the
 * file is truncated (what came before the cut was returned).
 */
const struct rawrec_end *rawrec_reader__end(const struct rawrec_reader *r);
/* The 'C' records read so far (all of them once next() returned 0). */
const struct out_sources *rawrec_reader__sources(const struct rawrec_reader *r);
/* Samples returned so far. */
uint64_t rawrec_reader__samples(const struct rawrec_reader *r);
/* Accepts NULL. */
void rawrec_reader__free(struct rawrec_reader *r);

#endif
