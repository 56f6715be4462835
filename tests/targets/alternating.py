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
protocol before relying on it; READY says whether hostile mode is on.
"""
import ctypes
import json
import os
import sys
import threading

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
# Thread-state fields, for --hostile (3.15: current_frame, base_frame,
# last_profiled_frame, last_profiled_frame_seq are consecutive words).

U64 = ctypes.c_uint64


def tstate_addr():
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    return get()


def find_current_frame_offset(ts):
    """The word of the thread state that points at the running frame:
    a frame whose f_executable (offset 0, a tagged reference) is this
    function's code object. Words that may not be pointers are read by
    write(2) into a pipe, where a bad address is EFAULT, not a crash (a
    chroot may have no /proc)."""
    code = id(find_current_frame_offset.__code__)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    libc.write.restype = ctypes.c_ssize_t
    r, w = os.pipe()
    try:
        for off in range(0, 512, 8):
            p = U64.from_address(ts + off).value
            if not p or p % 8 or libc.write(w, p, 8) != 8:
                continue
            if int.from_bytes(os.read(r, 8), "little") & ~7 == code:
                return off
    finally:
        os.close(r)
        os.close(w)
    return None


class Anchor:
    def __init__(self):
        ts = tstate_addr()
        cur = find_current_frame_offset(ts)
        if cur is None:
            raise RuntimeError("current_frame not found")
        self.ts = ts
        self.cur = ts + cur
        self.lpf = ts + cur + 16
        self.seq = ts + cur + 24

    def caller(self):
        """The frame that called this method."""
        return U64.from_address(U64.from_address(self.cur).value + 8).value

    def get(self):
        return U64.from_address(self.lpf).value, U64.from_address(self.seq).value

    def set(self, addr):
        U64.from_address(self.lpf).value = addr


def protocol_works(anchor):
    """Anchor this callee's frame, return: the anchor must move to the
    caller and the sequence grow by one."""
    def callee():
        f = anchor.caller()
        anchor.set(f)
        return f
    me = anchor.caller()
    _, s0 = anchor.get()
    callee()
    a, s1 = anchor.get()
    return a == me and s1 == s0 + 1


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
