/* SPDX-License-Identifier: MIT */
/*
 * agent.h - `pyprof-bpf agent`: continuous profiling. record's pipeline
 * (record.h's sink) feeds windows.c, which cuts it into one pprof per
 * process per window; each is labelled (labels.c), put in the spool
 * (spool.c) and delivered by one shipper per store (shipper.c, push_*.c,
 * http.c), or written into --output-dir.
 */
#ifndef PYPROF_AGENT_H
#define PYPROF_AGENT_H

/* `pyprof-bpf agent ...`: returns the exit status. */
int agent__main(int argc, char **argv);

#endif
