// SPDX-License-Identifier: MIT
/* perf_events.c - see perf_events.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>

#include "sampling/perf_events.h"

#define TRACEFS "/sys/kernel/tracing"
#define TRACEFS_OLD "/sys/kernel/debug/tracing"

struct named_event {
	const char *name, *alias;
	uint32_t type;
	uint64_t config;
};

/* perf's names (tools/perf/util/parse-events.c's tables), and its aliases */
static const struct named_event named[] = {
	{ "cpu-clock", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	{ "page-faults", "faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
	{ "minor-faults", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN },
	{ "major-faults", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ },
	{ "context-switches", "cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cpu-migrations", "migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "alignment-faults", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS },
	{ "emulation-faults", NULL, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS },
	{ "cycles", "cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", NULL, PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	{ "cache-references", NULL, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES },
	{ "cache-misses", NULL, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
	{ "branches", "branch-instructions", PERF_TYPE_HARDWARE,
	  PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
	{ "branch-misses", NULL, PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES },
	{ "ref-cycles", NULL, PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES },
};

bool sampler_event__is_tracepoint(const struct sampler_event *e)
{
	return e->type == PERF_TYPE_TRACEPOINT;
}

bool sampler_event__is_clock(const struct sampler_event *e)
{
	return e->type == PERF_TYPE_SOFTWARE && (e->config == PERF_COUNT_SW_CPU_CLOCK ||
						 e->config == PERF_COUNT_SW_TASK_CLOCK);
}

uint64_t sampler_event__default_period(const struct sampler_event *e)
{
	return e->type == PERF_TYPE_TRACEPOINT ||
	       (e->type == PERF_TYPE_SOFTWARE && !sampler_event__is_clock(e)) ? 1 : 0;
}

/* A tracepoint's part: what tracefs names hold, and short. */
static bool plain_name(const char *s, size_t max)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

	return n && !s[n] && n < max;
}

/*
 * A hardware event needs the CPU's counters: opened once, disabled, on
 * ourselves (a virtual machine without a virtual PMU has none).
 */
static int probe_hardware(const struct sampler_event *e, char *err, size_t errlen)
{
	struct perf_event_attr attr = {
		.type = e->type, .size = sizeof(attr), .config = e->config,
		.disabled = 1, .exclude_kernel = 1, .exclude_hv = 1,
	};
	int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == EACCES || errno == EPERM) {
		snprintf(err, errlen, "event %s: permission denied opening a hardware counter "
			 "(needs CAP_PERFMON)", e->name);
		return -EACCES;
	}
	snprintf(err, errlen, "event %s: this machine exposes no hardware counters for it "
		 "(no CPU PMU under /sys/bus/event_source/devices/, as in most virtual "
		 "machines); software events work: cpu-clock, page-faults, context-switches, "
		 "or a tracepoint", e->name);
	return -EOPNOTSUPP;
}

/* The id of tracepoint @e under @root (tracefs); -errno. */
static int read_tracepoint_id(const char *root, const struct sampler_event *e, uint64_t *id)
{
	char path[256], buf[32], *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/events/%s/%s/id", root, e->subsys, e->tracepoint);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	errno = 0;
	*id = strtoull(buf, &end, 10);
	return errno || end == buf ? -EIO : 0;
}

/* tracefs, mounted at its place when it is not (as perf record does). */
static int tracepoint_id(struct sampler_event *e, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (stat(TRACEFS "/events", &st) && stat(TRACEFS_OLD "/events", &st) &&
	    mount("tracefs", TRACEFS, "tracefs", 0, NULL)) {
		rc = -errno;
		snprintf(err, errlen, "event %s: tracefs is not mounted and cannot be (mount "
			 "tracefs on %s: %s)", e->name, TRACEFS, strerror(errno));
		return rc;
	}
	rc = read_tracepoint_id(TRACEFS, e, &e->config);
	if (rc == -ENOENT)
		rc = read_tracepoint_id(TRACEFS_OLD, e, &e->config);
	if (rc == -ENOENT)
		snprintf(err, errlen, "event %s: no such tracepoint (those of this kernel: %s/"
			 "available_events)", e->name, TRACEFS);
	else if (rc)
		snprintf(err, errlen, "event %s: its id in %s/events cannot be read: %s",
			 e->name, TRACEFS, strerror(-rc));
	return rc;
}

static int parse_tracepoint(const char *spec, const char *colon, struct sampler_event *out,
			    char *err, size_t errlen)
{
	size_t ns = (size_t)(colon - spec);

	if (ns >= sizeof(out->subsys) || strlen(colon + 1) >= sizeof(out->tracepoint)) {
		snprintf(err, errlen, "event %.80s: too long for a tracepoint", spec);
		return -EINVAL;
	}
	memcpy(out->subsys, spec, ns);
	out->subsys[ns] = '\0';
	strcpy(out->tracepoint, colon + 1);
	if (!plain_name(out->subsys, sizeof(out->subsys)) ||
	    !plain_name(out->tracepoint, sizeof(out->tracepoint))) {
		snprintf(err, errlen, "event %.80s: a tracepoint is SUBSYS:NAME, letters, digits "
			 "and _ (syscalls:sys_enter_openat)", spec);
		return -EINVAL;
	}
	snprintf(out->name, sizeof(out->name), "%s:%s", out->subsys, out->tracepoint);
	out->type = PERF_TYPE_TRACEPOINT;
	return tracepoint_id(out, err, errlen);
}

int sampler_event__parse(const char *spec, struct sampler_event *out, char *err,
			 size_t errlen)
{
	const char *colon = strchr(spec, ':');

	memset(out, 0, sizeof(*out));
	if (colon)
		return parse_tracepoint(spec, colon, out, err, errlen);
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (strcmp(spec, named[i].name) && (!named[i].alias || strcmp(spec, named[i].alias)))
			continue;
		snprintf(out->name, sizeof(out->name), "%s", named[i].name);
		out->type = named[i].type;
		out->config = named[i].config;
		return out->type == PERF_TYPE_HARDWARE ? probe_hardware(out, err, errlen) : 0;
	}
	snprintf(err, errlen, "unknown event %.80s (software: cpu-clock, task-clock, page-faults, "
		 "minor-faults, major-faults, context-switches, cpu-migrations, alignment-faults, "
		 "emulation-faults; hardware: cycles, instructions, cache-references, "
		 "cache-misses, branches, branch-misses, ref-cycles; or a tracepoint SUBSYS:NAME)",
		 spec);
	return -ENOENT;
}
