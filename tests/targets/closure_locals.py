"""A thread parked in a closure, for dump --locals' free variables.

    python closure_locals.py READY

outer() binds n, s and b, and calls inner(), whose frame reads them as free
variables (cells it shares with outer's frame) beside a local of its own,
and sleeps there. READY (JSON, atomically): the pid and the reprs of
inner's and outer's variables, as the target itself sees them. Runs until
killed.
"""
import json
import os
import sys
import time

READY = sys.argv[1]


def outer():
    n = 41
    s = "free var"
    b = b"\x01cell"

    def inner():
        own = n + 1
        seen = {"inner": {"n": repr(n), "s": repr(s), "b": repr(b), "own": repr(own)},
                "outer": {"n": repr(n), "s": repr(s), "b": repr(b)}}
        tmp = READY + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "locals": seen}, f)
        os.rename(tmp, READY)
        while True:
            time.sleep(1)
            own = n + 1

    inner()


outer()
