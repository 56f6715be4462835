/* SPDX-License-Identifier: MIT */
/*
 * frame_name.h - the frame naming rule every text format shares (documented
 * at the top of frame_name.c).
 */
#ifndef PYPROF_FRAME_NAME_H
#define PYPROF_FRAME_NAME_H

#include "output/internal.h"		/* struct out_frame */

/* Set fr->text (the perf-script symbol), fr->dso, fr->folded (NULL when the
 * folded text is fr->text) and fr->addr from the frame's kind, function, file
 * and line. 0 or -ENOMEM (then the three strings are NULL). */
int out_frame__name(struct out_frame *fr);

#endif
