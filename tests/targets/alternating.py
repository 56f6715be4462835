"""A target whose threads alternate between two equally deep call chains,
a1 -> a2 -> ... -> aN and b1 -> b2 -> ... -> bN, called from the same
frame, so that the frames of one chain land at the addresses the other
chain's frames just left: a profiler that trusts a reused frame address
splices callers of one chain under frames of the other.

    python alternating.py READY [--threads T] [--depth N] [--hostile]

Every leaf does a little CPU work so that samples land at every depth.
Writes READY (atomically: JSON with the pid) once running; runs until
killed. Runs on CPython 3.11+.

--hostile (CPython 3.15 only): the target also plays a racy profiler
against itself. Now and then, after the a-chain returned, it writes the
address of the a-chain's innermost frame, dead by then, into its own
tstate->last_profiled_frame without touching last_profiled_frame_seq,
just before the b-chain's innermost frame takes that address: the anchor
then sits on a reused address with an unchanged sequence. (This is what a
profiler writing the anchor while the thread runs can do.) The target
finds the thread-state fields itself and checks the interpreter's anchor
protocol before relying on it (tstate_anchor.py, staged next to this
script); READY says whether hostile mode is on.
"""
import json
import os
import sys
import threading

sys.dont_write_bytecode = True      # no __pycache__ next to the targets
from tstate_anchor import U64, Anchor, protocol_works  # noqa: E402

args = sys.argv[1:]
READY = args[0]
THREADS = int(args[args.index("--threads") + 1]) if "--threads" in args else 2
DEPTH = int(args[args.index("--depth") + 1]) if "--depth" in args else 30
HOSTILE = "--hostile" in args
WORK = 60


def spin():
    x = 0
    for i in range(WORK):
        x += i
    return x


def make_chain(prefix):
    """prefix1 ... prefixN, each calling the next; the last one spins, then
    calls here() (a no-op, or for --hostile the recorder of its address)."""
    src = []
    for i in range(1, DEPTH + 1):
        body = f"return {prefix}{i + 1}()" if i < DEPTH else "spin()\n    return here()"
        src.append(f"def {prefix}{i}():\n    {body}\n")
    ns = {"spin": spin, "here": lambda: 0}
    exec("".join(src), ns)
    return ns


# --------------------------------------------------------------------------

def worker(hostile):
    a, b = make_chain("a"), make_chain("b")
    anchor = None
    if hostile:
        anchor = Anchor()
        leaf = {}

        # One frame above the leaf: the leaf is this frame's caller.

        def here():
            f = U64.from_address(anchor.cur).value
            leaf["addr"] = U64.from_address(f + 8).value
            return 0
        a["here"] = b["here"] = here
    a1, b1 = a["a1"], b["b1"]
    n = 0
    while True:
        a1()
        if anchor is not None and n % 7 == 0:
            # The a-chain's leaf is gone; b's leaf will take its address.
            anchor.set(leaf["addr"])
        b1()
        n += 1


def main():
    hostile = False
    if HOSTILE:
        try:
            hostile = protocol_works(Anchor())
        except (RuntimeError, ValueError, OSError):
            hostile = False
    threads = [threading.Thread(target=worker, args=(hostile,), daemon=True)
               for _ in range(THREADS - 1)]
    for t in threads:
        t.start()
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "hostile": hostile, "depth": DEPTH,
                   "threads": THREADS}, f)
    os.replace(READY + ".tmp", READY)
    worker(hostile)


if __name__ == "__main__":
    main()
