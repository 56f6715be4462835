"""The benchmark's target: THREADS threads, each DEPTH Python frames deep,
spinning in a CPU-bound loop at the top of the stack, counting iterations.

    python workload.py COUNTERS THREADS DEPTH [KIND]

KIND (default spin) is that steady state. The other kinds make a profiler
meet something new at almost every sample (its first sightings), with one
thread on a CPU at a time, DEPTH frames deep, doing ~1 ms units of the same
spinning work (calibrated at start-up); the count is of units done:

  threads  each unit runs in a new thread (started, then joined by the main
           thread, which waits off CPU): about one new thread per ms of CPU
  code     each unit compiles a fresh module defining fresh_<N>() (a new code
           object, with a name and a file of its own: <fresh-N>), execs it
           and runs a shorter unit (~0.2 ms) in fresh_<N>(), then drops it:
           each code object is freed ~0.3 ms after its creation, usually
           before a profiler that reads code objects from the target later
           can. fresh_<N> is called from one of 5 lines (# CALLSITE k, k =
           N % 5), so a sample's caller line tells whether the fresh_<M> it
           names is the one that ran (or a later one at the same address)

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
KIND = sys.argv[4] if len(sys.argv) > 4 else "spin"
if KIND not in ("spin", "threads", "code"):
    raise SystemExit("workload: unknown KIND %r" % KIND)
if KIND != "spin" and THREADS != 1:
    raise SystemExit("workload: KIND %s runs one thread at a time (THREADS 1)" % KIND)
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


def unit_spin(n):
    """The churn kinds' unit of work: n iterations at the top of the stack."""
    i = 0
    while i < n:
        i += 1
    return i


def unit_down(k, n):
    if k > 0:
        return unit_down(k - 1, n)
    return unit_spin(n)


def unit_thread_main(n):
    # frames: threading's own, this one, unit_down x (k + 1), unit_spin
    here = depth_here()
    unit_down(max(0, DEPTH - here - 2), n)


FRESH = """def fresh_%d(n):
    i = 0
    while i < n:
        i += 1
    return i
"""


def churn_loop(n):
    """Runs units forever (the caller is DEPTH - 2 frames deep: with the loop
    and the unit's frame the stack is DEPTH deep)."""
    c = slots
    units = 0
    while True:
        units += 1
        if KIND == "threads":
            t = threading.Thread(target=unit_thread_main, args=(n,), name="unit-%d" % units)
            t.start()
            t.join()
        else:
            ns = {}
            exec(compile(FRESH % units, "<fresh-%d>" % units, "exec"), ns)
            f = ns.pop("fresh_%d" % units)
            # The call site tells units % 5: a sample naming fresh_<M> from
            # the wrong site names a code object that was not running.
            r = units % 5
            if r == 0:
                f(n)    # CALLSITE 0
            elif r == 1:
                f(n)    # CALLSITE 1
            elif r == 2:
                f(n)    # CALLSITE 2
            elif r == 3:
                f(n)    # CALLSITE 3
            else:
                f(n)    # CALLSITE 4
            del ns, f
        c[1] = units
        c[0] = 1


def churn_down(k, n):
    if k > 0:
        return churn_down(k - 1, n)
    return churn_loop(n)


def calibrate():
    """Iterations of unit_spin per ms of CPU here (best of 5)."""
    import time
    n = 100000
    best = None
    for _ in range(5):
        t = time.thread_time()
        unit_spin(n)
        d = time.thread_time() - t
        best = d if best is None else min(best, d)
    return n * 0.001 / max(best, 1e-6)


UNIT_MS = {"threads": 1.0, "code": 0.2}


def main():
    sys.setrecursionlimit(DEPTH + 1000)
    if KIND != "spin":
        n = max(100, int(calibrate() * UNIT_MS[KIND]))
        here = depth_here()
        # main (here frames) + churn_down x (k + 1) + churn_loop + the unit
        k = DEPTH - here - 3
        if KIND == "threads":
            k = max(0, k)
        elif k < 0:
            raise SystemExit("workload: DEPTH %d is below the minimum %d" % (DEPTH, here + 3))
        churn_down(k, n)
        return
    for i in range(1, THREADS):
        threading.Thread(target=start, args=(i,), daemon=True).start()
    start(0)


if __name__ == "__main__":
    main()
