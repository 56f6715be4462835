/* SPDX-License-Identifier: MIT */
/*
 * linetable.h - decoding of CPython 3.11+ location tables (code.co_linetable,
 * PEP 626 and PEP 657; the format is described in CPython's
 * Objects/locations.md).
 *
 * The table is untrusted input read from another process: every function
 * here checks each byte against the end of the buffer, loops at most once
 * per byte, and keeps all line and column arithmetic inside int.
 *
 * Offsets are in bytes from the start of co_code_adaptive, i.e. the
 * instruction index (code unit index) times 2, which is what
 * PyCode_Addr2Line() takes.
 *
 * Entries are checked strictly: the first byte of an entry must have bit 7
 * set and every other byte must have it clear (CPython's compiler only
 * writes such tables, and its own backwards iteration relies on it), so a
 * table cut or corrupted in the middle of an entry is reported as malformed
 * instead of being decoded as garbage.
 */
#ifndef PYPROF_LINETABLE_H
#define PYPROF_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of an instruction that has no location (f_lineno is None). */
#define LINETABLE_NO_LINE	(-1)

/*
 * Tables longer than this are rejected with -EINVAL: CPython code objects
 * are far smaller, and the bound keeps every offset computation exact.
 */
#define LINETABLE_MAX_LEN	((size_t)1 << 30)

/* One entry of a location table. */
struct linetable_range {
	int64_t start;		/* first byte offset covered */
	int64_t end;		/* one past the last byte offset covered */
	int line;		/* LINETABLE_NO_LINE for an entry without location */
	int end_line;		/* -1 when unknown */
	int col;		/* 0-based column in UTF-8 bytes, -1 when unknown */
	int end_col;		/* -1 when unknown */
};

/*
 * linetable__line_at() - the line of the instruction at byte_offset.
 * @table, @len:	co_linetable bytes
 * @firstlineno:	co_firstlineno
 * @byte_offset:	instruction index * 2
 * @line:		out: what frame.f_lineno / PyCode_Addr2Line() gives:
 *			@firstlineno for a negative offset (the table is not
 *			read then, as CPython does), LINETABLE_NO_LINE for an
 *			instruction without location.
 *
 * Returns 0, -EINVAL for a malformed or truncated table (or a NULL
 * argument), -ERANGE when the offset lies beyond the end of the table.
 */
int linetable__line_at(const uint8_t *table, size_t len, int firstlineno,
		       int64_t byte_offset, int *line);

/*
 * linetable__range_at() - the whole entry covering byte_offset, with its
 * columns, so that a caller can cache [start, end) -> line.
 * Same return values as linetable__line_at(); a negative offset gives
 * -ERANGE here, since no entry covers it.
 */
int linetable__range_at(const uint8_t *table, size_t len, int firstlineno,
			int64_t byte_offset, struct linetable_range *range);

/*
 * linetable__ranges() - decode the whole table, one range per entry, in
 * order (adjacent entries may have the same line: merge them if wanted).
 * @out:	array of @cap entries, may be NULL when @cap is 0
 * @count:	out: the number of entries in the table, also when it does
 *		not fit, so that a caller can size @out and call again
 *
 * The whole table is validated. Returns 0, -EINVAL for a malformed table,
 * -ENOSPC when the table has more than @cap entries (the first @cap are
 * filled in).
 */
int linetable__ranges(const uint8_t *table, size_t len, int firstlineno,
		      struct linetable_range *out, size_t cap, size_t *count);

/*
 * linetable__whole_prefix() - how many leading bytes of a table cut at
 * @len (a bounded copy of a longer one) are whole entries: what
 * linetable__ranges() decodes once the cut entry is left out. 0 when even
 * the first entry is cut or malformed.
 */
size_t linetable__whole_prefix(const uint8_t *table, size_t len, int firstlineno);

#endif /* PYPROF_LINETABLE_H */
