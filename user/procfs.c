/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "procfs.h"

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

int procfs__alive(pid_t pid)
{
	char fn[64], buf[512], *rp;
	int alive = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	/* "pid (comm) S ...": the comm may hold ')' itself, the state follows
	 * the last one. A zombie has exited already. */
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')))
		alive = !(rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
	fclose(f);
	return alive;
}

int procfs__thread_alive(pid_t pid, pid_t tid)
{
	char fn[64];

	snprintf(fn, sizeof(fn), "/proc/%d/task/%d", (int)pid, (int)tid);
	return tid > 0 && access(fn, F_OK) == 0;
}
