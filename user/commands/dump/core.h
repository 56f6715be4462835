/* SPDX-License-Identifier: MIT */
/*
 * core.h - `dump --core`: a core file opened as the target whose
 * threads dump reads (issue #25 item 6). Its memory is served to every
 * reader through remote_mem (REMOTE_MEM_CORE), its files from its root.
 */
#ifndef PYPROF_DUMP_CORE_H
#define PYPROF_DUMP_CORE_H

#include <stddef.h>
#include <stdint.h>
#include "commands/dump.h"

struct core_file;
struct pyproc;

struct dump_core {
	struct core_file *cf;
	const char *exe;	/* --exe: opened for the core's executable */
	const char *core_exe;	/* the executable's path in the core */
	int64_t mtime_ns;	/* when the core was written: a source file newer
				 * than it is not what ran */
};

/*
 * Open @o->core (under @o->root), and the Python process in it into *@p.
 * 0, or -errno with one line in @err.
 */
int dump_core__open(const struct dump_opts *o, struct dump_core *dc, struct pyproc **p,
		    char *err, size_t errlen);
void dump_core__close(struct dump_core *dc);

#endif
