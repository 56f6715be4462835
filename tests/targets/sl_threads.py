"""Short threads, one after the other, each with a function of its own.

    python sl_threads.py LOG [SLOTS] [LIFE_MS]

SLOTS (default 3) threads run at any time. Thread number i (threading name
"t<i>") runs work_<i>(), a function of its own made for it (exec of a
fresh text, file name "<work>"; kept for the whole run, so no code object
is freed), for LIFE_MS (default 30) milliseconds of busy Python work, and
ends; the main thread starts the next one in its place. Ending threads hand
their stack, pthread_self() value and often their PyThreadState's address
on to the threads started after them (glibc's stack cache, the allocator):
only the kernel's thread id tells them apart. A profiler that lends a
remembered state to another thread shows work_<i> in a sample of a thread
that is not t<i>.

LOG (JSON, replaced atomically every ~50 ms, first once SLOTS threads
started) holds the version, the pid, the main thread's native id, the
CLOCK_MONOTONIC time it was written, and per thread started: its number,
native thread id (null until it runs), threading.get_ident() (its
pthread_self()), and the CLOCK_MONOTONIC times (ns) when it entered and
left runner() (null while it runs). Runs until killed. CPython 3.11+.
"""
import json
import os
import sys
import threading
import time

LOG = sys.argv[1]
SLOTS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
LIFE_NS = int(float(sys.argv[3]) * 1e6) if len(sys.argv) > 3 else 30_000_000

WORK = """\
def work_{i}(end):
    x = 0
    while time.monotonic_ns() < end:
        for k in range(200):
            x += k * k % 7
    return x
"""

funcs = {}


def make(i):
    ns = {"time": time}
    exec(compile(WORK.format(i=i), "<work>", "exec"), ns)
    funcs[i] = ns[f"work_{i}"]


def runner(rec, fn):
    rec["tid"] = threading.get_native_id()
    rec["ident"] = threading.get_ident()
    rec["start"] = time.monotonic_ns()
    fn(rec["start"] + LIFE_NS)
    rec["end"] = time.monotonic_ns()


def write_log(log):
    log["written"] = time.monotonic_ns()
    with open(LOG + ".tmp", "w") as f:
        json.dump(log, f)
    os.replace(LOG + ".tmp", LOG)


def main():
    log = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
           "main_tid": threading.get_native_id(), "threads": []}
    running = []
    i = 0
    next_log = 0
    while True:
        running = [t for t in running if t.is_alive()]
        while len(running) < SLOTS:
            make(i)
            rec = {"i": i, "tid": None, "ident": None, "start": None, "end": None}
            log["threads"].append(rec)
            t = threading.Thread(target=runner, args=(rec, funcs[i]), name=f"t{i}",
                                 daemon=True)
            t.start()
            running.append(t)
            i += 1
        now = time.monotonic_ns()
        if now >= next_log:
            write_log(log)
            next_log = now + 50_000_000
        time.sleep(0.001)


if __name__ == "__main__":
    main()
