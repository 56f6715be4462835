/*
 * The agent cell's store (agent.py): a minimal HTTP/1.1 server on the
 * loopback address that reads every request (headers, then Content-Length
 * bytes of body) and answers 200 with an empty body, on connections kept
 * alive or not. It stands for Pyroscope or Parca without costing what they
 * would; it is a C process, so `pyprof-bpf agent -a` never samples it.
 *
 *	sink PORT COUNTERS
 *
 * PORT 0 picks a free port. COUNTERS: a file of four little-endian uint64
 * slots, shared with the driver through the page cache: slot 0 the port
 * listened on (set once listening), slot 1 requests answered 200, slot 2
 * body bytes received, slot 3 requests refused (400/411: no length, a header
 * too long). Runs until killed; dies with its parent (PR_SET_PDEATHSIG).
 * Built by the benchmark into its cache directory (never committed as a
 * binary).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXCONN 64
#define HDRMAX 16384

struct conn {
	int fd;
	size_t have;		/* header bytes buffered */
	long long body_left;	/* -1: reading headers */
	char hdr[HDRMAX];
};

static volatile uint64_t *slots;
static struct conn conns[MAXCONN];

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void answer(struct conn *c, const char *status)
{
	char buf[128];
	int n = snprintf(buf, sizeof(buf), "HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n", status);
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(c->fd, p, (size_t)n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (int)w;
	}
}

static void drop(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
}

/* The headers end at @end: the body's length, or -1 without one. */
static long long content_length(struct conn *c, size_t end)
{
	char *line = c->hdr, *stop = c->hdr + end;

	while (line < stop) {
		char *eol = memchr(line, '\n', (size_t)(stop - line));

		if (!eol)
			break;
		if (!strncasecmp(line, "Content-Length:", 15))
			return strtoll(line + 15, NULL, 10);
		line = eol + 1;
	}
	return -1;
}

/* Consume what @c buffered: headers, then the body, request after request. */
static void advance(struct conn *c)
{
	for (;;) {
		if (c->body_left < 0) {
			char *end = memmem(c->hdr, c->have, "\r\n\r\n", 4);
			size_t used;

			if (!end) {
				if (c->have == HDRMAX) {
					slots[3]++;
					answer(c, "400 Bad Request");
					drop(c);
				}
				return;
			}
			used = (size_t)(end - c->hdr) + 4;
			c->body_left = content_length(c, used);
			if (c->body_left < 0) {
				slots[3]++;
				answer(c, "411 Length Required");
				drop(c);
				return;
			}
			memmove(c->hdr, c->hdr + used, c->have - used);
			c->have -= used;
		}
		/* the body: what is buffered counts, the rest comes from reads */
		size_t take = c->have < (size_t)c->body_left ? c->have : (size_t)c->body_left;

		slots[2] += take;
		c->body_left -= (long long)take;
		memmove(c->hdr, c->hdr + take, c->have - take);
		c->have -= take;
		if (c->body_left > 0)
			return;
		slots[1]++;
		answer(c, "200 OK");
		c->body_left = -1;
		if (!c->have)
			return;
	}
}

static void on_readable(struct conn *c)
{
	char big[65536];
	ssize_t n;

	if (c->body_left > 0) {	/* straight into the body */
		size_t want = (size_t)c->body_left < sizeof(big) ? (size_t)c->body_left : sizeof(big);

		n = read(c->fd, big, want);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				return;
			drop(c);
			return;
		}
		slots[2] += (uint64_t)n;
		c->body_left -= n;
		if (!c->body_left) {
			slots[1]++;
			answer(c, "200 OK");
			c->body_left = -1;
		}
		return;
	}
	n = read(c->fd, c->hdr + c->have, HDRMAX - c->have);
	if (n <= 0) {
		if (n < 0 && errno == EINTR)
			return;
		drop(c);
		return;
	}
	c->have += (size_t)n;
	advance(c);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	int lfd, fd, one = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: %s PORT COUNTERS\n", argv[0]);
		return 2;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL))
		die("prctl");
	signal(SIGPIPE, SIG_IGN);
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 32))
		die(argv[2]);
	slots = mmap(NULL, 32, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (slots == MAP_FAILED)
		die("mmap");
	close(fd);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 64))
		die("bind/listen");
	if (getsockname(lfd, (struct sockaddr *)&sa, &salen))
		die("getsockname");
	for (int i = 0; i < MAXCONN; i++)
		conns[i].fd = -1;
	slots[0] = ntohs(sa.sin_port);
	for (;;) {
		struct pollfd pfd[MAXCONN + 1];
		int map[MAXCONN + 1], n = 0;

		pfd[n].fd = lfd;
		pfd[n++].events = POLLIN;
		for (int i = 0; i < MAXCONN; i++)
			if (conns[i].fd >= 0) {
				map[n] = i;
				pfd[n].fd = conns[i].fd;
				pfd[n++].events = POLLIN;
			}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (int k = 1; k < n; k++)
			if (pfd[k].revents)
				on_readable(&conns[map[k]]);
		if (pfd[0].revents & POLLIN) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			int i;

			if (cfd < 0)
				continue;
			for (i = 0; i < MAXCONN && conns[i].fd >= 0; i++)
				;
			if (i == MAXCONN) {
				close(cfd);
				continue;
			}
			conns[i].fd = cfd;
			conns[i].have = 0;
			conns[i].body_left = -1;
		}
	}
}
