"""Two greenlets for argv[1] seconds, main -> a -> b -> main in turn: one
computes (fib), the other sums a generator. Each was started from a switch()
of another (a from main, b from a), so each runs on top of a suspended C stack
that is not its own: a native unwind goes from the greenlet's evaluation
loop down through greenlet's start (g_initialstub) into the parent's
evaluation loop, whose Python frames are not in the running chain."""
import sys
import time

import greenlet


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def worker_a(other):
    while True:
        fib(14)
        other[0].switch()


def worker_b(home):
    while True:
        sum(i * i for i in range(3000))
        home.switch()


def main(secs):
    rb, home = [None], greenlet.getcurrent()
    a = greenlet.greenlet(lambda: worker_a(rb))
    b = greenlet.greenlet(lambda: worker_b(home))
    rb[0] = b
    stop = time.time() + secs
    # main -> a -> b -> main, and again: a resumes after its switch to b
    while time.time() < stop:
        a.switch()


main(float(sys.argv[1]))
