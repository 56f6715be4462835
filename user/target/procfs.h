/* SPDX-License-Identifier: MIT */
/* procfs.h - small facts about a process from /proc: names and liveness. */
#ifndef PYPROF_PROCFS_H
#define PYPROF_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The comm of @pid (@tid 0) or of its thread @tid; "" when it is gone. */
void procfs__comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* 1 while @pid exists and is not a zombie. */
int procfs__alive(pid_t pid);
/* The id @pid (@tid 0) or its thread @tid has in its own (innermost) PID
 * namespace (NSpid): 0, -ESRCH (gone), -ENOENT (no NSpid line), -errno. */
int procfs__nspid(pid_t pid, pid_t tid, pid_t *out);
/* The innermost id of one status line ("NSpid:\t1234\t5\n", NUL-terminated)
 * into *out: 0, -ENOENT (another line), -EINVAL (no id, or not one). */
int procfs__status_nspid(const char *line, pid_t *out);
/* 1 while thread @tid of @pid exists. */
int procfs__thread_alive(pid_t pid, pid_t tid);
/*
 * The live descendants of @pid (children, grandchildren...), parents
 * before their children, at most @max of them into @out. Sets *n; returns
 * 0, -E2BIG when there were more, or -errno.
 */
int procfs__descendants(pid_t pid, pid_t *out, size_t max, size_t *n);

/*
 * The state letter of one stat line ("pid (comm) S ppid ..."), @len bytes of
 * @buf (no NUL needed), into *state. The comm may hold spaces and ')': the
 * state follows the last ')'. Returns 0, or -EINVAL when @buf is no stat line.
 */
int procfs__stat_state(const char *buf, size_t len, char *state);
/*
 * Open /proc/@pid/task/@tid/stat to be read again and again with
 * procfs__stat_fd_state() (the caller closes it). Returns the fd or -errno.
 */
int procfs__task_stat_open(pid_t pid, pid_t tid);
/*
 * The state letter of the task whose stat @fd is open, read afresh (one
 * pread at offset 0). Returns 0, -ESRCH when the task is gone (its fd stays
 * bound to it: a tid reused later is another task), -EINVAL, or -errno.
 */
int procfs__stat_fd_state(int fd, char *state);

/*
 * The system call thread @tid of @pid is in, from /proc/PID/task/TID/syscall
 * (root or ptrace access): *nr its number and *arg0 its first argument; *nr
 * -1 when it is blocked outside any. -EAGAIN while it runs (the kernel does
 * not say), -ESRCH when gone, -EINVAL for text not of that file's form.
 */
int procfs__task_syscall(pid_t pid, pid_t tid, long *nr, uint64_t *arg0);
/* The text of one such file (@len bytes of @buf, no NUL needed), parsed. */
int procfs__syscall_parse(const char *buf, size_t len, long *nr, uint64_t *arg0);
/*
 * Thread @tid's kernel stack (/proc/PID/task/TID/stack, root only): its
 * function names, innermost first, one per line, into @out (NUL-terminated,
 * cut at a whole name). Empty for a thread running in user space. 0 or
 * -errno.
 */
int procfs__task_kstack(pid_t pid, pid_t tid, char *out, size_t len);
/* The names of a stack file's lines ("[<0>] name+0x1/0x2"), as above. */
void procfs__kstack_parse(const char *buf, size_t len, char *out, size_t outlen);

/*
 * When @pid started, in ns since the epoch (CLOCK_REALTIME), to the
 * kernel's tick (its stat's starttime, on the boot clock). 0 or -errno.
 */
int procfs__start_ns(pid_t pid, int64_t *out);

#endif
