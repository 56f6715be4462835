/* SPDX-License-Identifier: MIT */
/*
 * fuzz_labels.c - a target's labels from its /proc/PID/environ, cmdline and
 * cgroup (user/agent/labels.c): the input is each of the three in turn (no
 * NUL after it), into a label-sized buffer and a short one. A label is
 * NUL-terminated in its buffer, [A-Za-z0-9._/:-] only, not empty when found;
 * a container id is 64 hex digits. OTEL_RESOURCE_ATTRIBUTES' pairs: at most
 * LABELS_RESOURCE_MAX, keys [A-Za-z0-9._-] and not service.name, values
 * labels.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "agent/labels.h"

static void check_label(int rc, const char *out, size_t len)
{
	size_t n = strnlen(out, len);

	if (n == len || (rc == 0 && n == 0) || (rc != 0 && rc != -ENOENT))
		__builtin_trap();
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/:-",
			    out[i]))
			__builtin_trap();
}

static void run(const char *text, size_t n, char *out, size_t len)
{
	int rc;

	memset(out, 'x', len);
	rc = labels__service_from_environ(text, n, out, len);
	if (rc == 0 || out[0] != 'x')
		check_label(rc, out, len);
	memset(out, 'x', len);
	rc = labels__service_from_cmdline(text, n, out, len);
	if (rc == 0)
		check_label(rc, out, len);
	memset(out, 'x', len);
	rc = labels__container_from_cgroup(text, n, out, len);
	if (rc == 0) {
		check_label(rc, out, len);
		if (strlen(out) != (len > 64 ? 64 : len - 1) || strspn(out, "0123456789abcdef") !=
		    strlen(out))
			__builtin_trap();
	}
}

static void run_resource(const char *text, size_t n)
{
	struct proc_labels l;

	labels__resource_from_environ(text, n, &l);
	if (l.nresource > LABELS_RESOURCE_MAX)
		__builtin_trap();
	for (size_t i = 0; i < l.nresource; i++) {
		const struct resource_label *r = &l.resource[i];

		if (strnlen(r->key, sizeof(r->key)) == sizeof(r->key) || !r->key[0] ||
		    strspn(r->key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
			    strlen(r->key) || !strcmp(r->key, "service.name"))
			__builtin_trap();
		check_label(0, r->value, sizeof(r->value));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly @size bytes: ASan sees a read past them */
	char *text = malloc(size ? size : 1), big[LABEL_VALUE_MAX], small[5];

	if (!text)
		return 0;
	memcpy(text, data, size);
	run(text, size, big, sizeof(big));
	run(text, size, small, sizeof(small));
	run_resource(text, size);
	free(text);
	return 0;
}
