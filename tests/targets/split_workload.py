"""A CPU-bound target with a known split, under a fixed 30-deep stack, that
times itself.

    python split_workload.py LAYOUT STATS [LIFETIME [_exit|raise|exec]]

The only thread runs, forever (or LIFETIME seconds after writing LAYOUT, then
os._exit(0), or with "raise" a SystemExit that unwinds the stack and lets the
interpreter finalize normally, or with "exec" an execv() of the same
interpreter spinning in a one-line program: same pid, another image):

    <module> -> main -> rec x30 -> cycle -> hot | warm

cycle() alternates hot(2m) and warm(m): the same loop, so hot does 2/3 of
the work and warm 1/3 (m jitters by up to 25% from cycle to cycle so the
calls never lock in phase with a sampling period). Around every call cycle()
reads time.thread_time_ns() and time.perf_counter_ns(); after every cycle it
replaces STATS (one line, whitespace-separated integers):

    cycles hot_cpu_ns warm_cpu_ns hot_wall_ns warm_wall_ns thread_cpu_ns

so a test can take the difference between two reads around a recording.
Everything cycle() does between the calls is builtins (no Python frame), so
the only Python stacks the thread ever has while it cycles are the ones
above, with cycle() at any of its lines when neither hot nor warm runs.

Before entering the stack it writes LAYOUT (JSON, atomically): the version,
its pid and native thread id as it sees them, m, and for hot, warm, cycle, rec,
main and <module> the lines their code objects hold (co_lines() of this very
interpreter) and their co_firstlineno, so a test knows which lines exist where. The call sites are
marked in the source with `# LINE:<caller>-><callee>` comments. Runs on CPython 3.11+.
"""
import json
import os
import sys
import threading
import time

LAYOUT = sys.argv[1]
STATS = sys.argv[2]
LIFETIME = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
HOW = sys.argv[4] if len(sys.argv) > 4 else "_exit"
DEPTH = 30


def hot(n):
    x = 0
    for i in range(n):  # LOOP:hot
        x += i * i  # LOOP:hot
    return x


def warm(n):
    x = 0
    for i in range(n):  # LOOP:warm
        x += i * i  # LOOP:warm
    return x


def cycle(m, end):
    tt = time.thread_time_ns
    pc = time.perf_counter_ns
    mono = time.monotonic
    replace = os.replace
    tmp = STATS + ".tmp"
    cycles = hot_ns = warm_ns = hot_wall = warm_wall = 0
    j = 12345
    while True:
        j = (j * 1103515245 + 12345) & 0x7FFFFFFF
        k = m + j % (m // 2) - m // 4
        w0 = pc()
        t0 = tt()
        hot(2 * k)  # LINE:cycle->hot
        t1 = tt()
        w1 = pc()
        warm(k)  # LINE:cycle->warm
        t2 = tt()
        w2 = pc()
        hot_ns += t1 - t0
        warm_ns += t2 - t1
        hot_wall += w1 - w0
        warm_wall += w2 - w1
        cycles += 1
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"%d %d %d %d %d %d\n" % (cycles, hot_ns, warm_ns, hot_wall,
                                                  warm_wall, t2))
        os.close(fd)
        replace(tmp, STATS)
        if end and mono() > end:
            if HOW == "raise":
                raise SystemExit(0)
            if HOW == "exec":
                os.execv(sys.executable, [sys.executable, "-c", "while True: pass"])
            os._exit(0)


def rec(n, m, end):
    if n > 1:
        return rec(n - 1, m, end)  # LINE:rec->rec
    return cycle(m, end)  # LINE:rec->cycle


def code_lines(code):
    return sorted({ln for _, _, ln in code.co_lines() if ln is not None})


def calibrate():
    """m such that warm(m) takes about 15 ms of CPU here."""
    m = 20000
    while True:
        t0 = time.thread_time_ns()
        warm(m)
        dt = time.thread_time_ns() - t0
        if dt > 5_000_000 or m > 1 << 28:
            return max(1000, int(m * 15_000_000 / max(dt, 1)))
        m *= 4


def main():
    m = calibrate()
    layout = {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "pid": os.getpid(),
        "tid": threading.get_native_id(),
        "m": m,
        "depth": DEPTH,
        "file": __file__,
        "lines": {name: code_lines(f.__code__) for name, f in
                  (("hot", hot), ("warm", warm), ("cycle", cycle), ("rec", rec),
                   ("main", main))},
        "module_lines": code_lines(sys._getframe(1).f_code),
        "first": {name: f.__code__.co_firstlineno for name, f in
                  (("hot", hot), ("warm", warm), ("cycle", cycle), ("rec", rec),
                   ("main", main))},
    }
    layout["first"]["<module>"] = sys._getframe(1).f_code.co_firstlineno
    with open(LAYOUT + ".tmp", "w") as f:
        json.dump(layout, f)
    os.replace(LAYOUT + ".tmp", LAYOUT)
    end = time.monotonic() + LIFETIME if LIFETIME > 0 else 0
    rec(DEPTH, m, end)  # LINE:main->rec


if __name__ == "__main__":
    main()  # LINE:<module>->main
