/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "target/debug_offsets.h"
#include "target/elf_symbols.h"
#include "target/exc_offsets.h"
#include "target/call_sites.h"
#include "target/frame_sizes.h"
#include "target/libc_tls.h"
#include "target/offsets_legacy.h"
#include "target/procdir.h"
#include "target/procmaps.h"
#include "target/procfs.h"
#include "target/pyproc.h"
#include "target/remote_mem.h"
#include "util/bytes.h"

/* Bounds on lists read from the target: a corrupt list must end somewhere. */
#define MAX_INTERPRETERS 256
#define MAX_THREADS_WALKED 65536

struct tid_pair {
	uint64_t ns_tid;
	pid_t host_tid;
};

struct pyproc {
	pid_t pid;
	struct py_offsets off;
	uint64_t runtime;
	uint64_t code_type;
	uint64_t coro_type, asyncgen_type;
	uint64_t thread_id_below_tp;	/* libc_tls.h */
	char version[32];
	struct tid_pair *tids;		/* namespace tid -> host tid */
	size_t ntids;
	/* The thread list as last seen (one interpreter only), to read it
	 * again in one process_vm_readv. */
	uint64_t last_interp;
	uint64_t *last_tstates;
	size_t nlast, caplast;
	unsigned char *tsbuf;		/* nlast thread states, tstate_size each */
	struct remote_iov *tsiov;
	struct py_gil_gc gil_gc;	/* valid when gil_gc.gil != 0 */
	struct frame_sizes *sizes;	/* made at the first use */
	struct call_sites *sites;	/* likewise */
};

pid_t pyproc__pid(const struct pyproc *p) { return p->pid; }
const struct py_offsets *pyproc__offsets(const struct pyproc *p) { return &p->off; }
const char *pyproc__version(const struct pyproc *p) { return p->version; }
uint64_t pyproc__runtime(const struct pyproc *p) { return p->runtime; }
uint64_t pyproc__code_type(const struct pyproc *p) { return p->code_type; }
uint64_t pyproc__coro_type(const struct pyproc *p) { return p->coro_type; }
uint64_t pyproc__asyncgen_type(const struct pyproc *p) { return p->asyncgen_type; }
uint64_t pyproc__thread_id_below_tp(const struct pyproc *p) { return p->thread_id_below_tp; }

struct frame_sizes *pyproc__frame_sizes(struct pyproc *p)
{
	if (!p->sizes && frame_sizes__known(&p->off))
		p->sizes = calloc(1, sizeof(*p->sizes));
	return p->sizes;
}

struct call_sites *pyproc__call_sites(struct pyproc *p)
{
	if (!p->sites && opfamily__table(p->off.version_hex)) {
		p->sites = malloc(sizeof(*p->sites));
		if (p->sites)
			call_sites__init(p->sites, p->off.version_hex);
	}
	return p->sites;
}

unsigned long pyproc__call_sites_refused(const struct pyproc *p)
{
	return p->sites ? p->sites->plain : 0;
}

void pyproc__free(struct pyproc *p)
{
	if (!p)
		return;
	free(p->tids);
	free(p->last_tstates);
	free(p->tsbuf);
	free(p->tsiov);
	free(p->sizes);
	free(p->sites);
	free(p);
}

static void format_version(uint32_t hex, char *buf, size_t len)
{
	static const char *const level[] = { [0xa] = "a", [0xb] = "b", [0xc] = "rc" };
	unsigned int lvl = (hex >> 4) & 0xf;

	/* The target's own word: levels other than a, b, rc (0xd, 0xe) are
	 * not in the table, and are printed as a final release. */
	if (lvl > 0xc || lvl < 0xa)
		snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
	else
		snprintf(buf, len, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xff,
			 (hex >> 8) & 0xff, level[lvl], hex & 0xf);
}

int pyproc__from_image(pid_t pid, const struct pyproc_image *img, struct pyproc **out)
{
	struct pyproc *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->off = img->off;
	p->runtime = img->runtime;
	p->code_type = img->code_type;
	p->coro_type = img->coro_type;
	p->asyncgen_type = img->asyncgen_type;
	format_version(p->off.version_hex, p->version, sizeof(p->version));
	*out = p;
	return 0;
}

/* "3.10" out of ".../libpython3.10.so.1.0" or ".../python3.10". */
static int version_from_name(const char *path, unsigned int *major, unsigned int *minor)
{
	const char *base = strrchr(path, '/');
	const char *s;

	base = base ? base + 1 : path;
	s = strstr(base, "python");
	if (!s)
		return -ENOENT;
	return sscanf(s, "python%u.%u", major, minor) == 2 ? 0 : -ENOENT;
}

static int exe_path(pid_t pid, char *buf, size_t len)
{
	char fn[64];
	ssize_t n;

	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
	n = readlink(fn, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (n > 10 && strcmp(buf + n - 10, " (deleted)") == 0)
		buf[n - 10] = '\0';
	return 0;
}

static int is_libpython(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return strncmp(base, "libpython", 9) == 0;
}

struct runtime_loc {
	const struct mapping *map;
	struct elf_pyinfo info;
	uint64_t bias;
};

/* Find the executable (@exe) or libpython that holds _PyRuntime. */
static int find_runtime(const struct pyproc_files *fs, const char *exe, const struct procmaps *maps,
			struct runtime_loc *loc, char *err, size_t errlen)
{
	const char *seen[64];
	size_t nseen = 0;
	int err_open = 0;

	/* The executable first, then every libpython*.so mapping. */
	for (size_t i = 0; i <= maps->n; i++) {
		const char *path = i == 0 ? exe : maps->maps[i - 1].path;
		const struct mapping *first;
		int fd, rc;

		if (!path[0] || (i > 0 && !is_libpython(path)))
			continue;
		for (size_t k = 0; k < nseen; k++)
			if (strcmp(seen[k], path) == 0)
				goto next;
		if (nseen < sizeof(seen) / sizeof(seen[0]))
			seen[nseen++] = path;
		first = procmaps__first(maps, path);
		if (!first)
			continue;
		fd = fs->open(fs->ctx, first);
		if (fd < 0) {
			err_open = fd;
			continue;
		}
		rc = elf_pyinfo__read(fd, &loc->info);
		close(fd);
		if (rc || !loc->info.runtime)
			continue;
		loc->map = first;
		loc->bias = first->start - first->offset - loc->info.load_vaddr;
		return 0;
next:;
	}
	if (err_open == -EACCES || err_open == -EPERM) {
		snprintf(err, errlen, "%s: permission denied opening its executable", fs->what);
		return -EPERM;
	}
	snprintf(err, errlen, "%s (%s) is not a Python process: no _PyRuntime in it or "
		 "any libpython it maps%s", fs->what, exe[0] ? exe : "?",
		 err_open ? " (some of its files could not be opened)" : "");
	return -ENOEXEC;
}

static int read_version(struct pyproc *p, const struct runtime_loc *loc, char *err, size_t errlen)
{
	uint32_t hex = 0;
	unsigned int major, minor;
	int rc;

	if (loc->info.py_version) {
		rc = remote_read(p->pid, loc->bias + loc->info.py_version, &hex, sizeof(hex));
		if (rc)
			return rc;
		if ((hex >> 24) == 3 && ((hex >> 16) & 0xff) >= 11)
			return (int)(p->off.version_hex = hex, 0);
	}
	/* Py_Version appeared in 3.11: without it, name the version we can. */
	if (hex && (hex >> 24) == 3)
		minor = (hex >> 16) & 0xff, major = 3;
	else if (version_from_name(loc->map->path, &major, &minor))
		major = 0;
	if (major)
		snprintf(err, errlen, "unsupported Python %u.%u in process %d: pyprof-bpf reads 3.11 to 3.15",
			 major, minor, (int)p->pid);
	else
		snprintf(err, errlen, "unsupported Python in process %d (older than 3.11): "
			 "pyprof-bpf reads 3.11 to 3.15", (int)p->pid);
	return -ENOTSUP;
}

static int load_table(struct pyproc *p, char *err, size_t errlen);

/* The version's offsets: its table, and where its exceptions are (left 0,
 * --mode exception refused, when the layout is not the one known). */
static int load_offsets(struct pyproc *p, char *err, size_t errlen)
{
	int rc = load_table(p, err, errlen);

	if (!rc && exc_offsets__fill(&p->off)) {
		p->off.tstate_exc_current = p->off.tstate_exc_info = 0;
		p->off.type_tp_name = p->off.type_tp_flags = 0;
	}
	return rc;
}

static int load_table(struct pyproc *p, char *err, size_t errlen)
{
	uint32_t hex = p->off.version_hex;
	unsigned char hdr[DEBUG_OFFSETS_HEADER], *buf;
	long size;
	int rc;

	if (((hex >> 16) & 0xff) < 13) {
		rc = offsets_legacy__get(hex, &p->off);
		if (rc)
			snprintf(err, errlen, "unsupported Python %u.%u", hex >> 24, (hex >> 16) & 0xff);
		return rc;
	}
	rc = remote_read(p->pid, p->runtime, hdr, sizeof(hdr));
	if (rc)
		return rc;
	if (memcmp(hdr, DEBUG_OFFSETS_COOKIE, 8) != 0) {
		snprintf(err, errlen, "process %d: _PyRuntime does not start with the debug offsets "
			 "cookie", (int)p->pid);
		return -EPROTO;
	}
	{
		uint64_t v;

		memcpy(&v, hdr + 8, 8);
		if ((uint32_t)v != hex) {
			snprintf(err, errlen, "process %d: _Py_DebugOffsets says version 0x%llx but "
				 "Py_Version is 0x%x", (int)p->pid, (unsigned long long)v, hex);
			return -EPROTO;
		}
		size = debug_offsets__size(v);
	}
	if (size < 0) {
		snprintf(err, errlen, "unsupported Python %u.%u in process %d: pyprof-bpf reads 3.11 to 3.15",
			 hex >> 24, (hex >> 16) & 0xff, (int)p->pid);
		return -ENOTSUP;
	}
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	rc = remote_read(p->pid, p->runtime, buf, size);
	if (!rc)
		rc = debug_offsets__parse(buf, size, &p->off, err, errlen);
	free(buf);
	return rc;
}

/* Build the namespace-tid -> host-tid table from NSpid: lines. */
static int load_tids(struct pyproc *p)
{
	struct procdir it;
	size_t cap = 0;
	pid_t host;
	int rc = procdir__open_tids(&it, p->pid);

	if (rc)
		return rc;
	p->ntids = 0;
	while (procdir__next(&it, &host)) {
		pid_t inner = host;
		int err = procfs__nspid(p->pid, host, &inner);

		if (err == -ENOENT)
			inner = host;	/* no NSpid line: no namespace to tell */
		else if (err)
			continue;	/* the thread just exited */
		if (p->ntids == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct tid_pair *n = realloc(p->tids, ncap * sizeof(*n));

			if (!n) {
				procdir__close(&it);
				return -ENOMEM;
			}
			p->tids = n;
			cap = ncap;
		}
		p->tids[p->ntids++] = (struct tid_pair){ inner, host };
	}
	procdir__close(&it);
	return 0;
}

static pid_t host_tid(struct pyproc *p, uint64_t ns_tid, int reload)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < p->ntids; i++)
			if (p->tids[i].ns_tid == ns_tid)
				return p->tids[i].host_tid;
		/* A thread started since we last looked: look again, once. */
		if (pass || !reload || load_tids(p))
			break;
	}
	return 0;
}

static void fill_thread(struct pyproc *p, const unsigned char *ts, uint64_t tstate,
			uint64_t interp, struct py_thread *t, int *reloaded)
{
	const struct py_offsets *o = &p->off;

	t->tstate = tstate;
	t->interp = interp;
	t->thread_id = get_u64(ts, o->tstate_thread_id);
	t->native_tid = get_u64(ts, o->tstate_native_thread_id);
	t->host_tid = host_tid(p, t->native_tid, !*reloaded);
	if (!t->host_tid)
		*reloaded = 1;
}

/* Remember the list for next time; failure only costs the fast path. */
static void remember_threads(struct pyproc *p, uint64_t interp, const struct py_thread *t,
			     size_t n, int complete)
{
	size_t sz = p->off.tstate_size;

	p->nlast = 0;
	if (!complete || n == 0)
		return;
	if (n > p->caplast) {
		size_t cap = n * 2;
		uint64_t *ts = realloc(p->last_tstates, cap * sizeof(*ts));

		if (!ts)
			return;
		p->last_tstates = ts;
		free(p->tsbuf);
		free(p->tsiov);
		p->tsbuf = malloc(cap * sz);
		p->tsiov = malloc((cap + 3) * sizeof(*p->tsiov));
		p->caplast = p->tsbuf && p->tsiov ? cap : 0;
		if (!p->caplast)
			return;
	}
	for (size_t i = 0; i < n; i++)
		p->last_tstates[i] = t[i].tstate;
	p->last_interp = interp;
	p->nlast = n;
}

/* The list as it was last time, read in one call and checked link by link;
 * 1 when it still holds, 0 to take the slow path. */
static int threads_predicted(struct pyproc *p, struct py_thread *out, size_t max, size_t *n)
{
	const struct py_offsets *o = &p->off;
	uint64_t head = 0, first = 0, next_interp = 1;
	struct remote_iov *iov = p->tsiov;
	size_t k = 0, done, sz = o->tstate_size;
	int reloaded = 0;

	if (!p->nlast || p->nlast > max)
		return 0;
	iov[k++] = (struct remote_iov){ p->runtime + o->runtime_interpreters_head, &head, 8 };
	iov[k++] = (struct remote_iov){ p->last_interp + o->interp_threads_head, &first, 8 };
	iov[k++] = (struct remote_iov){ p->last_interp + o->interp_next, &next_interp, 8 };
	for (size_t i = 0; i < p->nlast; i++)
		iov[k++] = (struct remote_iov){ p->last_tstates[i], p->tsbuf + i * sz, sz };
	if (remote_readv_prefix(p->pid, iov, k, &done) || head != p->last_interp ||
	    next_interp || first != p->last_tstates[0])
		return 0;
	for (size_t i = 0; i < p->nlast; i++) {
		const unsigned char *ts = p->tsbuf + i * sz;
		uint64_t next = i + 1 < p->nlast ? p->last_tstates[i + 1] : 0;

		if (get_u64(ts, o->tstate_interp) != head || get_u64(ts, o->tstate_next) != next)
			return 0;
	}
	for (size_t i = 0; i < p->nlast; i++)
		fill_thread(p, p->tsbuf + i * sz, p->last_tstates[i], head, &out[i], &reloaded);
	*n = p->nlast;
	return 1;
}

/*
 * A list of @walked thread states (@kept of them in @t) whose next after the
 * last is @again, @cycle links after an earlier one: how many come before
 * the first repeat. Past what was kept it cannot tell, and the walk was
 * longer than the caller takes anyway.
 */
static size_t list_distinct(const struct py_thread *t, size_t kept, size_t walked, size_t cycle,
			    uint64_t again)
{
	for (size_t i = 0; i + cycle <= walked; i++) {
		uint64_t later;

		if (i + cycle < walked) {
			if (i + cycle >= kept)
				break;
			later = t[i + cycle].tstate;
		} else {
			later = again;
		}
		if (i < kept && t[i].tstate == later)
			return i + cycle;
	}
	return walked;
}

int pyproc__threads(struct pyproc *p, struct py_thread *out, size_t max, size_t *n)
{
	const struct py_offsets *o = &p->off;
	unsigned char ts[PY_MAX_STRUCT_COPY];
	uint64_t interp;
	size_t count = 0, walked = 0;
	uint64_t first_interp;
	int rc, reloaded = 0, ninterp = 0;

	*n = 0;
	if (threads_predicted(p, out, max, n))
		return 0;
	rc = remote_read_u64(p->pid, p->runtime + o->runtime_interpreters_head, &interp);
	if (rc)
		return rc;
	first_interp = interp;
	for (int ni = 0; interp && ni < MAX_INTERPRETERS; ni++, ninterp++) {
		uint64_t tstate, next_interp;
		struct remote_iov iov[2] = {
			{ interp + o->interp_threads_head, &tstate, 8 },
			{ interp + o->interp_next, &next_interp, 8 },
		};

		size_t base = count, power = 1, lam = 1;
		uint64_t tortoise;

		rc = remote_readv(p->pid, iov, 2);
		if (rc)
			return rc;
		tortoise = tstate;
		while (tstate) {
			struct py_thread t;

			if (++walked > MAX_THREADS_WALKED)
				return -ELOOP;
			rc = remote_read(p->pid, tstate, ts, o->tstate_size);
			if (rc)
				return rc;
			/* Every thread state points back at its interpreter: a
			 * cheap check that the offsets and the list are sane. */
			if (get_u64(ts, o->tstate_interp) != interp)
				return -EPROTO;
			fill_thread(p, ts, tstate, interp, &t, &reloaded);
			if (count < max)
				out[count] = t;
			count++;
			tstate = get_u64(ts, o->tstate_next);
			/* Brent: a list that comes back on itself (a target that
			 * wrote its own) keeps the threads before the repeat. */
			if (tstate == tortoise) {
				count = base + list_distinct(out + base, max > base ? max - base : 0,
							     count - base, lam, tstate);
				break;
			}
			if (power == lam) {
				tortoise = tstate;
				power *= 2;
				lam = 0;
			}
			lam++;
		}
		interp = next_interp;
	}
	*n = count < max ? count : max;
	remember_threads(p, first_interp, out, *n, ninterp == 1 && count <= max);
	return count > max ? -E2BIG : 0;
}

int pyproc__interp_id(struct pyproc *p, uint64_t interp, int64_t *id)
{
	uint64_t v;
	int rc;

	*id = -1;
	if (!interp)
		return -EINVAL;
	rc = remote_read_u64(p->pid, interp + p->off.interp_id, &v);
	if (rc)
		return rc;
	/* ids count up from 0 (the main interpreter); a negative one is
	 * not an interpreter's */
	if ((int64_t)v < 0)
		return -EPROTO;
	*id = (int64_t)v;
	return 0;
}

int pyproc__gil_gc(struct pyproc *p, struct py_gil_gc *out)
{
	const struct py_offsets *o = &p->off;
	struct py_gil_gc g = { 0 };
	int32_t locked = 0, collecting = 0;
	int rc;

	if (p->gil_gc.gil) {
		*out = p->gil_gc;
		return 0;
	}
	memset(out, 0, sizeof(*out));
	if (!o->runtime_interpreters_main || !o->gil_size || !o->gil_last_holder ||
	    !o->gil_locked || !o->interp_gc_collecting || o->gc_collecting_size != 4 ||
	    (!o->runtime_gil && !o->interp_ceval_gil))
		return -ENOTSUP;
	rc = remote_read_u64(p->pid, p->runtime + o->runtime_interpreters_main, &g.interp);
	if (rc)
		return rc;
	if (!g.interp)
		return -EAGAIN;
	if (o->runtime_gil) {
		g.gil = p->runtime + o->runtime_gil;
	} else {
		/* The pointer is what the interpreter takes; the main one's
		 * must be its own GIL, else our offsets are wrong. */
		rc = remote_read_u64(p->pid, g.interp + o->interp_ceval_gil, &g.gil);
		if (rc)
			return rc;
		if (!g.gil)
			return -EAGAIN;
		if (o->interp_gil && g.gil != g.interp + o->interp_gil)
			return -EPROTO;
	}
	g.gil_size = o->gil_size;
	g.gil_holder = g.gil + o->gil_last_holder;
	g.gil_locked = g.gil + o->gil_locked;
	g.gc_collecting = g.interp + o->interp_gc_collecting;
	g.gc_collecting_size = o->gc_collecting_size;
	g.gc_frame = o->interp_gc_frame ? g.interp + o->interp_gc_frame : 0;
	{
		struct remote_iov iov[2] = {
			{ g.gil_locked, &locked, sizeof(locked) },
			{ g.gc_collecting, &collecting, sizeof(collecting) },
		};

		rc = remote_readv(p->pid, iov, 2);
		if (rc)
			return rc;
	}
	if (locked == -1)	/* the GIL is not created yet */
		return -EAGAIN;
	if ((locked != 0 && locked != 1) || (collecting != 0 && collecting != 1))
		return -EPROTO;
	p->gil_gc = g;
	*out = g;
	return 0;
}

static int check_readable(pid_t pid, char *err, size_t errlen)
{
	char fn[64];

	snprintf(fn, sizeof(fn), "/proc/%d", (int)pid);
	if (pid <= 0 || access(fn, F_OK) != 0) {
		snprintf(err, errlen, "no such process: %d", (int)pid);
		return -ESRCH;
	}
	return 0;
}

/*
 * The runtime found among @maps (the files opened through @fs), its
 * version read and its offsets loaded into @p: what every target needs
 * before its threads can be read. 0, or -errno with @err said when it is
 * something but a failed read.
 */
static int attach(struct pyproc *p, const struct pyproc_files *fs, const char *exe,
		  const struct procmaps *maps, char *err, size_t errlen)
{
	struct runtime_loc loc = { 0 };
	int rc;

	rc = find_runtime(fs, exe, maps, &loc, err, errlen);
	if (rc)
		return rc;
	p->runtime = loc.bias + loc.info.runtime;
	p->code_type = loc.info.code_type ? loc.bias + loc.info.code_type : 0;
	p->coro_type = loc.info.coro_type ? loc.bias + loc.info.coro_type : 0;
	p->asyncgen_type = loc.info.asyncgen_type ? loc.bias + loc.info.asyncgen_type : 0;
	p->thread_id_below_tp = libc_tls__thread_id_below_tp(fs, maps);
	rc = read_version(p, &loc, err, errlen);
	if (!rc)
		rc = load_offsets(p, err, errlen);
	if (!rc)
		format_version(p->off.version_hex, p->version, sizeof(p->version));
	return rc;
}

int pyproc__open_files(const struct pyproc_files *fs, const char *exe,
		       const struct procmaps *maps, const pid_t *tids, size_t ntids,
		       struct pyproc **out, char *err, size_t errlen)
{
	struct pyproc *p = calloc(1, sizeof(*p));
	struct py_thread first;
	size_t n;
	int rc;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->pid = fs->pid;
	p->tids = calloc(ntids ? ntids : 1, sizeof(*p->tids));
	if (!p->tids) {
		pyproc__free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ntids; i++)
		p->tids[i] = (struct tid_pair){ tids[i], tids[i] };
	p->ntids = ntids;
	err[0] = '\0';
	rc = attach(p, fs, exe, maps, err, errlen);
	if (!rc) {
		rc = pyproc__threads(p, &first, 1, &n);
		rc = rc == -E2BIG ? 0 : rc;
		if (rc == -EPROTO)
			snprintf(err, errlen, "%s: Python %s's thread list does not match its offsets",
				 fs->what, p->version);
	}
	if (rc && !err[0])
		snprintf(err, errlen, "%s: reading its runtime: %s", fs->what, strerror(-rc));
	if (rc) {
		pyproc__free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int open_in_process(void *ctx, const struct mapping *m)
{
	return procmaps__open_file(*(const pid_t *)ctx, m);
}

int pyproc__open(pid_t pid, struct pyproc **out, char *err, size_t errlen)
{
	struct procmaps maps = { 0 };
	char exe[PATH_MAX] = "", what[32];
	struct pyproc_files fs = { pid, what, open_in_process, &pid };
	struct pyproc *p;
	struct py_thread first;
	size_t n;
	int rc;

	*out = NULL;
	rc = check_readable(pid, err, errlen);
	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	rc = procmaps__read(pid, &maps);
	if (rc == -EACCES || rc == -EPERM) {
		snprintf(err, errlen, "permission denied reading process %d: run as root or as its "
			 "owner (with ptrace allowed, see kernel.yama.ptrace_scope)", (int)pid);
		rc = -EPERM;
		goto fail;
	}
	if (rc == -ESRCH && check_readable(pid, err, errlen) == 0) {
		snprintf(err, errlen, "process %d is not a Python process: it has no memory map "
			 "(a kernel thread, or a zombie)", (int)pid);
		rc = -ENOEXEC;
		goto fail;
	}
	if (rc == -ESRCH) {
		snprintf(err, errlen, "process %d exited", (int)pid);
		goto fail;
	}
	if (rc) {
		snprintf(err, errlen, "reading /proc/%d/maps: %s", (int)pid, strerror(-rc));
		goto fail;
	}
	snprintf(what, sizeof(what), "process %d", (int)pid);
	exe_path(pid, exe, sizeof(exe));
	rc = attach(p, &fs, exe, &maps, err, errlen);
	if (rc == -ENOEXEC || (rc == -EPERM && err[0]))
		goto fail;
	if (rc)
		goto fail_read;
	rc = load_tids(p);
	if (rc)
		goto fail_read;
	/* The offsets must lead from the runtime to a thread and back. The
	 * target runs: a thread state freed while the list is read breaks
	 * the round trip too, so a few tries before calling it wrong. */
	for (int i = 0; i < 5; i++) {
		rc = pyproc__threads(p, &first, 1, &n);
		if (rc != -EPROTO)
			break;
		usleep(2000);
	}
	if (rc == -EPROTO) {
		snprintf(err, errlen, "process %d: Python %s's thread list does not match its offsets",
			 (int)pid, p->version);
		goto fail;
	}
	if (rc && rc != -E2BIG)
		goto fail_read;
	procmaps__free(&maps);
	*out = p;
	return 0;

fail_read:
	if (err[0] == '\0' || rc == -ESRCH || rc == -EPERM || rc == -EFAULT) {
		if (rc == -EPERM)
			snprintf(err, errlen, "permission denied reading the memory of process %d: run "
				 "as root or with CAP_SYS_PTRACE", (int)pid);
		else if (rc == -ESRCH || check_readable(pid, err, errlen))
			snprintf(err, errlen, "process %d exited", (int)pid);
		else if (rc == -EFAULT)
			snprintf(err, errlen, "process %d: reading its runtime failed (exiting, or "
				 "memory corrupt)", (int)pid);
		else
			snprintf(err, errlen, "process %d: %s", (int)pid, strerror(-rc));
	}
fail:
	procmaps__free(&maps);
	pyproc__free(p);
	return rc;
}

/* co_version of every frame's code object, in one process_vm_readv. */
