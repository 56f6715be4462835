/* SPDX-License-Identifier: MIT */
/*
 * top/top.h - `pyprof-bpf top`: a live view of the functions a Python process
 * spends its time in, refreshed every second, on the record pipeline
 * (record.h's sink). top.c is the command (options, keys, the clock);
 * aggregate.c keeps the counts; format.c makes the text of a snapshot, which
 * screen.c draws with ncurses on a terminal and plain.c prints otherwise.
 */
#ifndef PYPROF_TOP_H
#define PYPROF_TOP_H

#include <stddef.h>
#include <stdio.h>
#include "commands/record.h"
#include "commands/top/aggregate.h"

/* `pyprof-bpf top ...`: returns the exit status. */
int top__main(int argc, char **argv);

/* Everything one refresh shows. */
struct top_snapshot {
	const struct record_info *info;
	const struct record_status *status;
	const struct top_view *view;
	const struct top_thread *thread;	/* the view's thread, or NULL: all */
	const struct top_thread *process;	/* a thread of the view's process, or NULL */
	const struct top_row *rows;
	size_t nrows;
	struct top_totals totals;
	size_t nthreads, active_threads, nprocs;
	double window_s;			/* the recent view's length */
	int paused;
	const char *event;			/* the shown event's name (-e), NULL: the clock's */
	unsigned int nevents;			/* events recorded (e shows the next) */
};

/*
 * format.c: the lines of a snapshot. Each writes at most @len bytes (NUL
 * included) into @buf, cut to @width columns when @width > 0.
 */
#define TOP_HEADER_LINES 3
void top_fmt__header(const struct top_snapshot *s, int i, char *buf, size_t len, int width);
void top_fmt__columns(const struct top_snapshot *s, char *buf, size_t len, int width);
void top_fmt__row(const struct top_snapshot *s, size_t i, char *buf, size_t len, int width);

/* plain.c: one snapshot as text on @f (rows: at most that many); 0 or -errno. */
int top_plain__print(FILE *f, const struct top_snapshot *s, size_t rows);

/* screen.c: the terminal view. */
struct top_screen;
/* Take the terminal (stdout; keys from stdin, or /dev/tty). Until it is
 * closed, what is written on stderr is kept and shown after. 0 or -errno
 * with one line in @err: -ENOTTY when stdout is no terminal, or one that
 * terminfo cannot draw on (TERM=dumb, unknown). */
int top_screen__open(struct top_screen **out, char *err, size_t errlen);
/* Give the terminal back as it was, then show what stderr got meanwhile.
 * Accepts NULL. */
void top_screen__close(struct top_screen *scr);
/* Keys beyond characters, as top_screen__key() returns them. */
enum { TOP_KEY_LEFT = 0x10000, TOP_KEY_RIGHT, TOP_KEY_RESIZE, TOP_KEY_OTHER };
/* A key pressed before @until (CLOCK_MONOTONIC seconds): a character or a
 * TOP_KEY_*; -1 when none. */
int top_screen__key(struct top_screen *scr, double until);
/* Draw @s (a line of @msg at the bottom when not NULL). */
void top_screen__draw(struct top_screen *scr, const struct top_snapshot *s, const char *msg);
/* Rows the table has room for now. */
size_t top_screen__rows(struct top_screen *scr);

#endif
