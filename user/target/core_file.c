// SPDX-License-Identifier: MIT
/*
 * core_file.c - a process's memory and threads from its core file
 * (core_file.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "target/core_file.h"
#include "target/rootfs.h"

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

/* struct elf_prstatus: pr_pid, then pr_reg (the architecture's user
 * registers), then pr_fpvalid. */
#define PRSTATUS_PID 32
#define PRSTATUS_REGS 112
#if defined(__aarch64__)
#define CORE_MACHINE EM_AARCH64
#define CORE_ARCH "AArch64"
#define PRSTATUS_SIZE 392	/* x0-x30, sp, pc, pstate */
#define REG_ARG0 0
#define REG_NR 8
#define REG_SP 31
#define REG_PC 32
#define SVC_0 0xd4000001u	/* svc #0 */
#else
#define CORE_MACHINE EM_X86_64
#define CORE_ARCH "x86-64"
#define PRSTATUS_SIZE 336	/* user_regs_struct */
#define REG_ARG0 14		/* rdi */
#define REG_NR 15		/* orig_rax */
#define REG_PC 16
#define REG_SP 19
#endif
/* struct elf_prpsinfo: pr_pid, pr_fname[16]. */
#define PRPSINFO_UID 16
#define PRPSINFO_PID 24
#define PRPSINFO_FNAME 40
#define PRPSINFO_SIZE 136

#define AT_PHDR_TYPE 3
/* Files kept open for reads the core did not dump. */
#define OPEN_FILES 16

struct segment {
	uint64_t vaddr, memsz;	/* in memory */
	uint64_t offset, filesz;	/* in the core */
};

struct open_file {
	const char *path;	/* a mapping's */
	int fd;			/* -errno: could not be opened */
};

struct core_file {
	int fd;
	Elf *elf;
	const unsigned char *raw;	/* the whole core, mapped by libelf */
	size_t size;
	struct segment *seg;
	size_t nseg;
	struct core_thread *threads;
	size_t nthreads;
	struct procmaps maps;
	pid_t pid;
	uid_t uid;
	char comm[16];
	uint64_t phdr;		/* AT_PHDR */
	int rootfd;
	int hostfd;		/* "/": where a debugger on this host saw the files */
	struct open_file files[OPEN_FILES];
	size_t nfiles;
};

static uint64_t get64(const unsigned char *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

static int fail(char *err, size_t errlen, int rc, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return rc;
}

/* NT_PRSTATUS: one thread. */
static int note_thread(struct core_file *cf, const unsigned char *d, size_t len)
{
	struct core_thread *t;

	if (len < PRSTATUS_SIZE)
		return -EPROTO;
	if (cf->nthreads == CORE_FILE_MAX_THREADS)
		return 0;	/* the rest are not shown */
	t = &cf->threads[cf->nthreads++];
	t->tid = (pid_t)get32(d + PRSTATUS_PID);
	t->syscall = (int64_t)get64(d + PRSTATUS_REGS + 8 * REG_NR);
	t->arg0 = get64(d + PRSTATUS_REGS + 8 * REG_ARG0);
	t->pc = get64(d + PRSTATUS_REGS + 8 * REG_PC);
	t->sp = get64(d + PRSTATUS_REGS + 8 * REG_SP);
	return 0;
}

/* AArch64: the system call of each thread whose pc is on an svc (x8), once
 * the memory can be read; the others were in none (core_file.h). */
static void threads_syscalls(struct core_file *cf)
{
#if defined(__aarch64__)
	for (size_t i = 0; i < cf->nthreads; i++) {
		struct core_thread *t = &cf->threads[i];
		uint32_t insn;

		if (core_file__read(cf, t->pc, &insn, sizeof(insn)) || insn != SVC_0)
			t->syscall = -1;
	}
#else
	(void)cf;
#endif
}

/* NT_PRPSINFO: the process. */
static int note_process(struct core_file *cf, const unsigned char *d, size_t len)
{
	if (len < PRPSINFO_SIZE)
		return -EPROTO;
	cf->pid = (pid_t)get32(d + PRPSINFO_PID);
	cf->uid = (uid_t)get32(d + PRPSINFO_UID);
	memcpy(cf->comm, d + PRPSINFO_FNAME, sizeof(cf->comm) - 1);
	cf->comm[sizeof(cf->comm) - 1] = '\0';
	return 0;
}

/* NT_AUXV: where the executable's program headers are. */
static int note_auxv(struct core_file *cf, const unsigned char *d, size_t len)
{
	for (size_t i = 0; i + 16 <= len; i += 16)
		if (get64(d + i) == AT_PHDR_TYPE)
			cf->phdr = get64(d + i + 8);
	return 0;
}

/*
 * NT_FILE: count, page size, then count (start, end, page offset) and as
 * many NUL-terminated paths.
 */
static int note_files(struct core_file *cf, const unsigned char *d, size_t len)
{
	uint64_t count, page;
	const char *names, *end = (const char *)d + len;

	if (len < 16 || cf->maps.n)
		return -EPROTO;
	count = get64(d);
	page = get64(d + 8);
	if (count > (len - 16) / 24 || count > CORE_FILE_MAX_SEGMENTS || !page ||
	    (page & (page - 1)) || page > (1u << 30))
		return -EPROTO;
	cf->maps.maps = calloc(count ? count : 1, sizeof(*cf->maps.maps));
	if (!cf->maps.maps)
		return -ENOMEM;
	names = (const char *)d + 16 + count * 24;
	for (uint64_t i = 0; i < count; i++) {
		const unsigned char *e = d + 16 + i * 24;
		struct mapping *m = &cf->maps.maps[i];
		const char *nul = memchr(names, '\0', (size_t)(end - names));

		if (!nul)
			return -EPROTO;
		m->start = get64(e);
		m->end = get64(e + 8);
		if (m->end < m->start || get64(e + 16) > UINT64_MAX / page)
			return -EPROTO;
		m->offset = get64(e + 16) * page;
		memcpy(m->perms, "r--p", 5);	/* NT_FILE does not say */
		m->path = strdup(names);
		if (!m->path)
			return -ENOMEM;
		cf->maps.n = i + 1;
		names = nul + 1;
	}
	return 0;
}

static int read_note(struct core_file *cf, const GElf_Nhdr *nh, const char *name,
		     const unsigned char *desc)
{
	if (nh->n_namesz != 5 || memcmp(name, "CORE", 5) != 0)
		return 0;	/* LINUX (FP state, ...) and others */
	switch (nh->n_type) {
	case NT_PRSTATUS:
		return note_thread(cf, desc, nh->n_descsz);
	case NT_PRPSINFO:
		return note_process(cf, desc, nh->n_descsz);
	case NT_AUXV:
		return note_auxv(cf, desc, nh->n_descsz);
	case NT_FILE:
		return note_files(cf, desc, nh->n_descsz);
	default:
		return 0;
	}
}

static int read_notes(struct core_file *cf, const GElf_Phdr *ph)
{
	Elf_Data *data = elf_getdata_rawchunk(cf->elf, (int64_t)ph->p_offset, ph->p_filesz,
					      ELF_T_NHDR);
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;
	int rc;

	if (!data)
		return -EPROTO;
	while (off < data->d_size &&
	       (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		rc = read_note(cf, &nh, (const char *)data->d_buf + name_off,
			       (const unsigned char *)data->d_buf + desc_off);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_segment(const void *a, const void *b)
{
	const struct segment *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* Program headers: the segments (sorted) and the notes. */
static int read_headers(struct core_file *cf, char *err, size_t errlen)
{
	size_t nph = 0;
	int rc;

	if (elf_getphdrnum(cf->elf, &nph) || nph > CORE_FILE_MAX_SEGMENTS)
		return fail(err, errlen, -EPROTO, "its program headers cannot be read");
	cf->seg = calloc(nph ? nph : 1, sizeof(*cf->seg));
	cf->threads = calloc(CORE_FILE_MAX_THREADS, sizeof(*cf->threads));
	if (!cf->seg || !cf->threads)
		return -ENOMEM;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(cf->elf, (int)i, &ph))
			return fail(err, errlen, -EPROTO, "a program header cannot be read");
		if (ph.p_type == PT_NOTE) {
			if (ph.p_offset > cf->size || ph.p_filesz > cf->size - ph.p_offset)
				return fail(err, errlen, -EIO, "it is truncated (its notes are cut)");
			rc = read_notes(cf, &ph);
			if (rc)
				return fail(err, errlen, rc, rc == -ENOMEM ? "out of memory" :
					    "its notes are malformed");
		} else if (ph.p_type == PT_LOAD) {
			if (ph.p_filesz > ph.p_memsz || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
				return fail(err, errlen, -EPROTO, "a segment is malformed");
			if (ph.p_offset > cf->size || ph.p_filesz > cf->size - ph.p_offset)
				return fail(err, errlen, -EIO, "it is truncated (a segment runs past "
					    "its end)");
			cf->seg[cf->nseg++] = (struct segment){ ph.p_vaddr, ph.p_memsz, ph.p_offset,
								ph.p_filesz };
		}
	}
	if (!cf->nthreads)
		return fail(err, errlen, -EPROTO, "it names no thread (no NT_PRSTATUS note)");
	qsort(cf->seg, cf->nseg, sizeof(*cf->seg), cmp_segment);
	return 0;
}

int core_file__open_fd(int fd, const char *root, struct core_file **out, char *err,
		       size_t errlen)
{
	struct core_file *cf = calloc(1, sizeof(*cf));
	GElf_Ehdr eh;
	int rc;

	*out = NULL;
	if (!cf) {
		close(fd);
		return -ENOMEM;
	}
	cf->fd = fd;
	cf->rootfd = cf->hostfd = -1;
	cf->uid = (uid_t)-1;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		rc = fail(err, errlen, -ENOSYS, "libelf is too old");
		goto out;
	}
	cf->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!cf->elf || elf_kind(cf->elf) != ELF_K_ELF || !gelf_getehdr(cf->elf, &eh) ||
	    eh.e_type != ET_CORE) {
		rc = fail(err, errlen, -ENOEXEC, "not a core file");
		goto out;
	}
	if (eh.e_machine != CORE_MACHINE || gelf_getclass(cf->elf) != ELFCLASS64) {
		rc = fail(err, errlen, -ENOEXEC, "not an " CORE_ARCH " core (this pyprof-bpf "
			  "reads " CORE_ARCH "'s)");
		goto out;
	}
	cf->raw = (const unsigned char *)elf_rawfile(cf->elf, &cf->size);
	if (!cf->raw) {
		rc = fail(err, errlen, -EIO, "it cannot be mapped");
		goto out;
	}
	rc = read_headers(cf, err, errlen);
	if (rc)
		goto out;
	cf->rootfd = open(root && root[0] ? root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	cf->hostfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cf->rootfd < 0 || cf->hostfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "its root %s: %s", root ? root : "/", strerror(errno));
		goto out;
	}
	threads_syscalls(cf);
	*out = cf;
	return 0;
out:
	core_file__free(cf);
	return rc;
}

int core_file__open(const char *path, const char *root, struct core_file **out, char *err,
		    size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*out = NULL;
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, -EINVAL, "not a regular file");
	}
	return core_file__open_fd(fd, root, out, err, errlen);
}

void core_file__free(struct core_file *cf)
{
	if (!cf)
		return;
	for (size_t i = 0; i < cf->nfiles; i++)
		if (cf->files[i].fd >= 0)
			close(cf->files[i].fd);
	if (cf->rootfd >= 0)
		close(cf->rootfd);
	if (cf->hostfd >= 0)
		close(cf->hostfd);
	if (cf->elf)
		elf_end(cf->elf);
	if (cf->fd >= 0)
		close(cf->fd);
	procmaps__free(&cf->maps);
	free(cf->seg);
	free(cf->threads);
	free(cf);
}

int core_file__open_mapped(const struct core_file *cf, const struct mapping *map)
{
	char magic[SELFMAG];
	int fd = rootfs__open_at(cf->rootfd, map->path, PROCMAPS_MAX_FILE, NULL);

	/* A kernel's core names the files as the process saw them (under
	 * its root); gcore, as the debugger did (on this host). */
	if (fd < 0)
		fd = rootfs__open_at(cf->hostfd, map->path, PROCMAPS_MAX_FILE, NULL);
	if (fd < 0)
		return fd;
	/* A core names what paths it likes: only an ELF file is memory. */
	if (pread(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, ELFMAG, SELFMAG) != 0) {
		close(fd);
		return -ENOEXEC;
	}
	return fd;
}

int core_file__root(const struct core_file *cf)
{
	return cf->rootfd;
}

/* The descriptor of @m's file, opened once (-errno: it cannot be). */
static int mapped_fd(struct core_file *cf, const struct mapping *m)
{
	for (size_t i = 0; i < cf->nfiles; i++)
		if (cf->files[i].path == m->path || strcmp(cf->files[i].path, m->path) == 0)
			return cf->files[i].fd;
	if (cf->nfiles == OPEN_FILES)
		return -EMFILE;
	cf->files[cf->nfiles] = (struct open_file){ m->path, core_file__open_mapped(cf, m) };
	return cf->files[cf->nfiles++].fd;
}

/* Bytes at @addr from the file mapped there: how many (0: none). */
static size_t read_mapped(struct core_file *cf, uint64_t addr, unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < cf->maps.n; i++) {
		const struct mapping *m = &cf->maps.maps[i];
		size_t n;
		ssize_t got;
		int fd;

		if (addr < m->start || addr >= m->end)
			continue;
		fd = mapped_fd(cf, m);
		if (fd < 0)
			return 0;
		n = m->end - addr < len ? (size_t)(m->end - addr) : len;
		got = pread(fd, buf, n, (off_t)(m->offset + (addr - m->start)));
		return got > 0 ? (size_t)got : 0;
	}
	return 0;
}

/* The segment holding @addr, or NULL. */
static const struct segment *segment_of(const struct core_file *cf, uint64_t addr)
{
	size_t lo = 0, hi = cf->nseg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct segment *s = &cf->seg[mid];

		if (addr < s->vaddr)
			hi = mid;
		else if (addr - s->vaddr >= s->memsz)
			lo = mid + 1;
		else
			return s;
	}
	return NULL;
}

int core_file__read(struct core_file *cf, uint64_t addr, void *buf, size_t len)
{
	unsigned char *out = buf;

	while (len) {
		const struct segment *s = segment_of(cf, addr);
		uint64_t in = s ? addr - s->vaddr : 0;
		size_t n;

		if (s && in < s->filesz) {
			n = s->filesz - in < len ? (size_t)(s->filesz - in) : len;
			memcpy(out, cf->raw + s->offset + in, n);
		} else {
			/* not dumped: the file mapped there, if any */
			n = read_mapped(cf, addr, out, s && s->memsz - in < len ?
						   (size_t)(s->memsz - in) : len);
			if (!n)
				return -EFAULT;
		}
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

pid_t core_file__pid(const struct core_file *cf)
{
	return cf->pid ? cf->pid : cf->threads[0].tid;
}

uid_t core_file__uid(const struct core_file *cf)
{
	return cf->uid;
}

const char *core_file__comm(const struct core_file *cf)
{
	return cf->comm;
}

const char *core_file__exe(const struct core_file *cf)
{
	for (size_t i = 0; cf->phdr && i < cf->maps.n; i++)
		if (cf->phdr >= cf->maps.maps[i].start && cf->phdr < cf->maps.maps[i].end)
			return cf->maps.maps[i].path;
	return "";
}

const struct procmaps *core_file__maps(const struct core_file *cf)
{
	return &cf->maps;
}

const struct core_thread *core_file__threads(const struct core_file *cf, size_t *n)
{
	*n = cf->nthreads;
	return cf->threads;
}
