"""The kernel matrix's target (tests/kernels/checks.py, issue #33): one thread
of each kind a mode looks for, each in a function of its own.

    python kernel_mix.py READY [mix|async|spawn|zlib]

mix (the default): busy() spins in hot_spot() (cpu, gil, --native,
--opcodes), sleeper() sleeps in idle_wait() (off-cpu, wall), raiser()
spends its time in in_handler() inside an except block (exception mode),
sys_worker() stats "/" in stat_loop() (--kernel). async: an event loop
whose task async_busy() calls hot_spot() (--async, 3.14+). spawn: busy()
in this process while spawn_loop() starts a child running child_hot()
every 0.3 s (--subprocesses). zlib: zlib_worker() alone on the CPU, its
compress_spot() spending its time in zlib's C code (--native: a C library's
function under the Python frame that called it). READY is written once the
threads run. On SIGUSR1 the interpreter writes its own traceback of every
thread to READY.tb (faulthandler, from the signal handler: no Python frame
of its own), what `dump` is compared with.
"""
import asyncio
import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
import zlib


def hot_spot(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def busy():
    while True:
        hot_spot(20000)


def idle_wait():
    time.sleep(0.05)


def sleeper():
    while True:
        idle_wait()


def in_handler():
    x = 0
    for i in range(5000):
        x += i
    return x


def raiser():
    while True:
        try:
            raise KeyError("k")
        except KeyError:
            in_handler()
        time.sleep(0.001)


def stat_loop():
    for _ in range(200):
        os.stat("/")


def sys_worker():
    while True:
        stat_loop()
        time.sleep(0.002)


def compress_spot(data):
    for _ in range(20):
        zlib.compress(data, 9)


def zlib_worker():
    data = os.urandom(1 << 14) * 4
    while True:
        compress_spot(data)


async def async_busy():
    while True:
        hot_spot(20000)
        await asyncio.sleep(0)


async def async_main():
    await asyncio.gather(asyncio.create_task(async_busy(), name="busy-task"))


CHILD = ("def child_hot(n):\n"
         "    x = 0\n"
         "    for i in range(n):\n"
         "        x += i * i\n"
         "    return x\n"
         "child_hot(3_000_000)\n")


def spawn_loop():
    while True:
        subprocess.run([sys.executable, "-c", CHILD], check=True)
        time.sleep(0.3)


def ready(path):
    tb = open(path + ".tb", "w")
    faulthandler.register(signal.SIGUSR1, file=tb, all_threads=True)
    ready.tb = tb      # kept open for the handler
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(path + ".tmp", path)


def main():
    path, kind = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "mix")
    if kind == "async":
        ready(path)
        asyncio.run(async_main())
        return
    workers = {"mix": (sleeper, raiser, sys_worker), "spawn": (spawn_loop,),
               "zlib": (zlib_worker,)}[kind]
    for w in workers:
        threading.Thread(target=w, name=w.__name__, daemon=True).start()
    ready(path)
    if kind == "zlib":
        while True:     # the CPU is zlib_worker's
            time.sleep(1)
    busy()


if __name__ == "__main__":
    main()
