"""A CPU-bound target for the call-graph views (pstats, callgrind), with a
known split that it times itself.

    python callgraph_split.py LAYOUT STATS

The only thread cycles, forever:

    <module> -> main -> cycle -> caller -> hot(2k)   (call site a)
                                        -> hot(k)    (call site b)
                             -> warm(k)
                             -> cold(k // 4)
                             -> rec(6 deep) -> hot(k // 2)

hot, warm and cold run the same loop, so by work hot has 3.5/4.75 (74%),
warm 21% and cold 5%; caller calls hot from two lines (2:1), rec recurses
six frames before calling hot. k jitters by up to 25% from cycle to cycle so
the calls never lock in phase with a sampling period. Around each call
cycle() reads time.thread_time_ns(), and after each cycle replaces STATS (one
line, whitespace-separated integers, CPU nanoseconds so far):

    cycles hot_a hot_b warm cold rec

(hot_a, hot_b: caller's two calls of hot, timed inside caller; rec: the whole
recursion, which is its call of hot and six frames' worth of calls.)
Before cycling it writes LAYOUT (JSON, atomically): the version, the file, k,
the first line of each function and the lines of the call sites marked
"# LINE:caller->callee".
"""
import json
import os
import re
import sys
import time

LAYOUT = sys.argv[1]
STATS = sys.argv[2]
tt = time.thread_time_ns
SPLIT = [0, 0]


def hot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def warm(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def cold(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def caller(k):
    t0 = tt()
    hot(2 * k)  # LINE:caller->hot:a
    t1 = tt()
    hot(k)  # LINE:caller->hot:b
    SPLIT[0] += t1 - t0
    SPLIT[1] += tt() - t1


def rec(depth, n):
    if depth > 1:
        return rec(depth - 1, n)  # LINE:rec->rec
    return hot(n)  # LINE:rec->hot


def cycle(m):
    cycles = warm_ns = cold_ns = rec_ns = 0
    j = 12345
    tmp = STATS + ".tmp"
    while True:
        j = (j * 1103515245 + 12345) & 0x7FFFFFFF
        k = m + j % (m // 2) - m // 4
        caller(k)  # LINE:cycle->caller
        t0 = tt()
        warm(k)  # LINE:cycle->warm
        t1 = tt()
        cold(k // 4)  # LINE:cycle->cold
        t2 = tt()
        rec(6, k // 2)  # LINE:cycle->rec
        t3 = tt()
        warm_ns += t1 - t0
        cold_ns += t2 - t1
        rec_ns += t3 - t2
        cycles += 1
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"%d %d %d %d %d %d\n" % (cycles, SPLIT[0], SPLIT[1], warm_ns, cold_ns,
                                                  rec_ns))
        os.close(fd)
        os.replace(tmp, STATS)


def calibrate():
    """k such that warm(k) takes about 10 ms of CPU here."""
    m = 20000
    while True:
        t0 = tt()
        warm(m)
        dt = tt() - t0
        if dt > 5_000_000 or m > 1 << 28:
            return max(1000, int(m * 10_000_000 / max(dt, 1)))
        m *= 4


def marked_lines():
    out = {}
    with open(__file__, encoding="utf-8") as f:
        for no, text in enumerate(f, 1):
            mark = re.search(r"# LINE:(\w+->[\w:]+)$", text.rstrip())
            if mark:
                out[mark.group(1)] = no
    return out


def main():
    m = calibrate()
    funcs = (hot, warm, cold, caller, rec, cycle, main)
    layout = {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "pid": os.getpid(),
        "file": __file__,
        "k": m,
        "first": {f.__name__: f.__code__.co_firstlineno for f in funcs},
        "sites": marked_lines(),
    }
    with open(LAYOUT + ".tmp", "w") as f:
        json.dump(layout, f)
    os.replace(LAYOUT + ".tmp", LAYOUT)
    cycle(m)  # LINE:main->cycle


main()
