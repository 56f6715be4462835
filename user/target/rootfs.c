/* SPDX-License-Identifier: MIT */
/* rootfs.c - files a target names, opened inside its root (rootfs.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include "target/rootfs.h"

#define MAX_COMPONENTS 256	/* a deeper path is refused, not walked */

int rootfs__reopen(int pathfd, uint64_t max_size, struct stat *st)
{
	char fn[64];
	struct stat sb, again;
	int fd, err = 0;

	if (fstat(pathfd, &sb))
		err = -errno;
	else if (!S_ISREG(sb.st_mode))
		err = -EINVAL;
	else if ((uint64_t)sb.st_size > max_size)
		err = -EFBIG;
	if (err) {
		close(pathfd);
		return err;
	}
	/* the inode the O_PATH fd holds, whatever its path has become since */
	snprintf(fn, sizeof(fn), "/proc/self/fd/%d", pathfd);
	fd = open(fn, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	err = fd < 0 ? -errno : 0;
	close(pathfd);
	if (err)
		return err;
	if (fstat(fd, &again) || again.st_ino != sb.st_ino || again.st_dev != sb.st_dev) {
		close(fd);
		return -ESTALE;
	}
	if (st)
		*st = sb;
	return fd;
}

/* Without openat2 (kernels before 5.6): one component at a time, no
 * symlink and no ".." followed at all; stricter than the kernel's walk,
 * enough for the paths a Python process maps or writes in /tmp. */
static int walk_nofollow(int rootfd, const char *path)
{
	char buf[PATH_MAX], *save = NULL, *part;
	int dir = dup(rootfd), next, depth = 0;

	if (dir < 0)
		return -errno;
	if (strlen(path) >= sizeof(buf)) {
		close(dir);
		return -ENAMETOOLONG;
	}
	strcpy(buf, path);
	for (part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		int err = 0;

		if (!strcmp(part, ".."))
			err = -EXDEV;
		else if (++depth > MAX_COMPONENTS)
			err = -ELOOP;
		else if ((next = openat(dir, part, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			err = -errno;
		close(dir);
		if (err)
			return err;
		dir = next;
	}
	return dir;	/* a symlink opened O_PATH|O_NOFOLLOW fails S_ISREG later */
}

static int open_in_root(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOSYS)
		return walk_nofollow(rootfd, path);
	if (errno != ENOENT)
		return -errno;
	/* a link to nothing inside the root (often: to a path outside it) is
	 * told apart from no file at all, so that a caller can say so */
	how.flags |= O_NOFOLLOW;
	fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0)
		return -ENOENT;
	close((int)fd);
	return -ELOOP;
}

static int open_with(pid_t pid, const char *path, uint64_t max_size, struct stat *st,
		     int (*resolve)(int rootfd, const char *path))
{
	char fn[64];
	int rootfd, pathfd;

	if (!path || path[0] != '/')
		return -EINVAL;
	snprintf(fn, sizeof(fn), "/proc/%d/root", (int)pid);
	rootfd = open(fn, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	pathfd = resolve(rootfd, path);
	close(rootfd);
	if (pathfd < 0)
		return pathfd;
	return rootfs__reopen(pathfd, max_size, st);
}

int rootfs__open_at(int rootfd, const char *path, uint64_t max_size, struct stat *st)
{
	int pathfd;

	if (!path || path[0] != '/')
		return -EINVAL;
	pathfd = open_in_root(rootfd, path);
	if (pathfd < 0)
		return pathfd;
	return rootfs__reopen(pathfd, max_size, st);
}

int rootfs__open(pid_t pid, const char *path, uint64_t max_size, struct stat *st)
{
	return open_with(pid, path, max_size, st, open_in_root);
}

int rootfs__open_nofollow(pid_t pid, const char *path, uint64_t max_size, struct stat *st)
{
	return open_with(pid, path, max_size, st, walk_nofollow);
}

int rootfs__open_mapped(pid_t pid, uint64_t start, uint64_t end, uint64_t max_size,
			struct stat *st)
{
	char fn[96];
	int pathfd;

	snprintf(fn, sizeof(fn), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
	/* O_PATH: a device or FIFO mapped there is never opened for real */
	pathfd = open(fn, O_PATH | O_CLOEXEC);
	if (pathfd < 0)
		return -errno;
	return rootfs__reopen(pathfd, max_size, st);
}

int rootfs__owner(pid_t pid, uid_t *uid)
{
	char fn[32];
	struct stat sb;

	snprintf(fn, sizeof(fn), "/proc/%d", (int)pid);
	if (stat(fn, &sb))
		return errno == ENOENT ? -ESRCH : -errno;
	*uid = sb.st_uid;
	return 0;
}
