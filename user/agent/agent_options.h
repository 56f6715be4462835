/* SPDX-License-Identifier: MIT */
/* agent_options.h - `pyprof-bpf agent`'s own options (record's are record's). */
#ifndef PYPROF_AGENT_OPTIONS_H
#define PYPROF_AGENT_OPTIONS_H

#include <argp.h>
#include <stddef.h>
#include <stdint.h>
#include "agent/http.h"
#include "agent/labels.h"

#define AGENT_MAX_PUSH 8
#define AGENT_MAX_LABELS 32
#define AGENT_DEFAULT_FREQ 19
#define AGENT_DEFAULT_WINDOW 15.0
#define AGENT_DEFAULT_SPOOL_MB 100
#define AGENT_DEFAULT_SPOOL_AGE (6 * 3600.0)
#define AGENT_DEFAULT_RETAIN (24 * 3600.0)
#define AGENT_DEFAULT_PUSH_TIMEOUT 10.0

struct push_kind;

struct agent_push {
	const struct push_kind *kind;
	const char *url;
};

struct agent_label {
	char name[LABEL_NAME_MAX];
	char value[LABEL_VALUE_MAX];
};

struct agent_opts {
	double window_s;
	struct agent_push push[AGENT_MAX_PUSH];
	size_t npush;
	const char *output_dir;
	double retain_s;
	struct agent_label labels[AGENT_MAX_LABELS];
	size_t nlabels;
	const char *spool_dir;		/* NULL: the default */
	uint64_t spool_bytes;
	double spool_age_s;
	const char *auth_file;
	const char *push_headers[HTTP_MAX_HEADERS];	/* --push-header */
	size_t npush_headers;
	struct http_auth auth;		/* read from auth_file */
	double push_timeout_s;
};

extern const struct argp agent_argp;
extern const char agent_doc[];

/* The defaults, before parsing. */
void agent_opts__init(struct agent_opts *o);

/* "90", "30s", "10m", "6h", "2d" into seconds: 0 or -EINVAL. */
int parse_duration(const char *s, double *out);

/* --auth-file's "key=value" lines into @a: 0 or -errno with one line in @err. */
int agent_auth__read(const char *path, struct http_auth *a, char *err, size_t errlen);

#endif
