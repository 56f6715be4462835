"""A target of several threads that hold still, for tests that read their
frame cache anchors from outside.

    python anchor_threads.py READY [THREADS [DEPTH]]

THREADS threads (4; the main thread is one of them) each recurse DEPTH (40)
frames deep and spin at the top in a loop that calls nothing, so no
thread's stack changes once READY exists:

    <thread root> -> work -> hold x DEPTH -> spin

READY (JSON) holds the pid and, for every thread, its native tid, the
address of its thread state, of its last_profiled_frame (the anchor; the
sequence is the next word) and its chain of frames from spin()'s outwards
(interpreter-owned frames included), so that a test can read each anchor
from /proc/PID/mem and tell which live frame it points at. Runs until
killed. CPython 3.15 only (the field layout is 3.15's; tstate_anchor.py,
staged next to this script, finds it).
"""
import json
import os
import sys
import threading

sys.dont_write_bytecode = True      # no __pycache__ next to the targets
from tstate_anchor import Anchor  # noqa: E402

READY = sys.argv[1]
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
DEPTH = int(sys.argv[3]) if len(sys.argv) > 3 else 40

lock = threading.Lock()
found = []
all_in = threading.Event()


def spin(anchor):
    me = anchor.caller()
    info = {"tid": threading.get_native_id(), "tstate": anchor.ts, "anchor": anchor.lpf,
            "chain": Anchor.chain_from(me)}
    a, s = anchor.get()
    if (a, s) != (0, 0):
        sys.exit(f"anchor_threads: an anchor is already set: {a:#x} {s}")
    with lock:
        found.append(info)
        if len(found) == THREADS:
            with open(READY + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "depth": DEPTH, "threads": found}, f)
            os.replace(READY + ".tmp", READY)
    x = 0
    while True:
        x = (x + 1) & 0xFFFF


def hold(n, anchor):
    if n > 1:
        return hold(n - 1, anchor)
    return spin(anchor)


def work():
    sys.setrecursionlimit(DEPTH + 1000)
    hold(DEPTH, Anchor())


def main():
    if sys.version_info[:2] != (3, 15):
        sys.exit("anchor_threads: CPython 3.15 only")
    for _ in range(THREADS - 1):
        threading.Thread(target=work, daemon=True).start()
    work()


if __name__ == "__main__":
    main()
