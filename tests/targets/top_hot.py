"""A target for tests/test_top.py: a known hot function.

    top_hot.py READY_FILE [SECONDS] [--thread] [--until=STOP_FILE]

The main thread runs driver() -> hot_leaf() (about three quarters of its
time, own) and warm_leaf() (a quarter); driver() itself does nothing, so it
has a total share near 100% and an own share near 0. With --thread a second
thread, named "side", runs side_loop() -> side_leaf(). Writes READY_FILE once
running; exits after SECONDS (default: never), or once STOP_FILE exists
(looked at every 0.1 s).
"""
import os
import sys
import threading
import time


def hot_leaf():
    x = 0
    for i in range(30000):
        x += i * i
    return x


def warm_leaf():
    x = 0
    for i in range(10000):
        x += i ^ 7
    return x


def driver(end, until):
    check = 0.0
    while end is None or time.monotonic() < end:
        hot_leaf()
        warm_leaf()
        if until and time.monotonic() >= check:
            check = time.monotonic() + 0.1
            if os.path.exists(until):
                return


def side_leaf():
    x = 0
    for i in range(20000):
        x += i % 3
    return x


def side_loop():
    while True:
        side_leaf()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seconds = float(args[1]) if len(args) > 1 else None
    if "--thread" in sys.argv:
        threading.Thread(target=side_loop, name="side", daemon=True).start()
    with open(args[0], "w") as f:
        f.write("ready")
    until = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--until=")), None)
    driver(time.monotonic() + seconds if seconds else None, until)


main()
