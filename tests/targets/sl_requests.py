"""A thread per request: thousands of threads a second, each living ~1 ms.

    python sl_requests.py STATS [WORK_US [LOG]]

The main thread serves "requests" one after the other: for each it starts a
thread (threading.Thread, named req-N) running handle_request(), and joins
it. handle_request() does WORK_US (default 1000) microseconds of real Python
work, calibrated at start-up, in its own frame (the loop is in
handle_request itself, no callee), timed with time.thread_time_ns() around
the work: the CPU time the process spends inside handle_request is known.
WORK_US may be a range LO-HI: each request then works a random time in it.

STATS (replaced atomically every ~50 ms, first once the calibration is done)
holds one line "requests handler_cpu_ns written_monotonic_ns python
lines...": requests served, the CPU time summed over every call of
handle_request, when it was written (CLOCK_MONOTONIC), the version, and the
lines of handle_request (co_lines()). With LOG, each request instead
appends (in batches, with STATS) a line "n tid started entered left joined"
to LOG: its thread's native id and the CLOCK_MONOTONIC times (ns) before
Thread.start(), when handle_request began and ended its work, and after
join(); handler_cpu_ns stays 0 (thread_time_ns(), a system call, would
bring the kernel's count of the thread's CPU time up to date, which a
program that never asks does not get). Runs until killed. CPython 3.11+.
"""
import os
import random
import sys
import threading
import time

STATS = sys.argv[1]
WORK_US = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1000").split("-")]
LOG = sys.argv[3] if len(sys.argv) > 3 else None

handler_cpu_ns = 0
ITERS = 20000         # of the calibration
PER_MS = 1000         # iterations per millisecond of work


def handle_request(n, rec=None, iters=None):
    global handler_cpu_ns
    if rec is not None:
        # Not timed with thread_time_ns(): see LOG above.
        rec += (threading.get_native_id(), time.monotonic_ns())
        x = n
        for i in range(iters):
            x = (x * 31 + i) % 1000003
        rec.append(time.monotonic_ns())
        return x
    t0 = time.thread_time_ns()
    x = n
    for i in range(iters if iters is not None else ITERS):
        x = (x * 31 + i) % 1000003
    handler_cpu_ns += time.thread_time_ns() - t0
    return x


def calibrate():
    """PER_MS: iterations of handle_request's loop per millisecond."""
    global PER_MS, handler_cpu_ns
    best = None
    for _ in range(5):
        t0 = time.thread_time_ns()
        handle_request(0)
        dt = time.thread_time_ns() - t0
        best = dt if best is None else min(best, dt)
    PER_MS = max(10, ITERS * 1_000_000 // max(best, 1))
    handler_cpu_ns = 0


def write_stats(n):
    lines = sorted({ln for _, _, ln in handle_request.__code__.co_lines() if ln is not None})
    data = "%d %d %d %s %s\n" % (n, handler_cpu_ns, time.monotonic_ns(),
                                 "%d.%d.%d" % sys.version_info[:3],
                                 ",".join(map(str, lines)))
    with open(STATS + ".tmp", "w") as f:
        f.write(data)
    os.replace(STATS + ".tmp", STATS)


def serve():
    n = 0
    next_stats = 0
    log = open(LOG, "w") if LOG else None
    recs = []
    while True:
        n += 1
        rec = [n, time.monotonic_ns()] if log else None
        iters = PER_MS * random.randint(WORK_US[0], WORK_US[-1]) // 1000
        t = threading.Thread(target=handle_request, args=(n, rec, iters),
                             name="req-%d" % n)
        t.start()
        t.join()
        now = time.monotonic_ns()
        if log:
            rec.append(now)
            recs.append(rec)
        if now >= next_stats:
            if log:
                log.writelines("%d %d %d %d %d %d\n" % (r[0], r[2], r[1], r[3], r[4], r[5])
                               for r in recs)
                log.flush()
                recs.clear()
            write_stats(n)
            next_stats = now + 50_000_000


if __name__ == "__main__":
    calibrate()
    serve()
