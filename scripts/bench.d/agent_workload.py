"""The agent cell's services (agent.py): one process of a service-like mix,
counting its units of work.

    python -c "$(cat agent_workload.py)" COUNTERS KIND NAME THREADS

Passed as -c code (not a path) so that the sid root's interpreters run it
through chroot alike. NAME becomes the process's name (comm, through prctl
PR_SET_NAME, before any thread starts: its threads inherit it), so that
`pyprof-bpf agent -a --comm` can pick these processes out of a shared host.

KIND:
  batch  one thread computing in bursts: BURST units back to back, then a
         sleep as long as ~1.5 bursts (a queue worker; ~40% of a core)
  web    THREADS request handlers: each sleeps a random ~0.4 s (the next
         request), then handles it (a unit, ~12 frames deep: route, parse,
         render); ~5% of a core in all
  idle   a daemon: its main thread wakes every ~1 s for a unit; THREADS - 1
         more threads (a heartbeat) wake every ~2 s for a tenth of one

A unit is the same fixed work everywhere (~1-2 ms of pure-Python loop).
COUNTERS: a file of 1 + 2 x THREADS little-endian uint64 slots, shared with
the driver through the page cache: slot 0 becomes 1 once every thread runs;
slot 1 + 2i thread i's units done, slot 2 + 2i the wall time it spent in
them (ns, perf_counter). Units per second of that time is the service's
capacity: what the profiler's interruptions take shows there, while units
per wall second of the sleeping kinds is set by their sleeps.
"""
import mmap
import os
import random
import sys
import threading
import time

COUNTERS, KIND, NAME, THREADS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
UNIT = 12000            # loop iterations a unit
BURST = 10              # batch: units per burst


def set_name(name):
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)     # PR_SET_NAME
        return
    except (ImportError, OSError, AttributeError):
        pass
    with open("/proc/self/comm", "w") as f:
        f.write(name[:15])


set_name(NAME)
with open(COUNTERS, "w+b") as _f:
    _f.truncate(8 * (1 + 2 * THREADS))
    _map = mmap.mmap(_f.fileno(), 8 * (1 + 2 * THREADS))
slots = memoryview(_map).cast("Q")
clock = time.perf_counter_ns


def compute(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def unit():
    return compute(UNIT)


# web: a request handler's stack
def render(depth):
    if depth:
        return render(depth - 1)
    return unit()


def parse_request():
    return render(4)


def route():
    return parse_request()


def handle_request():
    return route()


def counted(idx, fn):
    t = clock()
    fn()
    slots[1 + 2 * idx] += 1
    slots[2 + 2 * idx] += clock() - t


def batch_worker(idx):
    while True:
        t = clock()
        for _ in range(BURST):
            counted(idx, unit)
        time.sleep(1.5 * (clock() - t) / 1e9)


def web_handler(idx):
    rnd = random.Random(os.getpid() * 100 + idx)
    while True:
        time.sleep(rnd.uniform(0.1, 0.7))
        counted(idx, handle_request)


def heartbeat(idx):
    while True:
        time.sleep(2.0)
        t = clock()
        compute(UNIT // 10)
        slots[1 + 2 * idx] += 1
        slots[2 + 2 * idx] += clock() - t


def daemon_main(idx):
    period = 0.8 + (os.getpid() % 41) / 100.0
    while True:
        time.sleep(period)
        counted(idx, unit)


if KIND == "batch":
    targets = [batch_worker] * THREADS
elif KIND == "web":
    targets = [web_handler] * THREADS
elif KIND == "idle":
    targets = [daemon_main] + [heartbeat] * (THREADS - 1)
else:
    raise SystemExit("agent_workload: unknown KIND %r" % KIND)
for i in range(1, THREADS):
    threading.Thread(target=targets[i], args=(i,), daemon=True).start()
slots[0] = 1
targets[0](0)
