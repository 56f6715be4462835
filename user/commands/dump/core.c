// SPDX-License-Identifier: MIT
/*
 * core.c - `dump --core`: a core file opened as the target
 * (core.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "commands/dump/core.h"
#include "target/core_file.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"

/* A mapping's file under the core's root; --exe for the executable's. */
static int open_mapped(void *ctx, const struct mapping *m)
{
	const struct dump_core *dc = ctx;
	struct stat st;
	int fd;

	if (!dc->exe || strcmp(m->path, dc->core_exe) != 0)
		return core_file__open_mapped(dc->cf, m);
	fd = open(dc->exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int dump_core__open(const struct dump_opts *o, struct dump_core *dc, struct pyproc **p,
		    char *err, size_t errlen)
{
	char why[PYPROF_ERRLEN] = "", what[PYPROF_ERRLEN];
	struct pyproc_files fs = { REMOTE_MEM_CORE, what, open_mapped, dc };
	const struct core_thread *ct;
	pid_t tids[CORE_FILE_MAX_THREADS];
	struct stat st;
	size_t n;
	int rc;

	*dc = (struct dump_core){ .exe = o->exe };
	*p = NULL;
	rc = core_file__open(o->core, o->root, &dc->cf, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "core %s: %s", o->core, why);
		return rc;
	}
	if (!stat(o->core, &st))
		dc->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	dc->core_exe = core_file__exe(dc->cf);
	if (!dc->core_exe[0] && dc->exe) {
		snprintf(err, errlen, "core %s: it does not say which file its executable was, "
			 "so --exe cannot stand in for it", o->core);
		return -ENOEXEC;
	}
	ct = core_file__threads(dc->cf, &n);
	for (size_t i = 0; i < n; i++)
		tids[i] = ct[i].tid;
	snprintf(what, sizeof(what), "core %s (process %d, %s)", o->core,
		 (int)core_file__pid(dc->cf), core_file__comm(dc->cf));
	remote_mem__set_core(dc->cf);
	rc = pyproc__open_files(&fs, dc->core_exe, core_file__maps(dc->cf), tids, n, p, err,
				errlen);
	if (rc == -EFAULT)
		snprintf(err, errlen, "%s: the memory it needs is not in the core, nor in the "
			 "files it maps (a core cut by coredump_filter, or files changed since)",
			 what);
	return rc;
}

void dump_core__close(struct dump_core *dc)
{
	remote_mem__set_core(NULL);
	core_file__free(dc->cf);
	dc->cf = NULL;
}
