"""A target for tests/test_views_stream.py: known time in known places.

    stream_mix.py SECONDS [--hot] [--sleeper] [--contenders]

--hot: the main thread spins in hot() for 3 ms of its own CPU time, then in
  cold() for 1 ms (on average: each length is drawn at random), in a loop: hot() is 3/4 of its CPU time (thread_time).
--sleeper: a thread named "sleeper" calls time.sleep(0.2) in nap(), in a loop.
--contenders: two threads named "contend_a" and "contend_b" run pure Python
  (contend()) forever: they take turns with the GIL.
The main thread without --hot sleeps. Prints "ready" once every thread
runs; exits after SECONDS.
"""
import random
import sys
import threading
import time

NAP_S = 0.2


def spin(cpu_s):
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


def hot():
    # Random lengths, mean 3 ms: a fixed 3 + 1 ms loop is twice the sampler's
    # 2.004 ms period (499 Hz of the thread's CPU time, as thread_time counts),
    # and the samples locked onto its phase: hot's share came out 0.99 or 0.54.
    spin(random.uniform(0.0015, 0.0045))


def cold():
    spin(random.uniform(0.0005, 0.0015))      # mean 1 ms


def nap(started):
    started.set()
    while True:
        time.sleep(NAP_S)


def contend(started):
    started.set()
    x = 0
    while True:
        for i in range(1000):
            x += i * i
        x &= 0xffff


def main():
    secs, flags = float(sys.argv[1]), set(sys.argv[2:])
    started = []
    roles = []
    if "--sleeper" in flags:
        roles.append(("sleeper", nap))
    if "--contenders" in flags:
        roles += [("contend_a", contend), ("contend_b", contend)]
    for name, fn in roles:
        ev = threading.Event()
        threading.Thread(target=fn, args=(ev,), name=name, daemon=True).start()
        started.append(ev)
    for ev in started:
        ev.wait()
    print("ready", flush=True)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if "--hot" in flags:
            hot()
            cold()
        else:
            time.sleep(0.05)


main()
