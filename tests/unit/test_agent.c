// SPDX-License-Identifier: MIT
/*
 * test_agent.c - the pure parts of `pyprof-bpf agent`: labels read from
 * what a target chooses (its command line, environment and cgroup: every
 * byte hostile), durations, the auth file, the spool (entries published
 * into queues, read in order, bounded by size and age, cleaned after a
 * crash), the stores' requests (Parca's JSON and base64, Pyroscope's URL)
 * and the windows a recording is cut into (clock-aligned, late samples,
 * profiles written as gzip before they are handed over).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>
#include "agent/agent_options.h"
#include "agent/http.h"
#include "agent/labels.h"
#include "agent/push.h"
#include "agent/spool.h"
#include "agent/windows.h"
#include "output/output.h"
#include "symbols/symbolizer.h"
#include "util/clock.h"

/* ---- files ---- */

static char *make_tmpdir(void)
{
	char tmpl[] = "/tmp/test_agent_XXXXXX";

	assert_non_null(mkdtemp(tmpl));
	return strdup(tmpl);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_rf(char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static unsigned char *read_whole(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0, r;

	assert_non_null(f);
	do {
		if (n + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

static int exists(const char *path)
{
	struct stat st;

	return !lstat(path, &st);
}

static char *path_of(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

/* ---- labels ---- */

static void clean(const char *s, size_t n, size_t len, const char *want)
{
	char out[300];

	memset(out, 'Z', sizeof(out));
	labels__clean(s, n, out, len);
	assert_string_equal(out, want);
}

static void test_labels_clean(void **state)
{
	char longs[400], want[LABEL_VALUE_MAX];
	char out[4] = "abc";

	(void)state;
	clean("web-1.prod_a/b:c", 100, 64, "web-1.prod_a/b:c");
	clean("svc{a=\"b\"},c", 100, 64, "svc_a__b___c");
	clean("line1\nline2\r\t ", 100, 64, "line1_line2___");
	clean("caf\xc3\xa9-\xe2\x82\xac", 100, 64, "caf__-___");	/* é, € */
	clean("\x7f\x80\xff%&?#", 100, 64, "_______");
	clean("abcdef", 3, 64, "abc");			/* cut at n */
	clean("abcdef", 100, 4, "abc");			/* cut at the buffer */
	clean("ab\0cd", 5, 64, "ab");			/* a NUL ends it */
	clean("abc", 3, 1, "");
	clean("", 0, 64, "");
	labels__clean("abc", 3, out, 0);		/* no room: untouched */
	assert_memory_equal(out, "abc", 4);

	memset(longs, 'x', sizeof(longs) - 1);
	longs[sizeof(longs) - 1] = '\0';
	memset(want, 'x', sizeof(want) - 1);
	want[sizeof(want) - 1] = '\0';
	clean(longs, sizeof(longs), LABEL_VALUE_MAX, want);
}

static void test_labels_name_ok(void **state)
{
	static const char *const good[] = { "a", "env", "_x", "A9_b", "team_2", "X__y" };
	static const char *const bad[] = {
		"", "9a", "__x", "__", "a-b", "a.b", "a/b", "a:b", "a b", "a=b", "a{",
		"caf\xc3\xa9", "-a", ".a", "a\n",
	};
	char name[LABEL_NAME_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(labels__name_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (labels__name_ok(bad[i]))
			fail_msg("'%s' accepted", bad[i]);
	}
	memset(name, 'a', LABEL_NAME_MAX - 1);
	name[LABEL_NAME_MAX - 1] = '\0';
	assert_true(labels__name_ok(name));		/* 63 bytes */
	name[LABEL_NAME_MAX - 1] = 'a';
	name[LABEL_NAME_MAX] = '\0';
	assert_false(labels__name_ok(name));		/* 64 */
}

/* The service of a command line of @n bytes, copied into a buffer of
 * exactly @n bytes (ASan sees a read past it). */
static int svc(const char *args, size_t n, char *out, size_t len)
{
	char *copy = malloc(n ? n : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, args, n);
	memset(out, 'Z', len);
	rc = labels__service_from_cmdline(copy, n, out, len);
	free(copy);
	return rc;
}

#define CMD(lit) (lit), sizeof(lit) - 1	/* a literal's bytes, its last NUL included */

static void svc_is(const char *args, size_t n, const char *want)
{
	char out[LABEL_VALUE_MAX];

	if (!want) {
		assert_int_equal(svc(args, n, out, sizeof(out)), -ENOENT);
		return;
	}
	assert_int_equal(svc(args, n, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_service_from_cmdline(void **state)
{
	char big[600], want[LABEL_VALUE_MAX], out[8];
	size_t n;

	(void)state;
	svc_is(CMD("python3\0/a/b/server.py\0"), "server");
	svc_is(CMD("python3\0server.py\0--port\0080\0"), "server");
	svc_is(CMD("python3\0-u\0-X\0dev\0app.py\0"), "app");
	svc_is(CMD("python3\0-Xdev\0-B\0app.py\0"), "app");
	svc_is(CMD("python3\0-W\0ignore\0w.py\0"), "w");
	svc_is(CMD("python3\0--check-hash-based-pycs\0always\0x.py\0"), "x");
	svc_is(CMD("python3\0-m\0pkg.mod\0--flag\0"), "pkg.mod");
	svc_is(CMD("python3\0-mpkg.mod\0"), "pkg.mod");
	svc_is(CMD("python3\0-u\0-m\0http.server\0"), "http.server");
	svc_is(CMD("/usr/bin/python3.12\0/srv/run\0"), "run");	/* no .py */
	svc_is(CMD("python3\0a.py.py\0"), "a.py");
	svc_is(CMD("python3\0/srv/.py\0"), ".py");		/* nothing but .py: kept */
	/* what the target chooses is cleaned */
	svc_is(CMD("python3\0/x/my server{a=b},c.py\0"), "my_server_a_b__c");
	svc_is(CMD("python3\0/x/caf\xc3\xa9\n.py\0"), "caf___");
	svc_is(CMD("python3\0-mpkg{x=\"1\"}\0"), "pkg_x__1__");
	/* nothing named */
	svc_is(CMD("python3\0-c\0import app\0app.py\0"), NULL);
	svc_is(CMD("python3\0-cimport app\0"), NULL);
	svc_is(CMD("python3\0-u\0-c\0pass\0"), NULL);
	svc_is(CMD("python3\0"), NULL);				/* the interpreter alone */
	svc_is("/usr/bin/python3", 16, NULL);			/* ... with no NUL */
	svc_is("", 0, NULL);
	svc_is(CMD("\0\0\0"), NULL);				/* empty arguments */
	svc_is(CMD("python3\0\0app.py\0"), NULL);		/* an empty script */
	/* Joined letters, as CPython's own option parser reads them. */
	svc_is(CMD("python3\0-Ic\0import x; run()\0"), NULL);
	svc_is(CMD("python3\0-Bc\0pass\0"), NULL);
	svc_is(CMD("python3\0-Im\0pkg.svc\0"), "pkg.svc");
	svc_is(CMD("python3\0-Impkg.svc\0"), "pkg.svc");
	svc_is(CMD("python3\0-IWignore\0w.py\0"), "w");
	svc_is(CMD("python3\0-IW\0ignore\0w.py\0"), "w");
	svc_is(CMD("python3\0-\0x.py\0"), NULL);		/* the program from stdin */
	svc_is(CMD("python3\0--version\0x.py\0"), "x");
	/* The last argument without its NUL: nothing past n is read. */
	{
		static const char a1[] = "python3\0/srv/app.pyEXTRA";
		static const char a2[] = "python3\0-m\0pkg.modEXTRA";
		char *h1 = malloc(19), *h2 = malloc(18);

		assert_non_null(h1);
		assert_non_null(h2);
		memcpy(h1, a1, 19);	/* "python3\0/srv/app.py", no NUL */
		memcpy(h2, a2, 18);	/* "python3\0-m\0pkg.mod", no NUL */
		svc_is(h1, 19, "app");
		svc_is(h2, 18, "pkg.mod");
		svc_is("python3\0app.pyEXTRA", 14, "app");	/* what follows is not read */
		svc_is("python3\0-m\0pkg.modEXTRA", 18, "pkg.mod");
		free(h1);
		free(h2);
	}
	svc_is(CMD("python3\0-m\0"), NULL);			/* -m, no module */
	svc_is(CMD("python3\0-m\0\0"), NULL);
	svc_is(CMD("python3\0-X\0"), NULL);			/* -X, no value */
	svc_is(CMD("python3\0-u\0-O\0"), NULL);			/* options only */
	svc_is(CMD("python3\0/srv/app/\0"), NULL);		/* a directory */
	svc_is(CMD("/opt/app.py\0"), NULL);			/* only argv[0] */

	/* a long script name is cut to a label value */
	memcpy(big, "python3\0/", 9);
	n = 9;
	memset(big + n, 's', 500);
	n += 500;
	memcpy(big + n, ".py", 4);
	n += 4;
	memset(want, 's', sizeof(want) - 1);
	want[sizeof(want) - 1] = '\0';
	svc_is(big, n, want);
	/* ... and so is a long module */
	memcpy(big, "python3\0-m", 10);
	memset(big + 10, 'm', 500);
	big[510] = '\0';
	memset(want, 'm', sizeof(want) - 1);
	svc_is(big, 511, want);

	/* a small buffer */
	assert_int_equal(svc(CMD("python3\0/a/b/server.py\0"), out, 4), 0);
	assert_string_equal(out, "ser");
}

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static int container(const char *text, size_t n, char *out, size_t len)
{
	char *copy = malloc(n ? n : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, text, n);
	memset(out, 'Z', len);
	rc = labels__container_from_cgroup(copy, n, out, len);
	free(copy);
	return rc;
}

static void container_is(const char *text, const char *want)
{
	char out[LABEL_VALUE_MAX];
	int rc = container(text, strlen(text), out, sizeof(out));

	if (!want) {
		assert_int_equal(rc, -ENOENT);
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(out, want);
}

static void test_container_from_cgroup(void **state)
{
	char out[LABEL_VALUE_MAX];
	const char *t;

	(void)state;
	container_is("0::/system.slice/docker-" ID64 ".scope\n", ID64);
	container_is("12:cpu,cpuacct:/kubepods/burstable/pod0a1b2c3d-1234-5678-9abc-def012345678/"
		     ID64 "\n11:memory:/kubepods/burstable/pod0a1b2c3d-1234-5678-9abc-def012345678/"
		     ID64 "\n", ID64);
	container_is("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-" ID64 ".scope", ID64);
	container_is("0::/machine.slice/libpod-" ID64 ".scope/container\n", ID64);
	container_is("0::/system.slice/crio-" ID64 ".scope\n", ID64);
	container_is("0::/docker/" ID64 "\n", ID64);
	container_is("0::/a/" ID64 "\n1::/b/" ID64B "\n", ID64B);	/* the last */
	container_is("0::/x" ID64 "g\n", ID64);		/* a run of exactly 64 */
	/* none */
	container_is("0::/user.slice/user-1000.slice/session-2.scope\n", NULL);
	container_is("0::/\n", NULL);
	container_is("", NULL);
	container_is("0::/docker-" ID64 "a.scope\n", NULL);		/* 65 digits */
	container_is("0::/docker-" ID64 ID64 ".scope\n", NULL);	/* 128 */
	container_is("0::/docker-123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		     ".scope\n", NULL);					/* 63 */
	container_is("0::/docker-0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"
		     ".scope\n", NULL);					/* upper case */
	/* @n bounds it: the last digit is past it */
	t = "0::/docker-" ID64;
	assert_int_equal(container(t, strlen(t) - 1, out, sizeof(out)), -ENOENT);
	assert_int_equal(container(t, strlen(t), out, sizeof(out)), 0);
	assert_string_equal(out, ID64);
	/* a small buffer */
	assert_int_equal(container(t, strlen(t), out, 9), 0);
	assert_string_equal(out, "01234567");
}

static void assert_label_value(const char *v)
{
	assert_true(v[0]);
	assert_true(strlen(v) < LABEL_VALUE_MAX);
	for (const char *c = v; *c; c++)
		assert_non_null(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				       "0123456789._/:-", *c));
}

static void test_labels_read(void **state)
{
	struct proc_labels l;
	char comm[300], want[LABEL_VALUE_MAX], *cg;
	size_t n;
	FILE *f;
	long pid_max = 4194304;
	pid_t gone;

	(void)state;
	/* self: whatever it is, a label value; the container as the cgroup says */
	memset(&l, 'Z', sizeof(l));
	labels__read(getpid(), "test_agent", &l);
	assert_label_value(l.service);
	cg = (char *)read_whole("/proc/self/cgroup", &n);
	cg = realloc(cg, n + 1);
	assert_non_null(cg);
	cg[n] = '\0';
	memset(want, 0, sizeof(want));
	labels__container_from_cgroup(cg, n, want, sizeof(want));
	assert_string_equal(l.container, want);
	free(cg);

	/* a process that does not exist: its comm, cleaned */
	f = fopen("/proc/sys/kernel/pid_max", "r");
	if (f) {
		assert_int_equal(fscanf(f, "%ld", &pid_max), 1);
		fclose(f);
	}
	gone = (pid_t)(pid_max + 1);
	memset(&l, 'Z', sizeof(l));
	labels__read(gone, "wor{ker}=1", &l);
	assert_string_equal(l.service, "wor_ker__1");
	assert_string_equal(l.container, "");
	labels__read(gone, NULL, &l);
	assert_string_equal(l.service, "python");
	labels__read(gone, "", &l);
	assert_string_equal(l.service, "python");
	memset(comm, 'c', sizeof(comm) - 1);
	comm[sizeof(comm) - 1] = '\0';
	labels__read(gone, comm, &l);
	memset(want, 'c', sizeof(want) - 1);
	want[sizeof(want) - 1] = '\0';
	assert_string_equal(l.service, want);
}

/* ---- labels of another process: its environment and command line ---- */

struct child {
	pid_t pid;
	int in;		/* its stdin: closing it ends it */
};

/* /bin/sh running @script with @env: it says "ready" on its stdout once it
 * runs (its command line and environment are in place by then), then
 * waits on its stdin. */
static void child_start(struct child *c, const char *script, char *const env[])
{
	char *const argv[] = { "sh", (char *)script, NULL };
	int in[2], out[2];
	char buf[16];
	size_t got = 0;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (!c->pid) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execve("/bin/sh", argv, env);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in = in[1];
	while (got < 6) {
		ssize_t r = read(out[0], buf + got, sizeof(buf) - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(out[0]);
	buf[got] = '\0';
	if (strcmp(buf, "ready\n"))
		fail_msg("the child did not start: '%s'", buf);
}

static void child_stop(struct child *c)
{
	int status;

	close(c->in);
	kill(c->pid, SIGKILL);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
}

static void test_labels_read_child(void **state)
{
	char *dir = make_tmpdir(), *script = path_of(dir, "server.py");
	char longv[300], want[LABEL_VALUE_MAX];
	struct proc_labels l;
	struct child c;

	(void)state;
	if (access("/bin/sh", X_OK))
		skip();
	write_file(script, "echo ready\nread x\n", 18);
	{	/* OTEL_SERVICE_NAME first, cleaned */
		char *const env[] = { "PYROSCOPE_APPLICATION_NAME=pyro",
				      "OTEL_SERVICE_NAME=my svc{a=\"b\"},\n\xc3\xa9", NULL };

		child_start(&c, script, env);
		labels__read(c.pid, "sh", &l);
		child_stop(&c);
		assert_string_equal(l.service, "my_svc_a__b______");
	}
	{	/* an empty OTEL_SERVICE_NAME and look-alike names are not it */
		char *const env[] = { "OTEL_SERVICE_NAME=", "OTEL_SERVICE_NAMEX=no",
				      "XOTEL_SERVICE_NAME=no",
				      "PYROSCOPE_APPLICATION_NAME=pyro.app", NULL };

		child_start(&c, script, env);
		labels__read(c.pid, "sh", &l);
		child_stop(&c);
		assert_string_equal(l.service, "pyro.app");
	}
	{	/* none: the script */
		char *const env[] = { "OTEL_SERVICE_NAME=", "PATH=/bin", NULL };

		child_start(&c, script, env);
		labels__read(c.pid, "sh", &l);
		child_stop(&c);
		assert_string_equal(l.service, "server");
	}
	{	/* a long value is cut */
		char *env[] = { longv, NULL };

		snprintf(longv, sizeof(longv), "OTEL_SERVICE_NAME=%0280d", 7);
		child_start(&c, script, env);
		labels__read(c.pid, "sh", &l);
		child_stop(&c);
		memset(want, '0', sizeof(want) - 1);
		want[sizeof(want) - 1] = '\0';
		assert_string_equal(l.service, want);
	}
	free(script);
	rm_rf(dir);
}

/* ---- agent options ---- */

static void test_parse_duration(void **state)
{
	static const struct {
		const char *s;
		double want;
	} good[] = {
		{ "90", 90 }, { "1.5", 1.5 }, { "30s", 30 }, { "10m", 600 }, { "6h", 21600 },
		{ "2d", 172800 }, { "0", 0 }, { "0.5m", 30 },
	};
	static const char *const bad[] = {
		"", "x", "10x", "-1", "-1s", "1e999", "10ms", "s", "10S", "10 s", "10s ", "nan",
		"inf", "1h30m",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		double v = -1;

		assert_int_equal(parse_duration(good[i].s, &v), 0);
		assert_true(v == good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		double v = -7;

		if (parse_duration(bad[i], &v) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_true(v == -7);			/* untouched */
	}
}

static int auth_of(const char *dir, const char *text, struct http_auth *a, char *err,
		   size_t errlen)
{
	char *p = path_of(dir, "auth");
	int rc;

	write_file(p, text, strlen(text));
	err[0] = '\0';
	rc = agent_auth__read(p, a, err, errlen);
	free(p);
	return rc;
}

static void test_auth_file(void **state)
{
	char *dir = make_tmpdir(), err[512], *p;
	struct http_auth *a = calloc(1, sizeof(*a));
	char *longv;

	(void)state;
	assert_non_null(a);
	assert_int_equal(auth_of(dir, "# the stores' credentials\n"
				 "\n"
				 "  tenant = acme-1  \n"
				 "\tuser=bob\r\n"
				 "password =  s3cr=t #x\n"
				 "   # bearer=no\n", a, err, sizeof(err)), 0);
	assert_string_equal(a->tenant, "acme-1");
	assert_string_equal(a->user, "bob");
	assert_string_equal(a->password, "s3cr=t #x");		/* after the first '=' */
	assert_string_equal(a->bearer, "");

	assert_int_equal(auth_of(dir, "bearer=eyJ.tok-en_", a, err, sizeof(err)), 0);
	assert_string_equal(a->bearer, "eyJ.tok-en_");		/* no final newline */

	/* CRLF, blank lines included; a comment longer than any buffer stays one. */
	assert_int_equal(auth_of(dir, "user=bob\r\n\r\npassword=pw\r\n", a, err, sizeof(err)), 0);
	assert_string_equal(a->user, "bob");
	assert_string_equal(a->password, "pw");
	{
		size_t n = 2 + 9000 + strlen("tenant=evil\n") + 1;
		char *c = malloc(n);

		assert_non_null(c);
		memcpy(c, "# ", 2);
		memset(c + 2, 'x', 9000);
		strcpy(c + 9002, "tenant=evil\n");
		assert_int_equal(auth_of(dir, c, a, err, sizeof(err)), 0);
		assert_string_equal(a->tenant, "");
		free(c);
	}
	assert_string_equal(a->user, "");			/* cleared first */
	assert_string_equal(a->tenant, "");

	assert_int_equal(auth_of(dir, "", a, err, sizeof(err)), 0);

	/* an unknown key: its line, never its value */
	assert_int_equal(auth_of(dir, "user=bob\n# c\npasswd=hunter2\n", a, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "line 3"));
	assert_null(strstr(err, "hunter2"));
	assert_null(strstr(err, "passwd"));
	/* a line that is not key=value */
	assert_int_equal(auth_of(dir, "user=bob\nhunter2\n", a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 2"));
	assert_null(strstr(err, "hunter2"));
	/* a password alone */
	assert_int_equal(auth_of(dir, "password=hunter2\n", a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "password"));
	assert_null(strstr(err, "hunter2"));
	/* a value too long for its field */
	longv = malloc(400);
	assert_non_null(longv);
	memcpy(longv, "tenant=", 7);
	memset(longv + 7, 't', 300);
	longv[307] = '\0';
	assert_int_equal(auth_of(dir, longv, a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1"));
	assert_null(strstr(err, "ttttttttt"));
	free(longv);

	/* no file */
	p = path_of(dir, "missing");
	assert_int_equal(agent_auth__read(p, a, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, p));
	free(p);

	free(a);
	rm_rf(dir);
}

/* ---- spool ---- */

static struct spool *spool_at(const char *dir, uint64_t max_bytes, uint64_t max_age_s)
{
	struct spool *s = NULL;
	char err[256] = "";

	if (spool__open(dir, max_bytes, max_age_s, &s, err, sizeof(err)))
		fail_msg("spool__open %s: %s", dir, err);
	assert_non_null(s);
	return s;
}

/* Write @len bytes of a profile at @entry's tmp path and publish it. */
static int put_entry(struct spool *s, const char *entry, size_t len, const char *meta,
		     char *const *queues, size_t nq)
{
	char path[4096];
	char *body = malloc(len ? len : 1);
	int rc;

	assert_non_null(body);
	for (size_t i = 0; i < len; i++)
		body[i] = (char)(i * 7 + strlen(entry));
	spool__tmp_path(s, entry, path, sizeof(path));
	write_file(path, body, len);
	free(body);
	rc = spool__publish(s, entry, meta, queues, nq);
	assert_false(exists(path));		/* the tmp file is gone, whatever happened */
	return rc;
}

/* The oldest entry of @qdir and how many it holds, from one listing:
 * -ENOENT when it is empty. */
static int oldest(const char *qdir, char *entry, size_t len, size_t *count)
{
	struct spool_entry *v;
	int rc = spool_queue__list(qdir, &v, count);

	if (rc)
		return rc;
	if (*count)
		snprintf(entry, len, "%s", v[0].name);
	free(v);
	return *count ? 0 : -ENOENT;
}

static size_t queued(const char *qdir)
{
	char e[SPOOL_ENTRY_LEN];
	size_t n = 99;
	int rc = oldest(qdir, e, sizeof(e), &n);

	assert_true(rc == 0 || rc == -ENOENT);
	assert_true(rc ? n == 0 : n > 0);
	return n;
}

static void test_spool_open(void **state)
{
	char *dir = make_tmpdir(), *top, *tmp, *stray, *file, err[256] = "";
	char q[4096];
	struct spool *s;
	struct stat st;

	(void)state;
	top = path_of(dir, "a/b/spool");
	tmp = path_of(dir, "a/b/spool/.tmp");
	s = spool_at(top, 1 << 20, 0);
	assert_int_equal(stat(top, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);	/* the queues' names are its own */
	assert_int_equal(stat(tmp, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(spool__queue(s, "pyroscope-0123", q, sizeof(q)), 0);
	assert_int_equal(strncmp(q, top, strlen(top)), 0);
	assert_string_equal(q + strlen(top), "/pyroscope-0123");
	assert_int_equal(stat(q, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(spool__queue(s, "pyroscope-0123", q, sizeof(q)), 0);	/* again */
	assert_int_equal(spool__queue(s, "pyroscope-0123", q, 16), -ENAMETOOLONG);
	spool__free(s);

	/* what a dead agent left in .tmp is removed */
	stray = path_of(tmp, "0000000001000-0000000042.pb.gz");
	write_file(stray, "half", 4);
	s = spool_at(top, 1 << 20, 0);
	assert_false(exists(stray));
	assert_true(exists(tmp));
	spool__free(s);

	/* a spool that cannot be made */
	file = path_of(dir, "file");
	write_file(file, "x", 1);
	free(top);
	top = path_of(file, "spool");
	s = (struct spool *)1;
	assert_int_equal(spool__open(top, 1 << 20, 0, &s, err, sizeof(err)), -ENOTDIR);
	assert_true(s == (struct spool *)1);
	assert_non_null(strstr(err, top));
	spool__free(NULL);

	free(file);
	free(stray);
	free(tmp);
	free(top);
	rm_rf(dir);
}

static void test_spool_entry_name(void **state)
{
	char a[SPOOL_ENTRY_LEN], b[SPOOL_ENTRY_LEN], small[8];

	(void)state;
	spool__entry_name(1700000000123ull, 4242, a, sizeof(a));
	assert_string_equal(a, "1700000000123-0000004242");
	spool__entry_name(999, 1, a, sizeof(a));
	assert_string_equal(a, "0000000000999-0000000001");
	spool__entry_name(0, 0, a, sizeof(a));
	assert_string_equal(a, "0000000000000-0000000000");
	spool__entry_name(9999999999999ull, 2147483647, a, sizeof(a));
	assert_string_equal(a, "9999999999999-2147483647");
	assert_true(strlen(a) < SPOOL_ENTRY_LEN);
	/* by name = by window, then by pid */
	spool__entry_name(999, 7, a, sizeof(a));
	spool__entry_name(1000, 1, b, sizeof(b));
	assert_true(strcmp(a, b) < 0);
	spool__entry_name(1000, 5, a, sizeof(a));
	spool__entry_name(1000, 40, b, sizeof(b));
	assert_true(strcmp(a, b) < 0);
	spool__entry_name(1000, 5, small, sizeof(small));
	assert_string_equal(small, "0000000");
}

static void test_spool_publish_read(void **state)
{
	char *dir = make_tmpdir(), *top = path_of(dir, "spool");
	char q1[4096], q2[4096], e[SPOOL_ENTRY_LEN], e1[SPOOL_ENTRY_LEN], e2[SPOOL_ENTRY_LEN];
	char e3[SPOOL_ENTRY_LEN], path[4200];
	char *queues[2] = { q1, q2 };
	const char *meta1 = "from_ms=1700000000000\nuntil_ms=1700000015000\npid=42\n"
			    "service_name=web\n";
	struct spool *s = spool_at(top, 1 << 20, 0);
	struct stat st;
	void *body;
	char *meta;
	size_t n, blen;

	(void)state;
	assert_int_equal(spool__queue(s, "pyroscope-1", q1, sizeof(q1)), 0);
	assert_int_equal(spool__queue(s, "parca-2", q2, sizeof(q2)), 0);
	assert_int_equal(queued(q1), 0);
	assert_int_equal(oldest(q1, e, sizeof(e), &n), -ENOENT);

	/* published out of order: read in order */
	spool__entry_name(1700000015000ull, 42, e2, sizeof(e2));
	spool__entry_name(1700000000000ull, 42, e1, sizeof(e1));
	spool__entry_name(1700000000000ull, 7, e3, sizeof(e3));	/* same window, lower pid */
	assert_int_equal(put_entry(s, e2, 300, "pid=42\n", queues, 2), 0);
	assert_int_equal(put_entry(s, e1, 100, meta1, queues, 2), 0);
	assert_int_equal(put_entry(s, e3, 0, "pid=7\n", queues, 1), 0);
	assert_int_equal(queued(q1), 3);
	assert_int_equal(queued(q2), 2);

	/* one profile, two names */
	snprintf(path, sizeof(path), "%s/%s.pb.gz", q1, e1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 100);
	assert_int_equal(st.st_nlink, 2);

	assert_int_equal(oldest(q1, e, sizeof(e), &n), 0);
	assert_string_equal(e, e3);
	assert_int_equal(n, 3);
	assert_int_equal(oldest(q2, e, sizeof(e), &n), 0);
	assert_string_equal(e, e1);
	assert_int_equal(n, 2);

	assert_int_equal(spool_queue__read(q2, e1, &body, &blen, &meta), 0);
	assert_int_equal(blen, 100);
	for (size_t i = 0; i < blen; i++)
		assert_int_equal(((unsigned char *)body)[i], (unsigned char)(i * 7 + strlen(e1)));
	assert_string_equal(meta, meta1);
	free(body);
	free(meta);
	assert_int_equal(spool_queue__read(q1, e3, &body, &blen, &meta), 0);	/* empty */
	assert_int_equal(blen, 0);
	assert_string_equal(meta, "pid=7\n");
	free(body);
	free(meta);

	/* removed from one queue, still in the other */
	spool_queue__remove(q2, e1);
	assert_int_equal(spool_queue__read(q2, e1, &body, &blen, &meta), -ENOENT);
	assert_int_equal(oldest(q2, e, sizeof(e), &n), 0);
	assert_string_equal(e, e2);
	assert_int_equal(n, 1);
	assert_int_equal(spool_queue__read(q1, e1, &body, &blen, &meta), 0);
	assert_int_equal(blen, 100);
	free(body);
	free(meta);
	spool_queue__remove(q2, e2);
	spool_queue__remove(q2, e2);		/* twice: nothing to do */
	assert_int_equal(queued(q2), 0);

	/* a profile that was never written is in no queue */
	spool__entry_name(1700000030000ull, 9, e, sizeof(e));
	assert_int_not_equal(spool__publish(s, e, "pid=9\n", queues, 2), 0);
	assert_int_equal(queued(q2), 0);
	assert_int_equal(queued(q1), 3);
	assert_int_equal(spool_queue__read(q2, e, &body, &blen, &meta), -ENOENT);
	spool__free(s);
	rm_rf(dir);
	free(top);
}

static void test_spool_stray_and_cleanup(void **state)
{
	static const char *const stray[] = {
		"README", "x.pb.gz", "0000000000001-0000000001.pb.gz.new",
		"000000000000a-0000000001.pb.gz", "00000000000010000000001.pb.gz",
		"0000000000001-0000000001.pb", "0000000000001-00000000001.pb.gz",
		"0000000000001_0000000001.pb.gz", ".0000000000001-0000000001.pb.gz",
		"0000000000001-0000000001.meta.new", "x.meta",
	};
	char *dir = make_tmpdir(), *top = path_of(dir, "spool");
	struct spool *s = spool_at(top, 1 << 20, 0);
	char q[4096], e[SPOOL_ENTRY_LEN], path[4200], *qs[1] = { q };
	size_t n;
	uint64_t dropped = 0;

	(void)state;
	assert_int_equal(spool__queue(s, "q", q, sizeof(q)), 0);
	for (size_t i = 0; i < sizeof(stray) / sizeof(stray[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", q, stray[i]);
		write_file(path, "stray", 5);
	}
	snprintf(path, sizeof(path), "%s/sub", q);
	assert_int_equal(mkdir(path, 0700), 0);
	/* a stray file beside the queues */
	snprintf(path, sizeof(path), "%s/notaqueue", top);
	write_file(path, "x", 1);
	assert_int_equal(oldest(q, e, sizeof(e), &n), -ENOENT);
	assert_int_equal(n, 0);

	/* a meta whose profile never came (an agent died between the two) */
	snprintf(path, sizeof(path), "%s/0000000000005-0000000001.meta", q);
	write_file(path, "pid=1\n", 6);
	assert_int_equal(put_entry(s, "0000000000009-0000000001", 10, "pid=1\n", qs, 1), 0);
	assert_int_equal(spool__queue(s, "q", q, sizeof(q)), 0);	/* opened again */
	assert_false(exists(path));
	snprintf(path, sizeof(path), "%s/0000000000009-0000000001.meta", q);
	assert_true(exists(path));		/* a whole entry is kept */
	assert_int_equal(oldest(q, e, sizeof(e), &n), 0);
	assert_string_equal(e, "0000000000009-0000000001");
	assert_int_equal(n, 1);
	for (size_t i = 0; i < sizeof(stray) / sizeof(stray[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", q, stray[i]);
		assert_true(exists(path));	/* not ours: left alone */
	}
	/* the bounds count entries only */
	assert_int_equal(spool__enforce(s, 1, &dropped), 0);
	assert_int_equal(dropped, 0);
	assert_int_equal(queued(q), 1);

	spool__free(s);
	rm_rf(dir);
	free(top);
}

static void test_spool_meta_get(void **state)
{
	const char *meta = "service_name_x=a\nservice_name=web-1\nfrom_ms=17\nempty=\n"
			   "eq=a=b\nxpid=3\npid=42\nlast=end";
	char out[64], small[4];

	(void)state;
	assert_int_equal(spool_meta__get(meta, "service_name", out, sizeof(out)), 0);
	assert_string_equal(out, "web-1");
	assert_int_equal(spool_meta__get(meta, "service_name_x", out, sizeof(out)), 0);
	assert_string_equal(out, "a");
	assert_int_equal(spool_meta__get(meta, "pid", out, sizeof(out)), 0);
	assert_string_equal(out, "42");
	assert_int_equal(spool_meta__get(meta, "eq", out, sizeof(out)), 0);
	assert_string_equal(out, "a=b");
	assert_int_equal(spool_meta__get(meta, "empty", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(spool_meta__get(meta, "last", out, sizeof(out)), 0);
	assert_string_equal(out, "end");
	/* absent: prefixes, suffixes and values are not keys */
	assert_int_equal(spool_meta__get(meta, "service", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get(meta, "name", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get(meta, "web-1", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get(meta, "from", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get(meta, "mode", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get("", "pid", out, sizeof(out)), -ENOENT);
	assert_int_equal(spool_meta__get("pid", "pid", out, sizeof(out)), -ENOENT);
	/* cut to the buffer */
	assert_int_equal(spool_meta__get(meta, "service_name", small, sizeof(small)), 0);
	assert_string_equal(small, "web");
	assert_int_equal(spool_meta__get(meta, "pid", small, 1), 0);
	assert_string_equal(small, "");
}

static void test_spool_enforce_size(void **state)
{
	char *dir = make_tmpdir(), *top = path_of(dir, "spool");
	/* an entry weighs its profile and 512 bytes: room for three of 100 */
	struct spool *s = spool_at(top, 3 * (100 + 512), 0);
	char q1[4096], q2[4096], e[SPOOL_ENTRY_LEN], want[SPOOL_ENTRY_LEN];
	char *both[2] = { q1, q2 };
	uint64_t dropped = 0;
	size_t n;

	(void)state;
	assert_int_equal(spool__queue(s, "a", q1, sizeof(q1)), 0);
	assert_int_equal(spool__queue(s, "b", q2, sizeof(q2)), 0);
	for (int i = 4; i >= 0; i--) {		/* newest first */
		spool__entry_name(1000000000ull + (uint64_t)i * 15000, 42, e, sizeof(e));
		assert_int_equal(put_entry(s, e, 100, "pid=42\n", both, 1), 0);
	}
	assert_int_equal(spool__enforce(s, 1000000, &dropped), 0);
	assert_int_equal(dropped, 2);
	assert_int_equal(queued(q1), 3);
	assert_int_equal(oldest(q1, e, sizeof(e), &n), 0);
	spool__entry_name(1000000000ull + 2 * 15000, 42, want, sizeof(want));
	assert_string_equal(e, want);
	assert_int_equal(spool__enforce(s, 1000000, &dropped), 0);	/* within: nothing */
	assert_int_equal(dropped, 2);

	/* across queues: an entry in both weighs in each */
	spool__entry_name(2000000000ull, 1, e, sizeof(e));
	assert_int_equal(put_entry(s, e, 100, "pid=1\n", both, 2), 0);
	assert_int_equal(queued(q1) + queued(q2), 5);
	assert_int_equal(spool__enforce(s, 1000000, &dropped), 0);
	assert_int_equal(dropped, 4);
	assert_int_equal(queued(q1), 2);		/* the oldest two of q1 went */
	assert_int_equal(queued(q2), 1);		/* q2's newer one stays */
	spool__entry_name(1000000000ull + 4 * 15000, 42, want, sizeof(want));
	assert_int_equal(oldest(q1, e, sizeof(e), &n), 0);
	assert_string_equal(e, want);

	spool__free(s);
	rm_rf(dir);
	free(top);
}

static void test_spool_enforce_age(void **state)
{
	char *dir = make_tmpdir(), *top = path_of(dir, "spool");
	struct spool *s = spool_at(top, 1ull << 40, 3600);
	char q[4096], e[SPOOL_ENTRY_LEN], want[SPOOL_ENTRY_LEN], *qs[1] = { q };
	uint64_t dropped = 0;
	size_t n;

	(void)state;
	assert_int_equal(spool__queue(s, "a", q, sizeof(q)), 0);
	/* windows at 1,000,000 s + 0, 600, 1200, 1800 */
	for (int i = 0; i < 4; i++) {
		spool__entry_name((1000000ull + (uint64_t)i * 600) * 1000, 42, e, sizeof(e));
		assert_int_equal(put_entry(s, e, 10, "pid=42\n", qs, 1), 0);
	}
	/* exactly the age: kept */
	assert_int_equal(spool__enforce(s, 1000000 + 3600, &dropped), 0);
	assert_int_equal(dropped, 0);
	assert_int_equal(queued(q), 4);
	/* past it: the first two */
	assert_int_equal(spool__enforce(s, 1000000 + 600 + 3601, &dropped), 0);
	assert_int_equal(dropped, 2);
	assert_int_equal(oldest(q, e, sizeof(e), &n), 0);
	assert_int_equal(n, 2);
	spool__entry_name((1000000ull + 1200) * 1000, 42, want, sizeof(want));
	assert_string_equal(e, want);
	/* all of them */
	assert_int_equal(spool__enforce(s, 10000000, &dropped), 0);
	assert_int_equal(dropped, 4);
	assert_int_equal(queued(q), 0);
	spool__free(s);

	/* no age bound */
	s = spool_at(top, 1ull << 40, 0);
	assert_int_equal(put_entry(s, e, 10, "pid=42\n", qs, 1), 0);
	assert_int_equal(spool__enforce(s, UINT64_MAX / 2, &dropped), 0);
	assert_int_equal(dropped, 4);
	assert_int_equal(queued(q), 1);
	spool__free(s);
	rm_rf(dir);
	free(top);
}

/* ---- push ---- */

static const char *const meta_full =
	"from_ms=1700000000123\nuntil_ms=1700000015123\npid=42\nservice_name=web-1\n"
	"host=h1.example\nmode=cpu\ncomm=python3\nsamples=17\nlabel.env=prod\n"
	"python_version=3.12.1\ncontainer_id=" ID64 "\nlabel.team=a/b:c\n";

struct got_labels {
	char s[1024];
	int calls, stop_at;
};

static int collect(void *ctx, const char *name, const char *value)
{
	struct got_labels *g = ctx;
	size_t n = strlen(g->s);

	snprintf(g->s + n, sizeof(g->s) - n, "%s=%s;", name, value);
	return ++g->calls == g->stop_at ? 77 : 0;
}

static void test_push_basics(void **state)
{
	struct got_labels g = { .stop_at = 0 };
	char *u;

	(void)state;
	assert_ptr_equal(push__kind("pyroscope"), &push_pyroscope);
	assert_ptr_equal(push__kind("parca"), &push_parca);
	assert_null(push__kind(""));
	assert_null(push__kind("Parca"));
	assert_null(push__kind("parca "));
	assert_null(push__kind("pyroscope=http://x"));
	assert_string_equal(push_pyroscope.name, "pyroscope");
	assert_string_equal(push_parca.name, "parca");

	u = push__url("http://h:4040", "/ingest");
	assert_string_equal(u, "http://h:4040/ingest");
	free(u);
	u = push__url("http://h:4040///", "/ingest");
	assert_string_equal(u, "http://h:4040/ingest");
	free(u);
	u = push__url("https://h/prefix/", "/profiles/writeraw");
	assert_string_equal(u, "https://h/prefix/profiles/writeraw");
	free(u);
	u = push__url("", "/ingest");
	assert_string_equal(u, "/ingest");
	free(u);

	/* the fixed ones in their order, then the user's in the meta's */
	assert_int_equal(push__each_label(meta_full, collect, &g), 0);
	assert_string_equal(g.s, "pid=42;host=h1.example;python_version=3.12.1;container_id=" ID64
			    ";env=prod;team=a/b:c;");
	/* absent or empty ones are left out */
	memset(&g, 0, sizeof(g));
	assert_int_equal(push__each_label("service_name=s\npid=7\ncontainer_id=\nhost=h\n"
					  "labelx=1\nlabel.k=v", collect, &g), 0);
	assert_string_equal(g.s, "pid=7;host=h;k=v;");
	memset(&g, 0, sizeof(g));
	assert_int_equal(push__each_label("", collect, &g), 0);
	assert_int_equal(g.calls, 0);
	/* the first non-zero return stops it */
	memset(&g, 0, sizeof(g));
	g.stop_at = 3;
	assert_int_equal(push__each_label(meta_full, collect, &g), 77);
	assert_int_equal(g.calls, 3);
	memset(&g, 0, sizeof(g));
	g.stop_at = 5;
	assert_int_equal(push__each_label(meta_full, collect, &g), 77);
	assert_string_equal(g.s, "pid=42;host=h1.example;python_version=3.12.1;container_id=" ID64
			    ";env=prod;");
}

static int b64v(char c)
{
	const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(tab, c) : NULL;

	return p ? (int)(p - tab) : -1;
}

/* Strict base64 of @s (@n chars) into @out: its length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;

		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64v(s[i + k])) < 0)
				return -1;
		}
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		else if (v[1] & 15)
			return -1;		/* non-canonical */
		if (pad < 1)
			out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
		else if (pad == 1 && (v[2] & 3))
			return -1;
	}
	return (long)o;
}

static void test_push_parca(void **state)
{
	char *dir = make_tmpdir(), path[4200], cmd[8800];
	struct push_request r;
	unsigned char prof[16], dec[16];

	(void)state;
	for (size_t len = 0; len <= 10; len++) {
		const char *raw, *end;
		char *body;
		long got;

		for (size_t i = 0; i < len; i++)
			prof[i] = (unsigned char)(0xff - i * 29);
		memset(&r, 0x5a, sizeof(r));
		assert_int_equal(push_parca.request(NULL, "http://parca:7070/", meta_full, prof,
						    len, &r), 0);
		assert_string_equal(r.url, "http://parca:7070/profiles/writeraw");
		assert_string_equal(r.content_type, "application/json");
		assert_non_null(r.body);
		assert_ptr_equal(r.body, r.owned);
		body = strndup(r.body, r.len);
		assert_int_equal(strlen(body), r.len);
		raw = strstr(body, "\"rawProfile\":\"");
		assert_non_null(raw);
		raw += strlen("\"rawProfile\":\"");
		end = strchr(raw, '"');
		assert_non_null(end);
		assert_int_equal((size_t)(end - raw), (len + 2) / 3 * 4);
		got = b64_decode(raw, (size_t)(end - raw), dec);
		assert_int_equal(got, (long)len);
		assert_memory_equal(dec, prof, len);
		if (len % 3 == 1)
			assert_memory_equal(end - 2, "==", 2);
		else if (len % 3 == 2)
			assert_true(end[-1] == '=' && end[-2] != '=');
		else if (len)
			assert_true(end[-1] != '=');
		/* for Python's json and base64 to check */
		snprintf(path, sizeof(path), "%s/parca-%zu.json", dir, len);
		write_file(path, r.body, r.len);
		snprintf(path, sizeof(path), "%s/parca-%zu.bin", dir, len);
		write_file(path, prof, len);
		free(body);
		push_request__free(&r);
		assert_null(r.url);
		assert_null(r.owned);
	}
	if (!access("/usr/bin/python3", X_OK)) {
		snprintf(cmd, sizeof(cmd),
			 "/usr/bin/python3 -c '\n"
			 "import base64, json, sys\n"
			 "d = sys.argv[1]\n"
			 "for n in range(11):\n"
			 "    j = json.load(open(\"%%s/parca-%%d.json\" %% (d, n)))\n"
			 "    want = open(\"%%s/parca-%%d.bin\" %% (d, n), \"rb\").read()\n"
			 "    assert set(j) == {\"series\", \"normalized\"}\n"
			 "    assert j[\"normalized\"] is True\n"
			 "    s, = j[\"series\"]\n"
			 "    l = [(x[\"name\"], x[\"value\"])\n"
			 "         for x in s[\"labels\"][\"labels\"]]\n"
			 "    assert l == [(\"__name__\", \"process_cpu\"),\n"
			 "        (\"service_name\", \"web-1\"),\n"
			 "        (\"pid\", \"42\"), (\"host\", \"h1.example\"),\n"
			 "        (\"python_version\", \"3.12.1\"), (\"container_id\", \"%s\"),\n"
			 "        (\"env\", \"prod\"), (\"team\", \"a/b:c\")], l\n"
			 "    p, = s[\"samples\"]\n"
			 "    assert base64.b64decode(p[\"rawProfile\"], validate=True) == want\n"
			 "' %s", ID64, dir);
		assert_int_equal(system(cmd), 0);
	}

	/* what the profile weighs */
	assert_int_equal(push_parca.request(NULL, "http://p", "service_name=s\nmode=wall\n", "", 0,
					    &r), 0);
	assert_non_null(strstr(r.body, "{\"name\":\"__name__\",\"value\":\"wall\"}"));
	assert_non_null(strstr(r.body, "{\"name\":\"service_name\",\"value\":\"s\"}]"));
	push_request__free(&r);
	assert_int_equal(push_parca.request(NULL, "http://p", "service_name=s\nmode=off-cpu\n", "",
					    0, &r), 0);
	assert_non_null(strstr(r.body, "\"value\":\"off_cpu\""));
	push_request__free(&r);
	assert_int_equal(push_parca.request(NULL, "http://p", "service_name=s\n", "", 0, &r), 0);
	assert_non_null(strstr(r.body, "\"value\":\"process_cpu\""));
	push_request__free(&r);

	/* no service: no request */
	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(push_parca.request(NULL, "http://p", "pid=1\nmode=cpu\n", "ab", 2, &r),
			 -EINVAL);
	assert_null(r.url);
	assert_null(r.owned);
	push_request__free(&r);
	rm_rf(dir);
}

/* @s with its %XX decoded, into a malloc'd string. */
static char *unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	assert_non_null(out);
	for (; *s; s++) {
		unsigned int c;

		if (*s == '%' && sscanf(s + 1, "%2x", &c) == 1) {
			*o++ = (char)c;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return out;
}

/* OTEL_RESOURCE_ATTRIBUTES: service.name, the other pairs, and the pairs
 * as Pyroscope/Parca labels ('.' and '-' made '_'). */
static void test_resource_attributes(void **state)
{
	static const char env[] = "A=1\0OTEL_RESOURCE_ATTRIBUTES= service.name = shop , "
				  "deployment.environment=prod%20eu,bad key=x,k8s.pod-name=web-1,"
				  "noeq,=v,empty=\0PYROSCOPE_APPLICATION_NAME=pyro";
	static const char meta[] = "service_name=shop\npid=7\nresource.deployment.environment="
				   "prod_eu\nresource.k8s.pod-name=web-1\nlabel.team=a\n";
	struct proc_labels l;
	struct got_labels g = { .stop_at = 0 };
	char out[LABEL_VALUE_MAX];

	(void)state;
	assert_int_equal(labels__service_from_environ(env, sizeof(env) - 1, out, sizeof(out)), 0);
	assert_string_equal(out, "shop");	/* before PYROSCOPE_APPLICATION_NAME */
	/* bad key, noeq, =v and empty= are left out: 3 counted (noeq has no '=') */
	assert_int_equal(labels__resource_from_environ(env, sizeof(env) - 1, &l), 3);
	assert_int_equal(l.nresource, 2);
	assert_string_equal(l.resource[0].key, "deployment.environment");
	assert_string_equal(l.resource[0].value, "prod_eu");
	assert_string_equal(l.resource[1].key, "k8s.pod-name");
	assert_string_equal(l.resource[1].value, "web-1");
	assert_int_equal(push__each_label(meta, collect, &g), 0);
	assert_string_equal(g.s, "pid=7;deployment_environment=prod_eu;k8s_pod_name=web-1;team=a;");
}

static void test_push_pyroscope(void **state)
{
	static const char prof[] = "\x1f\x8b\x08\0profile";
	const char *want_name = "web-1{pid=42,host=h1.example,python_version=3.12.1,container_id="
				ID64 ",env=prod,team=a/b:c}";
	char err[256] = "", *meta, *name, *q, *longmeta;
	struct http *h = NULL;
	struct push_request r;
	size_t n;

	(void)state;
	if (http__init(err, sizeof(err)))
		skip();
	assert_int_equal(http__new(&h), 0);

	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(push_pyroscope.request(h, "http://pyro:4040/", meta_full, prof,
						sizeof(prof) - 1, &r), 0);
	assert_string_equal(r.content_type, "application/octet-stream");
	assert_ptr_equal(r.body, prof);		/* the profile as it is */
	assert_int_equal(r.len, sizeof(prof) - 1);
	assert_null(r.owned);
	assert_int_equal(strncmp(r.url, "http://pyro:4040/ingest?name=", 29), 0);
	q = r.url + 29;
	n = strcspn(q, "&");
	assert_string_equal(q + n, "&from=1700000000&until=1700000015&format=pprof");
	/* the name escaped: nothing of it reads as the query's */
	for (size_t i = 0; i < n; i++)
		assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				       "0123456789-._~%", q[i]));
	name = strndup(q, n);
	assert_non_null(strstr(name, "%7B"));	/* { */
	meta = unescape(name);
	assert_string_equal(meta, want_name);
	free(meta);
	free(name);
	push_request__free(&r);

	/* service, from and until are needed */
	assert_int_equal(push_pyroscope.request(h, "http://p", "from_ms=1\nuntil_ms=2\n", "", 0,
						&r), -EINVAL);
	assert_null(r.url);
	assert_int_equal(push_pyroscope.request(h, "http://p", "service_name=s\nuntil_ms=2\n", "",
						0, &r), -EINVAL);
	assert_int_equal(push_pyroscope.request(h, "http://p", "service_name=s\nfrom_ms=2\n", "", 0,
						&r), -EINVAL);
	/* no labels: name=s{} */
	assert_int_equal(push_pyroscope.request(h, "http://p", "service_name=s\nfrom_ms=999\n"
						"until_ms=15999\n", "", 0, &r), 0);
	assert_string_equal(r.url, "http://p/ingest?name=s%7B%7D&from=0&until=15&format=pprof");
	push_request__free(&r);

	/* more labels than a name holds */
	longmeta = malloc(20 * 520 + 100);
	assert_non_null(longmeta);
	n = (size_t)sprintf(longmeta, "service_name=s\nfrom_ms=1\nuntil_ms=2\n");
	for (int i = 0; i < 20; i++) {
		n += (size_t)sprintf(longmeta + n, "label.l%02d=", i);
		memset(longmeta + n, 'v', 400);
		n += 400;
		longmeta[n++] = '\n';
		longmeta[n] = '\0';
	}
	assert_int_equal(push_pyroscope.request(h, "http://p", longmeta, "", 0, &r), -E2BIG);
	assert_null(r.url);
	free(longmeta);

	http__free(h);
	http__free(NULL);
}

/* ---- windows ---- */

#define NS 1000000000ull

struct closed_rec {
	pid_t pid;
	uint64_t from_ms, until_ms, samples;
	char entry[SPOOL_ENTRY_LEN];
	char comm[32];
};

struct closed_log {
	struct spool *spool;
	char *queue;
	struct closed_rec rec[16];
	size_t n;
};

/* Whether @path is a whole gzip stream; its text into *out (malloc'd). */
static int gunzip(const char *path, unsigned char **out, size_t *outlen)
{
	size_t len, cap = 1 << 16;
	unsigned char *in = read_whole(path, &len), *buf = malloc(cap);
	z_stream z;
	int rc;

	assert_non_null(buf);
	memset(&z, 0, sizeof(z));
	if (len < 18 || in[0] != 0x1f || in[1] != 0x8b) {
		free(in);
		free(buf);
		return 0;
	}
	assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = in;
	z.avail_in = (uInt)len;
	do {
		if (z.total_out == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		z.next_out = buf + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		rc = inflate(&z, Z_NO_FLUSH);
	} while (rc == Z_OK);
	*outlen = z.total_out;
	inflateEnd(&z);
	free(in);
	*out = buf;
	return rc == Z_STREAM_END && z.avail_in == 0;
}

static void on_closed(void *ctx, const struct window_profile *p)
{
	struct closed_log *seen = ctx;
	struct closed_rec *r;
	char path[4096], want[SPOOL_ENTRY_LEN], *meta, *queues[1] = { seen->queue };
	unsigned char *pb;
	size_t len;

	assert_true(seen->n < sizeof(seen->rec) / sizeof(seen->rec[0]));
	r = &seen->rec[seen->n++];
	r->pid = p->pid;
	r->from_ms = p->from_ms;
	r->until_ms = p->until_ms;
	r->samples = p->samples;
	snprintf(r->entry, sizeof(r->entry), "%s", p->entry);
	snprintf(r->comm, sizeof(r->comm), "%s", p->comm);
	spool__entry_name(p->from_ms, p->pid, want, sizeof(want));
	assert_string_equal(p->entry, want);
	/* the profile is written, whole, at its tmp path */
	spool__tmp_path(seen->spool, p->entry, path, sizeof(path));
	assert_true(gunzip(path, &pb, &len));
	assert_non_null(memmem(pb, len, "handle_request", 14));
	assert_non_null(memmem(pb, len, "/srv/app.py", 11));
	assert_non_null(memmem(pb, len, "cpu", 3));
	free(pb);
	assert_true(asprintf(&meta, "from_ms=%llu\nuntil_ms=%llu\npid=%d\n",
			     (unsigned long long)p->from_ms, (unsigned long long)p->until_ms,
			     (int)p->pid) > 0);
	assert_int_equal(spool__publish(seen->spool, p->entry, meta, queues, 1), 0);
	free(meta);
}

static const struct py_sym frames[] = {
	{ "handle_request", "/srv/app.py", 12, 10 },
	{ "<module>", "/srv/app.py", 30, 1 },
};

static int add(struct windows *w, pid_t pid, uint64_t ts)
{
	struct out_sample s = {
		.comm = pid == 100 ? "web" : "worker", .pid = pid, .tid = pid,
		.ts_ns = ts, .status = 0, .nframes = 2, .frames = frames,
	};

	return windows__add(w, &s);
}

static struct closed_rec *rec_of(struct closed_log *seen, size_t from, pid_t pid)
{
	for (size_t i = from; i < seen->n; i++)
		if (seen->rec[i].pid == pid)
			return &seen->rec[i];
	fail_msg("no profile of %d", (int)pid);
	return NULL;
}

static void test_windows(void **state)
{
	char *dir = make_tmpdir(), *top = path_of(dir, "spool"), q[4096];
	struct closed_log seen = { .n = 0 };
	struct windows_opts o = {
		.window_s = 1, .grace_s = 0.25, .mode = "cpu", .closed = on_closed, .ctx = &seen,
	};
	struct windows *w = NULL;
	struct windows_stats st;
	struct closed_rec *a, *b;
	unsigned int closed = 99;
	int64_t off;
	uint64_t k, w1, w2;
	double next;

	(void)state;
	seen.spool = spool_at(top, 1 << 30, 0);
	assert_int_equal(spool__queue(seen.spool, "q", q, sizeof(q)), 0);
	seen.queue = q;
	o.spool = seen.spool;
	assert_int_equal(windows__new(&o, &w), 0);
	/* CLOCK_MONOTONIC of a UNIX time, as windows.c maps them (within µs) */
	off = (int64_t)(realtime_ns() - mono_ns());
	k = (uint64_t)((int64_t)mono_ns() + off) / NS;
	w1 = k + 1;			/* two windows after this one, in full */
	w2 = k + 2;
#define MONO(real_ns) ((uint64_t)((int64_t)(real_ns) - off))
	assert_int_equal(add(w, 100, MONO(w1 * NS + NS / 2)), 0);
	assert_int_equal(add(w, 200, MONO(w2 * NS + NS / 10)), 0);
	assert_int_equal(add(w, 100, MONO(w1 * NS + NS / 20)), 0);
	assert_int_equal(add(w, 200, MONO(w1 * NS + NS / 3)), 0);
	assert_int_equal(add(w, 100, MONO(w2 * NS - NS / 20)), 0);	/* just before W2 */
	assert_int_equal(add(w, 100, MONO(w2 * NS + NS / 20)), 0);	/* just after */
	assert_int_equal(add(w, 100, MONO(w2 * NS + NS / 2)), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(add(w, 200, MONO(w2 * NS + NS / 2 + (uint64_t)i)), 0);
	/* W1: 100 x3, 200 x1; W2: 100 x2, 200 x4 */

	next = windows__next_close(w, MONO(w1 * NS + NS / 2));
	assert_true(next > (double)MONO(w2 * NS) / 1e9 + 0.25 - 0.001);
	assert_true(next < (double)MONO(w2 * NS) / 1e9 + 0.25 + 0.001);

	/* nothing has ended a grace ago */
	assert_int_equal(windows__close(w, MONO(w2 * NS + NS / 4 - NS / 20), 0, &closed), 0);
	assert_int_equal(closed, 0);
	assert_int_equal(seen.n, 0);
	/* W1 has */
	assert_int_equal(windows__close(w, MONO(w2 * NS + NS / 4 + NS / 20), 0, &closed), 0);
	assert_int_equal(closed, 1);
	assert_int_equal(seen.n, 2);		/* one profile per process */
	a = rec_of(&seen, 0, 100);
	b = rec_of(&seen, 0, 200);
	assert_int_equal(a->samples, 3);
	assert_int_equal(b->samples, 1);
	assert_int_equal(a->from_ms, w1 * 1000);
	assert_int_equal(a->until_ms, w2 * 1000);
	assert_int_equal(b->from_ms, w1 * 1000);
	assert_int_equal(b->until_ms, w2 * 1000);
	assert_string_equal(a->comm, "web");
	assert_string_equal(b->comm, "worker");
	assert_int_equal(queued(q), 2);
	windows__stats(w, &st);
	assert_int_equal(st.samples, 10);
	assert_int_equal(st.late, 0);
	assert_int_equal(st.profiles, 2);
	assert_int_equal(st.windows, 1);
	assert_int_equal(st.closed_samples, 4);

	/* late: W1's, and an older one's, go to the oldest open (W2) */
	assert_int_equal(add(w, 100, MONO(w1 * NS + NS / 2)), 0);
	assert_int_equal(add(w, 100, MONO(k * NS)), 0);
	windows__stats(w, &st);
	assert_int_equal(st.samples, 12);
	assert_int_equal(st.late, 2);
	/* closing again at the same time closes nothing */
	assert_int_equal(windows__close(w, MONO(w2 * NS + NS / 4 + NS / 20), 0, &closed), 0);
	assert_int_equal(closed, 0);

	/* the rest */
	assert_int_equal(windows__close(w, mono_ns(), 1, &closed), 0);
	assert_int_equal(closed, 1);
	assert_int_equal(seen.n, 4);
	a = rec_of(&seen, 2, 100);
	b = rec_of(&seen, 2, 200);
	assert_int_equal(a->samples, 4);
	assert_int_equal(b->samples, 4);
	assert_int_equal(a->from_ms, w2 * 1000);	/* abuts W1 */
	assert_int_equal(a->until_ms, (w2 + 1) * 1000);
	assert_int_equal(b->from_ms, w2 * 1000);
	assert_int_equal(queued(q), 4);
	windows__stats(w, &st);
	assert_int_equal(st.samples, 12);
	assert_int_equal(st.late, 2);
	assert_int_equal(st.profiles, 4);
	assert_int_equal(st.windows, 2);
	assert_int_equal(st.closed_samples, 12);
	assert_int_equal(windows__close(w, mono_ns(), 1, &closed), 0);	/* none left */
	assert_int_equal(closed, 0);
#undef MONO
	windows__free(w);
	spool__free(seen.spool);
	rm_rf(dir);
	free(top);
}

/* The first window begins when the agent does; closing all ends the last
 * one at the stop. */
static void test_windows_start_stop(void **state)
{
	char *dir = make_tmpdir(), *top = path_of(dir, "spool"), q[4096];
	struct closed_log seen = { .n = 0 };
	struct windows_opts o = {
		.window_s = 1, .grace_s = 0, .mode = "cpu", .closed = on_closed, .ctx = &seen,
	};
	struct windows *w = NULL;
	unsigned int closed;
	uint64_t t0, t1, t2, t3, end, now;
	struct closed_rec *r;

	(void)state;
	seen.spool = spool_at(top, 1 << 30, 0);
	assert_int_equal(spool__queue(seen.spool, "q", q, sizeof(q)), 0);
	seen.queue = q;
	o.spool = seen.spool;
	t0 = realtime_ns() / 1000000;
	assert_int_equal(windows__new(&o, &w), 0);
	t1 = realtime_ns() / 1000000;
	now = mono_ns();		/* one time: the two in one window */
	assert_int_equal(add(w, 100, now), 0);
	assert_int_equal(add(w, 100, now), 0);
	t2 = realtime_ns() / 1000000;
	assert_int_equal(windows__close(w, mono_ns(), 1, &closed), 0);
	t3 = realtime_ns() / 1000000;
	assert_int_equal(closed, 1);
	assert_int_equal(seen.n, 1);
	r = &seen.rec[0];
	assert_int_equal(r->samples, 2);
	/* the agent's start, or the window's if a second began in between */
	assert_true(r->from_ms >= t0 && r->from_ms <= t2);
	assert_true(r->from_ms <= t1 || r->from_ms % 1000 == 0);
	end = (r->from_ms / 1000 + 1) * 1000;
	assert_true(r->until_ms > r->from_ms);
	assert_true(r->until_ms == end || (r->until_ms >= t2 && r->until_ms <= t3));
	windows__free(w);

	/* open windows freed unclosed: no leak, no callback */
	seen.n = 0;
	assert_int_equal(windows__new(&o, &w), 0);
	assert_int_equal(add(w, 100, mono_ns()), 0);
	assert_int_equal(add(w, 200, mono_ns() + 5 * NS), 0);
	windows__free(w);
	windows__free(NULL);
	assert_int_equal(seen.n, 0);

	spool__free(seen.spool);
	rm_rf(dir);
	free(top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels_clean),
		cmocka_unit_test(test_labels_name_ok),
		cmocka_unit_test(test_service_from_cmdline),
		cmocka_unit_test(test_container_from_cgroup),
		cmocka_unit_test(test_labels_read),
		cmocka_unit_test(test_labels_read_child),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_auth_file),
		cmocka_unit_test(test_spool_open),
		cmocka_unit_test(test_spool_entry_name),
		cmocka_unit_test(test_spool_publish_read),
		cmocka_unit_test(test_spool_stray_and_cleanup),
		cmocka_unit_test(test_spool_meta_get),
		cmocka_unit_test(test_spool_enforce_size),
		cmocka_unit_test(test_spool_enforce_age),
		cmocka_unit_test(test_push_basics),
		cmocka_unit_test(test_push_parca),
		cmocka_unit_test(test_push_pyroscope),
		cmocka_unit_test(test_resource_attributes),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_windows_start_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
