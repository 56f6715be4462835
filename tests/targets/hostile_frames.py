"""A target that corrupts its own frames, code objects and thread-state list
while it is sampled (issue #23, the hostile-target suite).

    python hostile_frames.py MODE READY STOP LIFETIME

MODE "frames" cycles through, on the main thread:
  loop_self      run_loop_self's frame: `previous` = itself
  loop_younger   run_loop_younger's frame: `previous` = its callee's frame
                 (a younger one: the chain loops callee -> caller -> callee)
  prev_unmapped  run_prev_unmapped's frame: `previous` into an unmapped page
  prev_garbage   run_prev_garbage's frame: `previous` into a bytes object's
                 data (a "frame" of garbage)
  code_unmapped  run_code_unmapped's frame: code pointer into an unmapped page
  code_noncode   run_code_noncode's frame: code pointer at a bytes object
  linetable      spin_linetable's code object (a fresh one each time): its
                 co_linetable bytes' ob_size = 2 GB
  clean          nothing corrupted (spin_clean must still show, named)
MODE "tstate" cycles, with a second thread sleeping (so the interpreter's
thread list is head=worker -> main -> NULL):
  tstate_self     main's tstate->next = main (the list ends in a self-loop)
  tstate_earlier  main's tstate->next = worker (back to the head)
  tstate_head     worker's tstate->next = worker (main is cut off the list)
  clean

Each corruption is made by spin_KIND (the leaf) on its caller run_KIND (or
on itself), held while spin_KIND burns ~50 ms of CPU (so the BPF backend,
which samples threads on a CPU, sees it), and undone before spin_KIND
returns: a frame's `previous` and code are read by the interpreter itself
when the frame returns or is walked, so leaving them would crash it. Every
stack is <module> -> main -> cycle -> run_KIND -> spin_KIND.

How the layouts are found (at run time, the same code on 3.11 to 3.15):
  - the interpreter frame of a frame object: PyFrameObject is
    {PyObject_HEAD, f_back, f_frame, ...} on 3.11-3.15, so f_frame is the
    pointer at object.__basicsize__ + 8 (16 + 8: no build here has
    Py_TRACE_REFS; the basic size says so if one did);
  - the code field (f_code on 3.11/3.12, f_executable on 3.13+, a tagged
    _PyStackRef on 3.14+ whose low bits are kept) and `previous`: found by
    scanning the first 16 words of the leaf's interpreter frame for id(its
    code) (low 3 bits masked) and for its caller's interpreter frame; each
    must match exactly one word, or the target refuses to run;
  - PyThreadState starts {prev, next, interp} on 3.11-3.15: checked at run
    time (main's prev is the worker, the worker's next is main, both from
    PyThreadState_Get in each thread);
  - a bytes object's ob_size is at object.__basicsize__ (PyVarObject).
The garbage collector is disabled for the target's life: a collection
walks every thread's frames on 3.14+ (and would meet the corruption).

When STOP exists (or LIFETIME seconds passed), the target checks it still
works: exceptions with tracebacks through the once-corrupted frames,
sys._current_frames() over the thread list, a full gc.collect(), line
numbers of the once-corrupted code; then prints "ok CHECKSUM" and exits 0.
"""
import ctypes
import gc
import mmap
import os
import sys
import threading
import time
import types

MODE, READY, STOP = sys.argv[1], sys.argv[2], sys.argv[3]
LIFETIME = float(sys.argv[4])
SPIN = 0.05
HDR = object.__basicsize__
u64 = ctypes.c_uint64
perf_counter = time.perf_counter


def iframe(depth):
    """The _PyInterpreterFrame address of the frame `depth` levels above the
    caller of iframe."""
    f = sys._getframe(depth + 1)
    return u64.from_address(id(f) + HDR + 8).value


def calibrate():
    """(offset of the code field, offset of `previous`) in an interpreter
    frame."""
    def callee():
        me, parent = iframe(0), iframe(1)
        code = id(sys._getframe(0).f_code)
        words = [u64.from_address(me + 8 * i).value for i in range(16)]
        c = [i for i, w in enumerate(words) if w & ~7 == code]
        p = [i for i, w in enumerate(words) if w == parent]
        if len(c) != 1 or len(p) != 1:
            raise SystemExit(f"cannot find the frame layout: code at {c}, previous at {p}")
        return 8 * c[0], 8 * p[0]
    return callee()


CODE_OFF, PREV_OFF = calibrate()


def unmapped_page():
    """The address of a page that is not mapped: the middle of three pages,
    the outer two kept PROT_NONE so nothing else is mapped there."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    base = libc.mmap(None, 3 * mmap.PAGESIZE, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        raise SystemExit("mmap failed")
    if libc.munmap(base + mmap.PAGESIZE, mmap.PAGESIZE):
        raise SystemExit("munmap failed")
    return base + mmap.PAGESIZE + 0x40


UNMAPPED = unmapped_page()
NONCODE = bytes(range(256)) * 4    # 1 KB of bytes where a code object should be


# --------------------------------------------------------------------------
# the corruptions: each spin_KIND corrupts, burns SPIN seconds, restores.
# Each is written out whole, not through a shared helper: the frame corrupted
# is the spin function's own (iframe(1)), the one the samples land in.

def spin_loop_self(dur):
    slot = u64.from_address(iframe(1) + PREV_OFF)
    saved, bad = slot.value, iframe(1)
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_loop_younger(dur):
    slot = u64.from_address(iframe(1) + PREV_OFF)
    saved, bad = slot.value, iframe(0)
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_prev_unmapped(dur):
    slot = u64.from_address(iframe(1) + PREV_OFF)
    saved, bad = slot.value, UNMAPPED
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_prev_garbage(dur):
    slot = u64.from_address(iframe(1) + PREV_OFF)
    saved, bad = slot.value, id(NONCODE) + 64
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_code_unmapped(dur):
    slot = u64.from_address(iframe(1) + CODE_OFF)
    saved = slot.value
    bad = UNMAPPED | (saved & 7)
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_code_noncode(dur):
    slot = u64.from_address(iframe(1) + CODE_OFF)
    saved = slot.value
    bad = id(NONCODE) | (saved & 7)
    end = perf_counter() + dur
    slot.value = bad
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_linetable(dur):
    end = perf_counter() + dur
    while perf_counter() < end:  # LINE:linetable
        pass


def spin_clean(dur):
    end = perf_counter() + dur
    while perf_counter() < end:  # LINE:clean
        pass


def run_loop_self():
    spin_loop_self(SPIN)


def run_loop_younger():
    spin_loop_younger(SPIN)


def run_prev_unmapped():
    spin_prev_unmapped(SPIN)


def run_prev_garbage():
    spin_prev_garbage(SPIN)


def run_code_unmapped():
    spin_code_unmapped(SPIN)


def run_code_noncode():
    spin_code_noncode(SPIN)


LT_CODE = spin_linetable.__code__


def run_linetable():
    # A fresh code object with its own line table each time, so a profiler
    # that remembers code objects meets the corrupted table as new.
    code = LT_CODE.replace(co_linetable=bytes(bytearray(LT_CODE.co_linetable)))
    fn = types.FunctionType(code, globals(), "spin_linetable")
    size = ctypes.c_ssize_t.from_address(id(code.co_linetable) + HDR)
    saved = size.value
    size.value = 2 << 30
    try:
        fn(SPIN)
    finally:
        size.value = saved


def run_clean():
    spin_clean(SPIN / 2)


# thread states

tstate_get = ctypes.pythonapi.PyThreadState_Get
tstate_get.restype = ctypes.c_void_p
WORKER_TSTATE = []
worker_ready = threading.Event()


def worker():
    WORKER_TSTATE.append(tstate_get())
    worker_ready.set()
    while True:
        time.sleep(0.005)


def spin_tstate(dur, who, target):
    slot = u64.from_address(who + 8)
    saved = slot.value
    end = perf_counter() + dur
    slot.value = target
    try:
        while perf_counter() < end:
            pass
    finally:
        slot.value = saved


def spin_tstate_self(dur):
    spin_tstate(dur, MAIN_TSTATE, MAIN_TSTATE)


def spin_tstate_earlier(dur):
    spin_tstate(dur, MAIN_TSTATE, WORKER_TSTATE[0])


def spin_tstate_head(dur):
    spin_tstate(dur, WORKER_TSTATE[0], WORKER_TSTATE[0])


def run_tstate_self():
    spin_tstate_self(SPIN)


def run_tstate_earlier():
    spin_tstate_earlier(SPIN)


def run_tstate_head():
    spin_tstate_head(SPIN)


KINDS = {
    "frames": [run_loop_self, run_clean, run_loop_younger, run_clean, run_code_unmapped,
               run_clean, run_code_noncode, run_clean, run_linetable, run_clean,
               run_prev_unmapped, run_clean, run_prev_garbage, run_clean],
    "tstate": [run_tstate_self, run_clean, run_tstate_earlier, run_clean, run_tstate_head,
               run_clean],
}


def cycle(kinds, deadline):
    n = 0
    while not os.path.exists(STOP) and time.monotonic() < deadline:
        for k in kinds:
            k()
        n += 1
    return n


def check():
    """That the interpreter still works after the corruptions."""
    def deep(n):
        if n == 0:
            raise ValueError("x")
        return deep(n - 1)
    try:
        deep(20)
    except ValueError as e:
        tb, depth = e.__traceback__, 0
        while tb:
            depth += 1
            tb = tb.tb_next
        assert depth == 22, depth
    frames = sys._current_frames()
    assert threading.get_ident() in frames, frames
    if MODE == "tstate":
        assert len(frames) == 2, frames
    gc.enable()
    gc.collect()
    lines = [ln for _, _, ln in LT_CODE.co_lines() if ln]
    assert lines and max(lines) < 1000, lines
    run_linetable()
    run_loop_self()
    run_code_noncode()
    return sum(i * i for i in range(100000))


MAIN_TSTATE = tstate_get()


def main():
    gc.disable()
    if MODE == "tstate":
        threading.Thread(target=worker, daemon=True).start()
        worker_ready.wait()
        # the list is head=worker -> main: check the layout we write
        if u64.from_address(WORKER_TSTATE[0] + 8).value != MAIN_TSTATE or \
                u64.from_address(MAIN_TSTATE).value != WORKER_TSTATE[0]:
            raise SystemExit("PyThreadState does not start {prev, next}")
    kinds = KINDS[MODE]
    for k in kinds:            # once before READY: everything runs
        k()
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(READY + ".tmp", READY)
    n = cycle(kinds, time.monotonic() + LIFETIME)
    print(f"ok {check()} cycles {n}", flush=True)


if __name__ == "__main__":
    main()
