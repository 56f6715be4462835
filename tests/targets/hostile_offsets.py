"""A target that garbles its own _Py_DebugOffsets once a profiler has
attached (issue #23, the hostile-target suite). 3.13+: 3.11 and 3.12 have
no such table.

    python hostile_offsets.py READY STOP LIFETIME

_PyRuntime is found with ctypes (the exported symbol, in the executable or
in libpython: ctypes.pythonapi) and must start with the cookie "xdebugpy".
_PyRuntime is ordinary writable data, so no mprotect is needed. The
interpreter never reads the table itself (it is there for debuggers and
profilers), so leaving it garbled would not crash it; the target still
restores it between rounds so that a profiler attaching then finds it sound.

Until SIGUSR1 (the test sends it once the profilers have attached) the
table is left alone. After it, rounds of: garble bytes [24, 24 + 256) of the
table (past the cookie, version and free_threaded words, well inside the
table on 3.13-3.15, whose first 256 bytes are the runtime, interpreter and
thread-state sections), burn ~50 ms in spin_garbled, restore, burn ~25 ms
in spin_clean. Garbage is, by turns: random bytes, all 0xff, and every word
plus 8 (offsets that look sound and are all wrong). The cookie is left
alone so the table still claims to be valid.

When STOP exists (or LIFETIME passed) it restores the table, checks the
interpreter (a traceback, sys._current_frames, gc) and prints "ok CHECKSUM".
"""
import ctypes
import gc
import os
import random
import signal
import struct
import sys
import time

READY, STOP = sys.argv[1], sys.argv[2]
LIFETIME = float(sys.argv[3])
SPIN = 0.05
START, LEN = 24, 256
perf_counter = time.perf_counter

RUNTIME = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
if ctypes.string_at(RUNTIME, 8) != b"xdebugpy":
    raise SystemExit("_PyRuntime does not start with the debug offsets' cookie")
ORIG = ctypes.string_at(RUNTIME + START, LEN)
rng = random.Random(23)
GARBAGE = [
    bytes(rng.getrandbits(8) for _ in range(LEN)),
    b"\xff" * LEN,
    b"".join(struct.pack("<Q", (w + 8) & (2**64 - 1))
             for w in struct.unpack(f"<{LEN // 8}Q", ORIG)),
]
attached = [False]


def on_usr1(sig, frame):
    attached[0] = True


def spin_garbled(garbage):
    end = perf_counter() + SPIN
    ctypes.memmove(RUNTIME + START, garbage, LEN)
    try:
        while perf_counter() < end:
            pass
    finally:
        ctypes.memmove(RUNTIME + START, ORIG, LEN)


def spin_clean(dur):
    end = perf_counter() + dur
    while perf_counter() < end:  # LINE:clean
        pass


def run(deadline):
    n = 0
    while not os.path.exists(STOP) and time.monotonic() < deadline:
        if attached[0]:
            spin_garbled(GARBAGE[n % len(GARBAGE)])
            n += 1
        spin_clean(SPIN / 2)
    return n


def main():
    signal.signal(signal.SIGUSR1, on_usr1)
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(READY + ".tmp", READY)
    n = run(time.monotonic() + LIFETIME)
    assert ctypes.string_at(RUNTIME + START, LEN) == ORIG
    try:
        1 / 0
    except ZeroDivisionError as e:
        assert e.__traceback__ is not None
    assert sys._current_frames()
    gc.collect()
    print(f"ok {sum(i * i for i in range(100000))} rounds {n}", flush=True)


if __name__ == "__main__":
    main()
