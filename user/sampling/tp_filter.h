/* SPDX-License-Identifier: MIT */
/*
 * tp_filter.h - --filter EXPR of a tracepoint event (the first of -e's): the kernel's tracepoint
 * filter syntax (as `perf record -e TP --filter EXPR` takes it), checked by
 * the kernel itself, then compiled against the tracepoint's format (tracefs
 * events/SUBSYS/NAME/format) into the postfix operations the BPF program
 * evaluates on each hit (struct pyprof_filter, bpf/pyprof.h). The kernel's
 * own filter cannot serve: it runs after a tracepoint's BPF programs.
 *
 * What compiles: FIELD OP VALUE predicates joined by &&, || and ! with
 * parentheses; numbers (decimal, 0x hex, negative) with == != < <= > >= &;
 * strings (char arrays, __data_loc strings, user string pointers such as a
 * system call's filename), quoted or not, with == != ~ and a '*' at the start
 * or the end (a suffix or a prefix). At most PYPROF_FILTER_OPS operations and
 * PYPROF_FILTER_STRS strings of PYPROF_FILTER_STR - 1 bytes.
 */
#ifndef PYPROF_SAMPLING_TP_FILTER_H
#define PYPROF_SAMPLING_TP_FILTER_H

#include <stddef.h>
#include "pyprof.h"
#include "sampling/perf_events.h"

/*
 * @expr for tracepoint @ev into @out (out->event is left to the caller).
 * 0, or -errno with one line in @err naming what is wrong: -EINVAL (the
 * kernel rejects it, or a field, value or operator that does not fit),
 * -ENOTSUP (valid, but beyond what compiles: say which), another from
 * tracefs.
 */
int tp_filter__compile(const struct sampler_event *ev, const char *expr,
		       struct pyprof_filter *out, char *err, size_t errlen);

#endif
