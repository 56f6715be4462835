// SPDX-License-Identifier: MIT
/* leaf.c - see leaf.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "offcpu/leaf.h"
#include "offcpu/ksyms.h"
#include "offcpu/syscalls.h"

#define NR_NAMES 512

struct leaf_names {
	struct ksyms *ks;		/* NULL: no kernel frames */
	char *syscall[NR_NAMES];	/* "[syscall] NAME", made at first use */
	char other[NR_NAMES][24];	/* "[syscall] 123" for unnamed numbers */
};

int leaf_names__new(bool kernel, struct leaf_names **out)
{
	struct leaf_names *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return -ENOMEM;
	if (kernel) {
		err = ksyms__load(&l->ks);
		if (err) {
			free(l);
			return err;
		}
	}
	*out = l;
	return 0;
}

void leaf_names__free(struct leaf_names *l)
{
	if (!l)
		return;
	ksyms__free(l->ks);
	for (int i = 0; i < NR_NAMES; i++)
		free(l->syscall[i]);
	free(l);
}

static const char *syscall_frame(struct leaf_names *l, int64_t nr)
{
	const char *name;

	if (nr < 0 || nr >= NR_NAMES)
		return "[syscall] ?";
	if (l->syscall[nr])
		return l->syscall[nr];
	name = syscall__name((long)nr);
	if (name && asprintf(&l->syscall[nr], "[syscall] %s", name) >= 0)
		return l->syscall[nr];
	l->syscall[nr] = NULL;
	snprintf(l->other[nr], sizeof(l->other[nr]), "[syscall] %lld", (long long)nr);
	return l->other[nr];
}

/* Frames of the scheduler and of the tracepoint that took the stack: the
 * innermost ones, up to __schedule. */
static bool scheduler_frame(const char *name)
{
	return !strcmp(name, "__schedule") || !strncmp(name, "bpf_", 4) ||
	       !strncmp(name, "__bpf_", 6) || !strncmp(name, "__traceiter_", 12) ||
	       !strncmp(name, "__probestub_", 12);
}

/* Syscall entry code: the same for every stack, said by [syscall] NAME. */
static bool entry_frame(const char *name)
{
	return !strncmp(name, "entry_SYSCALL", 13) || !strcmp(name, "do_syscall_64") ||
	       !strcmp(name, "x64_sys_call") || !strncmp(name, "__x64_sys_", 10) ||
	       !strncmp(name, "__do_sys_", 9) || !strncmp(name, "__se_sys_", 9);
}

static uint32_t kernel_frames(struct leaf_names *l, const struct raw_sample *r,
			      struct out_leaf *out, uint32_t room)
{
	const char *names[64];
	uint64_t offs[64];
	uint32_t n = 0, first = 0, k = 0;

	if (!l->ks)
		return 0;
	for (uint32_t i = 0; i < r->nkstack && n < 64; i++) {
		const char *name = ksyms__name(l->ks, r->kstack[i], &offs[n]);

		names[n++] = name ? name : "[unknown]";
	}
	/* Innermost first: skip past the last scheduler frame. */
	for (uint32_t i = 0; i < n && i < 8; i++)
		if (scheduler_frame(names[i]))
			first = i + 1;
	for (uint32_t i = n; i-- > first && k < room;) {
		if (entry_frame(names[i]))
			continue;
		out[k++] = (struct out_leaf){ OUT_FRAME_KERNEL, names[i], r->kstack[i],
					      strcmp(names[i], "[unknown]") ? offs[i] : 0 };
	}
	return k;
}

uint32_t leaf_names__frames(struct leaf_names *l, const struct raw_sample *r, enum leaf_part part,
			    bool gil_mode, struct out_leaf *out)
{
	uint32_t n = 0;

	if (r->flags & SAMPLE_F_GC)
		out[n++] = (struct out_leaf){ OUT_FRAME_STATUS, "<GC>" };
	switch (part) {
	case LEAF_CPU:
		if (gil_mode && (r->flags & SAMPLE_F_GIL_KNOWN) && !(r->flags & SAMPLE_F_GIL_HELD))
			out[n++] = (struct out_leaf){ OUT_FRAME_STATUS, "[GIL released]" };
		/* --kernel: what the tick interrupted in the kernel. */
		n += kernel_frames(l, r, out + n, LEAF_MAX - n);
		break;
	case LEAF_RUNNABLE:
		out[n++] = (struct out_leaf){ OUT_FRAME_STATUS, "[runnable]" };
		break;
	case LEAF_BLOCKED:
		if (r->flags & SAMPLE_F_GIL_WAIT)
			out[n++] = (struct out_leaf){ OUT_FRAME_STATUS, "[GIL wait]" };
		else if (r->syscall_nr >= 0)
			out[n++] = (struct out_leaf){ OUT_FRAME_STATUS,
						      syscall_frame(l, r->syscall_nr) };
		else
			out[n++] = (struct out_leaf){ OUT_FRAME_STATUS, "[blocked]" };
		n += kernel_frames(l, r, out + n, LEAF_MAX - n);
		break;
	}
	return n;
}
