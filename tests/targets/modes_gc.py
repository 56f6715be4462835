"""gc.collect() in a loop over cyclic garbage, beside a thread that never
collects, for the <GC> frame of issue #10 (tests/test_modes.py).

    python modes_gc.py INFO LOG [SECONDS]

Threads:
  collector  keeps ~300,000 container objects alive (every full collection
             traverses them), then loops: make 2,000 reference cycles and
             drop them (make_garbage), gc.collect() (collect_loop's line
             marked LINE:collect). It times itself with
             time.thread_time_ns(): its CPU time inside gc.collect(), and in
             all. Automatic collections are off (gc.disable()): its
             allocations would trigger some inside make_garbage, <GC> on
             their samples too but outside its timing (2-3 points of its
             CPU time on 3.11 and 3.12; gc.callbacks could time them, but
             Python code in a collection may hand the GIL over, see the
             README on <GC>).
  other      pure integer arithmetic (no container allocated: it never
             triggers a collection) contending for the GIL.

INFO (JSON, atomically, once both run): {"python", "pid", "tids": {role:
tid}, "collect_line": N}. LOG: the collector appends after every round
"MONO_NS THREAD_CPU_NS COLLECT_CPU_NS" (CLOCK_MONOTONIC, its cumulative CPU
time, its cumulative CPU time inside gc.collect()), flushed every ~50 ms.
Runs for SECONDS (default 120). CPython 3.11+.
"""
import gc
import faulthandler
import json
import os
import sys
import threading
import time


class Node:
    def __init__(self, i):
        self.i = i
        self.peer = None


def make_garbage(n):
    for i in range(n):
        a, b = Node(i), Node(i + 1)
        a.peer, b.peer = b, a


def collect_loop(log_path, live):
    gc.disable()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    collect_cpu = 0
    pending, last = [], time.monotonic()
    while True:
        make_garbage(2000)
        t0 = time.thread_time_ns()
        gc.collect()  # LINE:collect
        t1 = time.thread_time_ns()
        collect_cpu += t1 - t0
        pending.append("%d %d %d\n" % (time.monotonic_ns(), t1, collect_cpu))
        if time.monotonic() - last > 0.05:
            os.write(log, "".join(pending).encode())
            pending, last = [], time.monotonic()


def other():
    x = 0
    while True:
        for i in range(100000):
            x = (x * 31 + i) % 1000003


def main():
    faulthandler.enable(all_threads=True)   # a crash says where, on stderr
    info_path, log_path = sys.argv[1:3]
    lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0
    live = [{"k": [i, (i,)]} for i in range(100000)]
    with open(__file__) as f:
        line = next(i for i, s in enumerate(f, 1) if s.rstrip().endswith("# LINE:collect"))
    threads = [threading.Thread(target=collect_loop, args=(log_path, live), name="collector",
                                daemon=True),
               threading.Thread(target=other, name="other", daemon=True)]
    for t in threads:
        t.start()
    info = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
            "tids": {t.name: t.native_id for t in threads}, "collect_line": line}
    with open(info_path + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(info_path + ".tmp", info_path)
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline and all(t.is_alive() for t in threads):
        time.sleep(0.1)


if __name__ == "__main__":
    main()
