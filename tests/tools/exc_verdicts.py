"""CPython 3.15's own verdict on which threads have an exception.

Run with python3.15 (its _remote_debugging module) in the target's mount
namespace: exc_verdicts.py PID ROUNDS. Each round stops the target
(SIGSTOP), takes one RemoteUnwinder snapshot of every thread, and lets it go
on (SIGCONT). Prints one JSON object: for each place (the p_* function on
the thread's stack, tests/targets/exc_places.py), the fraction of rounds
in which THREAD_STATUS_HAS_EXCEPTION was set, and the rounds seen.
"""
import json
import os
import signal
import sys
import time

import _remote_debugging as rd

pid, rounds = int(sys.argv[1]), int(sys.argv[2])
unwinder = rd.RemoteUnwinder(pid, all_threads=True)
flagged, seen = {}, {}
for _ in range(rounds):
    os.kill(pid, signal.SIGSTOP)
    try:
        snap = unwinder.get_stack_trace()
    finally:
        os.kill(pid, signal.SIGCONT)
    for interp in snap:
        for t in interp.threads:
            place = next((f.funcname[2:].split(".")[0] for f in t.frame_info
                          if f.funcname.startswith("p_")), None)
            if place:
                seen[place] = seen.get(place, 0) + 1
                flagged[place] = flagged.get(place, 0) + bool(
                    t.status & rd.THREAD_STATUS_HAS_EXCEPTION)
    time.sleep(0.02)
print(json.dumps({p: [flagged[p] / seen[p], seen[p]] for p in seen}))
