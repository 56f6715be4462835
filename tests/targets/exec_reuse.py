"""A target that keeps freeing code objects and creating new ones at the
same addresses: a profiler that identifies code by address alone shows a
dead function's name (or line) for the live one.

    python exec_reuse.py READY LOG

Generation g defines one function, gen_<g>, by exec() of a fresh source
text (the same file name, "<reuse>", every time; the function's body
starts 10 * (g % 5) lines lower each generation), calls it in a hot loop from
drive(), then drops it: function and code object are freed, and the next
generation's code object usually lands at the same address.

LOG gets one line per generation, "g code_address t0_ns t1_ns line":
CLOCK_MONOTONIC just before the first call and just after the last one
(the only times gen_<g> can be on the stack), and the line of the loop
that runs inside it. Lines are written in batches; READY (JSON with the
pid) is written once the first batch is out. Runs until killed. Runs on
CPython 3.11+.
"""
import json
import os
import sys
import time

READY, LOG = sys.argv[1], sys.argv[2]
CALLS = 40
BATCH = 50


def source(g):
    """gen_<g>'s source, and the line of its loop (its def is at loop - 2,
    its last line at loop + 2)."""
    pad = 10 * (g % 5)
    return ("\n" * pad +
            f"def gen_{g}(n):\n"
            f"    x = 0\n"
            f"    for i in range(n):\n"
            f"        x += i * i\n"
            f"    return x\n"), pad + 3


def drive(fn, calls):
    x = 0
    for _ in range(calls):
        x += fn(300)
    return x


def main():
    log = open(LOG, "w")
    lines = []
    ready = False
    g = 0
    while True:
        src, line = source(g)
        ns = {}
        exec(compile(src, "<reuse>", "exec"), ns)
        fn = ns[f"gen_{g}"]
        addr = id(fn.__code__)
        t0 = time.monotonic_ns()
        drive(fn, CALLS)
        t1 = time.monotonic_ns()
        del fn, ns
        lines.append(f"{g} {addr:#x} {t0} {t1} {line}\n")
        g += 1
        if len(lines) >= BATCH:
            log.writelines(lines)
            log.flush()
            lines.clear()
            if not ready:
                with open(READY + ".tmp", "w") as f:
                    json.dump({"pid": os.getpid()}, f)
                os.replace(READY + ".tmp", READY)
                ready = True


if __name__ == "__main__":
    main()
