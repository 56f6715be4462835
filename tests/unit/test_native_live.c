// SPDX-License-Identifier: MIT
/*
 * test_native_live.c - the native unwinder (user/native/unwind.c) on real
 * samples of real interpreters, without BPF: perf_event_open() with
 * PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER on a cpu-clock event on
 * each thread of a Python target, the ring read as it fills, every sample
 * unwound at once (while the target runs, as a profiler would).
 *
 * Targets, on every interpreter of /var/cache/pyprof-bpf/pythons.txt (the
 * sid root's 3.13, 3.14, 3.15 in a chroot, pyenv's shared-libpython builds,
 * the system's 3.11):
 *   sort  sorted() of a shuffled list with a Python key function: the sort's
 *         C frames, the key function's evaluation loop above them, the
 *         calling one below, down to _start;
 *   zlib  zlib.compress() of a large buffer: leaf frames in libz;
 *   deep  a Python recursion 40 deep through C (sum(map(f, ...))): how much
 *         stack a deep C stack needs.
 * Each run prints the share of samples unwound completely, why the others
 * ended, the time per unwind, frames, the stack bytes the complete ones
 * needed (percentiles; the share a 8/16/32 KiB copy would have unwound
 * whole) and the unwinder's memory, then checks the frames (see check_*).
 *
 * Environment: NATIVE_LIVE_SECONDS (per run, default 0.5), NATIVE_LIVE_ONLY
 * (labels, comma-separated), NATIVE_LIVE_WORKLOADS (names), NATIVE_LIVE_PROGRAMS=1 (also
 * tests/targets/real_*.py where the interpreter has their libraries),
 * NATIVE_LIVE_VERBOSE=1 (a few whole stacks per run). Skipped without
 * perf_event_open (a container, perf_event_paranoid 3); chroot'ed
 * interpreters need root.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "native/unwind.h"

#define PYTHONS_TXT "/var/cache/pyprof-bpf/pythons.txt"
#define MAX_INTERPS 32
#define MAX_THREADS 64
#define MAX_FRAMES 512
#define STACK_MAX 65528		/* the most perf_event_open gives (a record is < 64 KiB) */
#define RING_PAGES 512		/* 2 MiB: ~30 samples of 64 KiB */
#define PERIOD_NS 1000000	/* 1 kHz per thread */

struct interp {
	char label[64];
	char root[PATH_MAX];	/* "" unless chroot'ed */
	char python[PATH_MAX];
};

struct workload;

/* A sample kept for replaying: the registers and the stack it needed. */
struct kept {
	struct native_regs regs;
	unsigned char *stack;
	size_t len;
	size_t n;
	int complete;
	uint64_t leaf_pc;
};

/* One run's numbers. */
struct run {
	const struct interp *in;
	const struct workload *w;
	struct native_unwinder *u;
	pid_t pid;
	int named;		/* the interpreter's static functions have names (-1: unknown) */
	size_t samples, complete, lost_records, no_regs, matched, checked;
	size_t ends[NATIVE_END__COUNT];
	size_t frames;
	uint64_t *ns;		/* per unwind, live */
	size_t *used;		/* stack bytes each complete unwind read */
	size_t n_ns, n_used, cap;
	struct kept *kept;
	size_t n_kept, cap_kept, kept_bytes;
	double replay_us;	/* the fastest replay pass, per unwind */
	size_t replay_diff;	/* replayed samples unwound differently */
	size_t examples;
	long rss_before_kb, rss_after_kb;
	size_t heap_before, heap_after;
	struct native_unwinder_stats st;
	char why_unmatched[512];
	char ready[128];	/* the target's ready line */
};

struct workload {
	const char *name;
	const char *code;	/* python -c; prints "ready" when the hot loop starts */
	const char *script;	/* or a script of tests/targets, run with its SECONDS */
	/* Does this complete stack show what the workload runs? 1, 0, or -1 when
	 * the sample is in none of the workload's hot code (not counted). */
	int (*check)(struct run *run, const struct native_frame *f, size_t n);
	const char *env;	/* NAME=VALUE for the target */
	const char *labels;	/* only on interpreters whose label has this */
	double min_complete;	/* percent; 0: measured, not required */
};

static bool verbose;

/* ---- stacks ---- */

/* @name, or a part GCC split off it or specialized (name.cold,
 * name.lto_priv.0, name.constprop.0, name.isra.0, name.part.0). */
static bool sym_is(const struct native_frame *f, const char *name)
{
	size_t len = strlen(name);

	return f->symbol && strncmp(f->symbol, name, len) == 0 &&
	       (f->symbol[len] == '\0' || f->symbol[len] == '.');
}

static size_t find_sym(const struct native_frame *f, size_t n, size_t from, const char *name)
{
	for (size_t i = from; i < n; i++)
		if (sym_is(&f[i], name))
			return i;
	return SIZE_MAX;
}

static bool mod_has(const struct native_frame *f, const char *part)
{
	return f->module && strstr(f->module, part);
}

/* The interpreter's own module: the executable, or libpython. */
static bool in_interp(const struct native_frame *f)
{
	const char *slash;

	if (!f->module)
		return false;
	slash = strrchr(f->module, '/');
	slash = slash ? slash + 1 : f->module;
	return strncmp(slash, "python", 6) == 0 || strncmp(slash, "libpython", 9) == 0;
}

/* Every complete stack of a Python main thread ends the same way, whatever
 * the build: the interpreter's main, libc's start, the executable's _start. */
static bool bottom_ok(const struct native_frame *f, size_t n)
{
	size_t i = find_sym(f, n, 0, "Py_BytesMain");

	return n >= 4 && i != SIZE_MAX && find_sym(f, n, i, "__libc_start_main") != SIZE_MAX &&
	       sym_is(&f[n - 1], "_start");
}

/* Do the interpreter's static functions have names (a .symtab, or a debug
 * file: pyenv's builds, Debian's 3.14 with python3.14-dbg), or only its
 * exported ones (.dynsym: Debian's 3.13 and 3.15 here)? Asked of the
 * unwinder about the module Py_BytesMain is in. */
static bool named(struct run *run, const struct native_frame *f, size_t n)
{
	struct native_module m;
	size_t i;

	if (run->named < 0) {
		for (i = 0; i < n && !in_interp(&f[i]); i++)
			;
		if (i == n || native_unwinder__module(run->u, f[i].pc, &m))
			return false;
		run->named = m.symtab;
		fprintf(stderr, "  %-12s %-14s %s: %s\n", run->in->label, run->w->name, m.path,
			m.symtab ? (m.debug_file ? m.debug_file : ".symtab") : ".dynsym only");
	}
	return run->named;
}

/*
 * sorted(big, key=key): in the sort (list.sort's C code) while it calls the
 * key function (an evaluation loop above it) or compares, and below it the
 * evaluation loop that called sorted(), down to the start. Without names
 * for static functions the sort's own frames cannot be told: only the
 * exported frames and the start are checked there, and that interpreter
 * frames without a name stand above the evaluation.
 */
static int check_sort(struct run *run, const struct native_frame *f, size_t n)
{
	size_t sort, eval;

	if (!bottom_ok(f, n))
		return 0;
	if (named(run, f, n)) {
		sort = find_sym(f, n, 0, "list_sort_impl");
		if (sort == SIZE_MAX)
			sort = find_sym(f, n, 0, "list_sort");	/* LTO inlined _impl */
		if (sort == SIZE_MAX)
			return -1;	/* outside the sort: the loop around it */
		eval = find_sym(f, n, sort, "_PyEval_EvalFrameDefault");
		return eval != SIZE_MAX && find_sym(f, n, eval, "PyEval_EvalCode") != SIZE_MAX;
	}
	eval = find_sym(f, n, 0, "PyEval_EvalCode");
	if (eval == SIZE_MAX)
		return 0;
	for (size_t i = 0; i < eval; i++)
		if (in_interp(&f[i]) && !f[i].symbol)
			return 1;
	return -1;
}

/* The same sort in a thread of its own: its stack starts in libc's clone3
 * (start_thread above it), not at _start. */
static int check_thread(struct run *run, const struct native_frame *f, size_t n)
{
	size_t sort, eval;

	if (n < 4 || !mod_has(&f[n - 1], "libc.so") ||
	    find_sym(f, n, 0, "Py_BytesMain") != SIZE_MAX)
		return 0;
	if (f[n - 1].symbol && !sym_is(&f[n - 1], "clone3") && !sym_is(&f[n - 1], "__clone3"))
		return 0;
	if (!named(run, f, n)) {
		for (size_t i = 0; i < n; i++)
			if (in_interp(&f[i]) && !f[i].symbol)
				return 1;
		return -1;
	}
	sort = find_sym(f, n, 0, "list_sort_impl");
	if (sort == SIZE_MAX)
		sort = find_sym(f, n, 0, "list_sort");
	if (sort == SIZE_MAX)
		return -1;
	eval = find_sym(f, n, sort, "_PyEval_EvalFrameDefault");
	return eval != SIZE_MAX && find_sym(f, n, eval, "thread_run") != SIZE_MAX;
}

/* zlib.compress: leaf frames in libz, called from the zlib module (built in,
 * or an extension) under the evaluation of the module's code. */
static int check_zlib(struct run *run, const struct native_frame *f, size_t n)
{
	size_t i = 0;

	(void)run;
	if (!bottom_ok(f, n))
		return 0;
	if (!mod_has(&f[0], "libz.so"))
		return -1;
	while (i < n && mod_has(&f[i], "libz.so"))
		i++;
	if (i == n || !(in_interp(&f[i]) || mod_has(&f[i], "zlib")))
		return 0;
	return find_sym(f, n, i, "PyEval_EvalCode") != SIZE_MAX;
}

/* 40 levels of Python -> sum -> map -> Python: 40 evaluation loops (named
 * ones), or 40 x the C between them. */
static int check_deep(struct run *run, const struct native_frame *f, size_t n)
{
	size_t evals = 0;

	if (!bottom_ok(f, n))
		return 0;
	if (!named(run, f, n))
		return n >= 40 * 3 ? 1 : -1;
	for (size_t i = 0; i < n; i++)
		evals += sym_is(&f[i], "_PyEval_EvalFrameDefault");
	if (evals < 2)
		return -1;	/* between two rounds */
	return evals >= 40;
}

/* Real programs: only that every complete stack is a whole one. */
static int check_any(struct run *run, const struct native_frame *f, size_t n)
{
	(void)run;
	return bottom_ok(f, n) && find_sym(f, n, 0, "PyEval_EvalCode") != SIZE_MAX;
}

#define SORT_LOOP \
	"import random, sys\n" \
	"def key(x):\n" \
	"    return -x\n" \
	"big = list(range(200000))\n" \
	"random.Random(1).shuffle(big)\n" \
	"sorted(big, key=key)\n"

#define DEEP_LOOP \
	"import sys\n" \
	"def rec(n):\n" \
	"    if n == 0:\n" \
	"        s = 0\n" \
	"        for i in range(20000):\n" \
	"            s += i\n" \
	"        return s\n" \
	"    return sum(map(rec, [n - 1]))\n" \
	"rec(40)\n" \
	"print('ready', getattr(getattr(sys, '_jit', None), 'is_enabled', lambda: None)(),"\
	" flush=True)\n" \
	"while True:\n" \
	"    rec(40)\n"

static const struct workload workloads[] = {
	{ "sort",
	  SORT_LOOP
	  "print('ready', flush=True)\n"
	  "while True:\n"
	  "    sorted(big, key=key)\n",
	  NULL, check_sort, NULL, NULL, 99 },
	{ "thread",
	  SORT_LOOP
	  "import threading\n"
	  "def work():\n"
	  "    while True:\n"
	  "        sorted(big, key=key)\n"
	  "t = threading.Thread(target=work, daemon=True)\n"
	  "t.start()\n"
	  "print('ready', flush=True)\n"
	  "t.join()\n",
	  NULL, check_thread, NULL, NULL, 99 },
	/* 3.15's JIT: its code is anonymous memory without CFI (measured only) */
	{ "sort-jit",
	  SORT_LOOP
	  "print('ready', getattr(getattr(sys, '_jit', None), 'is_enabled', lambda: None)(),"
	  " flush=True)\n"
	  "while True:\n"
	  "    sorted(big, key=key)\n",
	  NULL, check_sort, "PYTHON_JIT=1", "3.15", 0 },
	{ "zlib",
	  "import random, zlib\n"
	  "r = random.Random(1)\n"
	  "words = [bytes(r.choices(b'abcdefghijklmnop', k=r.randint(2, 9))) for _ in range(500)]\n"
	  "data = b' '.join(r.choices(words, k=1 << 18))\n"
	  "zlib.compress(data, 6)\n"
	  "print('ready', flush=True)\n"
	  "while True:\n"
	  "    zlib.compress(data, 6)\n",
	  NULL, check_zlib, NULL, NULL, 99 },
	{ "deep", DEEP_LOOP,
	  NULL, check_deep, NULL, NULL, 99 },
	/* the same through 3.15's JIT: how often a stack meets jitted code */
	{ "deep-jit", DEEP_LOOP, NULL, check_deep, "PYTHON_JIT=1", "3.15", 0 },
};

static const struct workload programs[] = {
	{ "real_sympy", NULL, "real_sympy.py", check_any, NULL, NULL, 99 },
	{ "real_templates", NULL, "real_templates.py", check_any, NULL, NULL, 99 },
	{ "real_docutils", NULL, "real_docutils.py", check_any, NULL, NULL, 99 },
	{ "real_stdlib", NULL, "real_stdlib.py", check_any, NULL, NULL, 99 },
};

/* ---- targets ---- */

/* Is @name an item of the comma-separated @list? */
static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += len)
		if ((p == list || p[-1] == ',') && (p[len] == '\0' || p[len] == ','))
			return true;
	return false;
}

static int interps_read(struct interp *out, int max)
{
	const char *only = getenv("NATIVE_LIVE_ONLY");
	char line[3 * PATH_MAX];
	FILE *f = fopen(PYTHONS_TXT, "re");
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t'), *spec;
		struct interp *in = &out[n];

		line[strcspn(line, "\n")] = '\0';
		if (!tab)
			continue;
		*tab = '\0';
		spec = tab + 1;
		memset(in, 0, sizeof(*in));
		if (strlen(line) >= sizeof(in->label))
			continue;
		memcpy(in->label, line, strlen(line) + 1);
		if (only && !listed(only, in->label))
			continue;
		if (strncmp(spec, "chroot:", 7) == 0) {
			char *colon = strchr(spec + 7, ':');

			if (!colon)
				continue;
			*colon = '\0';
			snprintf(in->root, sizeof(in->root), "%s", spec + 7);
			snprintf(in->python, sizeof(in->python), "%s", colon + 1);
		} else {
			snprintf(in->python, sizeof(in->python), "%s", spec);
		}
		n++;
	}
	fclose(f);
	return n;
}

static const char *targets_dir(void)
{
	static char dir[PATH_MAX + 32];
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *p;

	/* .output/san/test_x -> the repository's tests/targets */
	if (len <= 0)
		return "tests/targets";
	exe[len] = '\0';
	p = strstr(exe, "/.output/");
	if (!p)
		return "tests/targets";
	*p = '\0';
	snprintf(dir, sizeof(dir), "%s/tests/targets", exe);
	return dir;
}

/* A copy of @src at @dst (a chroot sees only files inside its root). */
static int copy_file(const char *src, const char *dst)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	ssize_t r;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		close(in);
		return -errno;
	}
	while ((r = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)r) != r)
			break;
	close(in);
	close(out);
	return r == 0 ? 0 : -EIO;
}

/* Starts the target; its stdout comes back on *out_fd. */
static pid_t target_start(const struct interp *in, const struct workload *w, double seconds,
			  int *out_fd)
{
	char script[PATH_MAX], secs[32];
	int p[2];
	pid_t pid;

	snprintf(secs, sizeof(secs), "%.0f", seconds + 30);
	if (w->script) {
		char src[PATH_MAX], dst[PATH_MAX + 64];

		if (snprintf(src, sizeof(src), "%s/%s", targets_dir(), w->script) >=
		    (int)sizeof(src))
			return -1;
		snprintf(script, sizeof(script), "%s", src);
		if (in->root[0]) {
			/* staged where the chroot sees it, as tests/pyenvs.py does */
			snprintf(dst, sizeof(dst), "%s/tmp/pyprof-native", in->root);
			mkdir(dst, 0755);
			snprintf(dst, sizeof(dst), "%s/tmp/pyprof-native/%s", in->root, w->script);
			if (copy_file(src, dst))
				return -1;
			snprintf(script, sizeof(script), "/tmp/pyprof-native/%s", w->script);
		}
	}
	if (pipe2(p, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		dup2(p[1], 1);
		if (!verbose && devnull >= 0)
			dup2(devnull, 2);
		if (w->env)
			putenv((char *)w->env);
		if (in->root[0] && w->script)
			execl("/usr/sbin/chroot", "chroot", in->root, in->python, script, secs,
			      NULL);
		else if (in->root[0])
			execl("/usr/sbin/chroot", "chroot", in->root, in->python, "-c", w->code,
			      NULL);
		else if (w->script)
			execl(in->python, in->python, script, secs, NULL);
		else
			execl(in->python, in->python, "-c", w->code, NULL);
		_exit(127);
	}
	close(p[1]);
	*out_fd = p[0];
	return pid;
}

/* Waits for the target's "ready" line: 0, or -1 when it exits or takes
 * 60 s (imports, the data it builds). */
static int target_ready(int fd, char *line, size_t cap)
{
	char buf[4096];
	size_t got = 0;

	while (got < sizeof(buf) - 1) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, 60000) <= 0)
			return -1;
		r = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
		buf[got] = '\0';
		if (strstr(buf, "ready") && strchr(strstr(buf, "ready"), '\n')) {
			char *p = strstr(buf, "ready");

			p[strcspn(p, "\n")] = '\0';
			snprintf(line, cap, "%s", p);
			return 0;
		}
	}
	return -1;
}

static void target_stop(pid_t pid, int fd)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fd);
}

/* ---- perf ---- */

struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	unsigned char *data;
	size_t size;
};

static int ring_open(pid_t tid, struct ring *r)
{
	struct perf_event_attr a = { 0 };
	long page = sysconf(_SC_PAGESIZE);
	void *m;

	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = PERIOD_NS;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER |
			PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = native_regs__perf_mask();
	a.sample_stack_user = STACK_MAX;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.disabled = 1;
	a.wakeup_events = 4;
	r->fd = (int)syscall(__NR_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	r->size = (size_t)RING_PAGES * (size_t)page;
	m = mmap(NULL, r->size + (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (m == MAP_FAILED) {
		int err = -errno;

		close(r->fd);
		return err;
	}
	r->meta = m;
	r->data = (unsigned char *)m + page;
	return 0;
}

static void ring_close(struct ring *r)
{
	munmap(r->meta, r->size + (size_t)sysconf(_SC_PAGESIZE));
	close(r->fd);
}

static void ring_copy(const struct ring *r, uint64_t pos, void *dst, size_t len)
{
	size_t off = (size_t)(pos % r->size), first = r->size - off;

	if (first >= len) {
		memcpy(dst, r->data + off, len);
	} else {
		memcpy(dst, r->data + off, first);
		memcpy((unsigned char *)dst + first, r->data, len - first);
	}
}

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of this thread: what an unwind costs, whatever else the
 * machine runs meanwhile. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void run_push(struct run *run, uint64_t ns, int complete, size_t used)
{
	if (run->n_ns == run->cap) {
		size_t cap = run->cap ? run->cap * 2 : 4096;

		run->ns = realloc(run->ns, cap * sizeof(*run->ns));
		run->used = realloc(run->used, cap * sizeof(*run->used));
		assert_non_null(run->ns);
		assert_non_null(run->used);
		run->cap = cap;
	}
	run->ns[run->n_ns++] = ns;
	if (complete)
		run->used[run->n_used++] = used;
}

/* Keeps the sample for the replay: of a complete one, only the bytes its
 * unwind read (the same unwind, if a copy that short is enough). */
static void run_keep(struct run *run, const struct native_regs *regs, const unsigned char *stack,
		     size_t len, size_t n, int complete, uint64_t leaf_pc)
{
	struct kept *k;

	if (run->n_kept == run->cap_kept) {
		size_t cap = run->cap_kept ? run->cap_kept * 2 : 1024;

		run->kept = realloc(run->kept, cap * sizeof(*run->kept));
		assert_non_null(run->kept);
		run->cap_kept = cap;
	}
	k = &run->kept[run->n_kept++];
	if (complete && native_unwinder__last(run->u)->stack_used < len)
		len = native_unwinder__last(run->u)->stack_used;
	k->regs = *regs;
	k->len = len;
	k->stack = malloc(len ? len : 1);
	assert_non_null(k->stack);
	run->kept_bytes += len ? len : 1;
	memcpy(k->stack, stack, len);
	k->n = n;
	k->complete = complete;
	k->leaf_pc = leaf_pc;
}

static void print_stack(const struct native_frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "      #%-3zu %16llx %s+0x%llx (%s+0x%llx)\n", i,
			(unsigned long long)f[i].pc, f[i].symbol ? f[i].symbol : "[unknown]",
			(unsigned long long)f[i].offset, f[i].module ? f[i].module : "?",
			(unsigned long long)(f[i].pc - f[i].module_base));
}

static int unwind_sp(struct native_unwinder *u, const struct native_regs *regs,
		     const void *data, size_t len, struct native_frame *out, size_t *n,
		     int *complete)
{
	struct native_stack st = { .data = data, .addr = regs->r[NATIVE_REG_SP], .len = len };

	return native_unwinder__unwind(u, regs, &st, out, MAX_FRAMES, n, complete);
}

static void sample_handle(struct run *run, const unsigned char *rec, size_t len,
			  struct native_frame *frames)
{
	const int nregs = __builtin_popcountll(native_regs__perf_mask());
	const unsigned char *p = rec + sizeof(struct perf_event_header), *end = rec + len;
	uint64_t abi, size, dyn = 0, t0, t1;
	const unsigned char *stack;
	struct native_regs regs;
	size_t n = 0;
	int complete = 0, match;

	/* ip, pid/tid, then the registers and the stack */
	p += 8 + 8;
	memcpy(&abi, p, 8);
	p += 8;
	if (abi == PERF_SAMPLE_REGS_ABI_NONE) {
		run->no_regs++;
		return;
	}
	assert_true(p + 8 * nregs + 8 <= end);
	assert_int_equal(native_regs__from_perf(&regs, native_regs__perf_mask(),
						(const uint64_t *)p, (size_t)nregs), 0);
	p += 8 * nregs;
	memcpy(&size, p, 8);
	p += 8;
	stack = p;
	if (size) {
		assert_true(p + size + 8 <= end);
		memcpy(&dyn, p + size, 8);
	}
	run->samples++;
	t0 = now_ns();
	assert_int_equal(unwind_sp(run->u, &regs, stack, dyn, frames, &n, &complete), 0);
	t1 = now_ns();
	run->frames += n;
	run->ends[native_unwinder__last(run->u)->end]++;
	run->complete += complete;
	run_push(run, t1 - t0, complete, native_unwinder__last(run->u)->stack_used);
	run_keep(run, &regs, stack, dyn, n, complete, n ? frames[n - 1].pc : 0);
	if (!complete) {
		if (verbose && run->examples < 6) {
			run->examples++;
			fprintf(stderr, "    incomplete (%s, %llu stack bytes%s):\n",
				native_end__name(native_unwinder__last(run->u)->end),
				(unsigned long long)dyn,
				native_unwinder__last(run->u)->epilogue ? ", epilogue" : "");
			print_stack(frames, n);
			/* where the last frame's module lies, against the target's maps now */
			if (native_unwinder__last(run->u)->end == NATIVE_END_NO_CFI ||
			    native_unwinder__last(run->u)->end == NATIVE_END_NO_MODULE) {
				struct native_module m;
				char cmd[128];

				if (!native_unwinder__module(run->u, frames[n - 1].pc, &m))
					fprintf(stderr, "      module %s %llx-%llx\n", m.path,
						(unsigned long long)m.start,
						(unsigned long long)m.end);
				snprintf(cmd, sizeof(cmd), "grep -v ' 0 *$' /proc/%d/maps >&2",
					 (int)run->pid);
				if (system(cmd)) {}
			}
		}
		return;
	}
	match = run->w->check(run, frames, n);
	if (match < 0)
		return;
	run->checked++;
	run->matched += (size_t)match;
	if (!match && !run->why_unmatched[0]) {
		/* the first stack that fails the check, for the report */
		size_t off = 0;

		for (size_t i = 0; i < n && off < sizeof(run->why_unmatched) - 64; i++)
			off += (size_t)snprintf(run->why_unmatched + off,
						sizeof(run->why_unmatched) - off, "%s%s",
						i ? " <- " : "",
						frames[i].symbol ? frames[i].symbol : "?");
	}
	if (verbose && run->examples < 2 && match) {
		run->examples++;
		fprintf(stderr, "    complete:\n");
		print_stack(frames, n);
	}
}

static void ring_drain(struct run *run, struct ring *r, unsigned char *buf,
		       struct native_frame *frames)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;

	while (tail < head) {
		struct perf_event_header h;

		ring_copy(r, tail, &h, sizeof(h));
		assert_true(h.size >= sizeof(h));
		ring_copy(r, tail, buf, h.size);
		if (h.type == PERF_RECORD_SAMPLE) {
			sample_handle(run, buf, h.size, frames);
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t lost;

			memcpy(&lost, buf + sizeof(h) + 8, 8);
			run->lost_records += lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

/*
 * The kept samples unwound again, the target stopped (its maps unchanged),
 * every cache warm: the steady cost of an unwind, apart from the first
 * sight of each pc, in this thread's CPU time (the fastest of the passes).
 * Each replay must give what the live unwind gave.
 */
static void run_replay(struct run *run, struct native_frame *frames, int passes)
{
	run->replay_us = 0;
	for (int pass = 0; pass < passes; pass++) {
		uint64_t t0 = cpu_ns(), t;

		for (size_t i = 0; i < run->n_kept; i++) {
			const struct kept *k = &run->kept[i];
			size_t n;
			int complete;

			assert_int_equal(unwind_sp(run->u, &k->regs, k->stack, k->len, frames, &n,
						   &complete), 0);
			if (pass == 0 && (n != k->n || complete != k->complete ||
					  (n && frames[n - 1].pc != k->leaf_pc)))
				run->replay_diff++;
		}
		t = cpu_ns() - t0;
		if (run->n_kept && (pass == 0 || (double)t / 1000.0 / (double)run->n_kept <
						 run->replay_us))
			run->replay_us = (double)t / 1000.0 / (double)run->n_kept;
	}
}

static int thread_ids(pid_t pid, pid_t *tids, int max)
{
	char fn[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(fn, sizeof(fn), "/proc/%d/task", (int)pid);
	d = opendir(fn);
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max)
		if (de->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(de->d_name);
	closedir(d);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(size_t a, size_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void run_print(struct run *run)
{
	size_t fit[3] = { 0 }, sizes[3] = { 8192, 16384, 32768 };
	double mean = 0;
	long heap;

	qsort(run->ns, run->n_ns, sizeof(*run->ns), cmp_u64);
	qsort(run->used, run->n_used, sizeof(*run->used), cmp_size);
	for (size_t i = 0; i < run->n_ns; i++)
		mean += (double)run->ns[i];
	mean = run->n_ns ? mean / (double)run->n_ns / 1000.0 : 0;
	for (size_t i = 0; i < run->n_used; i++)
		for (int k = 0; k < 3; k++)
			fit[k] += run->used[i] <= sizes[k];
	fprintf(stderr, "  %-12s %-14s samples %5zu (lost %zu) complete %6.2f%% (",
		run->in->label, run->w->name, run->samples, run->lost_records,
		pct(run->complete, run->samples));
	for (int e = 1; e < NATIVE_END__COUNT; e++)
		if (run->ends[e])
			fprintf(stderr, " %s %zu", native_end__name((enum native_end)e),
				run->ends[e]);
	fprintf(stderr, " ) epilogues %llu, libdwfl steps %llu%s%s\n",
		(unsigned long long)run->st.epilogues, (unsigned long long)run->st.libdwfl_steps,
		run->w->env ? "; target said: " : "", run->w->env ? run->ready : "");
	if (!run->n_ns)
		return;
	fprintf(stderr,
		"  %-12s %-14s us/unwind live mean %.1f p50 %.1f p99 %.1f, replayed %.1f; "
		"frames %.1f; matched %zu/%zu\n", "", "", mean,
		(double)run->ns[run->n_ns / 2] / 1000.0,
		(double)run->ns[run->n_ns * 99 / 100] / 1000.0, run->replay_us,
		(double)run->frames / (double)run->samples, run->matched, run->checked);
	if (run->n_used)
		fprintf(stderr,
			"  %-12s %-14s stack bytes p50 %zu p90 %zu p99 %zu max %zu; complete "
			"with 8K %.2f%% 16K %.2f%% 32K %.2f%% 64K %.2f%%\n", "", "",
			run->used[run->n_used / 2], run->used[run->n_used * 9 / 10],
			run->used[run->n_used * 99 / 100], run->used[run->n_used - 1],
			pct(fit[0], run->samples), pct(fit[1], run->samples),
			pct(fit[2], run->samples), pct(run->complete, run->samples));
	/* what the unwinder holds: the growth, less the samples kept here (RSS
	 * also counts the pages of the files it mapped: ELF, symbols, CFI) */
	heap = (long)(run->heap_after - run->heap_before) - (long)run->kept_bytes;
	fprintf(stderr,
		"  %-12s %-14s modules %zu, symbols %zu (%zu KiB), CFI rows %zu (%zu KiB), "
		"refreshes %llu; unwinder heap %+ld KiB, RSS %+ld KiB\n", "", "", run->st.modules,
		run->st.symbols, run->st.symindex_bytes / 1024, run->st.rows,
		run->st.rows_bytes / 1024, (unsigned long long)run->st.refreshes, heap / 1024,
		run->rss_after_kb - run->rss_before_kb - (long)(run->kept_bytes / 1024));
	if (run->why_unmatched[0])
		fprintf(stderr, "  %-12s %-14s first unmatched: %s\n", "", "", run->why_unmatched);
}

static size_t heap_used(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* One target on one interpreter: 0, or 1 when it could not run here. */
static int run_one(const struct interp *in, const struct workload *w, double seconds,
		   struct run *run)
{
	static unsigned char buf[1 << 16];
	struct native_frame *frames = calloc(MAX_FRAMES, sizeof(*frames));
	struct ring rings[MAX_THREADS];
	pid_t pid, tids[MAX_THREADS];
	int fd, nt, nr = 0, err;
	uint64_t until;

	assert_non_null(frames);
	memset(run, 0, sizeof(*run));
	run->in = in;
	run->w = w;
	run->named = -1;
	pid = target_start(in, w, seconds, &fd);
	assert_true(pid > 0);
	run->pid = pid;
	if (target_ready(fd, run->ready, sizeof(run->ready))) {
		target_stop(pid, fd);
		free(frames);
		return 1;
	}
	nt = thread_ids(pid, tids, MAX_THREADS);
	for (int i = 0; i < nt; i++) {
		err = ring_open(tids[i], &rings[nr]);
		if (err == -ESRCH)
			continue;
		assert_int_equal(err, 0);
		nr++;
	}
	run->rss_before_kb = rss_kb();
	run->heap_before = heap_used();
	assert_int_equal(native_unwinder__new(pid, &run->u), 0);
	for (int i = 0; i < nr; i++)
		ioctl(rings[i].fd, PERF_EVENT_IOC_ENABLE, 0);
	until = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < until) {
		struct pollfd pfd[MAX_THREADS];

		for (int i = 0; i < nr; i++)
			pfd[i] = (struct pollfd){ .fd = rings[i].fd, .events = POLLIN };
		poll(pfd, (nfds_t)nr, 10);
		for (int i = 0; i < nr; i++)
			ring_drain(run, &rings[i], buf, frames);
	}
	for (int i = 0; i < nr; i++) {
		ioctl(rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
		ring_drain(run, &rings[i], buf, frames);
		ring_close(&rings[i]);
	}
	native_unwinder__stats(run->u, &run->st);
	run->rss_after_kb = rss_kb();
	run->heap_after = heap_used();
	/* stopped, not gone: its maps stay as the samples saw them */
	kill(pid, SIGSTOP);
	run_replay(run, frames, 5);
	native_unwinder__free(run->u);
	run->u = NULL;
	target_stop(pid, fd);
	free(frames);
	return 0;
}

static void run_free(struct run *run)
{
	for (size_t i = 0; i < run->n_kept; i++)
		free(run->kept[i].stack);
	free(run->kept);
	free(run->ns);
	free(run->used);
}

/* perf_event_open on ourselves: can this machine sample user stacks? */
static bool perf_usable(void)
{
	struct ring r;

	if (ring_open(0, &r))
		return false;
	ring_close(&r);
	return true;
}

static void test_live(void **state)
{
	static struct interp interps[MAX_INTERPS];
	const char *s = getenv("NATIVE_LIVE_SECONDS");
	double seconds = s ? atof(s) : 0.5;
	bool with_programs = getenv("NATIVE_LIVE_PROGRAMS") != NULL;
	const char *only_w = getenv("NATIVE_LIVE_WORKLOADS");
	int n, ran = 0, failed = 0;

	(void)state;
	verbose = getenv("NATIVE_LIVE_VERBOSE") != NULL;
	if (!perf_usable()) {
		fprintf(stderr, "  perf_event_open with user stacks unavailable: skipped\n");
		skip();
	}
	n = interps_read(interps, MAX_INTERPS);
	if (!n) {
		fprintf(stderr, "  no interpreter in %s: skipped\n", PYTHONS_TXT);
		skip();
	}
	for (int i = 0; i < n; i++) {
		const struct interp *in = &interps[i];
		size_t nw = sizeof(workloads) / sizeof(*workloads);
		size_t np = with_programs ? sizeof(programs) / sizeof(*programs) : 0;

		if (in->root[0] && geteuid() != 0) {
			fprintf(stderr, "  %-12s chroot needs root: skipped\n", in->label);
			continue;
		}
		if (access(in->root[0] ? in->root : in->python, X_OK) != 0) {
			fprintf(stderr, "  %-12s not installed: skipped\n", in->label);
			continue;
		}
		for (size_t k = 0; k < nw + np; k++) {
			const struct workload *w = k < nw ? &workloads[k] : &programs[k - nw];
			struct run run;

			if (only_w && !listed(only_w, w->name))
				continue;
			if (w->labels && !strstr(in->label, w->labels))
				continue;
			if (run_one(in, w, seconds, &run)) {
				fprintf(stderr, "  %-12s %-14s did not start%s\n", in->label,
					w->name,
					w->script ? " (its libraries missing?)" : "");
				if (!w->script)
					failed++;
				continue;
			}
			ran++;
			run_print(&run);
			/* the numbers first, then the verdicts */
			/* at least 99% complete, 90% of the checked ones right,
			 * every replay the same */
			if (run.samples < 20 ||
			    pct(run.complete, run.samples) < w->min_complete ||
			    (w->min_complete && run.checked < run.complete / 4) ||
			    (double)run.matched < 0.9 * (double)run.checked || run.replay_diff) {
				fprintf(stderr, "  %-12s %-14s FAILED\n", in->label, w->name);
				failed++;
			}
			run_free(&run);
		}
	}
	assert_true(ran > 0);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
