/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include "native/modules.h"
#include "native/symindex.h"
#include "target/procmaps.h"
#include "target/rootfs.h"

/* What is kept per libdwfl module (its userdata). */
struct nmod {
	pid_t pid;
	struct mapping map;	/* the lowest mapping: how to open the file */
	int vdso;		/* read from the target's memory by libdwfl */
	int foreign_root;	/* the target's root is not ours: its debug files first */
	int debug_asked;	/* find_debuginfo was called: a second call is the alt file */
	int syms_state;		/* 0: not built yet, 1: built, -1: failed */
	int symtab;		/* the symbols came from a .symtab */
	struct symindex *syms;
};

/* Anonymous executable memory as of the last refresh (JIT code). */
struct range {
	uint64_t start, end;
};

struct native_modules {
	pid_t pid;
	Dwfl *dwfl;
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	int foreign_root;
	struct range *anon;
	size_t nanon;
	long vm_pages;		/* the process's size at the last refresh */
};

static void nmod__free(struct nmod *nm)
{
	if (!nm)
		return;
	symindex__free(nm->syms);
	free(nm->map.path);
	free(nm);
}

/* ---- libdwfl callbacks: where the files are ---- */

static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct nmod *nm = *userdata;
	int fd;

	if (!nm)
		return -1;
	/* libdwfl reads the vDSO's image from /proc/PID/mem */
	if (nm->vdso)
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	/* the target's own file: through its root, or map_files when replaced */
	fd = procmaps__open_file(nm->pid, &nm->map);
	return fd >= 0 ? fd : -1;
}

/* The file's build id is @id: a debug file is trusted for nothing else. */
static bool has_build_id(int fd, const void *id, int len)
{
	const void *got;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	bool same;

	if (!elf)
		return false;
	same = dwelf_elf_gnu_build_id(elf, &got) == len && !memcmp(got, id, (size_t)len);
	elf_end(elf);
	return same;
}

/*
 * A debug file in the target's own root, opened inside it (rootfs.h: a
 * symlink out of it, a FIFO or a device is refused): the alt file (dwz) by
 * the absolute name the module gives, the main one by build id and checked.
 */
static int target_debug_file(Dwfl_Module *mod, struct nmod *nm, const char *debuglink_file,
			     char **name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	char path[PATH_MAX];
	int len, fd, off;

	if (nm->debug_asked) {
		if (!debuglink_file || debuglink_file[0] != '/')
			return -1;
		snprintf(path, sizeof(path), "%s", debuglink_file);
		fd = rootfs__open(nm->pid, path, PROCMAPS_MAX_FILE, NULL);
	} else {
		len = dwfl_module_build_id(mod, &id, &vaddr);
		if (len < 2 || len > 64)
			return -1;
		off = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);
		for (int i = 1; i < len; i++)
			off += snprintf(path + off, sizeof(path) - (size_t)off, "%02x", id[i]);
		snprintf(path + off, sizeof(path) - (size_t)off, ".debug");
		fd = rootfs__open(nm->pid, path, PROCMAPS_MAX_FILE, NULL);
		if (fd >= 0 && !has_build_id(fd, id, len)) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0 && asprintf(name, "/proc/%d/root%s", (int)nm->pid, path) < 0)
		*name = NULL;
	return fd >= 0 ? fd : -1;
}

/*
 * Separate debug files by build id only (Debian's -dbg/-dbgsym layout): the
 * target's own (a chroot, a container), then ours. Not
 * dwfl_standard_find_debuginfo: it would also ask debuginfod servers when
 * DEBUGINFOD_URLS is set, downloads a profiler must not start on its own.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct nmod *nm = *userdata;
	int fd = -1;

	if (nm && nm->foreign_root)
		fd = target_debug_file(mod, nm, debuglink_file, debuginfo_file_name);
	if (nm)
		nm->debug_asked = 1;
	if (fd >= 0)
		return fd;
	return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
					    debuglink_file, debuglink_crc, debuginfo_file_name);
}

static int on_removed(Dwfl_Module *mod, void *userdata, const char *name, Dwarf_Addr base,
		      void *arg)
{
	void **slot = userdata;	/* libdwfl passes the slot, as dwfl_getmodules does */

	(void)mod;
	(void)name;
	(void)base;
	(void)arg;
	nmod__free(*slot);
	*slot = NULL;
	return DWARF_CB_OK;
}

static int report_group(struct native_modules *m, const struct mapping *first, uint64_t end,
			 int vdso)
{
	char vname[32];
	const char *name = first->path;
	Dwfl_Module *mod;
	void **slot;
	struct nmod *nm;

	/* the name dwfl_linux_proc_find_elf knows the vDSO by */
	if (vdso) {
		snprintf(vname, sizeof(vname), "[vdso: %d]", (int)m->pid);
		name = vname;
	}
	mod = dwfl_report_module(m->dwfl, name, first->start, end);
	if (!mod)
		return -ENOMEM;
	dwfl_module_info(mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
	if (*slot)
		return 0;	/* still mapped where it was: keeps its caches */
	nm = calloc(1, sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	nm->pid = m->pid;
	nm->foreign_root = m->foreign_root;
	nm->vdso = vdso;
	nm->map = *first;
	nm->map.path = strdup(first->path);
	if (!nm->map.path) {
		free(nm);
		return -ENOMEM;
	}
	*slot = nm;
	return 0;
}

static bool is_file(const struct mapping *m)
{
	return m->path[0] == '/' && (m->inode || m->dev_major || m->dev_minor);
}

/*
 * Each run of mappings of one file (anonymous ones, its .bss or the holes
 * between its segments, may sit between) that starts at file offset 0 (where
 * libdwfl expects the ELF header: it derives the load bias from the module's
 * start) and maps code becomes a module; data files and files mapped from an
 * offset never hold a pc. A loaded file's offsets rise from one mapping to
 * the next: a mapping at a lower or equal offset is the same file mapped
 * again (a reader's mmap of it just below the library), and anonymous code
 * between is not the file's, so either starts a new run.
 */
static int report_maps(struct native_modules *mods, const struct procmaps *pm)
{
	const struct mapping *first = NULL;
	uint64_t end = 0, offset = 0;
	int exec = 0, err = 0;

	for (size_t i = 0; i <= pm->n && !err; i++) {
		const struct mapping *m = i < pm->n ? &pm->maps[i] : NULL;

		if (m && strcmp(m->path, "[vdso]") == 0) {
			err = report_group(mods, m, m->end, 1);
			continue;
		}
		if (m && !is_file(m)) {
			if (m->perms[2] != 'x')
				continue;
			m = NULL;	/* ends the run; not a module itself */
		}
		if (m && first && m->inode == first->inode && m->dev_major == first->dev_major &&
		    m->dev_minor == first->dev_minor && strcmp(m->path, first->path) == 0 &&
		    m->offset > offset) {
			end = m->end;
			offset = m->offset;
			exec |= m->perms[2] == 'x';
			continue;
		}
		if (first && exec && first->offset == 0)
			err = report_group(mods, first, end, 0);
		first = m;
		end = m ? m->end : 0;
		offset = m ? m->offset : 0;
		exec = m && m->perms[2] == 'x';
	}
	return err;
}

/* The anonymous executable mappings (maps lists them in address order). */
static int collect_anon(struct native_modules *mods, const struct procmaps *pm)
{
	struct range *r = NULL;
	size_t n = 0;

	for (size_t i = 0; i < pm->n; i++) {
		const struct mapping *m = &pm->maps[i];

		if (m->perms[2] != 'x' || is_file(m) || strcmp(m->path, "[vdso]") == 0)
			continue;
		if (!(n & (n + 1))) {	/* 0, 1, 3, 7...: grow to 2n + 1 */
			struct range *nr = realloc(r, (2 * n + 1) * sizeof(*r));

			if (!nr) {
				free(r);
				return -ENOMEM;
			}
			r = nr;
		}
		r[n++] = (struct range){ m->start, m->end };
	}
	free(mods->anon);
	mods->anon = r;
	mods->nanon = n;
	return 0;
}

bool native_modules__in_anon(const struct native_modules *m, uint64_t pc)
{
	return native_modules__anon_range(m, pc, NULL, NULL) == 0;
}

int native_modules__anon_range(const struct native_modules *m, uint64_t pc, uint64_t *start,
			       uint64_t *end)
{
	for (size_t i = 0; i < m->nanon; i++)
		if (pc >= m->anon[i].start && pc < m->anon[i].end) {
			if (start)
				*start = m->anon[i].start;
			if (end)
				*end = m->anon[i].end;
			return 0;
		}
	return -ENOENT;
}

struct symbol_search {
	const char *name;
	uint64_t addr;
	int found;
};

static int symbol_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		     void *arg)
{
	struct symbol_search *ss = arg;
	struct nmod *nm = *userdata;
	int n;

	(void)modname;
	(void)base;
	if (!nm || nm->vdso || (n = dwfl_module_getsymtab(mod)) < 0)
		return DWARF_CB_OK;
	for (int i = 0; i < n; i++) {
		const char *name;
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;

		name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		if (name && shndx != SHN_UNDEF && !strcmp(name, ss->name)) {
			ss->addr = addr;
			ss->found = 1;
			return DWARF_CB_ABORT;
		}
	}
	return DWARF_CB_OK;
}

int native_modules__symbol(struct native_modules *m, const char *name, uint64_t *addr)
{
	struct symbol_search ss = { .name = name };

	dwfl_getmodules(m->dwfl, symbol_cb, &ss, 0);
	if (!ss.found)
		return -ENOENT;
	*addr = ss.addr;
	return 0;
}

/* The process's size in pages (/proc/PID/statm): a mapping added or removed
 * changes it, and it costs one small read, not a walk of the maps. */
static long vm_pages(pid_t pid)
{
	char fn[64], buf[64];
	ssize_t len;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/statm", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	return strtol(buf, NULL, 10);
}

int native_modules__refresh(struct native_modules *m)
{
	struct procmaps pm = { 0 };
	int err, err2;

	m->vm_pages = vm_pages(m->pid);
	/* a process we cannot read keeps the modules it had */
	err = procmaps__read(m->pid, &pm);
	if (err)
		return err;
	dwfl_report_begin(m->dwfl);
	err = report_maps(m, &pm);
	/* always ended: modules not reported again are dropped */
	err2 = dwfl_report_end(m->dwfl, on_removed, NULL);
	if (!err)
		err = collect_anon(m, &pm);
	procmaps__free(&pm);
	if (err)
		return err;
	return err2 ? -ENOMEM : 0;
}

bool native_modules__grew(struct native_modules *m)
{
	return vm_pages(m->pid) != m->vm_pages;
}

static int free_nmod_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			void *arg)
{
	(void)mod;
	(void)name;
	(void)base;
	(void)arg;
	nmod__free(*userdata);
	*userdata = NULL;
	return DWARF_CB_OK;
}

void native_modules__free(struct native_modules *m)
{
	if (!m)
		return;
	if (m->dwfl) {
		dwfl_getmodules(m->dwfl, free_nmod_cb, NULL, 0);
		dwfl_end(m->dwfl);
	}
	free(m->anon);
	free(m->debuginfo_path);
	free(m);
}

/* Is the target's root ours? Then one debug directory, not the same twice. */
static bool same_root(pid_t pid)
{
	char fn[64];
	struct stat a, b;

	snprintf(fn, sizeof(fn), "/proc/%d/root/", (int)pid);
	return stat(fn, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int native_modules__new(pid_t pid, struct native_modules **out)
{
	struct native_modules *m;
	int err;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->pid = pid;
	/* ours only here: the target's are opened inside its root (find_debuginfo) */
	m->foreign_root = !same_root(pid);
	m->debuginfo_path = strdup("/usr/lib/debug");
	if (!m->debuginfo_path) {
		err = -ENOMEM;
		goto err_free;
	}
	m->cb.find_elf = find_elf;
	m->cb.find_debuginfo = find_debuginfo;
	m->cb.section_address = dwfl_offline_section_address;
	m->cb.debuginfo_path = &m->debuginfo_path;
	m->dwfl = dwfl_begin(&m->cb);
	if (!m->dwfl) {
		err = -ENOMEM;
		goto err_free;
	}
	err = native_modules__refresh(m);
	if (err)
		goto err_free;
	*out = m;
	return 0;

err_free:
	native_modules__free(m);
	return err;
}

Dwfl *native_modules__dwfl(struct native_modules *m)
{
	return m->dwfl;
}

Dwfl_Module *native_modules__at(struct native_modules *m, uint64_t pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(m->dwfl, pc);
	Dwarf_Addr start, end;

	if (!mod)
		return NULL;
	dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL);
	return pc >= start && pc < end ? mod : NULL;
}

/* ---- naming ---- */

static struct nmod *module_of(Dwfl_Module *mod)
{
	void **slot;

	dwfl_module_info(mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
	return *slot;
}

static enum symindex_bind bind_of(unsigned char info)
{
	switch (GELF_ST_BIND(info)) {
	case STB_GLOBAL:
		return SYMINDEX_GLOBAL;
	case STB_WEAK:
		return SYMINDEX_WEAK;
	default:
		return SYMINDEX_LOCAL;
	}
}

static bool has_symtab(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while (elf && (scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_SYMTAB)
			return true;
	return false;
}

/* The module's functions, read once (the best table libdwfl finds: .symtab,
 * the debug file's, else .dynsym). */
static int nmod__build_syms(struct nmod *nm, Dwfl_Module *mod)
{
	const char *debug_file = NULL;
	struct symindex *idx;
	Dwarf_Addr bias;
	int n, err;

	nm->syms_state = -1;
	n = dwfl_module_getsymtab(mod);
	if (n < 0)
		return -ENOENT;
	/* libdwfl looked for a debug file when the file itself had no .symtab */
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, &debug_file);
	nm->symtab = has_symtab(dwfl_module_getelf(mod, &bias)) || debug_file;
	err = symindex__new(&idx);
	if (err)
		return err;
	for (int i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name;
		unsigned char type;

		name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		if (!name || shndx == SHN_UNDEF)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		err = symindex__add(idx, addr, sym.st_size, name, bind_of(sym.st_info));
		if (err)
			goto err_free;
	}
	err = symindex__finish(idx);
	if (err)
		goto err_free;
	nm->syms = idx;
	nm->syms_state = 1;
	return 0;

err_free:
	symindex__free(idx);
	return err;
}

int native_modules__name(struct native_modules *m, uint64_t pc, struct native_name *out)
{
	Dwfl_Module *mod = native_modules__at(m, pc);
	struct nmod *nm = mod ? module_of(mod) : NULL;
	const unsigned char *id;
	GElf_Addr id_vaddr;
	Dwarf_Addr start, end;
	uint64_t off = 0;
	int len;

	memset(out, 0, sizeof(*out));
	if (!nm)
		return -ENOENT;
	dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL);
	out->path = nm->vdso ? "[vdso]" : nm->map.path;
	out->base = start;
	out->end = end;
	len = dwfl_module_build_id(mod, &id, &id_vaddr);
	if (len > 0) {
		out->build_id = id;
		out->build_id_len = (size_t)len;
	}
	if (nm->syms_state == 0)
		nmod__build_syms(nm, mod);
	out->symbol = symindex__lookup(nm->syms, pc, &off);
	out->sym_start = pc - off;
	return 0;
}

int native_modules__info(struct native_modules *m, uint64_t pc, struct native_module *out)
{
	Dwfl_Module *mod = native_modules__at(m, pc);
	struct nmod *nm = mod ? module_of(mod) : NULL;
	const unsigned char *id;
	GElf_Addr id_vaddr;
	Dwarf_Addr start, end;
	int len;

	memset(out, 0, sizeof(*out));
	if (!nm)
		return -ENOENT;
	if (nm->syms_state == 0)
		nmod__build_syms(nm, mod);
	dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, &out->debug_file);
	out->path = nm->vdso ? "[vdso]" : nm->map.path;
	out->start = start;
	out->end = end;
	out->base = start;
	len = dwfl_module_build_id(mod, &id, &id_vaddr);
	if (len > 0) {
		out->build_id = id;
		out->build_id_len = (size_t)len;
	}
	out->symtab = nm->symtab;
	return 0;
}

/*
 * The code bytes at @pc in the module's file image (through its loadable
 * segments: asking libdwfl for the section would load the module's whole
 * DWARF, tens of MB for a debug file). Code does not change under us, so
 * the file is as good as the process, and costs no system call.
 */
const unsigned char *native_modules__code(struct native_modules *m, uint64_t pc, size_t *left)
{
	Dwfl_Module *mod = native_modules__at(m, pc);
	Dwarf_Addr bias;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	size_t nph, size;
	char *raw;

	if (!elf || elf_getphdrnum(elf, &nph) != 0 || !(raw = elf_rawfile(elf, &size)))
		return NULL;
	for (size_t i = 0; i < nph; i++) {
		uint64_t vaddr = pc - bias, off;
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || vaddr < ph.p_vaddr ||
		    vaddr - ph.p_vaddr >= ph.p_filesz)
			continue;
		off = ph.p_offset + (vaddr - ph.p_vaddr);
		if (off >= size)
			return NULL;
		*left = size - off;
		if (*left > ph.p_filesz - (vaddr - ph.p_vaddr))
			*left = ph.p_filesz - (vaddr - ph.p_vaddr);
		return (const unsigned char *)raw + off;
	}
	return NULL;
}

static int count_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    void *arg)
{
	size_t *n = arg;
	struct nmod *nm = *userdata;

	(void)mod;
	(void)name;
	(void)base;
	n[0]++;
	if (nm) {
		n[1] += symindex__count(nm->syms);
		n[2] += symindex__bytes(nm->syms);
	}
	return DWARF_CB_OK;
}

void native_modules__count(struct native_modules *m, size_t *modules, size_t *symbols,
			   size_t *bytes)
{
	size_t n[3] = { 0 };

	dwfl_getmodules(m->dwfl, count_cb, n, 0);
	*modules = n[0];
	*symbols = n[1];
	*bytes = n[2];
}

int native_modules__entry_offset(struct native_modules *m, uint64_t pc, uint64_t *off)
{
	Dwfl_Module *mod = native_modules__at(m, pc);
	Dwarf_Addr bias;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	GElf_Ehdr eh;

	if (!elf || !gelf_getehdr(elf, &eh) || !eh.e_entry || pc < eh.e_entry + bias)
		return -ENOENT;
	*off = pc - (eh.e_entry + bias);
	return 0;
}
