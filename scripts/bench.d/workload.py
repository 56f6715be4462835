"""The benchmark's target: THREADS threads, each DEPTH Python frames deep,
spinning in a CPU-bound loop at the top of the stack, counting iterations.

    python workload.py COUNTERS THREADS DEPTH

Runs on CPython 3.11+ (standard library only, so it works in the Debian sid
root and in pyenv builds alike). The main thread is one of the THREADS
workers, so the process has exactly THREADS Python threads. Every thread's
stack, counted from its root frame to spin(), is exactly DEPTH frames.

COUNTERS is a file of THREADS + 1 little-endian uint64 slots, shared with the
driver through the page cache (MAP_SHARED): slot 0 becomes 1 once every
thread spins; slot 1 + i holds thread i's iteration count, updated every 1,024
iterations. The driver reads it whenever it likes, without signals and without
waiting for this process's GIL.
"""
import mmap
import sys
import threading

COUNTERS = sys.argv[1]
THREADS = int(sys.argv[2])
DEPTH = int(sys.argv[3])
PUBLISH = 0x3FF          # publish the count every 1024 iterations

with open(COUNTERS, "w+b") as _f:
    _f.truncate(8 * (THREADS + 1))
    _map = mmap.mmap(_f.fileno(), 8 * (THREADS + 1))
slots = memoryview(_map).cast("Q")
# Threads wait here, not spinning, until all exist: creating thread N while N-1
# others spin (and hold the GIL) would take seconds.
everyone = threading.Barrier(THREADS)


def spin(idx):
    c = slots
    everyone.wait()
    if idx == 0:
        c[0] = 1
    i = 0
    slot = idx + 1
    while True:
        i += 1
        if not i & PUBLISH:
            c[slot] = i


def down(n, idx):
    if n > 0:
        return down(n - 1, idx)
    return spin(idx)


def depth_here():
    """Frames from the caller of this function to its thread's root."""
    n, f = 0, sys._getframe(1)
    while f is not None:
        n, f = n + 1, f.f_back
    return n


def start(idx):
    # start itself is frame number `here`; down(k) adds k + 1 frames, spin one.
    here = depth_here()
    k = DEPTH - here - 2
    if k < 0:
        raise SystemExit("workload: DEPTH %d is below the minimum %d" % (DEPTH, here + 2))
    down(k, idx)


def main():
    sys.setrecursionlimit(DEPTH + 1000)
    for i in range(1, THREADS):
        threading.Thread(target=start, args=(i,), daemon=True).start()
    start(0)


if __name__ == "__main__":
    main()
