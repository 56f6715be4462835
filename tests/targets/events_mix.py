"""Targets of -e EVENT (tests/test_events.py, issue #35): one thread doing
what an event counts, in a function of its own, while another computes.

    python events_mix.py READY KIND

faults: grow() touches fresh memory page by page (a new 4 MiB anonymous
mapping each round, every page written once, then unmapped: each round's
pages are new to the process; a bytearray would come from malloc, whose
mmap threshold rises past it once one is freed, and reuse its heap) while
spin() computes; READY.rounds gets a line per round, "START END"
(CLOCK_MONOTONIC ns): CHUNK bytes touched between the two.
openat: opener() opens and closes /dev/null in a loop while spin() computes.
sleeps: napper() sleeps 1 ms in a loop (a context switch each) while the
main thread waits in idle() (a switch a second).
READY is written (the pid) once the threads run.
"""
import mmap
import os
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
CHUNK = 4 << 20


def spin():
    x = 0
    while True:
        for i in range(10000):
            x += i * i


def grow(path):
    log = open(path, "a")
    while True:
        t0 = time.monotonic_ns()
        m = mmap.mmap(-1, CHUNK)      # no page of it touched yet
        for off in range(0, CHUNK, PAGE):
            m[off] = 1
        m.close()
        log.write(f"{t0} {time.monotonic_ns()}\n")
        log.flush()
        time.sleep(0.02)      # ~25,000 faults a second: the ring keeps up


def opener():
    while True:
        os.close(os.open("/dev/null", os.O_RDONLY))
        time.sleep(0.0005)


def napper():
    while True:
        time.sleep(0.001)


def idle():
    while True:
        time.sleep(1)


def main():
    ready, kind = sys.argv[1], sys.argv[2]
    work = {"faults": (grow, (ready + ".rounds",)), "openat": (opener, ()),
            "sleeps": (napper, ())}[kind]
    threading.Thread(target=work[0], args=work[1], name=work[0].__name__,
                     daemon=True).start()
    with open(ready + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(ready + ".tmp", ready)
    if kind == "sleeps":
        idle()
    spin()


if __name__ == "__main__":
    main()
