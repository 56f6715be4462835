/* SPDX-License-Identifier: MIT */
/*
 * top/screen.c - the terminal view of `top`, with ncurses: the snapshot's
 * header, the column line, as many rows as fit, and a line of keys. The
 * terminal is taken with newterm() (cbreak: Ctrl-C still signals) and given
 * back with endwin(), which restores the modes it found; the alternate
 * screen (where the terminal has one) leaves the shell's lines as they were.
 * A resize comes as KEY_RESIZE (ncurses' SIGWINCH handler) and the next draw
 * fits the new size.
 *
 * Whatever is written on stderr while the screen is up (libbpf, a warning)
 * would tear it: fd 2 points to a memory file meanwhile, whose end is
 * written to the real stderr once the terminal is back.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "commands/top/top.h"
#include "util/clock.h"

#define STDERR_KEPT (64 * 1024)	/* the end of stderr shown after */
#define STDERR_MAX (1024 * 1024)	/* held meanwhile at most (then emptied) */

struct top_screen {
	SCREEN *scr;
	FILE *tty;		/* /dev/tty for keys when stdin is not the terminal */
	int err_saved;		/* our stderr while the screen is up, or -1 */
	int err_mem;		/* what fd 2 writes to meanwhile, or -1 */
	long long err_dropped;	/* bytes emptied out of it (STDERR_MAX) */
};

static const char keys_line[] =
	"q quit  o/t/n sort own/total/name  s next sort  r recent/all  l lines  "
	"[ ] thread  a all threads  P process  p pause";

/* fd 2 to a memory file until stderr_restore(). Without one, stderr stays. */
static void stderr_capture(struct top_screen *s)
{
	fflush(stderr);
	s->err_mem = memfd_create("pyprof-bpf-top-stderr", MFD_CLOEXEC);
	if (s->err_mem < 0)
		return;
	s->err_saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (s->err_saved < 0 || dup2(s->err_mem, STDERR_FILENO) < 0) {
		if (s->err_saved >= 0)
			close(s->err_saved);
		close(s->err_mem);
		s->err_saved = s->err_mem = -1;
	}
}

static void stderr_restore(struct top_screen *s)
{
	char buf[4096];
	off_t size, from;
	ssize_t n;

	if (s->err_mem < 0)
		return;
	fflush(stderr);
	dup2(s->err_saved, STDERR_FILENO);
	close(s->err_saved);
	size = lseek(s->err_mem, 0, SEEK_END);
	from = size > STDERR_KEPT ? size - STDERR_KEPT : 0;
	if (from || s->err_dropped)
		fprintf(stderr, "pyprof-bpf: [%lld bytes of messages left out]\n",
			(long long)from + s->err_dropped);
	fflush(stderr);
	if (size > 0 && lseek(s->err_mem, from, SEEK_SET) == from) {
		while ((n = read(s->err_mem, buf, sizeof(buf))) > 0)
			if (write(STDERR_FILENO, buf, (size_t)n) != n)
				break;
	}
	close(s->err_mem);
	s->err_saved = s->err_mem = -1;
}

int top_screen__open(struct top_screen **out, char *err, size_t errlen)
{
	struct top_screen *s;
	const char *term = getenv("TERM");
	FILE *in = stdin;
	char *cup;

	*out = NULL;
	if (!isatty(STDOUT_FILENO)) {
		snprintf(err, errlen, "standard output is not a terminal");
		return -ENOTTY;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->err_saved = s->err_mem = -1;
	if (!isatty(STDIN_FILENO)) {
		/* Keys from the terminal itself; without one, none. */
		s->tty = fopen("/dev/tty", "re");
		if (s->tty)
			in = s->tty;
	}
	setlocale(LC_CTYPE, "");
	s->scr = newterm(NULL, stdout, in);
	if (!s->scr) {
		snprintf(err, errlen, "the terminal (TERM=%s) has no terminfo entry that "
			 "can draw the live view", term ? term : "");
		if (s->tty)
			fclose(s->tty);
		free(s);
		return -ENOTTY;
	}
	set_term(s->scr);
	cup = tigetstr("cup");
	if (!cup || cup == (char *)-1) {
		/* TERM=dumb: it cannot place a line on the screen. */
		endwin();
		delscreen(s->scr);
		snprintf(err, errlen, "the terminal (TERM=%s) cannot address the cursor",
			 term ? term : "");
		if (s->tty)
			fclose(s->tty);
		free(s);
		return -ENOTTY;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	stderr_capture(s);
	*out = s;
	return 0;
}

void top_screen__close(struct top_screen *s)
{
	if (!s)
		return;
	endwin();
	delscreen(s->scr);
	/* The terminal is back: what stderr got meanwhile can be read. */
	stderr_restore(s);
	if (s->tty)
		fclose(s->tty);
	free(s);
}

int top_screen__key(struct top_screen *s, double until)
{
	double now;
	int ms, ch;

	(void)s;
	now = mono_s();
	ms = until > now ? (int)((until - now) * 1000 + 0.5) : 0;
	wtimeout(stdscr, ms);
	ch = wgetch(stdscr);
	switch (ch) {
	case ERR:
		return -1;
	case KEY_LEFT:
		return TOP_KEY_LEFT;
	case KEY_RIGHT:
		return TOP_KEY_RIGHT;
	case KEY_RESIZE:
		return TOP_KEY_RESIZE;
	default:
		return ch < 0x100 ? ch : TOP_KEY_OTHER;
	}
}

size_t top_screen__rows(struct top_screen *s)
{
	int h = getmaxy(stdscr);

	(void)s;
	/* The header, the column line, the keys line. */
	return h > TOP_HEADER_LINES + 2 ? (size_t)(h - TOP_HEADER_LINES - 2) : 0;
}

void top_screen__draw(struct top_screen *s, const struct top_snapshot *snap, const char *msg)
{
	int h, w, y = 0;
	size_t rows = top_screen__rows(s);
	char buf[4096];

	/* A long run's messages: memory is not let grow without bound (fd 2
	 * shares the memory file's offset, so it writes from 0 again). */
	if (s->err_mem >= 0 && lseek(s->err_mem, 0, SEEK_END) > STDERR_MAX) {
		s->err_dropped += lseek(s->err_mem, 0, SEEK_END);
		if (ftruncate(s->err_mem, 0) == 0)
			lseek(s->err_mem, 0, SEEK_SET);
	}
	getmaxyx(stdscr, h, w);
	werase(stdscr);
	for (int i = 0; i < TOP_HEADER_LINES && y < h; i++, y++) {
		top_fmt__header(snap, i, buf, sizeof(buf), w);
		if (i == 0)
			attron(A_BOLD);
		mvaddnstr(y, 0, buf, w);
		if (i == 0)
			attroff(A_BOLD);
	}
	if (y < h) {
		top_fmt__columns(snap, buf, sizeof(buf), w);
		attron(A_REVERSE);
		mvhline(y, 0, ' ', w);
		mvaddnstr(y, 0, buf, w);
		attroff(A_REVERSE);
		y++;
	}
	for (size_t i = 0; i < snap->nrows && i < rows; i++, y++) {
		top_fmt__row(snap, i, buf, sizeof(buf), w);
		mvaddnstr(y, 0, buf, w);
	}
	if (h > TOP_HEADER_LINES + 1) {
		snprintf(buf, sizeof(buf), "%s", msg ? msg : keys_line);
		attron(A_DIM);
		mvaddnstr(h - 1, 0, buf, w);
		attroff(A_DIM);
	}
	wnoutrefresh(stdscr);
	doupdate();
}
