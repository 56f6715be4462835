#!/usr/bin/env python3
"""pyprof-bpf's side-by-side benchmark (issue #4). Run it through scripts/bench.

One cell = one profiler x rate x threads x depth x round:
  1. start the workload (workload.py) and an identical unprofiled twin, side by
     side, in the profiler's target interpreter, and wait until both spin;
  2. start the profiler for DURATION seconds;
  3. inside its sampling time (from when it is seen sampling, or START_S
     after launch for profilers that do not show it, to 0.2 s before its
     duration ends) read, at both ends of that window: both workloads'
     iteration counts (from a file they share with us), their CPU time, the
     profiler's CPU time and its BPF programs' run time; for profilers that
     sample on CPU time, also read the target's CPU time when sampling starts
     and ends;
  4. when it exits: its rusage (CPU, children included; max RSS), its BPF
     programs' final run time, and the samples it delivered;
  5. kill both workloads.
Cells run round by round, every round visiting every configuration with the
profilers in a new shuffled order, so slow drifts of this shared machine's load
fall on every profiler alike. Figures are medians over the rounds.

Issue #9: a baseline pyprof-bpf, built from a fixed commit (--baseline-rev,
default 8a575c7, the last before the issue's in-kernel thread-state lookups
and code-object snapshots) into the cache (builds.py), runs as one more
profiler in every cell, so its steady CPU per sample sits beside the build
under test's. Each round then ends with the churn cells: the workload's
`threads` and `code` kinds (a new thread, a fresh code object, every unit),
recorded by both builds only, at --churn-rate; their BPF time per sample
against the steady 1-thread workload's, over the first sightings the
program counted, is the cost of a first sighting.

Issue #10: after the rounds, the mode cells (modes.py, --modes; alone with
--modes-only): the off-CPU modes' sched_switch/sched_wakeup programs' cost per
call, an unprofiled ping-pong's throughput while pyprof-bpf records another
process in off-cpu mode, a 32-thread GIL target's under --mode wall -F 999.
"""
import argparse
import collections
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import builds                     # noqa: E402
import modes                      # noqa: E402
import native                     # noqa: E402
import peers                      # noqa: E402
import procstat                   # noqa: E402
import report                     # noqa: E402
from procstat import BenchError   # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.join(peers.CACHE, "bench")

START_S = 1.0          # profiler start-up allowance before the measured window
START_MIN_S = 0.2      # ... or this, for a profiler seen sampling sooner
START_LIMIT_S = 30     # a profiler not seen sampling by then has failed
END_MARGIN_S = 0.2     # the window ends this long before its sampling does
PROFILER_GRACE_S = 120  # after its duration, how long a profiler may take to finish

FULL = dict(rates=[100, 1000, 10000], threads=[1, 32], depths=[25, 1000], rounds=3, duration=3)
QUICK_CONFIGS = [(10000, 1, 25), (10000, 1, 1000), (10000, 32, 25), (10000, 32, 1000),
                 (1000, 1, 25)]
BASELINE_REV = "8a575c7"   # the last commit before issue #9's changes
CHURN_KINDS = ("threads", "code")    # workload.py's; "steady" is its spin, in a churn cell
CHURN_DEPTH = 25


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Children:
    """Every process this run started, so that all of them (and only them) are
    killed on the way out. Each one leads its own session."""

    def __init__(self):
        self.procs = []

    def start(self, argv, out):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def kill(self, p):
        if p.returncode is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise BenchError("process %d did not die after SIGKILL" % p.pid)
        if p in self.procs:
            self.procs.remove(p)

    def kill_all(self):
        for p in list(self.procs):
            try:
                self.kill(p)
            except BenchError as e:
                log("bench: " + str(e))


class Workload:
    """One copy of workload.py; the driver reads its iteration counts from
    the counters file it shares through the page cache."""

    def __init__(self, children, target, threads, depth, work, name, logdir, kind="spin"):
        self.work_host, self.work_root = work
        self.kind = kind
        self.counters = os.path.join(self.work_host, name + ".counters")
        seen = self.work_root if target.chroot else self.work_host
        self.logpath = os.path.join(logdir, name + ".log")
        self.logf = open(self.logpath, "w")
        argv = target.command([os.path.join(seen, "workload.py"),
                               os.path.join(seen, name + ".counters"), str(threads), str(depth),
                               "spin" if kind == "steady" else kind])
        self.children = children
        self.proc = children.start(argv, self.logf)
        self.pid = self.proc.pid
        self.threads = threads
        # python -X perf writes /tmp/perf-PID.map (inside its root): ours to remove
        self.perf_map = None
        if "-X" in target.argv and "perf" in target.argv:
            self.perf_map = os.path.join(peers.SID if target.chroot else "/",
                                         "tmp/perf-%d.map" % self.pid)

    def read(self):
        """(ready, iterations over all threads), or None before the file exists.
        Each slot is an aligned 8-byte store; counts stay far below 2**32, so
        a torn read cannot show a wrong value."""
        try:
            with open(self.counters, "rb") as f:
                data = f.read()
        except OSError:
            return None
        if len(data) != 8 * (self.threads + 1):
            return None
        vals = struct.unpack("<%dQ" % (self.threads + 1), data)
        return vals[0] == 1, sum(vals[1:])

    def check_alive(self):
        if self.proc.poll() is not None:
            self.logf.flush()
            with open(self.logpath) as f:
                tail = f.read()[-600:]
            raise BenchError("workload %d exited (status %s): %s" % (self.pid, self.proc.returncode,
                                                                   tail.strip() or "no output"))

    def wait_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.read()
            if st and st[0]:
                with open("/proc/%d/comm" % self.pid) as f:
                    comm = f.read().strip()
                if not comm.startswith("python"):
                    raise BenchError("workload pid %d is %r, not the interpreter"
                                     % (self.pid, comm))
                n = procstat.thread_count(self.pid)
                # a churn runs its units in a thread of their own, or in main
                if n != self.threads and not (self.kind in CHURN_KINDS and n in (1, 2)):
                    raise BenchError("workload %d has %d threads, expected %d"
                                     % (self.pid, n, self.threads))
                return
            self.check_alive()
            time.sleep(0.02)
        raise BenchError("workload %d not ready after %d s" % (self.pid, timeout))

    def close(self):
        self.children.kill(self.proc)
        self.logf.close()
        if self.perf_map:
            try:
                os.unlink(self.perf_map)
            except FileNotFoundError:
                pass


def snapshot(workloads):
    """Every workload's [(iterations, t_mono, cpu_ns)], read back to back."""
    out = []
    for w in workloads:
        st = w.read()
        if st is None:
            w.check_alive()
            raise BenchError("workload %d: cannot read %s" % (w.pid, w.counters))
        out.append((st[1], time.monotonic(), procstat.cpu_ns(w.pid)))
    return out


def ctx_switches(workloads):
    return [procstat.ctx_switches(w.pid) for w in workloads]


def sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class Watcher(threading.Thread):
    """Polls a running profiler every 20 ms: its memory high-water mark; for
    pyprof-bpf's BPF backend, the BPF programs it holds (grabbed as soon as
    they appear); and for profilers that sample on CPU time, when their
    sampling starts and ends (Profiler.sampling_started/ended), reading the
    target's CPU time at both moments: the expected sample count is the rate
    times that CPU time."""

    def __init__(self, prof, pid, target_pid, logpath, duration, progs):
        super().__init__(daemon=True)
        self.prof, self.pid, self.target_pid, self.progs = prof, pid, target_pid, progs
        self.logpath, self.duration = logpath, duration
        self.hwm_kb = 0
        self.t_start = self.t_end = self.cpu_start = self.cpu_end = None
        self.stop = threading.Event()

    def log_text(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def run(self):
        n = 0
        while not self.stop.is_set():
            now = time.monotonic()
            if self.t_start is None:
                if self.prof.sampling_started(self):
                    self.t_start, self.cpu_start = now, procstat.cpu_ns(self.target_pid)
            elif self.t_end is None and self.prof.sampling_ended(self, now):
                self.t_end, self.cpu_end = now, procstat.cpu_ns(self.target_pid)
            if n % 5 == 0:
                st = procstat.status(self.pid)
                self.hwm_kb = max(self.hwm_kb, st.get("VmHWM", 0))
                if self.progs is not None:
                    self.progs.scan()
            n += 1
            wait = 0.02
            if self.t_start is not None and self.t_end is None and self.prof.ends_after_duration:
                due = self.t_start + self.duration - time.monotonic()
                if 0 < due < wait:
                    wait = due      # read the target's CPU time right on time
            self.stop.wait(wait)


def wait_exit(pid, timeout):
    """wait4() with a deadline: (status, rusage) or None on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, ru
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def run_cell(ctx, prof, rate, threads, depth, rnd, idx, kind="spin"):
    """Runs one cell; returns its result dict (with "failed" when the profiler
    failed: a result, not an error of the benchmark). kind: the workload's
    (workload.py: spin, or a churn)."""
    name = "%03d-%s-%d-%d-%d-r%d" % (idx, prof.key, rate, threads, depth, rnd)
    if kind != "spin":
        name += "-" + kind
    dur = ctx.duration
    res = dict(profiler=prof.key, label=prof.label, target=prof.target.label, clock=prof.clock,
               workload=kind,
               rate=rate, threads=threads, depth=depth, round=rnd, duration=dur,
               loadavg=os.getloadavg()[0], max_sample_rate_before=read_max_sample_rate())
    for f in os.listdir(ctx.work[0]):
        if not f.endswith(".py"):
            os.unlink(os.path.join(ctx.work[0], f))

    ws = []
    p = logf = watcher = progs = None
    try:
        ws = [Workload(ctx.children, prof.target, threads, depth, ctx.work, name + "-" + k,
                       ctx.logdir, kind) for k in ("profiled", "twin")]
        t_cell = time.monotonic()
        for w in ws:
            w.wait_ready()
        res["ready_s"] = time.monotonic() - t_cell
        time.sleep(0.3)
        target, twin = ws
        res["target_pid"], res["twin_pid"] = target.pid, twin.pid

        run = peers.Run(target.pid, rate, dur, ctx.work[0], ctx.work[1], kind)
        logpath = os.path.join(ctx.logdir, name + ".log")
        logf = open(logpath, "w")
        argv = prof.command(run)
        logf.write("$ %s\n" % " ".join(argv))
        logf.flush()
        t_launch = time.monotonic()
        p = ctx.children.start(argv, logf)
        progs = procstat.BpfPrograms(p.pid) if prof.bpf else None
        watcher = Watcher(prof, p.pid, target.pid, logpath, dur, progs)
        watcher.start()

        def profiler_side():
            if progs is not None:
                progs.scan()    # programs not seen yet would count in the window
            return procstat.cpu_ns(p.pid), (progs.totals()[0] if progs else 0)

        t_sampling = wait_started(prof, watcher, p.pid, t_launch)
        if t_sampling is None and proc_state(p.pid) not in (None, "Z"):
            ctx.children.kill(p)
            res["failed"] = "not seen sampling %d s after its launch: killed" % START_LIMIT_S
            return res
        alive_a = alive_b = False
        if t_sampling is not None:
            alive_a = proc_state(p.pid) not in (None, "Z")
            ta = time.monotonic()
            snap_a = snapshot(ws)
            prof_a = profiler_side()
            cs_a = ctx_switches(ws)
            sleep_until(t_sampling + dur - END_MARGIN_S)
            alive_b = proc_state(p.pid) not in (None, "Z")
            tb = time.monotonic()
            snap_b = snapshot(ws)
            prof_b = profiler_side()
            cs_b = ctx_switches(ws)

        done = wait_exit(p.pid, max(0.0, (t_sampling or t_launch) + dur + PROFILER_GRACE_S
                                    - time.monotonic()))
        if done is None:
            ctx.children.kill(p)
            res["failed"] = "still running %d s after its duration: killed" % PROFILER_GRACE_S
            return res
        status, ru = done
        p.returncode = os.waitstatus_to_exitcode(status)
        ctx.children.procs.remove(p)
        t_exit = time.monotonic()
        if prof.clock == "cpu" and watcher.t_start is not None:
            # Its end may come after its exit (seen late) or be due right now.
            until = time.monotonic() + 1.0
            if prof.ends_after_duration:
                until = max(until, watcher.t_start + dur + 0.1)
            while watcher.t_end is None and time.monotonic() < until:
                time.sleep(0.005)
        watcher.stop.set()
        watcher.join()
        logf.close()
        with open(logpath, errors="replace") as f:
            text = f.read()
        if p.returncode != 0:
            tail = [ln for ln in text.strip().splitlines()[1:] if ln.strip()][-3:]
            res["failed"] = "exit status %d: %s" % (p.returncode, " / ".join(tail)[:300])
            return res
        try:
            parsed = prof.parse(run, text)
        except peers.Failed as e:
            res["failed"] = str(e)
            return res
        except (OSError, ValueError) as e:
            raise BenchError("%s: cannot read its result: %s (log %s)" % (prof.label, e, logpath))
        if not (alive_a and alive_b):
            raise BenchError("%s exited (status 0) before the end of the measured window (log %s)"
                             % (prof.label, logpath))
        res.update(parsed)
        # pyprof-bpf's first line says which perf events it used: per-CPU
        # events also run (and return at once) on other tasks' ticks.
        m = re.search(r"\(per-(CPU|thread) events\)", text)
        if m:
            res["events"] = m.group(1).lower()
        bpf_ns = 0
        if progs is not None:
            bpf_ns, bpf_cnt = progs.totals()
            if not progs.fds:
                raise BenchError("%s: found none of its BPF programs (log %s)"
                                 % (prof.label, logpath))
            res["bpf_programs"] = progs.names()
            res["bpf_runs"] = bpf_cnt
            cnt = progs.counters()
            if cnt is not None:
                names = procstat.counter_names(os.path.join(prof.tree, "bpf", "pyprof.h")) \
                    if getattr(prof, "tree", None) else []
                if len(names) != len(cnt):
                    names = ["%d" % i for i in range(len(cnt))]
                res["counters"] = dict(zip(names, cnt))
        if kind in CHURN_KINDS:
            try:
                res["churn"] = churn_stats(os.path.join(ctx.work[0], "out.folded"), kind,
                                           target.pid, rate)
            except (OSError, ValueError) as e:
                raise BenchError("%s: cannot read its %s-churn output: %s" % (prof.label, kind, e))
        samples = res["samples"]
        cpu_s = ru.ru_utime + ru.ru_stime
        res["wall_s"] = t_exit - t_launch
        res["user_cpu_s"] = cpu_s
        res["bpf_s"] = bpf_ns / 1e9
        res["rss_mb"] = max(ru.ru_maxrss, watcher.hwm_kb) / 1024.0
        if samples:
            res["cpu_us"] = (cpu_s + bpf_ns / 1e9) / samples * 1e6
            res["bpf_us"] = bpf_ns / 1e9 / samples * 1e6
            res["user_us"] = cpu_s / samples * 1e6

        # The window inside the sampling time.
        win = tb - ta
        (c0a, t0a, cpu0a), (c1a, t1a, cpu1a) = snap_a
        (c0b, t0b, cpu0b), (c1b, t1b, cpu1b) = snap_b
        res["window_s"] = win
        res["target_cores"] = (cpu0b - cpu0a) / 1e9 / win
        res["twin_cores"] = (cpu1b - cpu1a) / 1e9 / win
        rate_t = (c0b - c0a) / (t0b - t0a)
        rate_w = (c1b - c1a) / (t1b - t1a)
        res["throughput"] = rate_t / rate_w if rate_w > 0 else None
        res["target_ips"], res["twin_ips"] = rate_t, rate_w
        if None not in cs_a + cs_b:
            res["target_cs_per_s"] = (cs_b[0] - cs_a[0]) / win
            res["twin_cs_per_s"] = (cs_b[1] - cs_a[1]) / win
        # Iterations per CPU-second of each: what is left once the scheduler's
        # share of this loaded machine is taken out.
        if res["target_cores"] > 0 and res["twin_cores"] > 0 and rate_w > 0:
            res["efficiency"] = (rate_t / res["target_cores"]) / (rate_w / res["twin_cores"])
        if prof.clock == "cpu":
            if watcher.t_start is None or watcher.t_end is None:
                raise BenchError("%s: did not see when its sampling %s (log %s)"
                                 % (prof.label, "started" if watcher.t_start is None else "ended",
                                    logpath))
            res["started_s"] = watcher.t_start - t_launch
            res["sampling_s"] = watcher.t_end - watcher.t_start
            res["sampling_cpu_s"] = (watcher.cpu_end - watcher.cpu_start) / 1e9
            expected = rate * res["sampling_cpu_s"]
            # samples fall where the target ran
            win_samples = samples * (cpu0b - cpu0a) / 1e9 / res["sampling_cpu_s"] \
                if res["sampling_cpu_s"] > 0 else 0
        else:
            if watcher.t_start is not None:
                res["started_s"] = watcher.t_start - t_launch
            if prof.expected_by_cpu:
                expected = rate * dur * res["target_cores"]
            else:
                expected = rate * dur * threads
            win_samples = samples * win / dur
        if win_samples > 0 and prof_a[0] is not None and prof_b[0] is not None:
            res["steady_us"] = ((prof_b[0] - prof_a[0]) + (prof_b[1] - prof_a[1])) / 1e9 \
                / win_samples * 1e6
            if prof.bpf:
                res["steady_bpf_us"] = (prof_b[1] - prof_a[1]) / 1e9 / win_samples * 1e6
        if kind in CHURN_KINDS:
            res["units_per_s"] = rate_t     # new threads or code objects per second
        res["expected"] = expected
        res["achieved"] = samples / expected if expected > 0 else None
        res["max_sample_rate_after"] = read_max_sample_rate()
        return res
    finally:
        if watcher is not None:
            watcher.stop.set()
        if progs is not None:
            progs.close()
        if p is not None and p.returncode is None:
            ctx.children.kill(p)
        if logf is not None and not logf.closed:
            logf.close()
        for w in ws:
            w.close()


UNNAMED = ("[no-python-state]", "[thread-start]", "[thread-exit]", "[no-python-frames]",
           "<unknown>", "[read-fault]", "[truncated]")


def _unnamed(frame):
    return any(m in frame for m in UNNAMED)


def callsites():
    """workload.py's lines that call fresh_<N>, by line: N % 5."""
    out = {}
    with open(os.path.join(HERE, "workload.py")) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"# CALLSITE (\d)", line)
            if m:
                out[i] = int(m.group(1))
    return out


def churn_stats(path, kind, pid, rate):
    """What a churn cell's collapsed output (written with --threads) says:
    samples (weights are periods: ns of CPU), and those where the new thing
    was on CPU, named, unnamed, or named wrong.

    threads: the samples of threads other than main (the units' threads),
    how many distinct ones, how many name a Python frame and the unit's
    own; wrong: a unit thread shown in main's loop, or main in a unit.
    code: the samples at one of the loop's call sites with a callee frame:
    named fresh_<M> from the call site of M % 5 (right), from another
    (wrong: a later code object at the same address), or unnamed."""
    period = 1e9 / rate
    c = collections.Counter()
    seen = set()
    sites = callsites() if kind == "code" else {}
    with open(path) as f:
        for line in f:
            stack, _, w = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(w) / period
            frames = stack.split(";")
            c["samples"] += n
            if any(_unnamed(fr) for fr in frames):
                c["unnamed_any"] += n
            tid = None
            for i, fr in enumerate(frames[:2]):
                m = re.match(r"^\[.*:(\d+)\]$", fr)
                if m:
                    tid, frames = int(m.group(1)), frames[i + 1:]
                    break
            if tid is None:
                raise ValueError("no [thread:tid] root in %r (written without --threads?)"
                                 % stack[:200])
            if kind == "threads":
                units = any(fr.startswith(("py::unit_", "py::unit_thread_main")) for fr in frames)
                if tid == pid:
                    c["main"] += n
                    if units:
                        c["wrong"] += n
                    continue
                c["new"] += n
                seen.add(tid)
                if any(fr.startswith("py::churn_") for fr in frames):
                    c["wrong"] += n
                elif any(fr.startswith("py::") for fr in frames):
                    c["named"] += n
                    if any(fr.startswith("py::unit_spin:") for fr in frames):
                        c["named_work"] += n
                else:
                    c["unnamed"] += n
                    c["why " + (frames[0] if frames else "?")] += n
            else:
                for i, fr in enumerate(frames):
                    m = re.match(r"py::churn_loop:.*:(\d+)$", fr)
                    if m:
                        break
                else:
                    continue
                site = sites.get(int(m.group(1)))
                if site is None:
                    continue
                callee = frames[i + 1] if i + 1 < len(frames) else None
                if callee is None:
                    c["no_callee"] += n
                    continue
                c["new"] += n
                mm = re.match(r"py::fresh_(\d+):<fresh-(\d+)>:\d+$", callee)
                if mm and mm.group(1) == mm.group(2):
                    seen.add(int(mm.group(1)))
                    if int(mm.group(1)) % 5 == site:
                        c["named"] += n
                    else:
                        c["wrong"] += n
                else:
                    c["unnamed"] += n
                    c["why " + re.sub(r"\d+", "N", callee)] += n
    out = {k: round(v, 1) for k, v in c.items()}
    out["distinct"] = len(seen)
    if not sites and kind == "code":
        raise ValueError("no # CALLSITE lines in workload.py")
    return out


def wait_started(prof, watcher, pid, t_launch):
    """Sleeps until the measured window may start; returns the time its
    sampling started (launch time when that cannot be seen), or None when the
    profiler exited first or was not seen sampling within START_LIMIT_S. A
    profiler whose start can be seen is waited for; the others get START_S."""
    if not prof.start_visible:
        sleep_until(t_launch + START_S)
        return t_launch
    while watcher.t_start is None:
        if proc_state(pid) in (None, "Z") or time.monotonic() > t_launch + START_LIMIT_S:
            return None
        time.sleep(0.01)
    sleep_until(max(t_launch + START_MIN_S, watcher.t_start + 0.05))
    return watcher.t_start


def read_max_sample_rate():
    try:
        with open("/proc/sys/kernel/perf_event_max_sample_rate") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def describe_cell(r):
    head = "%-32s %5d Hz %2d thr %4d deep r%d" % (r["label"], r["rate"], r["threads"], r["depth"],
                                                  r["round"])
    if r.get("workload", "spin") != "spin":
        head += " " + r["workload"]
    if "failed" in r:
        return head + ": FAILED " + r["failed"]
    parts = ["%d samples" % r["samples"]]
    if r.get("cpu_us") is not None:
        parts.append("%.1f us/sample" % r["cpu_us"] +
                     (" (BPF %.1f)" % r["bpf_us"] if r.get("bpf_us") else ""))
    if r.get("achieved") is not None:
        parts.append("rate %.0f%%" % (100 * r["achieved"]))
    parts.append("target %.2f cores" % r["target_cores"])
    if r.get("throughput") is not None:
        parts.append("throughput %.2f" % r["throughput"])
    parts.append("RSS %.1f MB" % r["rss_mb"])
    return head + ": " + ", ".join(parts)


class Context:
    pass


def prepare(args):
    if os.geteuid() != 0:
        raise BenchError("must run as root (BPF, perf, chroot)")
    ctx = Context()
    ctx.children = Children()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    if args.soak is not None:
        stamp += "-soak"
    ctx.outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp))
    os.makedirs(ctx.outdir, exist_ok=True)
    ctx.logdir = os.path.join(ctx.outdir, "logs")
    os.makedirs(ctx.logdir, exist_ok=True)
    # The tree is shared: someone may relink ./pyprof-bpf during the run. Run a
    # copy, so that every row measures the same build. --rev: a clean build
    # of that commit instead (built once, in the cache).
    ctx.tree = REPO
    if args.rev:
        src, sha = builds.build_rev(REPO, args.rev, BENCH_DIR, log)
        ctx.tree = os.path.dirname(src)
    else:
        src = os.path.abspath(args.binary) if args.binary else os.path.join(REPO, "pyprof-bpf")
    if not os.access(src, os.X_OK):
        raise BenchError("%s is missing: run make" % src)
    ctx.binary = os.path.join(ctx.outdir, "pyprof-bpf")
    for attempt in range(10):
        shutil.copy2(src, ctx.binary)
        r = subprocess.run([ctx.binary, "--version"], capture_output=True, text=True)
        if r.returncode == 0:
            break
        time.sleep(1)          # caught mid-link: try again
    else:
        raise BenchError("%s --version fails: %s" % (src, r.stderr.strip()))
    ctx.version = r.stdout.strip()
    ctx.git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
    if args.label:
        ctx.git = args.label
    elif args.rev:
        ctx.git = "clean build of %s" % builds.short(REPO, sha)
    elif args.binary:
        ctx.git = "%s (tree at %s)" % (src, ctx.git)
    ctx.baseline = None
    if args.soak is None and args.baseline_rev:
        bbin, bsha = builds.build_rev(REPO, args.baseline_rev, BENCH_DIR, log)
        ctx.baseline = (bbin, os.path.dirname(bbin), builds.short(REPO, bsha))
    # The work directory sits inside the sid root, so chrooted targets see it
    # (as work[1]) and host ones use the host path (work[0]).
    wname = "pyprof-bench-%d" % os.getpid()
    ctx.work = (os.path.join(peers.SID, "tmp", wname), "/tmp/" + wname)
    os.makedirs(ctx.work[0], exist_ok=True)
    shutil.copy(os.path.join(HERE, "workload.py"), ctx.work[0])
    ctx.duration = args.duration
    return ctx


def cleanup(ctx):
    ctx.children.kill_all()
    shutil.rmtree(ctx.work[0], ignore_errors=True)


def publish(outdir, files):
    """Copies the run's report files to BENCH_DIR/latest* (only for runs in the
    default place: --out runs are experiments); whether it did."""
    if os.path.dirname(outdir) != BENCH_DIR:
        return False
    for src, dst in files:
        if os.path.exists(src):
            shutil.copy(src, os.path.join(BENCH_DIR, dst))
    return True


def main_bench(args):
    if args.modes_only:
        configs, rounds = [], 0
    elif args.quick:
        configs = QUICK_CONFIGS
        rounds = args.rounds or 1
    else:
        configs = [(r, t, d) for d in args.depths for t in args.threads for r in args.rates]
        rounds = args.rounds or FULL["rounds"]
    ctx = prepare(args)
    profs = peers.all_profilers(ctx.binary, args.pyprof_target, shlex.split(args.pyprof_args),
                                tree=ctx.tree, baseline=ctx.baseline)
    if args.modes_only:
        profs = []
    elif args.profilers:
        want = set(args.profilers.split(","))
        unknown = want - {p.key for p in profs}
        if unknown:
            raise BenchError("unknown profilers %s (known: %s)"
                             % (",".join(sorted(unknown)), ",".join(p.key for p in profs)))
        profs = [p for p in profs if p.key in want]
    unavailable = {}
    for p in profs:
        why = p.unavailable()
        if why:
            unavailable[p.key] = why
            log("bench: %s: unavailable: %s" % (p.label, why))
    runnable = [p for p in profs if p.key not in unavailable]
    # Issue #9's churn cells: both builds (or the one under test alone), at
    # --churn-rate, 1 thread at a time, CHURN_DEPTH deep, with per-thread
    # events (peers.CHURN_ARGS); and the steady workload the same way.
    churn_profs = [p for p in runnable if p.key in ("pyprof-bpf", peers.BASELINE)]
    churn = []
    if args.churn and churn_profs:
        churn = [(args.churn_rate, 1, CHURN_DEPTH, k) for k in ["steady"] + args.churn]
    cells = rounds * (len(configs) * len(runnable) + len(churn) * len(churn_profs))
    est = cells * (ctx.duration + 2.0) + modes.estimate_s(args.modes)
    log("bench: %d cells (%d rounds x %d configurations x %d profilers)%s, about %.0f min; "
        "results in %s" % (cells, rounds, len(configs), len(runnable),
                           " and issue #10's mode cells (%s)" % ",".join(args.modes)
                           if args.modes else "", est / 60, ctx.outdir))

    meta = dict(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), git=ctx.git,
                pyprof_args=args.pyprof_args,
                version=ctx.version, kernel=os.uname().release, cpus=os.cpu_count(),
                duration=ctx.duration, rounds=rounds, quick=bool(args.quick),
                start_s=START_S, start_min_s=START_MIN_S, end_margin_s=END_MARGIN_S,
                configs=configs, churn=churn, modes_only=bool(args.modes_only),
                baseline=dict(rev=args.baseline_rev, name=ctx.baseline[2],
                              binary=ctx.baseline[0]) if ctx.baseline else None,
                profilers=[dict(key=p.key, label=p.label, target=p.target.label, clock=p.clock,
                                bpf=p.bpf, notes=p.notes) for p in profs],
                unavailable=unavailable, loadavg_start=os.getloadavg())
    results = []
    mode_results = None
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    try:
        with procstat.BpfStats() as stats:
            meta["bpf_stats"] = stats.how
            idx = 0
            for rnd in range(1, rounds + 1):
                plan = [(c + ("spin",), runnable) for c in configs] + \
                    [(c, churn_profs) for c in churn]
                for (rate, threads, depth, kind), profs_here in plan:
                    order = profs_here[:]
                    rng.shuffle(order)
                    # The baseline runs right before or after the build under
                    # test: their ratio is the figure asked, and this machine's
                    # load drifts.
                    pair = [p for p in order if p.key in ("pyprof-bpf", peers.BASELINE)]
                    if len(pair) == 2:
                        i = order.index(pair[0])
                        order.remove(pair[1])
                        order.insert(i + 1, pair[1])
                    for prof in order:
                        idx += 1
                        r = run_cell(ctx, prof, rate, threads, depth, rnd, idx, kind)
                        results.append(r)
                        log("[%d/%d %4.0fs] %s%s"
                            % (idx, cells, time.monotonic() - t0, describe_cell(r),
                               describe_churn(r)))
                        with open(os.path.join(ctx.outdir, "results.json"), "w") as f:
                            json.dump(dict(meta=meta, cells=results), f, indent=1)
                        time.sleep(0.2)
        # Issue #10's cells, after the statistics above are released: they
        # hold them only where they read them (modes.py).
        if args.modes:
            log("bench: issue #10's mode cells: %s (about %.0f s)"
                % (",".join(args.modes), modes.estimate_s(args.modes)))
            mode_results = modes.Modes(ctx, BENCH_DIR, shlex.split(args.pyprof_args),
                                       log).run(args.modes)
        # Issue #11's --native cost cells (native.py), last.
        if args.native and not args.modes_only:
            log("bench: issue #11's --native cells: %s (about %.0f s)"
                % (",".join(args.native), native.estimate_s(args.native, args.native_long)))
            nres = native.run(ctx, peers.SID, args.native, args.native_long, log)
            ntext = native.save(ctx.outdir, nres)
            publish(ctx.outdir, [(os.path.join(ctx.outdir, "native.md"), "latest-native.md")])
            print(ntext)
    finally:
        cleanup(ctx)
    meta["elapsed_s"] = time.monotonic() - t0
    meta["loadavg_end"] = os.getloadavg()
    saved = dict(meta=meta, cells=results)
    if mode_results is not None:
        saved["modes"] = mode_results
    with open(os.path.join(ctx.outdir, "results.json"), "w") as f:
        json.dump(saved, f, indent=1)

    return finish(ctx.outdir, meta, results, profs, unavailable, configs, mode_results)


def describe_churn(r):
    ch = r.get("churn")
    if not ch:
        return ""
    out = " [%s churn: %.0f/s; %.0f samples of new ones, %.0f named, %.0f wrong; %d distinct" % (
        r["workload"], r.get("units_per_s") or 0, ch.get("new", 0), ch.get("named", 0),
        ch.get("wrong", 0), ch.get("distinct", 0))
    cnt = r.get("counters") or {}
    if "lookups" in cnt:
        out += "; lookups %d, codes sent %d" % (cnt["lookups"], cnt.get("codes_sent", 0))
    return out + "]"


def finish(outdir, meta, results, profs, unavailable, configs, mode_results=None):
    """Writes and prints the report of a run; its exit status."""
    soak = None
    soak_path = os.path.join(BENCH_DIR, "latest-soak.json")
    if os.path.exists(soak_path):
        with open(soak_path) as f:
            soak = json.load(f)
    text, chart_err = report.write(outdir, meta, results, profs, unavailable, configs, soak,
                                   mode_results)
    if meta.get("modes_only"):
        # not a full table: published beside it, as the soak is
        published = publish(outdir, [(os.path.join(outdir, "table.md"), "latest-modes.md"),
                                     (os.path.join(outdir, "results.json"), "latest-modes.json")])
        print(text)
        log("bench: table %s/table.md%s" % (outdir, " (also %s/latest-modes.md)" % BENCH_DIR
                                            if published else ""))
    else:
        published = publish(outdir, [(os.path.join(outdir, "table.md"), "latest.md"),
                                     (os.path.join(outdir, "chart.png"), "latest.png"),
                                     (os.path.join(outdir, "results.json"), "latest.json")])
        print(text)
        log("bench: table %s/table.md, chart %s/chart.png%s"
            % (outdir, outdir, " (also %s/latest.md, latest.png)" % BENCH_DIR
               if published else ""))
    status = 0
    if chart_err:
        log("bench: ERROR: no chart: " + chart_err)
        status = 1
    ours = [r for r in results if r["profiler"].startswith("pyprof") and "failed" in r]
    if ours:
        log("bench: ERROR: pyprof-bpf failed in %d cells (see the table and %s/logs)"
            % (len(ours), outdir))
        status = 1
    return status


class _Shown:
    """A profiler as a saved run describes it (enough for the report)."""

    def __init__(self, d):
        self.key, self.label, self.clock = d["key"], d["label"], d["clock"]
        self.bpf = d.get("bpf", d["key"] == "pyprof-bpf")
        self.target = argparse.Namespace(label=d["target"])


def main_report(args):
    """Writes the report of a saved run again (table, targets, chart)."""
    outdir = os.path.abspath(args.report)
    try:
        with open(os.path.join(outdir, "results.json")) as f:
            saved = json.load(f)
    except (OSError, ValueError) as e:
        raise BenchError("cannot read %s/results.json: %s" % (outdir, e))
    meta = saved["meta"]
    if args.label:
        meta["git"] = args.label
        with open(os.path.join(outdir, "results.json"), "w") as f:
            json.dump(saved, f, indent=1)
    profs = [_Shown(d) for d in meta["profilers"]]
    configs = [tuple(c) for c in meta["configs"]]
    return finish(outdir, meta, saved["cells"], profs, meta["unavailable"], configs,
                  saved.get("modes"))


def main_soak(args):
    """Long run: pyprof-bpf at RATE for MINUTES; its RSS over time."""
    ctx = prepare(args)
    minutes = args.soak
    dur = int(minutes * 60)
    prof = peers.PyprofBpf(ctx.binary, args.backend, args.pyprof_target,
                           shlex.split(args.pyprof_args))
    why = prof.unavailable()
    if why:
        raise BenchError("pyprof-bpf unavailable: " + why)
    threads, depth, rate = args.threads[0], args.depths[0], args.soak_rate
    log("bench: soak: %s, %d Hz, %d thread(s), %d deep, %g min; results in %s"
        % (prof.label, rate, threads, depth, minutes, ctx.outdir))
    timeline = []
    res = dict(profiler=prof.key, label=prof.label, target=prof.target.label, rate=rate,
               threads=threads, depth=depth, minutes=minutes, git=ctx.git,
               started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    w = p = progs = None
    try:
        with procstat.BpfStats():
            w = Workload(ctx.children, prof.target, threads, depth, ctx.work, "soak", ctx.logdir)
            w.wait_ready()
            run = peers.Run(w.pid, rate, dur, ctx.work[0], ctx.work[1])
            logpath = os.path.join(ctx.logdir, "soak-profiler.log")
            logf = open(logpath, "w")
            t0 = time.monotonic()
            p = ctx.children.start(prof.command(run), logf)
            progs = procstat.BpfPrograms(p.pid) if prof.bpf else None
            next_print = t0 + 60
            done = None
            while done is None:
                time.sleep(1)
                if progs is not None:
                    progs.scan()
                st = procstat.status(p.pid)
                if st:
                    timeline.append((time.monotonic() - t0, st.get("VmRSS"), st.get("VmHWM")))
                if time.monotonic() >= next_print and st:
                    next_print += 60
                    log("bench: soak: %4.0f s: VmRSS %.1f MB, VmHWM %.1f MB"
                        % (time.monotonic() - t0, st["VmRSS"] / 1024, st["VmHWM"] / 1024))
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if wpid == p.pid:
                    done = (status, ru)
                elif time.monotonic() > t0 + dur + PROFILER_GRACE_S:
                    raise BenchError("soak: pyprof-bpf still running %d s after its duration"
                                     % PROFILER_GRACE_S)
            status, ru = done
            p.returncode = os.waitstatus_to_exitcode(status)
            ctx.children.procs.remove(p)
            logf.close()
            with open(logpath) as f:
                text = f.read()
            if p.returncode:
                raise BenchError("soak: pyprof-bpf exited with status %d: %s"
                                 % (p.returncode, text.strip()[-300:]))
            res.update(prof.parse(run, text))
            bpf_ns = progs.totals()[0] if progs else 0
    finally:
        if progs is not None:
            progs.close()
        cleanup(ctx)
    res["timeline"] = timeline
    res["vmhwm_mb"] = max([ru.ru_maxrss] + [h for _, _, h in timeline if h]) / 1024.0
    res["final_rss_mb"] = timeline[-1][1] / 1024.0 if timeline else None
    res["cpu_us"] = ((ru.ru_utime + ru.ru_stime) + bpf_ns / 1e9) / max(1, res["samples"]) * 1e6
    res["met"] = res["vmhwm_mb"] <= 32 if minutes >= 10 else None
    text = report.soak_text(res)
    with open(os.path.join(ctx.outdir, "soak.md"), "w") as f:
        f.write(text)
    with open(os.path.join(ctx.outdir, "soak.json"), "w") as f:
        json.dump(res, f, indent=1)
    publish(ctx.outdir, [(os.path.join(ctx.outdir, "soak.md"), "latest-soak.md"),
                  (os.path.join(ctx.outdir, "soak.json"), "latest-soak.json")])
    print(text)
    return 0


def main_native(args):
    """Issue #11's cells alone: --native against perf --call-graph dwarf."""
    ctx = prepare(args)
    log("bench: issue #11's --native cells: %s (about %.0f s); results in %s"
        % (",".join(args.native), native.estimate_s(args.native, args.native_long), ctx.outdir))
    try:
        res = native.run(ctx, peers.SID, args.native, args.native_long, log)
    finally:
        cleanup(ctx)
    res["git"] = ctx.git
    res["version"] = ctx.version
    res["started"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    res["loadavg_end"] = os.getloadavg()
    text = native.save(ctx.outdir, res)
    published = publish(ctx.outdir, [(os.path.join(ctx.outdir, "native.md"), "latest-native.md"),
                                     (os.path.join(ctx.outdir, "native.json"),
                                      "latest-native.json")])
    print(text)
    log("bench: %s/native.md%s" % (ctx.outdir, " (also %s/latest-native.md)" % BENCH_DIR
                                   if published else ""))
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Side-by-side benchmark of pyprof-bpf and its peers (issue #4). "
                    "Not a test: it never fails on a missed target, only on its own errors.")
    ap.add_argument("--quick", action="store_true",
                    help="a subset (10 kHz in all four shapes, 1 kHz 1 thread 25 deep; the "
                         "baseline and the churn cells too), one round: ~5 min")
    ap.add_argument("--soak", type=float, nargs="?", const=10.0, metavar="MINUTES",
                    help="instead: pyprof-bpf alone at --soak-rate for MINUTES (default 10), "
                         "RSS over time")
    ap.add_argument("--soak-rate", type=int, default=1000)
    ap.add_argument("--report", metavar="DIR",
                    help="instead: write the report of the run saved in DIR again (its "
                         "results.json), e.g. after a new --soak")
    ap.add_argument("--backend", choices=["bpf", "remote"], default="bpf",
                    help="backend for --soak")
    ap.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=FULL["rates"])
    ap.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--depths", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (--quick: 1)")
    ap.add_argument("--duration", type=int, default=FULL["duration"],
                    help="seconds each profiler samples (whole seconds: austin's -x)")
    ap.add_argument("--profilers", help="comma-separated subset: pyprof-bpf,pyprof-baseline,"
                                        "pyprof-remote,cpython-3.15,cpython-3.15-cpu,austin,perf")
    ap.add_argument("--baseline-rev", default=BASELINE_REV, metavar="REV",
                    help="issue #9: also run pyprof-bpf built from REV (default %s, the last "
                         "commit before the issue), in the BPF backend's cells and the churn "
                         "cells; built once into %s/build-<sha>/" % (BASELINE_REV, BENCH_DIR))
    ap.add_argument("--no-baseline", dest="baseline_rev", action="store_const", const=None,
                    help="no baseline build")
    ap.add_argument("--churn", type=lambda s: [k for k in s.split(",") if k],
                    default=list(CHURN_KINDS), metavar="KINDS",
                    help="issue #9's first-sighting cells, each round, for pyprof-bpf and the "
                         "baseline: workload kinds among %s (default all; '' for none)"
                    % ",".join(CHURN_KINDS))
    ap.add_argument("--churn-rate", type=int, default=1000, metavar="HZ")
    ap.add_argument("--modes", type=lambda s: [k for k in s.split(",") if k],
                    default=list(modes.CELLS), metavar="CELLS",
                    help="issue #10's cells, once, after the rounds: the cost of the off-CPU "
                         "modes, among %s (default all, ~%.0f min; '' for none): switch, the "
                         "sched_switch/sched_wakeup programs' ns per call (BPF statistics); "
                         "pingpong, an unprofiled pipe ping-pong's round trips while "
                         "pyprof-bpf records another process in off-cpu mode; gil, a 32-thread "
                         "target handing the GIL over ~8,000 times/s under --mode wall -F 999 "
                         "(and CPython 3.15's --mode wall)"
                    % (",".join(modes.CELLS), modes.estimate_s(modes.CELLS) / 60))
    ap.add_argument("--modes-only", action="store_true",
                    help="run only the --modes cells (no profiler cells, no baseline build); "
                         "the report goes to latest-modes.md")
    ap.add_argument("--native", type=lambda s: [k for k in s.split(",") if k],
                    default=["cost"], metavar="CELLS",
                    help="issue #11's cells, after the rest: cost, the CPU per sample of "
                         "--native at 99 Hz and 999 Hz beside perf record --call-graph dwarf "
                         "+ perf script on the same target (~%.0f min); long, --native --kernel "
                         "-F 999 for --native-long minutes, its RSS (default: cost; '' for "
                         "none)" % (native.estimate_s(["cost"]) / 60))
    ap.add_argument("--native-only", action="store_true",
                    help="run only the --native cells (no profiler cells, no baseline build); "
                         "the report goes to latest-native.md")
    ap.add_argument("--long", "--native-long", dest="native_long", type=float, nargs="?",
                    const=10.0, default=None, metavar="MINUTES",
                    help="add the long cell (--native --kernel -F 999 for MINUTES, default "
                         "10: its RSS after them, issue #11's <= 64 MB)")
    ap.add_argument("--rev", metavar="REV",
                    help="measure a clean build of REV (built once, like the baseline) "
                         "instead of the tree's ./pyprof-bpf")
    ap.add_argument("--pyprof-target", default="sid-3.15", choices=sorted(peers.TARGETS),
                    help="interpreter for pyprof-bpf's rows (default sid-3.15, as CPython's own)")
    ap.add_argument("--binary", help="the pyprof-bpf to measure (default: the tree's ./pyprof-bpf)")
    ap.add_argument("--label", help="how the report names that build (default: git describe)")
    ap.add_argument("--pyprof-args", default="", metavar="ARGS",
                    help="more options for pyprof-bpf, e.g. --pyprof-args=--no-frame-cache")
    ap.add_argument("--seed", type=int, default=4, help="seed of the shuffled profiler order")
    ap.add_argument("--out", help="results directory (default %s/<UTC time>)" % BENCH_DIR)
    args = ap.parse_args(argv)
    if args.soak is not None:
        args.threads = args.threads or [1]
        args.depths = args.depths or [25]
    else:
        args.threads = args.threads or FULL["threads"]
        args.depths = args.depths or FULL["depths"]
    bad = set(args.churn) - set(CHURN_KINDS)
    if bad:
        ap.error("--churn: unknown kinds %s" % ",".join(sorted(bad)))
    bad = set(args.modes) - set(modes.CELLS)
    if bad:
        ap.error("--modes: unknown cells %s (known: %s)" % (",".join(sorted(bad)),
                                                            ",".join(modes.CELLS)))
    if args.modes_only:
        if not args.modes:
            ap.error("--modes-only with no --modes cells")
        if args.soak is not None or args.report:
            ap.error("--modes-only excludes --soak and --report")
        args.baseline_rev = None
    if args.native_long is not None and "long" not in args.native:
        args.native = args.native + ["long"]
    if args.native_long is None:
        args.native_long = 10.0
    bad = set(args.native) - set(native.CELLS)
    if bad:
        ap.error("--native: unknown cells %s (known: %s)" % (",".join(sorted(bad)),
                                                             ",".join(native.CELLS)))
    if args.native_only:
        if not args.native:
            ap.error("--native-only with no --native cells")
        if args.soak is not None or args.report or args.modes_only:
            ap.error("--native-only excludes --soak, --report and --modes-only")
        args.baseline_rev = None
    if args.rev and args.binary:
        ap.error("--rev and --binary exclude each other")
    if args.duration < 2:
        ap.error("--duration must be at least 2 s (the measured window starts %.1f s in)" % START_S)
    return args


def main(argv):
    args = parse_args(argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.report:
            return main_report(args)
        if args.native_only:
            return main_native(args)
        return main_soak(args) if args.soak is not None else main_bench(args)
    except BenchError as e:
        log("bench: ERROR: %s" % e)
        return 2
    except KeyboardInterrupt:
        log("bench: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
