"""The calling thread's own frame cache fields, found and used from Python
with ctypes (shared by the frame cache targets: alternating.py,
anchor_watch.py; the tests stage it next to them).

CPython 3.15's thread state holds current_frame, base_frame,
last_profiled_frame (the anchor) and last_profiled_frame_seq as consecutive
words; a frame's f_executable is its first word (a tagged reference to the
code object) and `previous` its second. The fields are found, not assumed:
find_current_frame_offset() looks for the word that points at its own
frame, and protocol_works() checks the anchor protocol (which writes the
anchor: run it on a thread state that does not matter). Importable on any
CPython 3.11+; only the 3.15 layout is meaningful.
"""
import ctypes
import os

U64 = ctypes.c_uint64
PREVIOUS = 8            # offset of a frame's `previous` pointer


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
    """The calling thread's current_frame, last_profiled_frame and
    last_profiled_frame_seq. Use it from the thread that created it."""

    def __init__(self):
        ts = tstate_addr()
        cur = find_current_frame_offset(ts)
        if cur is None:
            raise RuntimeError("current_frame not found")
        self.ts = ts
        self.cur_off = cur
        self.cur = ts + cur
        self.lpf = ts + cur + 16
        self.seq = ts + cur + 24

    def caller(self):
        """The frame that called this method."""
        return U64.from_address(U64.from_address(self.cur).value + PREVIOUS).value

    def get(self):
        return U64.from_address(self.lpf).value, U64.from_address(self.seq).value

    def get_consistent(self):
        """(anchor, sequence), read again while the sequence changed under
        the read (a profiler writes both at once from outside)."""
        while True:
            s0 = U64.from_address(self.seq).value
            a = U64.from_address(self.lpf).value
            if U64.from_address(self.seq).value == s0:
                return a, s0

    def set(self, addr):
        U64.from_address(self.lpf).value = addr

    @staticmethod
    def chain_from(frame, limit=100_000):
        """Frame addresses from `frame` outwards along `previous` pointers
        (interpreter-owned frames included), innermost first."""
        out = []
        while frame and len(out) < limit:
            out.append(frame)
            frame = U64.from_address(frame + PREVIOUS).value
        return out

    def chain(self):
        """The chain of the frame that calls this method."""
        me = U64.from_address(self.cur).value
        return self.chain_from(U64.from_address(me + PREVIOUS).value)


def protocol_works(anchor):
    """Anchor this callee's frame, return: the anchor must move to the
    caller and the sequence grow by one. (Writes the anchor.)"""
    def callee():
        f = anchor.caller()
        anchor.set(f)
        return f
    me = anchor.caller()
    _, s0 = anchor.get()
    callee()
    a, s1 = anchor.get()
    return a == me and s1 == s0 + 1
