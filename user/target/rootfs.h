/* SPDX-License-Identifier: MIT */
/*
 * rootfs.h - opening a file a target process names, as that process sees
 * it, without letting the target point us anywhere else.
 *
 * We run as root and the target may be in a container: a path under
 * /proc/PID/root enters its root, but a plain open() then follows an
 * absolute symlink against *our* root (a host file), blocks on a FIFO and
 * runs a device's open. Here the path is resolved by the kernel inside the
 * target's root (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS; where the
 * kernel lacks openat2, a walk that refuses symlinks and ".."), opened
 * O_PATH (no driver, no FIFO wait), checked to be a regular file of bounded
 * size, and only then reopened for reading.
 */
#ifndef PYPROF_ROOTFS_H
#define PYPROF_ROOTFS_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * rootfs__open() - open @path (absolute, as @pid names it) read-only in
 * @pid's root. @st (may be NULL) gets the file's stat.
 * Returns an fd, or -ENOENT, -ESRCH (process gone), -ELOOP (a symlink to
 * nothing inside the root), -EINVAL (not a regular file), -EFBIG (larger
 * than @max_size), -EACCES; without openat2, see rootfs__open_nofollow().
 */
int rootfs__open(pid_t pid, const char *path, uint64_t max_size, struct stat *st);

/* The same inside the root directory @rootfd (a core's: dump --core). */
int rootfs__open_at(int rootfd, const char *path, uint64_t max_size, struct stat *st);

/* What rootfs__open() does where the kernel lacks openat2: no symlink and
 * no ".." followed at all (-ELOOP, -EXDEV, -ENOTDIR). */
int rootfs__open_nofollow(pid_t pid, const char *path, uint64_t max_size, struct stat *st);

/*
 * rootfs__open_mapped() - the very file mapped at [@start, @end) in @pid,
 * through /proc/PID/map_files (needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE), with the same checks. -EPERM without them.
 */
int rootfs__open_mapped(pid_t pid, uint64_t start, uint64_t end, uint64_t max_size,
			struct stat *st);

/*
 * rootfs__reopen() - an O_PATH fd (closed here either way) checked and
 * reopened read-only: what the two above end with, for a caller that
 * resolved a path its own way. Same errors.
 */
int rootfs__reopen(int pathfd, uint64_t max_size, struct stat *st);

/* The effective uid of @pid (the owner of /proc/PID), or -errno. */
int rootfs__owner(pid_t pid, uid_t *uid);

#endif
