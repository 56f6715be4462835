/* SPDX-License-Identifier: MIT */
/* agent_options.c - `pyprof-bpf agent`'s own options (agent_options.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent/agent_options.h"
#include "agent/push.h"
#include "util/errbuf.h"

enum {
	OPT_WINDOW = 0x3000, OPT_PUSH, OPT_OUTPUT_DIR, OPT_RETAIN, OPT_LABEL, OPT_SPOOL_DIR,
	OPT_SPOOL_SIZE, OPT_SPOOL_AGE, OPT_AUTH_FILE, OPT_PUSH_TIMEOUT, OPT_PUSH_HEADER,
};

const char agent_doc[] =
"Continuous profiling: samples every Python process of the host (-a, the\n"
"default), or -p's, or --comm's, at 19 Hz (-F's default here) until stopped,\n"
"and every --window seconds sends one pprof profile per process to the stores\n"
"given (--push, up to 8) and/or writes it into --output-dir. Profiles are\n"
"labelled with service_name (the target's OTEL_SERVICE_NAME,\n"
"OTEL_RESOURCE_ATTRIBUTES' service.name, PYROSCOPE_APPLICATION_NAME, its\n"
"script or -m module, else its name), pid, host, python_version,\n"
"container_id, the rest of the target's OTEL_RESOURCE_ATTRIBUTES and up to\n"
"32 --label's. While a store is\n"
"away they wait in a bounded spool on disk and are delivered in order when it\n"
"is back. SIGTERM or Ctrl-C closes the open window and delivers it (or leaves\n"
"it in the spool for the next start).\n"
"\v"
"EXAMPLES:\n"
"    sudo pyprof-bpf agent --push pyroscope=http://pyroscope:4040\n"
"    sudo pyprof-bpf agent --push parca=http://parca:7070 --label env=prod\n"
"    sudo pyprof-bpf agent --push otlp=http://otel-collector:4318\n"
"    sudo pyprof-bpf agent --comm 'gunicorn|celery' --output-dir /var/tmp/prof\n"
"    sudo pyprof-bpf agent -p 1234 --window 60 --mode wall --auth-file F \\\n"
"        --push pyroscope=https://profiles.example.com\n"
"\n"
"--auth-file holds \"tenant=ID\" (sent as X-Scope-OrgID), \"user=NAME\" and\n"
"\"password=SECRET\" (basic auth), \"bearer=TOKEN\" or \"header=NAME: VALUE\"\n"
"lines: secrets never on the command line. The agent's log lines go to\n"
"stderr, one line each.\n";

static const struct argp_option options[] = {
	{ "window", OPT_WINDOW, "SECONDS", 0, "One profile per process every SECONDS "
	  "(default 15, at least 1), windows aligned on the clock", 0 },
	{ "push", OPT_PUSH, "KIND=URL", 0, "Send the profiles to a store: pyroscope=URL "
	  "(POST URL/ingest), parca=URL (POST URL/profiles/writeraw) or otlp=URL (OTLP/HTTP, "
	  "POST URL/v1development/profiles); repeatable, up to 8", 0 },
	{ "push-header", OPT_PUSH_HEADER, "'NAME: VALUE'", 0, "A header of every push "
	  "request (a gateway's key); repeatable, up to 8 with --auth-file's", 0 },
	{ "output-dir", OPT_OUTPUT_DIR, "DIR", 0, "Also write them as DIR/SERVICE-PID-FROM"
	  ".pb.gz", 0 },
	{ "retain", OPT_RETAIN, "DURATION", 0, "Remove --output-dir's files older than "
	  "DURATION (default 24h; s, m, h, d)", 0 },
	{ "label", OPT_LABEL, "KEY=VALUE", 0, "A label of every profile; repeatable, up to "
	  "32", 0 },
	{ "spool-dir", OPT_SPOOL_DIR, "DIR", 0, "Where profiles wait for their stores "
	  "(default $STATE_DIRECTORY/spool, else /var/lib/pyprof-bpf/spool; without "
	  "--push, --output-dir's .spool)", 0 },
	{ "spool-size", OPT_SPOOL_SIZE, "MB", 0, "At most MB megabytes spooled (default 100): "
	  "past it the oldest profiles are dropped, and counted", 0 },
	{ "spool-age", OPT_SPOOL_AGE, "DURATION", 0, "Drop spooled profiles older than "
	  "DURATION (default 6h)", 0 },
	{ "auth-file", OPT_AUTH_FILE, "FILE", 0, "The stores' credentials (see below)", 0 },
	{ "push-timeout", OPT_PUSH_TIMEOUT, "SECONDS", 0, "Per request, and how long the "
	  "last window is tried at exit (default 10)", 0 },
	{ 0 },
};

void agent_opts__init(struct agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->window_s = AGENT_DEFAULT_WINDOW;
	o->retain_s = AGENT_DEFAULT_RETAIN;
	o->spool_bytes = (uint64_t)AGENT_DEFAULT_SPOOL_MB << 20;
	o->spool_age_s = AGENT_DEFAULT_SPOOL_AGE;
	o->push_timeout_s = AGENT_DEFAULT_PUSH_TIMEOUT;
}

int parse_duration(const char *s, double *out)
{
	char *end;
	double v, unit = 1;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0)
		return -EINVAL;
	if (*end) {
		if (end[1])
			return -EINVAL;
		switch (*end) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		default: return -EINVAL;
		}
	}
	*out = v * unit;
	return 0;
}

static void parse_push(struct agent_opts *o, char *arg, struct argp_state *state)
{
	char *eq = strchr(arg, '=');
	const struct push_kind *k;

	if (!eq || !eq[1])
		argp_error(state, "--push takes KIND=URL (pyroscope=URL, parca=URL or otlp=URL), "
			   "not '%s'",
			   arg);
	*eq = '\0';
	k = push__kind(arg);
	if (!k)
		argp_error(state, "--push: unknown store '%s' (pyroscope, parca or otlp)", arg);
	if (strncmp(eq + 1, "http://", 7) && strncmp(eq + 1, "https://", 8))
		argp_error(state, "--push %s=%s: the URL must start with http:// or https://",
			   arg, eq + 1);
	if (o->npush == AGENT_MAX_PUSH)
		argp_error(state, "at most %d --push", AGENT_MAX_PUSH);
	o->push[o->npush].kind = k;
	o->push[o->npush++].url = eq + 1;
}

static void parse_label(struct agent_opts *o, const char *arg, struct argp_state *state)
{
	const char *eq = strchr(arg, '=');
	struct agent_label *l;
	size_t n;

	if (!eq || eq == arg || !eq[1])
		argp_error(state, "--label takes KEY=VALUE, not '%s'", arg);
	if (o->nlabels == AGENT_MAX_LABELS)
		argp_error(state, "at most %d --label", AGENT_MAX_LABELS);
	l = &o->labels[o->nlabels];
	n = (size_t)(eq - arg);
	if (n >= sizeof(l->name))
		argp_error(state, "--label %s: the key is too long", arg);
	memcpy(l->name, arg, n);
	l->name[n] = '\0';
	if (!labels__name_ok(l->name))
		argp_error(state, "--label %s: a key is letters, digits and '_', not starting "
			   "with a digit or '__'", arg);
	if (!strcmp(l->name, "service_name") || !strcmp(l->name, "pid") ||
	    !strcmp(l->name, "host") || !strcmp(l->name, "python_version") ||
	    !strcmp(l->name, "container_id"))
		argp_error(state, "--label %s: %s is the agent's own label", arg, l->name);
	for (size_t i = 0; i < o->nlabels; i++)
		if (!strcmp(o->labels[i].name, l->name))
			argp_error(state, "--label %s: %s is given twice", arg, l->name);
	labels__clean(eq + 1, strlen(eq + 1), l->value, sizeof(l->value));
	if (strcmp(l->value, eq + 1))
		argp_error(state, "--label %s: a value is letters, digits and ._/:- (at most "
			   "%d)", arg, LABEL_VALUE_MAX - 1);
	o->nlabels++;
}

static void parse_seconds(const char *opt, const char *arg, double min, double *out,
			  struct argp_state *state)
{
	if (parse_duration(arg, out) || *out < min)
		argp_error(state, "invalid %s '%s' (a duration of at least %g s: 90, 30s, 10m, "
			   "6h, 2d)", opt, arg, min);
}

/* What --push and --auth-file need, now: a failure ends before sampling. */
static void check_setup(struct agent_opts *o, struct argp_state *state)
{
	char err[512];

	if (o->npush && http__init(err, sizeof(err)))
		argp_failure(state, 1, 0, "%s", err);
	if (o->auth_file && agent_auth__read(o->auth_file, &o->auth, err, sizeof(err)))
		argp_failure(state, 1, 0, "%s", err);
	for (size_t i = 0; i < o->npush_headers; i++) {
		if (o->auth.nheaders == HTTP_MAX_HEADERS)
			argp_failure(state, 1, 0, "at most %d headers (--push-header and "
				     "--auth-file's header= lines)", HTTP_MAX_HEADERS);
		strcpy(o->auth.headers[o->auth.nheaders++], o->push_headers[i]);
	}
}

static error_t parse(int key, char *arg, struct argp_state *state)
{
	struct agent_opts *o = state->input;
	double v;
	char *end;

	switch (key) {
	case OPT_WINDOW:
		parse_seconds("--window", arg, 1, &o->window_s, state);
		break;
	case OPT_PUSH:
		parse_push(o, arg, state);
		break;
	case OPT_OUTPUT_DIR:
		o->output_dir = arg;
		break;
	case OPT_RETAIN:
		parse_seconds("--retain", arg, 1, &o->retain_s, state);
		break;
	case OPT_LABEL:
		parse_label(o, arg, state);
		break;
	case OPT_SPOOL_DIR:
		o->spool_dir = arg;
		break;
	case OPT_SPOOL_SIZE:
		errno = 0;
		v = strtod(arg, &end);
		if (end == arg || *end || errno || !(v >= 1 && v <= 1024 * 1024))
			argp_error(state, "invalid --spool-size '%s' (megabytes, 1 to 1048576)",
				   arg);
		o->spool_bytes = (uint64_t)(v * (1 << 20));
		break;
	case OPT_SPOOL_AGE:
		parse_seconds("--spool-age", arg, 1, &o->spool_age_s, state);
		break;
	case OPT_AUTH_FILE:
		o->auth_file = arg;
		break;
	case OPT_PUSH_TIMEOUT:
		parse_seconds("--push-timeout", arg, 0.1, &o->push_timeout_s, state);
		break;
	case OPT_PUSH_HEADER:
		if (!http__header_ok(arg))
			argp_error(state, "--push-header takes 'NAME: VALUE' (a token name, no "
				   "control bytes, under %d bytes), not '%s'", HTTP_HEADER_MAX, arg);
		if (o->npush_headers == HTTP_MAX_HEADERS)
			argp_error(state, "at most %d --push-header", HTTP_MAX_HEADERS);
		o->push_headers[o->npush_headers++] = arg;
		break;
	case ARGP_KEY_END:
		if (!o->npush && !o->output_dir)
			argp_error(state, "nowhere to send the profiles: give --push KIND=URL "
				   "and/or --output-dir DIR");
		if (o->auth_file && !o->npush)
			argp_error(state, "--auth-file is for --push");
		if (o->npush_headers && !o->npush)
			argp_error(state, "--push-header is for --push");
		check_setup(o, state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp agent_argp = { .options = options, .parser = parse };

/* One "key=value" line of an auth file into @a. */
static int auth_line(char *line, struct http_auth *a)
{
	char *eq = strchr(line, '='), *v;
	size_t n;

	if (!eq)
		return -EINVAL;
	*eq = '\0';
	v = eq + 1;
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
		v[--n] = '\0';
	while (*v == ' ' || *v == '\t')
		v++;
	for (char *k = eq - 1; k >= line && (*k == ' ' || *k == '\t'); k--)
		*k = '\0';
#define AUTH_FIELD(name) \
	if (!strcmp(line, #name)) { \
		if (strlen(v) >= sizeof(a->name)) \
			return -E2BIG; \
		strcpy(a->name, v); \
		return 0; \
	}
	AUTH_FIELD(tenant)
	AUTH_FIELD(user)
	AUTH_FIELD(password)
	AUTH_FIELD(bearer)
#undef AUTH_FIELD
	if (!strcmp(line, "header")) {
		if (!http__header_ok(v))
			return -EINVAL;
		if (a->nheaders == HTTP_MAX_HEADERS)
			return -E2BIG;
		strcpy(a->headers[a->nheaders++], v);
		return 0;
	}
	return -ENOENT;
}

int agent_auth__read(const char *path, struct http_auth *a, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	unsigned int no = 0;
	struct stat st;

	memset(a, 0, sizeof(*a));
	if (!f) {
		int rc = -errno;

		seterr(err, errlen, "--auth-file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fileno(f), &st))
		st.st_mode = 0;
	if (!S_ISREG(st.st_mode)) {
		seterr(err, errlen, "--auth-file %s: %s", path, S_ISDIR(st.st_mode) ?
		       "is a directory" : "not a regular file");
		fclose(f);
		return -EINVAL;
	}
	if (st.st_mode & S_IROTH)
		fprintf(stderr, "pyprof-bpf agent: warning: --auth-file %s is readable by "
			"everyone (chmod 600 it)\n", path);
	while ((got = getline(&line, &cap, f)) >= 0) {
		char *s = line;
		size_t n = (size_t)got;
		int rc;

		no++;
		/* Whole lines (a comment never ends early), CRLF or not. */
		while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' ||
			     s[n - 1] == '\t'))
			s[--n] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		rc = strlen(s) != (size_t)(n - (size_t)(s - line)) ? -EINVAL : auth_line(s, a);
		if (rc) {
			/* The line is not printed: it may hold a secret. */
			seterr(err, errlen, "--auth-file %s, line %u: %s", path, no,
			       rc == -ENOENT ? "not tenant=, user=, password=, bearer= or header=" :
			       rc == -E2BIG ? "the value is too long" : "not key=value");
			free(line);
			fclose(f);
			return -EINVAL;
		}
	}
	free(line);
	if (ferror(f)) {
		seterr(err, errlen, "--auth-file %s: cannot be read", path);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	if (a->password[0] && !a->user[0]) {
		seterr(err, errlen, "--auth-file %s: password= without user=", path);
		return -EINVAL;
	}
	return 0;
}
