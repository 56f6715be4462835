"""A known line heat in two files (tests/test_views_html.py).

argv: SECONDS. Each round spends about three quarters of its CPU on the
line marked HOT in heat_lib.py and a quarter on the line marked WARM here;
both lines call only C code (sum, range), so their frames' own time stays
on them. Prints "ready" once the functions are imported, "ok" at the end.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heat_lib  # noqa: E402


def warm(n):
    return sum([i * i for i in range(n)])  # WARM


def main():
    secs = float(sys.argv[1])
    print("ready", os.getpid(), flush=True)
    t0 = time.time()
    while time.time() - t0 < secs:
        heat_lib.hot(30000)
        warm(10000)
    print("ok", flush=True)


main()
