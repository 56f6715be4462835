// SPDX-License-Identifier: MIT
/*
 * output_jsonl.c - JSON Lines: one JSON object per sample, one per line,
 * written as the sample arrives (the recorder flushes every 0.1 s through
 * output__flush(), so `tail -f` follows a recording):
 *
 *   {"time_ns":5273112233000,"pid":1234,"tid":1240,"thread":"MainThread",
 *    "comm":"python3","weight_ns":10101010,"status":"complete",
 *    "event":"cpu-clock","frames":[{"function":"<module>","file":"/app/w.py",
 *    "line":77,"kind":"python"}, ...]}
 *
 * time_ns: CLOCK_MONOTONIC, as perf-script's time; weight_ns: the period the
 * sample stands for (1 when the recorder gave none); status: "complete" or
 * the status frame's name without brackets ("truncated", "no-python-state",
 * ...); event: perf-script's event name. frames, outermost first, are the
 * stack every writer sees without the process and thread roots: Python
 * frames, native ones (file: the DSO), kernel functions and markers
 * ("[GIL wait]", "<GC>", "[truncated]"...; file "" and line 0), named as
 * the recorder gave them: nothing is percent-escaped. Strings are valid
 * UTF-8 (json_writer.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include "output/json_writer.h"
#include "output/internal.h"
#include "types/raw_sample.h"

/* A frame kind as the JSON says it; NULL: a root, not written. */
static const char *kind_name(enum out_frame_kind k)
{
	switch (k) {
	case OUT_FRAME_PYTHON:
		return "python";
	case OUT_FRAME_NATIVE:
		return "native";
	case OUT_FRAME_KERNEL:
		return "kernel";
	case OUT_FRAME_STATUS:
		return "marker";
	default:
		return NULL;
	}
}

static void write_status(FILE *f, uint32_t status)
{
	char buf[32];
	const char *name = output__status_name(status, buf, sizeof(buf));
	size_t len = strlen(name);

	if (status == SAMPLE_COMPLETE) {
		fputs(",\"status\":\"complete\"", f);
		return;
	}
	/* "[truncated]" -> "truncated" */
	if (len >= 2 && name[0] == '[' && name[len - 1] == ']')
		fprintf(f, ",\"status\":\"%.*s\"", (int)(len - 2), name + 1);
	else
		fprintf(f, ",\"status\":\"%s\"", name);
}

static int jsonl_add(struct output *o, const struct out_sample *s, uint32_t thread,
		     const uint32_t *stack, uint32_t n)
{
	const struct out_thread *t = &o->m.threads[thread];
	FILE *f = o->f;
	int first = 1;

	fprintf(f, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"thread\":", s->ts_ns,
		(int)s->pid, (int)s->tid);
	json_write_string(f, s->thread_name && *s->thread_name ? s->thread_name : t->comm);
	fputs(",\"comm\":", f);
	json_write_string(f, s->comm && *s->comm ? s->comm : "unknown");
	fprintf(f, ",\"weight_ns\":%" PRIu64, out_weight(s));
	write_status(f, s->status);
	fputs(",\"event\":", f);
	json_write_string(f, s->event ? s->event : o->opts.event && *o->opts.event ?
			  o->opts.event : "cpu-clock");
	fputs(",\"frames\":[", f);
	for (uint32_t i = 0; i < n; i++) {
		const struct out_frame *fr = &o->m.frames[stack[i]];
		const char *kind = kind_name(fr->kind);

		if (!kind)
			continue;
		fputs(first ? "{\"function\":" : ",{\"function\":", f);
		first = 0;
		json_write_string(f, fr->function);
		fputs(",\"file\":", f);
		json_write_string(f, fr->file);
		fprintf(f, ",\"line\":%d,\"kind\":\"%s\"}", fr->line, kind);
	}
	fputs("]}\n", f);
	return output__check_io(o);
}

const struct output_ops output_jsonl_ops = {
	.aggregate = 0,
	.stream = 1,
	.add = jsonl_add,
};
