"""Targets of issue #10's cells (modes.py): processes whose context switches
the off-CPU modes pay for.

    python modes_workload.py COUNTERS idle
    python modes_workload.py COUNTERS switchy DEPTH
    python modes_workload.py COUNTERS gil THREADS DEPTH UNITS SLEEP_S

idle     the main thread sleeps 10 ms in a loop (~100 switches/s: the
         profiled process of the ping-pong cell, whose switches are few
         beside the machine's)
switchy  two threads, DEPTH Python frames deep, pass a byte back and forth
         over two pipes: almost every switch of the machine is one of this
         process's threads leaving or reaching a CPU (a stack walk each)
gil      THREADS threads (the main one included), each DEPTH deep, each doing
         UNITS units of short pure-Python work and then sleeping SLEEP_S (a
         stand-in for a short blocking call): the GIL is handed over at every
         sleep and whenever a waiter's switch interval runs out

COUNTERS: a file of little-endian uint64 slots shared through the page cache
(as workload.py's): slot 0 becomes 1 once the work runs; slot 1 counts events
(idle: naps, switchy: round trips, gil: GIL hand-overs, i.e. a unit done by
another thread than the previous unit); slots 2.. each thread's units of work
(idle and switchy: one thread's count, equal to slot 1). Runs on CPython 3.11+,
standard library only.
"""
import mmap
import os
import sys
import threading
import time

COUNTERS = sys.argv[1]
KIND = sys.argv[2]
if KIND == "idle":
    THREADS, DEPTH = 1, 1
elif KIND == "switchy":
    THREADS, DEPTH = 2, int(sys.argv[3])
elif KIND == "gil":
    THREADS, DEPTH, UNITS, SLEEP_S = (int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                                      float(sys.argv[6]))
else:
    raise SystemExit("modes_workload: unknown KIND %r" % KIND)
NSLOTS = 2 + THREADS

with open(COUNTERS, "w+b") as _f:
    _f.truncate(8 * NSLOTS)
    _map = mmap.mmap(_f.fileno(), 8 * NSLOTS)
slots = memoryview(_map).cast("Q")
everyone = threading.Barrier(THREADS)


def down(n, fn, *args):
    """Calls fn(*args) n frames below the caller."""
    if n > 1:
        return down(n - 1, fn, *args)
    return fn(*args)


def idle():
    c = slots
    c[0] = 1
    n = 0
    while True:
        time.sleep(0.01)
        n += 1
        c[1] = c[2] = n


PING = os.pipe()
PONG = os.pipe()


def switchy(idx):
    c = slots
    rd, wr = (PING[0], PONG[1]) if idx else (PONG[0], PING[1])
    everyone.wait()
    if idx:
        while True:
            os.read(rd, 1)
            os.write(wr, b"x")
    c[0] = 1
    n = 0
    while True:
        os.write(wr, b"x")
        os.read(rd, 1)
        n += 1
        if not n & 0xFF:
            c[1] = c[2] = n


last = -1
handoffs = 0


def gil(idx):
    global last, handoffs
    c = slots
    slot = 2 + idx
    everyone.wait()
    if idx == 0:
        c[0] = 1
    n = 0
    units, nap = UNITS, SLEEP_S
    while True:
        for _ in range(units):
            x = 0
            for k in range(20):
                x += k
            n += 1
            if last != idx:
                last = idx
                handoffs += 1
                c[1] = handoffs
        c[slot] = n
        time.sleep(nap)


def main():
    if KIND == "idle":
        down(DEPTH, idle)
    elif KIND == "switchy":
        threading.Thread(target=down, args=(DEPTH, switchy, 1), daemon=True).start()
        down(DEPTH, switchy, 0)
    else:
        for i in range(1, THREADS):
            threading.Thread(target=down, args=(DEPTH, gil, i), daemon=True).start()
        down(DEPTH, gil, 0)


main()
