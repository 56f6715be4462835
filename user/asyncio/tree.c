/* SPDX-License-Identifier: MIT */
/*
 * asyncio/tree.c - the await tree of a snapshot as text, in the shape of
 * `python -m asyncio pstree`:
 *
 *   └── (T) Task-1 [0x7f...]
 *       └──  main /app.py:16
 *           └──  wait_for /usr/lib/python3.14/asyncio/tasks.py:486
 *               ├── (T) worker-1 [0x7f...]
 *
 * A task's children are its coroutine frames, outermost first; under the
 * innermost come the tasks it awaits (the tasks whose awaited_by names it).
 * Unlike pstree, a graph with cycles is still printed: the cycles are listed
 * first and a task met again on its own branch is marked, not followed; a
 * task already shown is named, not shown again; a branch deeper than
 * TREE_MAX_DEPTH tasks goes on at the left margin. Everything is iterative.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "asyncio/asyncio.h"
#include "symbols/symbolizer.h"
#include "util/text.h"

#define TREE_MAX_DEPTH 100	/* tasks nested on one line's indentation */
#define TREE_MAX_FRAMES 64	/* frames of one task shown (the rest elided) */
#define TREE_MAX_CYCLES 32

struct graph {
	const struct asyncio_snapshot *s;
	size_t *first, *kids;	/* children of task i: kids[first[i]..first[i+1]) */
	unsigned char *has_parent, *expanded, *onpath;
};

static void graph__free(struct graph *g)
{
	free(g->first);
	free(g->kids);
	free(g->has_parent);
	free(g->expanded);
	free(g->onpath);
}

/* Edges parent -> child for every awaiter that is a task we listed, children
 * in list order (as pstree orders them), each once. */
static int graph__build(struct graph *g, const struct asyncio_snapshot *s)
{
	struct asyncio_index *ix = NULL;
	size_t *count = NULL, nedges = 0, n = s->n;
	int rc = -ENOMEM;

	memset(g, 0, sizeof(*g));
	g->s = s;
	g->first = calloc(n + 1, sizeof(*g->first));
	count = calloc(n + 1, sizeof(*count));
	g->has_parent = calloc(n + 1, 1);
	g->expanded = calloc(n + 1, 1);
	g->onpath = calloc(n + 1, 1);
	if (!g->first || !count || !g->has_parent || !g->expanded || !g->onpath)
		goto out;
	rc = asyncio_index__new(s, &ix);
	if (rc)
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t c = 0; c < n; c++) {
			const struct asyncio_task *t = &s->tasks[c];

			for (size_t a = 0; a < t->nawaited; a++) {
				long p = asyncio_index__find(ix, t->awaited_by[a]);
				size_t k;

				if (p < 0)
					continue;
				if (pass == 0) {
					count[p]++;
					nedges++;
					continue;
				}
				for (k = g->first[p]; k < count[p] && g->kids[k] != c; k++)
					;
				if (k < count[p])
					continue;	/* listed twice */
				g->kids[count[p]++] = c;
				g->has_parent[c] = 1;
			}
		}
		if (pass == 0) {
			g->kids = malloc((nedges + 1) * sizeof(*g->kids));
			if (!g->kids) {
				rc = -ENOMEM;
				goto out;
			}
			for (size_t i = 0; i < n; i++) {
				g->first[i + 1] = g->first[i] + count[i];
				count[i] = g->first[i];
			}
		}
	}
	/* duplicates left gaps: close them */
	for (size_t i = 0, w = 0; i < n; i++) {
		size_t b = g->first[i];

		g->first[i] = w;
		for (size_t k = b; k < count[i]; k++)
			g->kids[w++] = g->kids[k];
		if (i + 1 == n)
			g->first[n] = w;
	}
	rc = 0;
out:
	free(count);
	asyncio_index__free(ix);
	return rc;
}

static size_t nkids(const struct graph *g, size_t t)
{
	return g->first[t + 1] - g->first[t];
}

static void print_cycle(FILE *out, const struct asyncio_snapshot *s, const size_t *path,
			size_t from, size_t to)
{
	fputs("cycle: ", out);
	for (size_t k = from; k <= to; k++) {
		put_clean(out, s->tasks[path[k]].name);
		fputs(" → ", out);
	}
	put_clean(out, s->tasks[path[from]].name);
	fputc('\n', out);
}

/* Back edges of a depth-first search over the task graph, each printed as a
 * cycle. Returns how many were found (at most TREE_MAX_CYCLES printed). */
static long cycles__print(FILE *out, struct graph *g)
{
	size_t n = g->s->n, sp = 0;
	size_t *path = malloc((n + 1) * sizeof(*path)), *next = malloc((n + 1) * sizeof(*next));
	size_t *pos = malloc((n + 1) * sizeof(*pos));
	unsigned char *color = calloc(n + 1, 1);	/* 0 new, 1 on the path, 2 done */
	long found = 0;

	if (!path || !next || !pos || !color) {
		found = -ENOMEM;
		goto out;
	}
	for (size_t r = 0; r < n; r++) {
		if (color[r])
			continue;
		path[sp] = r;
		next[sp] = 0;
		pos[r] = sp++;
		color[r] = 1;
		while (sp) {
			size_t v = path[sp - 1], w;

			if (next[sp - 1] == nkids(g, v)) {
				color[v] = 2;
				sp--;
				continue;
			}
			w = g->kids[g->first[v] + next[sp - 1]++];
			if (color[w] == 0) {
				path[sp] = w;
				next[sp] = 0;
				pos[w] = sp++;
				color[w] = 1;
				continue;
			}
			if (color[w] == 2)
				continue;
			if (found == 0)
				fputs("The await graph has cycles: they are shown once and not "
				      "followed.\n", out);
			if (found < TREE_MAX_CYCLES)
				print_cycle(out, g->s, path, pos[w], sp - 1);
			found++;
		}
	}
	if (found > TREE_MAX_CYCLES)
		fprintf(out, "... and %ld more cycles\n", found - TREE_MAX_CYCLES);
	if (found)
		fputc('\n', out);
out:
	free(path);
	free(next);
	free(pos);
	free(color);
	return found;
}

/* A node of the printed tree: a task (level -1) or one of its frames. */
struct node {
	size_t task;
	long level;
	size_t next;		/* next child to print */
};

/* Frame levels shown for @t: all, or the outermost and innermost halves of
 * TREE_MAX_FRAMES with one line for the frames between. */
static long shown_levels(const struct asyncio_task *t)
{
	return t->nframes <= TREE_MAX_FRAMES ? (long)t->nframes : TREE_MAX_FRAMES;
}

static void print_frame(FILE *out, const struct asyncio_task *t, long level)
{
	long nf = (long)t->nframes, idx;
	const struct py_sym *f;

	if (nf > TREE_MAX_FRAMES) {
		long half = TREE_MAX_FRAMES / 2;

		if (level == half) {
			fprintf(out, " ... %ld frames ...\n", nf - TREE_MAX_FRAMES + 1);
			return;
		}
		idx = level < half ? nf - 1 - level : TREE_MAX_FRAMES - 1 - level;
	} else {
		idx = nf - 1 - level;
	}
	f = &t->frames[idx];
	fputc(' ', out);
	put_clean(out, f->function);
	if (f->file[0]) {
		fputc(' ', out);
		put_clean(out, f->file);
	}
	if (f->line >= 0)
		fprintf(out, ":%d", f->line);
	fputc('\n', out);
}

static void print_task(FILE *out, const struct asyncio_task *t, const char *why)
{
	fputs("(T) ", out);
	put_clean(out, t->name);
	fprintf(out, " [0x%llx%s%s]%s\n", (unsigned long long)t->addr,
		t->state == ASYNCIO_TASK_RUNNING ? ", running" : "", t->torn ? ", torn" : "", why);
}

static void print_prefix(FILE *out, const unsigned char *last, size_t depth)
{
	for (size_t d = 0; d < depth; d++)
		fputs(last[d] ? "    " : "│   ", out);
	fputs(last[depth] ? "└── " : "├── ", out);
}

/*
 * Print the tree from root task @r. Tasks cut at the depth limit are added
 * to @queue (*nq of them) to be printed from the margin later.
 */
static void tree__from(FILE *out, struct graph *g, size_t r, struct node *st, unsigned char *last,
		       size_t *queue, size_t *nq)
{
	const struct asyncio_snapshot *s = g->s;
	size_t sp = 0, tasks_deep = 1;

	last[0] = 1;
	print_prefix(out, last, 0);
	print_task(out, &s->tasks[r], "");
	g->expanded[r] = g->onpath[r] = 1;
	st[sp++] = (struct node){ r, -1, 0 };
	while (sp) {
		struct node *top = &st[sp - 1];
		const struct asyncio_task *t = &s->tasks[top->task];
		long levels = shown_levels(t);
		size_t nc, child;
		int is_last;

		/* children: the next frame level, or (under the innermost) the tasks */
		nc = top->level + 1 < levels ? 1 : nkids(g, top->task);
		if (top->next == nc) {
			if (top->level == -1) {
				g->onpath[top->task] = 0;
				tasks_deep--;
			}
			sp--;
			continue;
		}
		is_last = ++top->next == nc;
		last[sp] = (unsigned char)is_last;
		print_prefix(out, last, sp);
		if (top->level + 1 < levels) {
			print_frame(out, t, top->level + 1);
			st[sp] = (struct node){ top->task, top->level + 1, 0 };
			sp++;
			continue;
		}
		child = g->kids[g->first[top->task] + top->next - 1];
		if (g->onpath[child]) {
			print_task(out, &s->tasks[child],
				   " (cycle: awaits a task above, not followed)");
			continue;
		}
		if (g->expanded[child]) {
			print_task(out, &s->tasks[child], " (shown above)");
			continue;
		}
		if (tasks_deep >= TREE_MAX_DEPTH) {
			print_task(out, &s->tasks[child], " (continued below)");
			g->expanded[child] = 1;
			queue[(*nq)++] = child;
			continue;
		}
		print_task(out, &s->tasks[child], "");
		g->expanded[child] = g->onpath[child] = 1;
		tasks_deep++;
		st[sp++] = (struct node){ child, -1, 0 };
	}
}

int asyncio_tree__print(FILE *out, const struct asyncio_snapshot *s)
{
	struct graph g;
	struct node *st = NULL;
	unsigned char *last = NULL;
	size_t *queue = NULL, nq = 0, qh = 0;
	/* a branch holds at most TREE_MAX_DEPTH tasks, each with its frames */
	size_t depth_cap = (size_t)TREE_MAX_DEPTH * (TREE_MAX_FRAMES + 2) + 2;
	long cycles;
	int rc;

	rc = graph__build(&g, s);
	if (rc)
		goto out;
	rc = -ENOMEM;
	st = calloc(depth_cap, sizeof(*st));
	last = calloc(depth_cap + 1, 1);
	queue = calloc(s->n + 1, sizeof(*queue));
	if (!st || !last || !queue)
		goto out;
	cycles = cycles__print(out, &g);
	if (cycles < 0)
		goto out;
	/* Roots: tasks no listed task awaits, in list order; then what was cut
	 * at the depth limit; then what only cycles reach. */
	for (size_t i = 0; i < s->n; i++) {
		if (!g.has_parent[i])
			tree__from(out, &g, i, st, last, queue, &nq);
		while (qh < nq) {
			size_t r = queue[qh++];

			g.expanded[r] = 0;
			tree__from(out, &g, r, st, last, queue, &nq);
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		if (g.expanded[i])
			continue;
		tree__from(out, &g, i, st, last, queue, &nq);
		while (qh < nq) {
			size_t r = queue[qh++];

			g.expanded[r] = 0;
			tree__from(out, &g, r, st, last, queue, &nq);
		}
	}
	rc = 0;
out:
	graph__free(&g);
	free(st);
	free(last);
	free(queue);
	return rc;
}
