"""A process in a container that points the profiler's file reads at host
files: run with -X perf in a chroot on its own overlay (tests/test_hostile_root.py).

argv: VARIANT SECONDS [HOST_SECRET HOST_FIFO]
After warming up (so its perf map holds entries), it replaces its own
/tmp/perf-PID.map, or its own executable's path, per VARIANT:
  own           nothing (the control)
  map-symlink   the map becomes a symlink to HOST_SECRET (an absolute path)
  map-fifo-link the map becomes a symlink to HOST_FIFO
  map-fifo      the map becomes a FIFO
  map-owner     the map becomes a copy owned by another user (uid 12345)
  exe-symlink   the executable's path becomes a symlink to HOST_SECRET
  exe-fifo      the executable's path becomes a FIFO
  src-symlink   this script's own source file becomes a symlink to HOST_SECRET
then prints "ready", burns CPU in burn() for SECONDS and prints "ok".
"""
import os
import shutil
import signal
import sys
import time


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def replace_with(path, make):
    tmp = path + ".new"
    make(tmp)
    os.replace(tmp, path)


def main():
    variant, secs = sys.argv[1], float(sys.argv[2])
    secret, fifo = (sys.argv[3:5] + ["", ""])[:2]
    t0 = time.time()
    while time.time() - t0 < 0.3:
        burn(5000)
    pmap = f"/tmp/perf-{os.getpid()}.map"
    exe = os.path.realpath(sys.executable)
    if variant == "map-symlink":
        replace_with(pmap, lambda t: os.symlink(secret, t))
    elif variant == "map-fifo-link":
        replace_with(pmap, lambda t: os.symlink(fifo, t))
    elif variant == "map-fifo":
        replace_with(pmap, os.mkfifo)
    elif variant == "map-owner":
        def copy(t):
            shutil.copyfile(pmap, t)
            os.chown(t, 12345, 12345)
        replace_with(pmap, copy)
    elif variant == "exe-symlink":
        replace_with(exe, lambda t: os.symlink(secret, t))
    elif variant == "exe-fifo":
        replace_with(exe, os.mkfifo)
    elif variant == "src-symlink":
        replace_with(os.path.abspath(__file__), lambda t: os.symlink(secret, t))
    elif variant != "own":
        raise SystemExit(f"unknown variant {variant}")
    # SIGUSR1 (the test, once its recording is over) ends the run early
    stop = []
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
    print("ready", os.getpid(), flush=True)
    t0 = time.time()
    while time.time() - t0 < secs and not stop:
        burn(5000)
    print("ok", flush=True)


main()
