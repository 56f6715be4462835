/*
 * A context-switch-heavy process for issue #10's ping-pong cell (modes.py):
 * a parent and its child pass one byte back and forth over two pipes, as
 * fast as they can. Each round trip blocks each of them once: two to four
 * context switches (two when they share a CPU, four when each waits on its
 * own idle CPU). Nothing here is profiled; it measures what a sched_switch
 * program attached for another process costs everyone else.
 *
 *	pingpong COUNTERS
 *
 * COUNTERS: a file of two little-endian uint64 slots, shared with the driver
 * through the page cache: slot 0 becomes 1 once the ping-pong runs, slot 1 is
 * the parent's count of round trips. Runs until killed; the child dies with
 * its parent (PR_SET_PDEATHSIG). Built by the benchmark into its cache
 * directory (never committed as a binary).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void put(int fd)
{
	ssize_t n;

	do
		n = write(fd, "x", 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		die("write");
}

static void get(int fd)
{
	char c;
	ssize_t n;

	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		die("read");
}

int main(int argc, char **argv)
{
	volatile uint64_t *slots;
	pid_t parent = getpid();
	int ping[2], pong[2], fd;
	uint64_t n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s COUNTERS\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 16))
		die(argv[1]);
	slots = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (slots == MAP_FAILED)
		die("mmap");
	close(fd);
	if (pipe(ping) || pipe(pong))
		die("pipe");
	switch (fork()) {
	case -1:
		die("fork");
	case 0:
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			return 1;
		for (;;) {
			get(ping[0]);
			put(pong[1]);
		}
	}
	slots[0] = 1;
	for (;;) {
		put(ping[1]);
		get(pong[0]);
		slots[1] = ++n;
	}
}
