"""CPython 3.15's own view of a process, for tests/test_dump_incident.py.

    python3.15 remote_unwinder.py PID

Prints one JSON document: _remote_debugging.RemoteUnwinder's stack trace of
every thread (CPU mode, so that on_cpu is told; no thread skipped): for each
interpreter its threads, each with its status bits and its frames
(innermost first) with their locations.
"""
import json
import sys

import _remote_debugging as rd

u = rd.RemoteUnwinder(int(sys.argv[1]), all_threads=True, mode=1,
                      skip_non_matching_threads=False)
out = {"bits": {n: getattr(rd, n) for n in dir(rd) if n.startswith("THREAD_STATUS_")},
       "interpreters": []}
for interp in u.get_stack_trace():
    threads = []
    for t in interp.threads:
        frames = []
        for f in t.frame_info:
            loc = f.location
            frames.append({"function": f.funcname, "file": f.filename,
                           "line": loc.lineno if loc else None,
                           "end_line": loc.end_lineno if loc else None,
                           "column": loc.col_offset if loc else None,
                           "end_column": loc.end_col_offset if loc else None})
        threads.append({"tid": t.thread_id, "status": t.status, "frames": frames})
    out["interpreters"].append({"id": interp.interpreter_id, "threads": threads})
json.dump(out, sys.stdout)
