/* SPDX-License-Identifier: MIT */
/*
 * symbolizer.h - turns (code object, instruction) into (qualname, file, line),
 * reading code objects from the target once and caching them.
 *
 * The cache is keyed by code address and checks the object is still the same
 * one (address reuse after a code object is freed). Strings are interned and
 * owned by the symbolizer: they stay valid until symbolizer__free().
 */
#ifndef PYPROF_SYMBOLIZER_H
#define PYPROF_SYMBOLIZER_H

#include <stdint.h>
#include "target/pyproc.h"
#include "types/py_sym.h"
#include "types/raw_sample.h"

struct symbolizer;

int symbolizer__new(struct pyproc *p, struct symbolizer **out);
void symbolizer__free(struct symbolizer *s);

/*
 * Take a code snapshot (sampler.h): the code object is named from it from
 * now on, even after the target frees it. Parts the snapshot cut short are
 * read from the target. Returns 0 or -errno (-EINVAL for a copy that is not
 * a code object); on error nothing changes.
 */
int symbolizer__add_code(struct symbolizer *s, const struct raw_code *c);


/* Start a new sample: cached code objects are checked again (once each)
 * for address reuse before they are trusted. */
void symbolizer__next_sample(struct symbolizer *s);

/* Resolve one raw frame. -EFAULT when the code object cannot be read,
 * -ENOENT for a frame Python does not show (pushed but not yet started). */
int symbolizer__resolve(struct symbolizer *s, const struct py_rawframe *f,
			struct py_sym *out);

/* Read the str object at @addr (at most 65,536 code points) as UTF-8, interned
 * (valid until symbolizer__free()). -EFAULT, -EINVAL for what is not a
 * compact str, -EMSGSIZE for a str longer than that. */
int symbolizer__read_str(struct symbolizer *s, uint64_t addr, const char **out);
/* As symbolizer__read_str(), from a copy of the object's first @len bytes
 * (read from @addr only when the string goes on past them). */
int symbolizer__str_from_copy(struct symbolizer *s, const void *copy, size_t len, uint64_t addr,
			      const char **out);

/*
 * Resolve a whole stack (starts a new sample): frames Python does not show
 * are dropped, frames that cannot be read become "<unknown>" and are counted
 * in *unresolved. @out holds at least @n entries; *nout is how many it got.
 */
int symbolizer__resolve_stack(struct symbolizer *s, const struct py_rawframe *raw, size_t n,
			      struct py_sym *out, size_t *nout, size_t *unresolved);

/*
 * The whole location of frame @f (3.11+ position table): line, end line,
 * column and end column (0-based, UTF-8 bytes; -1 unknown), read afresh
 * from the target's table. 0, -ERANGE, -EINVAL or a read error.
 */
struct linetable_range;
int symbolizer__location(struct symbolizer *s, const struct py_rawframe *f,
			 struct linetable_range *out);

#endif
