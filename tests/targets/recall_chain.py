"""A target whose threads call the same short chain over and over:
worker -> c1 -> c2 -> c3 -> leaf, with a leaf of a few additions, so the
chain is torn down and built again at the same addresses every
microsecond or so. A copy of a thread's stack taken over a few
microseconds can then hold frames of two passes: a caller caught while it
was being pushed again (3.11/3.12: its last instruction the one before its
first; 3.13+: at its first), or one whose instruction is from another
pass. Every pass has the same current frame and the same top, so only the
callers' instructions tell such a copy from one of a single instant.

With "split", c1..c3 return on the line after their call (the calls
marked SPLIT: instead of CALL:), so a caller copied at its return under a live callee, the commonest such
tear, shows a line of its own: with them on one line, a stack of lines
cannot tell it from one of a single instant.

    python recall_chain.py READY [THREADS [split]]

Writes READY (atomically: JSON with the pid) once running; runs until
killed. Runs on CPython 3.11+.
"""
import json
import os
import sys
import threading

READY = sys.argv[1]
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
SPLIT = sys.argv[3:4] == ["split"]


def leaf():
    x = 0
    for i in range(5):
        x += i
    return x


if not SPLIT:
    def c3():
        return leaf()  # CALL:c3

    def c2():
        return c3()  # CALL:c2

    def c1():
        return c2()  # CALL:c1
else:
    def c3():
        r = leaf()  # SPLIT:c3
        return r

    def c2():
        r = c3()  # SPLIT:c2
        return r

    def c1():
        r = c2()  # SPLIT:c1
        return r


def worker():
    while True:
        c1()  # CALL:worker


def main():
    for _ in range(THREADS):
        threading.Thread(target=worker, daemon=True).start()
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid()}, f)
    os.replace(READY + ".tmp", READY)
    threading.Event().wait()


if __name__ == "__main__":
    main()
