"""A target with many CPU-bound threads that start and end all the time.

    python threads_churn.py LOG NTHREADS CHURN

The main thread keeps NTHREADS worker threads alive. With CHURN=1 every
worker runs for a random 0.2 to 0.8 s and returns, and the main thread
starts a new one in its place (within ~10 ms); with CHURN=0 workers never
return. Worker number n's stack, while it works, is

    <threading frames> -> worker -> layer1 x D -> layer2,  D = 1 + n % 5

so that threads have distinct stacks, and worker() and layer1() are also
sampled at their own lines (between calls, and while worker records itself). The main thread sleeps in 10 ms steps between its checks.

LOG (JSON, replaced atomically every ~50 ms, first once the first NTHREADS
workers were started) holds the CLOCK_MONOTONIC time it was written, the
version, the pid and main thread id as this process sees them, the lines of
worker, layer1, layer2 and main (co_lines() of this interpreter), and one
entry per worker ever started: its name, native thread id (null until it
runs), the CLOCK_MONOTONIC times when main() created it (`created`), when it
entered worker() (`start`) and when it left (`end`, null while it runs), its
`depth` D, and its frames outside worker() as it saw them itself (`outer`: [qualname, file,
line], outermost first). Call sites are marked `# LINE:<caller>-><callee>`.
Runs on CPython 3.11+.
"""
import json
import os
import random
import sys
import threading
import time

LOG = sys.argv[1]
NTHREADS = int(sys.argv[2])
CHURN = sys.argv[3] == "1"


def layer2():
    x = 0
    for i in range(3000):  # LOOP:layer2
        x += i  # LOOP:layer2
    return x


def layer1(d):
    if d > 1:
        return layer1(d - 1)  # LINE:layer1->layer1
    return layer2()  # LINE:layer1->layer2


def worker(rec, life):
    f = sys._getframe(1)
    outer = []
    while f is not None:
        outer.append([f.f_code.co_qualname, f.f_code.co_filename, f.f_lineno])
        f = f.f_back
    outer.reverse()
    rec["outer"] = outer
    rec["tid"] = threading.get_native_id()
    rec["start"] = time.monotonic()
    end = rec["start"] + life
    depth = rec["depth"]
    while time.monotonic() < end:
        layer1(depth)  # LINE:worker->layer1
    rec["end"] = time.monotonic()


def code_lines(fn):
    return sorted({ln for _, _, ln in fn.__code__.co_lines() if ln is not None})


def write_log(log):
    data = json.dumps(log)
    with open(LOG + ".tmp", "w") as f:
        f.write(data)
    os.replace(LOG + ".tmp", LOG)


def main():
    log = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
           "main_tid": threading.get_native_id(),
           "lines": {"worker": code_lines(worker), "layer1": code_lines(layer1),
                     "layer2": code_lines(layer2), "main": code_lines(main)},
           "threads": [], "written": 0.0}
    threads = []
    n = 0
    next_log = 0.0
    while True:
        threads = [t for t in threads if t.is_alive()]
        while len(threads) < NTHREADS:
            n += 1
            rec = {"name": "w-%d" % n, "tid": None, "created": time.monotonic(),
                   "start": None, "end": None, "outer": None, "depth": 1 + n % 5}
            life = random.uniform(0.2, 0.8) if CHURN else float("inf")
            t = threading.Thread(target=worker, args=(rec, life), name=rec["name"],
                                 daemon=True)
            log["threads"].append(rec)
            t.start()
            threads.append(t)
        now = time.monotonic()
        if now >= next_log:
            log["written"] = now
            write_log(log)
            next_log = now + 0.05
        time.sleep(0.01)


if __name__ == "__main__":
    main()  # LINE:<module>->main
