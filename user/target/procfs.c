/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "target/procdir.h"
#include "target/procfs.h"

void procfs__comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char fn[64];
	FILE *f;

	buf[0] = '\0';
	if (tid)
		snprintf(fn, sizeof(fn), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	else
		snprintf(fn, sizeof(fn), "/proc/%d/comm", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	else
		buf[0] = '\0';
	fclose(f);
}

/*
 * What follows the comm in @pid's stat line ("pid (comm) S ppid ..."; the
 * comm may hold ')' itself: the fields follow the last one) into @buf;
 * NULL when unreadable. Read whole, not up to a newline: the comm may hold
 * one too, and a comm of "x) Z 1\n" would fake the state and the parent.
 */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
	char fn[64], *rp;
	ssize_t got;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	got = read(fd, buf, len - 1);
	close(fd);
	if (got <= 0)
		return NULL;
	buf[got] = '\0';
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

int procfs__alive(pid_t pid)
{
	char buf[512];
	const char *st = stat_fields(pid, buf, sizeof(buf));

	/* A zombie has exited already. */
	return st && *st != 'Z' && *st != 'X';
}

int procfs__status_nspid(const char *line, pid_t *out)
{
	char *end;
	long v = 0;
	int err = -EINVAL;

	if (strncmp(line, "NSpid:", 6))
		return -ENOENT;
	/* the last id is the one in the innermost namespace */
	for (line += 6;; line = end) {
		line += strspn(line, " \t");
		if (!*line || *line == '\n')
			break;
		errno = 0;
		v = strtol(line, &end, 10);
		if (end == line || errno || v <= 0 || v > INT_MAX ||
		    (*end && !strchr(" \t\n", *end)))
			return -EINVAL;
		err = 0;
	}
	if (!err)
		*out = (pid_t)v;
	return err;
}

int procfs__nspid(pid_t pid, pid_t tid, pid_t *out)
{
	char fn[64], line[256];
	int err = -ENOENT;
	FILE *f;

	if (tid)
		snprintf(fn, sizeof(fn), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	else
		snprintf(fn, sizeof(fn), "/proc/%d/status", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (err == -ENOENT && fgets(line, sizeof(line), f))
		err = procfs__status_nspid(line, out);
	fclose(f);
	return err;
}

int procfs__thread_alive(pid_t pid, pid_t tid)
{
	char fn[64];

	snprintf(fn, sizeof(fn), "/proc/%d/task/%d", (int)pid, (int)tid);
	return tid > 0 && access(fn, F_OK) == 0;
}

/* The parent of @pid from its stat line; 0 when unreadable. */
static pid_t parent_of(pid_t pid)
{
	char buf[512];
	const char *st = stat_fields(pid, buf, sizeof(buf));
	int ppid = 0;

	if (!st || sscanf(st, "%*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

int procfs__descendants(pid_t pid, pid_t *out, size_t max, size_t *n)
{
	pid_t *all = NULL, *par = NULL;
	size_t nall = 0, cap = 0, k = 0, head = 0;
	struct procdir it;
	pid_t v;
	int rc;

	*n = 0;
	rc = procdir__open_pids(&it);
	if (rc)
		return rc;
	while (procdir__next(&it, &v)) {
		if (v == pid)
			continue;
		if (nall == cap) {
			size_t nc = cap ? cap * 2 : 256;
			pid_t *a = realloc(all, nc * sizeof(*a)), *b;

			if (!a) {
				rc = -ENOMEM;
				break;
			}
			all = a;
			b = realloc(par, nc * sizeof(*b));
			if (!b) {
				rc = -ENOMEM;
				break;
			}
			par = b;
			cap = nc;
		}
		all[nall] = v;
		par[nall++] = parent_of(v);
	}
	procdir__close(&it);
	/* Breadth first from @pid: parents come before their children. */
	for (pid_t cur = pid; !rc; cur = out[head++]) {
		for (size_t i = 0; i < nall; i++) {
			if (par[i] != cur || !procfs__alive(all[i]))
				continue;
			if (k == max) {
				rc = -E2BIG;
				break;
			}
			out[k++] = all[i];
		}
		if (head == k)
			break;
	}
	free(all);
	free(par);
	*n = k;
	return rc;
}

int procfs__stat_state(const char *buf, size_t len, char *state)
{
	size_t rp = len;
	char c;

	while (rp > 0 && buf[rp - 1] != ')')
		rp--;
	/* rp: just past the last ')'; the line goes on with " S" */
	if (rp == 0 || !memchr(buf, '(', rp - 1) || rp + 2 > len || buf[rp] != ' ')
		return -EINVAL;
	c = buf[rp + 1];
	if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
		return -EINVAL;
	if (rp + 2 < len && buf[rp + 2] != ' ' && buf[rp + 2] != '\n')
		return -EINVAL;
	*state = c;
	return 0;
}

int procfs__task_stat_open(pid_t pid, pid_t tid)
{
	char fn[64];
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	return fd;
}

int procfs__stat_fd_state(int fd, char *state)
{
	/* A stat line is ~300 bytes; the state is within its first 30 (pid
	 * at most 7 digits, comm at most 15 bytes): a line cut at the end
	 * of this buffer still has it. */
	char buf[512];
	ssize_t got = pread(fd, buf, sizeof(buf), 0);

	if (got < 0)
		return -errno;
	if (got == 0)
		return -ESRCH;
	return procfs__stat_state(buf, (size_t)got, state);
}

/* One hex or decimal number at *@s, which moves past it: 0 or -EINVAL. */
static int scan_num(const char **s, const char *end, uint64_t *out, int hex)
{
	const char *p = *s;
	uint64_t v = 0;
	int digits = 0;

	if (hex) {
		if (end - p < 2 || p[0] != '0' || p[1] != 'x')
			return -EINVAL;
		p += 2;
	}
	for (; p < end && digits < 17; p++, digits++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' :
			hex && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (d < 0)
			break;
		v = v * (hex ? 16 : 10) + (uint64_t)d;
	}
	if (!digits || digits > 16)
		return -EINVAL;
	*s = p;
	*out = v;
	return 0;
}

int procfs__syscall_parse(const char *buf, size_t len, long *nr, uint64_t *arg0)
{
	const char *p = buf, *end = buf + len;
	uint64_t v;

	if (len >= 7 && memcmp(buf, "running", 7) == 0)
		return -EAGAIN;
	*arg0 = 0;
	if (len >= 2 && memcmp(buf, "-1", 2) == 0) {
		*nr = -1;	/* blocked, not in a system call */
		return 0;
	}
	if (scan_num(&p, end, &v, 0) || v > 4095)
		return -EINVAL;
	*nr = (long)v;
	if (p == end || *p++ != ' ' || scan_num(&p, end, arg0, 1))
		return -EINVAL;
	return 0;
}

/* One read of /proc/PID/task/TID/@name into @buf: the bytes read, or -errno
 * (-ESRCH: the thread is gone). */
static ssize_t read_task_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t len)
{
	char fn[64];
	ssize_t got;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	got = read(fd, buf, len);
	if (got < 0)
		got = -errno;
	close(fd);
	return got;
}

int procfs__task_syscall(pid_t pid, pid_t tid, long *nr, uint64_t *arg0)
{
	char buf[256];
	ssize_t got = read_task_file(pid, tid, "syscall", buf, sizeof(buf));

	if (got < 0)
		return (int)got;
	return procfs__syscall_parse(buf, (size_t)got, nr, arg0);
}

void procfs__kstack_parse(const char *buf, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	if (!outlen)
		return;
	for (size_t i = 0; i < len;) {
		size_t end = i, name, stop;

		while (end < len && buf[end] != '\n')
			end++;
		/* "[<0>] " then the name up to its "+0x" offset */
		name = i;
		while (name < end && buf[name] != ' ')
			name++;
		while (name < end && buf[name] == ' ')
			name++;
		stop = name;
		while (stop < end && buf[stop] != '+' && buf[stop] != ' ')
			stop++;
		if (stop > name && o + (stop - name) + 2 <= outlen) {
			if (o)
				out[o++] = '\n';
			memcpy(out + o, buf + name, stop - name);
			o += stop - name;
		} else if (stop > name) {
			break;		/* no room: whole names only */
		}
		i = end + 1;
	}
	out[o] = '\0';
}

int procfs__task_kstack(pid_t pid, pid_t tid, char *out, size_t len)
{
	char buf[4096];
	ssize_t got;

	if (len)
		out[0] = '\0';
	got = read_task_file(pid, tid, "stack", buf, sizeof(buf));
	if (got < 0)
		return (int)got;
	procfs__kstack_parse(buf, (size_t)got, out, len);
	return 0;
}

int procfs__start_ns(pid_t pid, int64_t *out)
{
	struct timespec real, boot;
	unsigned long long ticks;
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	long hz = sysconf(_SC_CLK_TCK);
	int field = 3;	/* the state is field 3; starttime is field 22 */

	if (!f)
		return -ESRCH;
	for (; field < 22 && *f; f++)
		if (*f == ' ')
			field++;
	if (field != 22 || sscanf(f, "%llu", &ticks) != 1 || hz <= 0)
		return -EINVAL;
	if (clock_gettime(CLOCK_REALTIME, &real) || clock_gettime(CLOCK_BOOTTIME, &boot))
		return -errno;
	*out = (real.tv_sec - boot.tv_sec) * 1000000000ll + (real.tv_nsec - boot.tv_nsec) +
	       (int64_t)(ticks / (unsigned long long)hz) * 1000000000ll +
	       (int64_t)(ticks % (unsigned long long)hz) * (1000000000ll / hz);
	return 0;
}
