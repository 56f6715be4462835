// SPDX-License-Identifier: MIT
/*
 * pidwatch.c - process liveness through a pidfd: it polls readable once
 * the process has exited, whether or not it is our child.
 */
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "target/pidwatch.h"
#include "target/procfs.h"

void pidwatch__open(struct pidwatch *w, pid_t pid)
{
	w->pid = pid;
#ifdef SYS_pidfd_open
	w->fd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
	w->fd = -1;
#endif
	if (w->fd < 0)
		w->fd = -1;
}

void pidwatch__close(struct pidwatch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

bool pidwatch__alive(const struct pidwatch *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLIN };
	int n;

	if (w->fd < 0)
		return procfs__alive(w->pid);
	n = poll(&p, 1, 0);

	if (n == 0)
		return true;
	if (n == 1 && (p.revents & (POLLIN | POLLHUP)))
		return false;	/* exited (or reaped) */
	/* poll failed, or POLLERR/POLLNVAL: nothing said of the process */
	return procfs__alive(w->pid);
}
