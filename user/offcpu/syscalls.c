/* SPDX-License-Identifier: MIT */
#include <stddef.h>
#include "offcpu/syscalls.h"
#include "syscall_table.h"	/* generated: .output/syscall_table.h */

const char *syscall__name(long nr)
{
	/* the numbering has holes (335..423 on x86-64): they read as NULL */
	if (nr < 0 || (unsigned long)nr >= sizeof(syscall_table) / sizeof(syscall_table[0]))
		return NULL;
	return syscall_table[nr];
}
