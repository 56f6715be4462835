"""A target whose frame cache anchor keeps moving the way the interpreter
moves it: every thread serves "requests" in a loop, each a call chain
r1 -> r2 -> ... -> rN in which every frame works a little before and after
calling the next, so frames return all the time at every depth and an
anchor set on one of them is moved to its caller (sequence + 1) again and
again between two samples.

    python unwinding.py READY [--threads T] [--depth N] [--base B]

With --base B every thread serves from B frames of recursion (below()),
so that a walk down to the base frame is long and a moved anchor that
cannot be spliced onto costs a long walk.

Writes READY (atomically: JSON with the pid) once running; runs until
killed. Runs on CPython 3.11+.
"""
import json
import os
import sys
import threading

args = sys.argv[1:]
READY = args[0]
THREADS = int(args[args.index("--threads") + 1]) if "--threads" in args else 1
DEPTH = int(args[args.index("--depth") + 1]) if "--depth" in args else 20
BASE = int(args[args.index("--base") + 1]) if "--base" in args else 0
WORK = 40


def work():
    x = 0
    for i in range(WORK):
        x += i
    return x


def make_chain():
    """r1 ... rN: each works, calls the next, works again."""
    src = []
    for i in range(1, DEPTH + 1):
        call = f"r{i + 1}()" if i < DEPTH else "work()"
        src.append(f"def r{i}():\n    work()\n    {call}\n    work()\n")
    ns = {"work": work}
    exec("".join(src), ns)
    return ns["r1"]


def serve():
    r1 = make_chain()
    while True:
        r1()


def below(n):
    if n > 0:
        return below(n - 1)
    return serve()


def main():
    for _ in range(THREADS - 1):
        threading.Thread(target=below, args=(BASE,), daemon=True).start()
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "depth": DEPTH, "base": BASE, "threads": THREADS}, f)
    os.replace(READY + ".tmp", READY)
    sys.setrecursionlimit(BASE + DEPTH + 1000)
    below(BASE)


if __name__ == "__main__":
    main()
