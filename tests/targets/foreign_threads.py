"""Python run on threads that Python did not create.

Round after round, four threads made by libc's pthread_create (through
ctypes) each call a ctypes callback. The callback enters the interpreter
through PyGILState_Ensure, which makes a thread state for the foreign
thread and frees it when the callback returns: every round brings four new
threads, each with a new state, alive about 2 ms, while the main thread
joins them.

Usage: foreign_threads.py READY LIFETIME. READY gets {"pid": N} once the
first round has run.
"""
import ctypes
import json
import os
import sys
import time

libc = ctypes.CDLL("libc.so.6")
START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def burn_in_foreign(n):
    x = 0
    for i in range(n):
        x += i * i  # LINE:burn
    return x


def callback(arg):
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:  # LINE:callback
        burn_in_foreign(200)  # LINE:call
    return None


START_C = START(callback)


def main_burn():
    x = 0
    for i in range(3000):
        x += i
    return x


def one_round():
    threads = [ctypes.c_ulong() for _ in range(4)]
    for t in threads:
        if libc.pthread_create(ctypes.byref(t), None, START_C, None):
            raise SystemExit("pthread_create failed")
    main_burn()
    for t in threads:
        libc.pthread_join(t, None)


def main():
    ready, lifetime = sys.argv[1], float(sys.argv[2])
    deadline = time.monotonic() + lifetime
    one_round()
    with open(ready + ".tmp", "w") as f:
        json.dump({"pid": os.getpid()}, f)
    os.replace(ready + ".tmp", ready)
    while time.monotonic() < deadline:
        one_round()


main()
