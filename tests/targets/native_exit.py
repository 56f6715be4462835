"""A program whose last moments run no Python code, for tests/test_native.py:
it spins in Python for a while (samples with Python frames), then leaves
~400,000 objects in reference cycles behind in a module global and returns.
The interpreter's finalization frees them (its garbage collector and the
module teardown), with no Python frame on the stack: --native must show
those samples whole (native frames down to the thread's first), not cut as
if the Python frames of an earlier sample were still to be placed.

    python native_exit.py
"""
import time


def spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


class Node:
    __slots__ = ("peer", "data")


def make_cycles(n):
    out = []
    for i in range(n):
        a, b = Node(), Node()
        a.peer, b.peer = b, a
        a.data = b.data = [i]
        out.append(a)
    return out


spin(0.3)
KEEP = make_cycles(200_000)
spin(0.1)
