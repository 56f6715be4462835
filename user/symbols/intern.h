/* SPDX-License-Identifier: MIT */
/*
 * intern.h - a set of strings: equal strings get one stable pointer, so the
 * rest of the program can compare and hash names by pointer.
 */
#ifndef PYPROF_INTERN_H
#define PYPROF_INTERN_H

#include <stddef.h>

struct intern;

int intern__new(struct intern **out);
void intern__free(struct intern *in);
/* The interned copy of @s (@len bytes, no NUL needed), or NULL on ENOMEM. */
const char *intern__get(struct intern *in, const char *s, size_t len);

#endif
