"""One thread that goes back and forth between a shallow C stack and a deep
one: a recursion through C (sorted() calling its key function, which sorts
again) argv[2] levels deep (~6 KB of C stack a level on 3.13-3.15), whose
innermost key function spins 50 ms; then 0.2 s of a plain loop. Writes
{"python": ..., "tid": ...} to argv[1] once running (/dev/null: nowhere),
and runs for argv[3] seconds."""
import json
import sys
import threading
import time

DEPTH = int(sys.argv[2])
SECS = float(sys.argv[3])


def spin(secs):
    end = time.perf_counter() + secs
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def key(level):
    if level == 0:
        return spin(0.05)   # deep_leaf
    return sorted([level - 1], key=key)[0]


def shallow():
    return spin(0.2)        # shallow_leaf


def work():
    end = time.time() + SECS
    while time.time() < end:
        shallow()
        sorted([DEPTH], key=key)


t = threading.Thread(target=work, name="deepc")
t.start()
with open(sys.argv[1], "w") as f:
    json.dump({"python": sys.version.split()[0], "tid": t.native_id}, f)
t.join()
