/* SPDX-License-Identifier: MIT */
/* spool.c - profiles waiting on disk for their stores (spool.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent/spool.h"
#include "util/errbuf.h"
#include "util/file.h"

#define BODY_EXT ".pb.gz"
#define META_EXT ".meta"

struct spool {
	char *dir;
	char *tmp;
	uint64_t max_bytes;
	uint64_t max_age_s;
};

/* mkdir -p of @path, mode 0700. 0 or -errno. */
static int mkdirs(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Whether @name is an entry's file with extension @ext ("<13>-<10>EXT"). */
static int entry_file(const char *name, const char *ext, char *entry, size_t len)
{
	size_t n = strlen(name), el = strlen(ext);

	if (n != 24 + el || strcmp(name + 24, ext) || name[13] != '-')
		return 0;
	for (size_t i = 0; i < 24; i++)
		if (i != 13 && (name[i] < '0' || name[i] > '9'))
			return 0;
	snprintf(entry, len, "%.24s", name);
	return 1;
}

/* Remove what is left in .tmp/ and metas with no profile (an agent died). */
static void clean_dir(const char *dir, int everything)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096], entry[SPOOL_ENTRY_LEN];

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (everything) {
			unlink(path);
			continue;
		}
		if (!entry_file(de->d_name, META_EXT, entry, sizeof(entry)))
			continue;
		snprintf(path, sizeof(path), "%s/%s" BODY_EXT, dir, entry);
		if (stat(path, &st) && errno == ENOENT) {
			snprintf(path, sizeof(path), "%s/%s" META_EXT, dir, entry);
			unlink(path);
		}
	}
	closedir(d);
}

int spool__open(const char *dir, uint64_t max_bytes, uint64_t max_age_s, struct spool **out,
		char *err, size_t errlen)
{
	struct spool *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s || !(s->dir = strdup(dir)) || asprintf(&s->tmp, "%s/.tmp", dir) < 0) {
		if (s)
			s->tmp = NULL;
		goto fail;
	}
	s->max_bytes = max_bytes;
	s->max_age_s = max_age_s;
	rc = mkdirs(dir);
	if (!rc)
		rc = mkdirs(s->tmp);
	if (rc) {
		seterr(err, errlen, "the spool %s cannot be made: %s", dir, strerror(-rc));
		goto fail;
	}
	if (access(dir, W_OK)) {
		rc = -errno;
		seterr(err, errlen, "the spool %s is not writable: %s", dir, strerror(-rc));
		goto fail;
	}
	clean_dir(s->tmp, 1);
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM)
		seterr(err, errlen, "out of memory");
	spool__free(s);
	return rc;
}

void spool__free(struct spool *s)
{
	if (!s)
		return;
	free(s->dir);
	free(s->tmp);
	free(s);
}

int spool__queue(struct spool *s, const char *name, char *path, size_t len)
{
	int rc;

	if ((size_t)snprintf(path, len, "%s/%s", s->dir, name) >= len)
		return -ENAMETOOLONG;
	rc = mkdirs(path);
	if (!rc)
		clean_dir(path, 0);
	return rc;
}

void spool__entry_name(uint64_t from_ms, pid_t pid, char *entry, size_t len)
{
	snprintf(entry, len, "%013" PRIu64 "-%010u", (uint64_t)(from_ms % 10000000000000ull),
		 (unsigned int)pid);
}

void spool__tmp_path(const struct spool *s, const char *entry, char *path, size_t len)
{
	snprintf(path, len, "%s/%s" BODY_EXT, s->tmp, entry);
}

int spool__publish(struct spool *s, const char *entry, const char *meta,
		   char *const *queues, size_t nqueues)
{
	char body[4096], path[4096];
	int rc = 0;

	spool__tmp_path(s, entry, body, sizeof(body));
	for (size_t i = 0; i < nqueues; i++) {
		int r;

		snprintf(path, sizeof(path), "%s/%s" META_EXT, queues[i], entry);
		r = write_file(path, meta, strlen(meta), 0600);
		snprintf(path, sizeof(path), "%s/%s" BODY_EXT, queues[i], entry);
		if (!r && link(body, path) && errno != EEXIST)
			r = -errno;
		if (r && !rc)
			rc = r;
	}
	unlink(body);
	return rc;
}

struct spooled {
	char entry[SPOOL_ENTRY_LEN];
	int queue;
	uint64_t bytes;
};

static int by_entry(const void *a, const void *b)
{
	return strcmp(((const struct spooled *)a)->entry, ((const struct spooled *)b)->entry);
}

/* @qdir's entries (queue @queue) appended to *out with their sizes. */
static int add_queue(const char *qdir, int queue, struct spooled **out, size_t *n)
{
	struct spool_entry *names;
	struct spooled *v;
	size_t k;
	int rc = spool_queue__list(qdir, &names, &k);

	if (rc || !k)
		return rc;
	v = realloc(*out, (*n + k) * sizeof(**out));
	if (!v) {
		free(names);
		return -ENOMEM;
	}
	*out = v;
	for (size_t i = 0; i < k; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s" BODY_EXT, qdir, names[i].name);
		if (stat(path, &st))
			continue;
		v = &(*out)[(*n)++];
		memcpy(v->entry, names[i].name, sizeof(v->entry));
		v->queue = queue;
		/* A profile linked into several queues is counted once per
		 * queue: what each queue would keep on its own. */
		v->bytes = (uint64_t)st.st_size + 512;
	}
	free(names);
	return 0;
}

/* Every entry of the queues under the spool, with its size: *out (malloc'd). */
static int list_all(struct spool *s, char ***qdirs, size_t *nq, struct spooled **out,
		    size_t *n)
{
	DIR *top = opendir(s->dir);
	struct dirent *de;
	int rc = 0;

	*qdirs = NULL;
	*nq = 0;
	*out = NULL;
	*n = 0;
	if (!top)
		return -errno;
	while (!rc && (de = readdir(top))) {
		char **q;

		if (de->d_name[0] == '.')
			continue;
		q = realloc(*qdirs, (*nq + 1) * sizeof(**qdirs));
		if (!q || asprintf(&q[*nq], "%s/%s", s->dir, de->d_name) < 0) {
			*qdirs = q ? q : *qdirs;
			break;
		}
		*qdirs = q;
		(*nq)++;
		rc = add_queue(q[*nq - 1], (int)*nq - 1, out, n);
		if (rc == -ENOTDIR)
			rc = 0;		/* a stray file */
	}
	closedir(top);
	return rc;
}

int spool__enforce(struct spool *s, uint64_t now_s, uint64_t *dropped)
{
	struct spooled *v;
	char **qdirs;
	size_t n, nq;
	uint64_t total = 0;
	int rc;

	rc = list_all(s, &qdirs, &nq, &v, &n);
	if (rc)
		n = 0;
	if (n)
		qsort(v, n, sizeof(*v), by_entry);
	for (size_t i = 0; i < n; i++)
		total += v[i].bytes;
	for (size_t i = 0; i < n; i++) {
		uint64_t from_s = strtoull(v[i].entry, NULL, 10) / 1000;
		int old = s->max_age_s && from_s + s->max_age_s < now_s;

		if (!old && total <= s->max_bytes)
			break;
		spool_queue__remove(qdirs[v[i].queue], v[i].entry);
		total -= v[i].bytes;
		(*dropped)++;
	}
	for (size_t i = 0; i < nq; i++)
		free(qdirs[i]);
	free(qdirs);
	free(v);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct spool_entry *)a)->name,
		      ((const struct spool_entry *)b)->name);
}

int spool_queue__list(const char *qdir, struct spool_entry **out, size_t *n)
{
	DIR *d = opendir(qdir);
	struct dirent *de;
	struct spool_entry *v = NULL, *g;
	size_t cap = 0;
	char e[SPOOL_ENTRY_LEN];

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!entry_file(de->d_name, BODY_EXT, e, sizeof(e)))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			g = realloc(v, cap * sizeof(*v));
			if (!g) {
				closedir(d);
				free(v);
				*n = 0;
				return -ENOMEM;
			}
			v = g;
		}
		memcpy(v[(*n)++].name, e, sizeof(e));
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), by_name);
	*out = v;
	return 0;
}

int spool_queue__read(const char *qdir, const char *entry, void **body, size_t *blen,
		      char **meta)
{
	char path[4096];
	size_t mlen;
	int rc;

	snprintf(path, sizeof(path), "%s/%s" META_EXT, qdir, entry);
	rc = read_file(path, SPOOL_META_MAX, 0, meta, &mlen);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/%s" BODY_EXT, qdir, entry);
	rc = read_file(path, SPOOL_BODY_MAX, 0, (char **)body, blen);
	if (rc) {
		free(*meta);
		*meta = NULL;
	}
	return rc;
}

void spool_queue__remove(const char *qdir, const char *entry)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s" BODY_EXT, qdir, entry);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s" META_EXT, qdir, entry);
	unlink(path);
}

int spool_meta__get(const char *meta, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	if (!len)
		return -EINVAL;
	for (const char *l = meta; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);

		if (ll > kl && !memcmp(l, key, kl) && l[kl] == '=') {
			size_t vl = ll - kl - 1;

			if (vl >= len)
				vl = len - 1;	/* callers pass len > 0 */
			memcpy(out, l + kl + 1, vl);
			out[vl] = '\0';
			return 0;
		}
		l = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}
