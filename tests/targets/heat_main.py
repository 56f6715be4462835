"""A known line heat in two files (tests/test_views_html.py).

argv: SECONDS. Each round (of random length) spends about three quarters of its CPU on the
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
    k = 0
    while time.time() - t0 < secs:
        # Sizes that wander (means 30000 and 10000, as a Weyl sequence
        # spreads them): a fixed round (~2.5 ms) is half the 199 Hz period,
        # and the ticks locked onto its phase (0.91 of the two lines' samples
        # on the first where 0.75 is the truth, in a CI run). Arithmetic, not
        # the random module: its lines would be on the page.
        k += 1
        heat_lib.hot(15000 + (k * 7919) % 30001)
        warm(5000 + (k * 104729) % 10001)
    print("ok", flush=True)


main()
