/* SPDX-License-Identifier: MIT */
/* record.h - `pyprof-bpf [record]` and `pyprof-bpf report`. */
#ifndef PYPROF_RECORD_H
#define PYPROF_RECORD_H

int record__main(int argc, char **argv);
int report__main(int argc, char **argv);

#endif
