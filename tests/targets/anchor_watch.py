"""A target that watches its own frame cache anchor while a profiler runs.

    python anchor_watch.py READY LOG [DEPTH]

The main thread recurses DEPTH (300) frames deep and spins at the top in a
CPU-bound loop forever:

    <module> -> main -> descend x DEPTH -> top [-> note]

Every EVERY iterations (about a millisecond) the loop calls note(), which reads the thread's own
tstate->last_profiled_frame and last_profiled_frame_seq (tstate_anchor.py,
staged next to this script) and appends a line to LOG, flushed at once:

    <CLOCK_MONOTONIC ns> <anchor, hex> <sequence> <where>

where <where> places the anchor among the thread's live frames at that
moment: an integer, its index along the chain counted from top()'s frame
(0: top, 1: the descend() that called top, ... -1: note() itself, the
caller of get_consistent()), "none" for a zero anchor, "dead" for an
address that is none of them. The chain below top() cannot change while top
spins, so it is walked (along the frames' `previous` pointers, from the
current frame) once, before READY; the frames above top are read at each
note.

Nothing here writes the anchor: whatever LOG shows was written by a
profiler, or moved by the interpreter's own pops. The interpreter's anchor
protocol is checked (it writes an anchor) on a short-lived thread of its
own, before the main thread starts. Writes READY (JSON: pid, depth, top's
frame and the chain's length) once spinning; runs until killed. CPython
3.15 only (the field layout is 3.15's).
"""
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True      # no __pycache__ next to the targets
from tstate_anchor import Anchor, protocol_works  # noqa: E402

READY, LOG = sys.argv[1], sys.argv[2]
DEPTH = int(sys.argv[3]) if len(sys.argv) > 3 else 300
EVERY = 20_000


def note(anchor, log, where):
    a, s = anchor.get_consistent()
    if not a:
        w = "none"
    elif a == anchor.caller():
        w = "-1"
    else:
        w = where.get(a, "dead")
    log.write(f"{time.monotonic_ns()} {a:#x} {s} {w}\n")
    log.flush()


def top(anchor, log):
    me = anchor.caller()
    chain = Anchor.chain_from(me)
    where = {f: str(i) for i, f in enumerate(chain)}
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "depth": DEPTH, "top": me, "chain": len(chain),
                   "tstate": anchor.ts, "current_frame_offset": anchor.cur_off}, f)
    os.replace(READY + ".tmp", READY)
    x = 0
    while True:
        for _ in range(EVERY):
            x = (x + 1) & 0xFFFF
        note(anchor, log, where)


def descend(n, anchor, log):
    if n > 1:
        return descend(n - 1, anchor, log)
    return top(anchor, log)


def protocol_check():
    """The anchor protocol, on a thread state of its own (it writes that
    thread's anchor, never the main thread's)."""
    ok = []

    def run():
        try:
            ok.append(protocol_works(Anchor()))
        except (RuntimeError, ValueError, OSError) as e:
            ok.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if ok != [True]:
        sys.exit(f"anchor_watch: the 3.15 anchor protocol does not hold here: {ok}")


def main():
    if sys.version_info[:2] != (3, 15):
        sys.exit("anchor_watch: CPython 3.15 only")
    protocol_check()
    anchor = Anchor()
    a, s = anchor.get()
    if (a, s) != (0, 0):
        sys.exit(f"anchor_watch: the anchor is already set: {a:#x} {s}")
    sys.setrecursionlimit(DEPTH + 1000)
    with open(LOG, "w") as log:
        descend(DEPTH, anchor, log)


if __name__ == "__main__":
    main()
