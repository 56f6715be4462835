/* SPDX-License-Identifier: MIT */
/* privileges.c - capabilities dropped once attached (privileges.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include "util/privileges.h"

#define BIT(cap) ((uint64_t)1 << (cap))

/* The highest capability this kernel knows (CAP_LAST_CAP of its headers). */
static int last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int n = -1;

	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n > 0 && n < 64 ? n : CAP_LAST_CAP;
}

uint64_t privileges__keep_mask(bool launched)
{
	uint64_t keep = BIT(CAP_SYS_PTRACE) | BIT(CAP_DAC_READ_SEARCH) | BIT(CAP_DAC_OVERRIDE) |
			BIT(CAP_CHECKPOINT_RESTORE) | BIT(CAP_BPF) | BIT(CAP_PERFMON) |
			BIT(CAP_SYSLOG);

	if (launched)
		keep |= BIT(CAP_KILL);
	if (last_cap() < CAP_CHECKPOINT_RESTORE)
		keep |= BIT(CAP_SYS_ADMIN);
	return keep & (last_cap() >= 63 ? ~0ull : (BIT(last_cap() + 1) - 1));
}

static int get_caps(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capget, &hdr, data) ? -errno : 0;
}

static int set_caps(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capset, &hdr, data) ? -errno : 0;
}

int privileges__drop_after_attach(bool launched)
{
	struct __user_cap_data_struct data[2];
	uint64_t keep = privileges__keep_mask(launched), eff;
	int err = get_caps(data);

	if (err)
		return err;
	eff = data[0].effective | (uint64_t)data[1].effective << 32;
	if (!eff)
		return 0;	/* nothing to give up */
	/* the bounding set first: dropping from it takes CAP_SETPCAP */
	if (eff & BIT(CAP_SETPCAP))
		for (int cap = 0; cap <= last_cap(); cap++)
			if (!(keep & BIT(cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
				return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return -errno;
	for (int i = 0; i < 2; i++) {
		uint32_t k = (uint32_t)(keep >> (32 * i));

		data[i].effective &= k;
		data[i].permitted &= k;
		data[i].inheritable = 0;
	}
	err = set_caps(data);
	if (err)
		return err;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ? -errno : 0;
}
