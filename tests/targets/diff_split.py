"""CPU split between two functions by a parameter, for report --diff
(tests/test_views_html.py).

argv: SHARE SECONDS. Each round spends SHARE of its work in alpha(), the
rest in beta(), and a fifth as much in steady(); all three run the same loop.
"""
import os
import sys
import time


def work(n):
    return sum([i * i for i in range(n)])


def alpha(n):
    return work(n)


def beta(n):
    return work(n)


def steady(n):
    return work(n)


def main():
    share, secs = float(sys.argv[1]), float(sys.argv[2])
    a = int(40000 * share)
    print("ready", os.getpid(), flush=True)
    t0 = time.time()
    while time.time() - t0 < secs:
        alpha(a)
        beta(40000 - a)
        steady(8000)
    print("ok", flush=True)


main()
