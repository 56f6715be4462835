"""A target whose stacks and threads never stop changing, and which exits on
its own: for dumping while it changes and while it goes away.

    python churn.py READY LIFETIME

Keeps about 16 short-lived threads running, each recursing to a random depth
and returning; the main thread recurses and unwinds too. Writes READY
(atomically) once running, then exits with os._exit(0) LIFETIME seconds later
(LIFETIME <= 0: never). Runs on CPython 3.8+.
"""
import os
import random
import sys
import threading
import time

READY = sys.argv[1]
LIFETIME = float(sys.argv[2])


def down(n, then):
    if n <= 0:
        return then()
    return down(n - 1, then) + 1


def brief():
    time.sleep(random.random() * 0.003)
    return 0


def worker():
    for _ in range(random.randint(1, 20)):
        down(random.randint(1, 150), brief)


def spawner():
    alive = []
    while True:
        alive = [t for t in alive if t.is_alive()]
        while len(alive) < 16:
            t = threading.Thread(target=worker, daemon=True)
            t.start()
            alive.append(t)
        time.sleep(0.001)


def busy():
    x = 0
    for i in range(random.randint(100, 3000)):
        x += i * i
    return x


def main():
    threading.Thread(target=spawner, name="spawner", daemon=True).start()
    time.sleep(0.05)
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(READY + ".tmp", READY)
    end = time.monotonic() + LIFETIME if LIFETIME > 0 else float("inf")
    while time.monotonic() < end:
        down(random.randint(1, 100), busy)
    os._exit(0)


if __name__ == "__main__":
    main()
