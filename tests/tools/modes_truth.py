"""What the threads of tests/targets/modes_mix.py really did over a window:
the truth tests/test_modes.py holds pyprof-bpf's modes against.

Sources, none of them pyprof-bpf:

- The kernel's view of each thread, read from outside the target (no GIL, no
  system call in it) by a poller process whose polling thread runs
  SCHED_FIFO, so that its readings come when it means them to (every 0.25
  to 0.75 ms at random, 0.5 on average: a fixed period would beat with the
  profiler's own 999 Hz timer) whatever the target does:
  - the thread's state in /proc/PID/task/TID/stat at every poll: R (on a CPU
    or runnable, waiting for one), S (interruptible sleep), D
    (uninterruptible sleep). The share of the polls in a state estimates the
    time in it; the error of that estimate is the polls' quantisation at the
    ends of each stretch in the state (~ period * sqrt(stretches / 6)).
  - its time on a CPU, /proc/PID/task/TID/schedstat's first field
    (se.sum_exec_runtime), every 5 ms, interpolated at the window's ends.
  So CPU = the schedstat delta, runnable = time in R - CPU, blocked = time in
  S or D.
  - the machine's steal time (/proc/stat), every 5 ms: time the hypervisor
    ran something else on a virtual CPU. A thread "on a CPU" then stays in R
    but its schedstat does not grow (the kernel takes steal out of task
    time), so runnable = R - CPU counts it as runnable where pyprof-bpf and
    schedstat's run_delay do not: the steal in the window bounds that error
    (seen in CI: polled runnable 0.65 s, run_delay 0.55 s, pyprof-bpf 0.52 s). (schedstat's second field, sched_info.run_delay, is NOT used: on
  this kernel (6.18) it sometimes counts a whole sleep as run delay: a 200 ms
  timed futex wait, which the target's own timers and pyprof-bpf both saw
  blocked, came back as a 200.4 ms jump of run_delay. It is still read and
  reported beside the polled value.)
- The target's own timers around each blocking call (its LOG): for sleep,
  lock and recv the blocked part that the call exists for is known by
  construction (the requested sleep, the lock's timeout, the feeder's send
  time), so the rest of each of these threads' blocked time is the GIL: they
  run no other blocking call. spin, gil_a and gil_b run no blocking call at
  all: all of their blocked time is the GIL.
- fsync: how long the kernel kept it in fsync() is not known to Python. Its
  waits there are uninterruptible (D: waiting for writeback, the journal
  commit, the cache flush) and the GIL's interruptible (S), so the time in D
  is its [syscall] fsync (and pwrite64's, had the write ever blocked).
"""
import bisect
import json
import math
import os
import random
import signal
import subprocess
import sys
import time


class Poller:
    """Polls the kernel's view of a process's threads from a separate process
    (this file run with --poll) whose polling thread runs SCHED_FIFO: the
    state of the `fast` tids every `period` seconds, the schedstat of every
    tid every `slow` seconds. stop() ends it and loads its readings."""

    def __init__(self, pid, tids, fast=(), period=0.0005, slow=0.005, out=None):
        self.pid, self.tids, self.fast = pid, list(tids), list(fast)
        self.out = out or f"/tmp/modes_poll_{os.getpid()}_{pid}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--poll", str(pid), self.out,
               str(period), str(slow), ",".join(map(str, self.tids)),
               ",".join(map(str, self.fast))]
        self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        line = self.p.stdout.readline()
        if line != b"polling\n":
            err = self.p.stderr.read().decode(errors="replace")
            raise RuntimeError(f"the poller did not start: {line!r} {err}")
        self.sched, self.states, self.steal = [], {}, []
        self.polls = self.misses = 0

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            _, err = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise RuntimeError("the poller did not stop")
        if self.p.returncode != 0:
            raise RuntimeError(f"the poller failed ({self.p.returncode}): "
                               f"{err.decode(errors='replace')}")
        with open(self.out) as f:
            self.load(json.load(f))
        return self

    def load(self, data):
        self.sched = [(t, {int(k): tuple(v) for k, v in s.items()}) for t, s in data["sched"]]
        self.states = {int(k): list(zip(v["t"], v["s"])) for k, v in data["states"].items()}
        self.misses = data["misses"]
        self.polls = data["polls"]
        self.steal = data["steal"]
        return self

    def steal_ns(self, lo, hi):
        """Steal time of all CPUs over [lo, hi], in ns (its ticks straddling
        the ends counted whole: an upper bound)."""
        tick = 1e9 / os.sysconf("SC_CLK_TCK")
        before = [v for t, v in self.steal if t <= lo]
        after = [v for t, v in self.steal if t >= hi]
        if not before or not after:
            raise ValueError(f"[{lo}, {hi}] is outside the polled span")
        return (after[0] - before[-1]) * tick

    def at(self, tid, t_ns):
        """(cpu_ns, run_delay_ns) of tid at t_ns, interpolated."""
        times = [t for t, _ in self.sched]
        i = bisect.bisect_left(times, t_ns)
        if i == 0 or i == len(times):
            raise ValueError(f"{t_ns} is outside the polled span "
                             f"[{times[0]}, {times[-1]}]")
        (t0, a), (t1, b) = self.sched[i - 1], self.sched[i]
        f = (t_ns - t0) / (t1 - t0)
        return tuple(x + f * (y - x) for x, y in zip(a[tid], b[tid]))

    def state_share(self, tid, lo, hi, states):
        """(share of tid's polls in [lo, hi] whose state is in states, its
        error as a share of the window, number of polls). Polls ~a period
        apart see each stretch in the states within a period at its ends:
        the error is ~ period * sqrt(stretches / 3) over the window."""
        v = [(t, s) for t, s in self.states[tid] if lo <= t <= hi]
        if len(v) < 2:
            return 0.0, 1.0, len(v)
        hit = sum(1 for _, s in v if s in states)
        stretches = sum(1 for (_, x), (_, y) in zip(v, v[1:])
                        if (x in states) != (y in states))
        period = (v[-1][0] - v[0][0]) / (len(v) - 1)
        return hit / len(v), period * math.sqrt(max(stretches, 1) / 3) / (hi - lo), len(v)


def poll_main(pid, out, period, slow, tids, fast):
    """The poller process: SCHED_FIFO, absolute-time sleeps, until SIGTERM."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
    except OSError as e:
        sys.exit(f"SCHED_FIFO: {e}")
    fds = {t: os.open(f"/proc/{pid}/task/{t}/schedstat", os.O_RDONLY) for t in tids}
    stat_fd = os.open("/proc/stat", os.O_RDONLY)
    steal = []
    sfds = {t: os.open(f"/proc/{pid}/task/{t}/stat", os.O_RDONLY) for t in fast}
    sched = []
    states = {t: {"t": [], "s": []} for t in fast}
    step, slow_ns = int(period * 1e9), int(slow * 1e9)
    polls = misses = 0
    rng = random.Random()
    print("polling", flush=True)
    nxt = time.monotonic_ns()
    last_slow = 0
    while not stop:
        now = time.monotonic_ns()
        if now - nxt > step:
            misses += 1
        if now - last_slow >= slow_ns:
            a = time.monotonic_ns()
            s = {}
            for t, fd in fds.items():
                v = os.pread(fd, 200, 0).split()
                s[t] = (int(v[0]), int(v[1]))
            sched.append(((a + time.monotonic_ns()) // 2, s))
            # "cpu  user nice system idle iowait irq softirq steal ..."
            steal.append((time.monotonic_ns(), int(os.pread(stat_fd, 256, 0).split()[8])))
            last_slow = now
        for t, fd in sfds.items():
            data = os.pread(fd, 512, 0)
            states[t]["t"].append(time.monotonic_ns())
            states[t]["s"].append(chr(data[data.rindex(b")") + 2]))
        polls += 1
        # A random step (half to one and a half periods): polls at a fixed
        # period would beat with a sampler's timer (pyprof-bpf's 999 Hz
        # ticks): its ticks would land in, or miss, this process's runs
        # in long streaks, and a thread's ticks would stray from its CPU
        # time by 10% (measured).
        nxt += int(step * (0.5 + rng.random()))
        left = nxt - time.monotonic_ns()
        if left > 0:
            time.sleep(left / 1e9)
        else:
            nxt = time.monotonic_ns()
    with open(out + ".tmp", "w") as f:
        json.dump({"sched": sched, "polls": polls, "misses": misses, "steal": steal,
                   "states": {t: {"t": v["t"], "s": "".join(v["s"])}
                              for t, v in states.items()}}, f)
    os.replace(out + ".tmp", out)


def read_log(path):
    """[(role, t0, end, t1)] of the target's LOG."""
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                r, *v = line.split()
                out.append((r, *map(int, v)))
    return out


def overlap(a, b, lo, hi):
    return max(0, min(b, hi) - max(a, lo))


BY_CONSTRUCTION = {"sleep": "[syscall] clock_nanosleep", "lock": "[syscall] futex",
                   "recv": "[syscall] recvfrom"}
GIL_ONLY = ("spin", "gil_a", "gil_b")


def truth(info, log, poller, lo, hi):
    """{role: {reason: ns}} over [lo, hi] (CLOCK_MONOTONIC ns): "cpu",
    "[runnable]", "[GIL wait]", "[syscall] NAME" (main: "blocked" whole),
    and "_err" (the polls' error on runnable/blocked, a share of the
    window), "_fsync_err" (fsync: on the time in D), "_run_delay" (schedstat's
    own, for comparison), "_steal" (ns: the machine's steal time, up to which
    runnable may be too high and blocked too low); plus {role: calls returned
    in the window}."""
    w = hi - lo
    out, calls = {}, {}
    steal = poller.steal_ns(lo, hi)
    for role, tid in info["tids"].items():
        c0, r0 = poller.at(tid, lo)
        c1, r1 = poller.at(tid, hi)
        cpu = c1 - c0
        p_r, err, _ = poller.state_share(tid, lo, hi, "R")
        run = max(0.0, p_r * w - cpu)
        blocked = max(0.0, w - cpu - run)
        d = {"cpu": cpu, "[runnable]": run, "_err": err, "_run_delay": r1 - r0,
             "_steal": steal}
        calls[role] = sum(1 for r, t0, e, t1 in log if r == role and lo <= t1 <= hi)
        if role in GIL_ONLY:
            d["[GIL wait]"] = blocked
        elif role in BY_CONSTRUCTION:
            s = sum(overlap(t0, e, lo, hi) for r, t0, e, t1 in log if r == role)
            s = min(s, blocked)
            d[BY_CONSTRUCTION[role]] = s
            d["[GIL wait]"] = blocked - s
        elif role == "fsync":
            p_d, err_d, _ = poller.state_share(tid, lo, hi, "D")
            s = min(p_d * w, blocked)
            d["[syscall] fsync"] = s
            d["[GIL wait]"] = blocked - s
            d["_fsync_err"] = err_d
        else:                       # main: not split
            d["blocked"] = blocked
        out[role] = d
    return out, calls


if __name__ == "__main__" and len(sys.argv) == 8 and sys.argv[1] == "--poll":
    _, _, pid, out, period, slow, tids, fast = sys.argv
    poll_main(int(pid), out, float(period), float(slow),
              [int(t) for t in tids.split(",") if t], [int(t) for t in fast.split(",") if t])
