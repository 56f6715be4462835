"""Issue #10's cells: what the off-CPU modes cost (`scripts/bench --modes
CELLS`, alone with `--modes-only`). pyprof-bpf's off-cpu and wall modes attach
a tp_btf/sched_switch program (pyprof_switch) and a tp_btf/sched_wakeup one
(pyprof_wakeup) that run at every context switch and wake-up of the machine.

switch    their cost per call, from the kernel's BPF statistics (held on with
          BPF_ENABLE_STATS, the reference-counted form of the sysctl
          kernel.bpf_stats_enabled, for these windows only), over a window of
          an off-cpu recording: (a) of an idle Python target while a pipe
          ping-pong (pingpong.c) switches beside it: nearly every call is for
          another task, one comparison; (b) of a target whose own two threads
          pass a byte back and forth over pipes, 25 frames deep
          (modes_workload.py switchy): nearly every call is its switch-out
          (the stack walk) or switch-in.
pingpong  the ping-pong's round trips per second while pyprof-bpf records the
          idle target in off-cpu mode, against no profiler at all: windows
          alternate (unprofiled, profiled, unprofiled, ...) on the same
          running processes; each profiled window is divided by the mean of
          the unprofiled windows on either side of it. The benchmark holds no
          BPF statistics then (they add two clock reads to every run of the
          programs); whether someone else had them on (the programs' run
          counts move) is reported.
gil       a 32-thread target handing the GIL over ~8,000 times/s
          (modes_workload.py gil: short pure-Python units, a 2.5 ms sleep every
          128 units): its work rate under `pyprof-bpf record --mode wall -F
          999`, and under CPython 3.15's profiler (`--mode wall -r 999 -a`, a
          peer figure), each against the unprofiled windows around it.

A window is WINDOW_S seconds: for pyprof-bpf from SETTLE_S after its
"sampling process" line; CPython's profiler does not show when it starts, so
its window starts CPYTHON_START_S after its launch (and it is asked to run
longer than that plus the window).
"""
import ctypes
import hashlib
import os
import re
import shutil
import statistics
import struct
import subprocess
import time

import peers
import procstat
from procstat import BenchError

HERE = os.path.dirname(os.path.abspath(__file__))
CELLS = ("switch", "pingpong", "gil")
WINDOW_S = 3.0
SETTLE_S = 0.3
START_LIMIT_S = 30
EXIT_LIMIT_S = 120
CPYTHON_START_S = 2.0
PINGPONG_REPS = 6            # profiled windows; one more unprofiled
GIL_REPS = 4                 # of each profiler
GIL = dict(threads=32, depth=25, units=128, sleep=0.0025)
SWITCHY_DEPTH = 25
RATE = 999
IDLE_TARGET = "sid-3.15"
GIL_TARGET = "sid-3.15-ns"   # in a mount namespace: CPython's profiler joins it


def estimate_s(cells):
    """About how long the cells take (a profiler's start-up is ~3 s here)."""
    prof = SETTLE_S + WINDOW_S + 4.5
    est = dict(switch=2 * prof + 2 * WINDOW_S + 6,
               pingpong=PINGPONG_REPS * prof + (PINGPONG_REPS + 1) * WINDOW_S + 6,
               gil=(2 * GIL_REPS + 1) * prof + (GIL_REPS + 1) * WINDOW_S + 8)
    return sum(est[c] for c in cells)


def build_pingpong(bench_dir, log):
    """pingpong.c compiled into BENCH_DIR/pingpong-<hash of the source>/."""
    src = os.path.join(HERE, "pingpong.c")
    with open(src, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    d = os.path.join(bench_dir, "pingpong-" + digest)
    exe = os.path.join(d, "pingpong")
    if os.access(exe, os.X_OK):
        return exe
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise BenchError("no C compiler (cc, gcc, clang) for %s" % src)
    os.makedirs(d, exist_ok=True)
    tmp = "%s.tmp-%d" % (exe, os.getpid())
    r = subprocess.run([cc, "-O2", "-Wall", "-o", tmp, src], capture_output=True, text=True)
    if r.returncode:
        raise BenchError("%s %s failed: %s" % (cc, src, (r.stderr or r.stdout).strip()[-600:]))
    os.rename(tmp, exe)
    log("bench: built %s" % exe)
    return exe


class EmptyProgram:
    """A BPF program that does nothing (r0 = 0; exit), attached beside
    pyprof-bpf's at the same tp_btf hook: the run time the kernel's
    statistics give it is their own floor here (the clock reads around a run;
    ~55 ns in this VM), to subtract from what they give pyprof-bpf's."""

    BPF_PROG_LOAD = 5
    BPF_RAW_TRACEPOINT_OPEN = 17
    BPF_PROG_TYPE_TRACING = 26
    BPF_TRACE_RAW_TP = 23
    _btf_ids = {}

    @classmethod
    def btf_id(cls, tp):
        """The vmlinux BTF id of btf_trace_<tp> (bpftool), or None."""
        if not cls._btf_ids:
            try:
                r = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                                   capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                return None
            for m in re.finditer(r"^\[(\d+)\] TYPEDEF 'btf_trace_(\w+)'", r.stdout, re.M):
                cls._btf_ids[m.group(2)] = int(m.group(1))
        return cls._btf_ids.get(tp)

    def __init__(self, tp):
        self.prog = self.link = None
        self.why = None
        btf = self.btf_id(tp)
        if btf is None:
            self.why = "no BTF id for btf_trace_%s" % tp
            return
        insns = (ctypes.c_uint8 * 16)(0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0)
        lic = ctypes.create_string_buffer(b"GPL")
        attr = bytearray(128)                  # union bpf_attr, BPF_PROG_LOAD's part
        struct.pack_into("<II", attr, 0, self.BPF_PROG_TYPE_TRACING, 2)
        struct.pack_into("<QQ", attr, 8, ctypes.addressof(insns), ctypes.addressof(lic))
        attr[48:48 + 11] = b"bench_empty"
        struct.pack_into("<I", attr, 68, self.BPF_TRACE_RAW_TP)
        struct.pack_into("<I", attr, 108, btf)
        words = list(struct.unpack("<32I", bytes(attr)))
        try:
            self.prog = procstat._bpf(self.BPF_PROG_LOAD, words)
            self.link = procstat._bpf(self.BPF_RAW_TRACEPOINT_OPEN, [0, 0, self.prog])
        except OSError as e:
            self.why = "cannot load or attach an empty program at %s: %s" % (tp, e.strerror)
            self.close()

    def read(self):
        if self.prog is None:
            return (0, 0)
        info = procstat._fdinfo("/proc/self/fdinfo/%d" % self.prog)
        return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))

    def close(self):
        for fd in (self.link, self.prog):
            if fd is not None:
                os.close(fd)
        self.prog = self.link = None


def machine_ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return None


def stats_sysctl():
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Counted:
    """A process that counts its work in a file of uint64 slots: slot 0 is 1
    once it runs, slot 1 its events, slots 2.. its units of work."""

    def __init__(self, children, argv, counters, nslots, logpath, what, threads=None):
        self.children, self.counters, self.nslots, self.what = children, counters, nslots, what
        self.threads = threads
        self.logpath = logpath
        self.logf = open(logpath, "w")
        self.logf.write("$ %s\n" % " ".join(argv))
        self.logf.flush()
        self.proc = children.start(argv, self.logf)
        self.pid = self.proc.pid

    def read(self):
        try:
            with open(self.counters, "rb") as f:
                data = f.read()
        except OSError:
            return None
        if len(data) != 8 * self.nslots:
            return None
        return struct.unpack("<%dQ" % self.nslots, data)

    def check_alive(self):
        if self.proc.poll() is not None:
            self.logf.flush()
            with open(self.logpath, errors="replace") as f:
                tail = f.read()[-600:]
            raise BenchError("%s (pid %d) exited (status %s): %s"
                             % (self.what, self.pid, self.proc.returncode, tail.strip()))

    def wait_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.read()
            if st and st[0] == 1:
                n = procstat.thread_count(self.pid)
                if self.threads and n != self.threads:
                    raise BenchError("%s %d has %d threads, expected %d"
                                     % (self.what, self.pid, n, self.threads))
                return
            self.check_alive()
            time.sleep(0.02)
        raise BenchError("%s %d not ready after %d s" % (self.what, self.pid, timeout))

    def pids(self):
        return [self.pid] + children_of(self.pid)

    def snap(self):
        st = self.read()
        if st is None:
            self.check_alive()
            raise BenchError("%s %d: cannot read %s" % (self.what, self.pid, self.counters))
        cpu = cs = 0
        for pid in self.pids():
            cpu += procstat.cpu_ns(pid) or 0
            cs += procstat.ctx_switches(pid) or 0
        return dict(t=time.monotonic(), events=st[1], work=sum(st[2:]), cpu=cpu, cs=cs)

    def close(self):
        self.children.kill(self.proc)
        self.logf.close()


def measure(procs, seconds):
    """Over SECONDS: each process's events, work and context switches per
    second and its cores; the machine's context switches per second."""
    a = {k: p.snap() for k, p in procs.items()}
    ma = machine_ctxt()
    time.sleep(seconds)
    b = {k: p.snap() for k, p in procs.items()}
    mb = machine_ctxt()
    out = dict(loadavg=os.getloadavg()[0])
    span = None
    for k in procs:
        dt = b[k]["t"] - a[k]["t"]
        span = dt if span is None else max(span, dt)
        out[k] = dict(events_per_s=(b[k]["events"] - a[k]["events"]) / dt,
                      work_per_s=(b[k]["work"] - a[k]["work"]) / dt,
                      cs_per_s=(b[k]["cs"] - a[k]["cs"]) / dt,
                      cores=(b[k]["cpu"] - a[k]["cpu"]) / 1e9 / dt)
    out["window_s"] = span
    out["machine_cs_per_s"] = (mb - ma) / span if ma is not None and mb is not None else None
    return out


def _wait_exit(pid, timeout):
    deadline = time.monotonic() + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, ru
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def _tail(path, n=3):
    with open(path, errors="replace") as f:
        lines = [ln for ln in f.read().strip().splitlines()[1:] if ln.strip()]
    return " / ".join(lines[-n:])[:300]


class Modes:
    """One run of the selected cells; results() is what goes into
    results.json under "modes"."""

    def __init__(self, ctx, bench_dir, pyprof_extra, log):
        self.ctx, self.bench_dir, self.log = ctx, bench_dir, log
        self.extra = list(pyprof_extra)
        self.n = 0
        shutil.copy(os.path.join(HERE, "modes_workload.py"), ctx.work[0])

    # -- processes --------------------------------------------------------

    def workload(self, target_key, kind, args, nslots, threads, name):
        target = peers.TARGETS[target_key]
        seen = self.ctx.work[1] if target.chroot else self.ctx.work[0]
        argv = target.command([os.path.join(seen, "modes_workload.py"),
                               os.path.join(seen, name + ".counters"), kind]
                              + [str(a) for a in args])
        return Counted(self.ctx.children, argv,
                       os.path.join(self.ctx.work[0], name + ".counters"), nslots,
                       os.path.join(self.ctx.logdir, "modes-" + name + ".log"),
                       "modes_workload %s" % kind, threads)

    def pingpong(self):
        exe = build_pingpong(self.bench_dir, self.log)
        counters = os.path.join(self.ctx.work[0], "pingpong.counters")
        return Counted(self.ctx.children, [exe, counters], counters, 2,
                       os.path.join(self.ctx.logdir, "modes-pingpong.log"), "pingpong")

    # -- profilers --------------------------------------------------------

    def ours(self, pid, mode):
        """pyprof-bpf recording PID in MODE for a window (and some slack);
        at RATE in the modes that sample CPU time too."""
        rate = ["-F", str(RATE)] if mode != "off-cpu" else []
        return [self.ctx.binary, "record", "-p", str(pid), "--mode", mode] + rate + \
            ["-d", str(int(SETTLE_S + WINDOW_S + 1.5)),
             "-o", os.path.join(self.ctx.work[0], "modes-out.folded"), "--format", "collapsed",
             "--backend", "bpf"] + self.extra

    def with_stats(self, pid, procs, mode="off-cpu"):
        """A recording of PID with BPF statistics held, and an empty program
        at sched_switch beside pyprof-bpf's."""
        with procstat.BpfStats() as st:
            empty = EmptyProgram("sched_switch")
            try:
                r = self.profiled("pyprof-bpf", self.ours(pid, mode), procs, stats=True,
                                  empty=empty)
            finally:
                empty.close()
        r["stats_how"] = st.how
        return r

    def profiled(self, who, argv, procs, stats=False, run=None, empty=None):
        """Starts a profiler, measures PROCS over a window of its sampling,
        waits for it to finish. who: "pyprof-bpf" (start seen in its log) or
        "cpython" (start after CPYTHON_START_S). stats: hold BPF statistics
        and read its programs' run time over the window; empty: an
        EmptyProgram attached beside them, read over the same window."""
        self.n += 1
        name = "modes-%02d-%s" % (self.n, who)
        logpath = os.path.join(self.ctx.logdir, name + ".log")
        logf = open(logpath, "w")
        logf.write("$ %s\n" % " ".join(argv))
        logf.flush()
        res = dict(profiler=who, log=logpath)
        t_launch = time.monotonic()
        p = self.ctx.children.start(argv, logf)
        # pyprof-bpf's programs are always read: their run counts move only
        # while someone has the statistics on (here or elsewhere)
        progs = procstat.BpfPrograms(p.pid) if who == "pyprof-bpf" else None
        try:
            if who == "pyprof-bpf":
                while True:
                    with open(logpath, errors="replace") as f:
                        if re.search(r"pyprof-bpf: sampling process \d+", f.read()):
                            break
                    if p.poll() is not None:
                        res["failed"] = "exit status %s before sampling: %s" % (p.returncode,
                                                                               _tail(logpath))
                        return res
                    if time.monotonic() > t_launch + START_LIMIT_S:
                        res["failed"] = "not seen sampling %d s after its launch" % START_LIMIT_S
                        return res
                    time.sleep(0.02)
                res["started_s"] = time.monotonic() - t_launch
                time.sleep(SETTLE_S)
            else:
                time.sleep(max(0.0, t_launch + CPYTHON_START_S - time.monotonic()))
                if p.poll() is not None:
                    res["failed"] = "exit status %s before its window: %s" % (p.returncode,
                                                                             _tail(logpath))
                    return res
            if progs is not None:
                for _ in range(100):
                    progs.scan()
                    if "pyprof_switch" in progs.per_program():
                        break
                    time.sleep(0.02)
                pa = progs.per_program()
                ea = empty.read() if empty else None
            res["sysctl"] = stats_sysctl()
            res["window"] = measure(procs, WINDOW_S)
            if progs is not None:
                pb = progs.per_program()
                res["programs"] = {k: dict(ns=pb[k][0] - pa.get(k, (0, 0))[0],
                                           runs=pb[k][1] - pa.get(k, (0, 0))[1])
                                   for k in pb if pb[k][1] - pa.get(k, (0, 0))[1] > 0}
                res["stats_on"] = bool(res["programs"])
                res["stats_held"] = stats
                if empty:
                    eb = empty.read()
                    if empty.why:
                        res["empty_failed"] = empty.why
                    elif eb[1] > ea[1]:
                        res["empty"] = dict(ns=eb[0] - ea[0], runs=eb[1] - ea[1])
            if p.poll() is not None:
                res["failed"] = "exited (status %s) before its window ended: %s" % (
                    p.returncode, _tail(logpath))
                return res
            done = _wait_exit(p.pid, EXIT_LIMIT_S)
            if done is None:
                res["failed"] = "still running %d s after its window: killed" % EXIT_LIMIT_S
                return res
            status, ru = done
            p.returncode = os.waitstatus_to_exitcode(status)
            self.ctx.children.procs.remove(p)
            res["cpu_s"] = ru.ru_utime + ru.ru_stime
            res["wall_s"] = time.monotonic() - t_launch
            logf.close()
            with open(logpath, errors="replace") as f:
                text = f.read()
            if p.returncode:
                res["failed"] = "exit status %d: %s" % (p.returncode, _tail(logpath))
                return res
            if who == "pyprof-bpf":
                if "with the BPF backend" not in text:
                    res["failed"] = "did not sample with the BPF backend: " + _tail(logpath)
                    return res
                m = re.search(r"(\d+) samples in ([\d.]+) s .*?, (\d+) lost", text)
                if not m:
                    raise BenchError("no final statistics line from pyprof-bpf (log %s)" % logpath)
                res["samples"], res["lost"] = int(m.group(1)), int(m.group(3))
            else:
                try:
                    res.update(peers.CPython315().parse(run, text))
                except (OSError, ValueError) as e:
                    res["failed"] = "cannot read its output: %s" % e
            return res
        finally:
            if progs is not None:
                progs.close()
            if p.returncode is None:
                self.ctx.children.kill(p)
            if not logf.closed:
                logf.close()

    def unprofiled(self, procs):
        return dict(profiler="none", window=measure(procs, WINDOW_S))

    # -- cells ------------------------------------------------------------

    def describe(self, cell, r, key, what):
        w = r.get("window")
        if "failed" in r:
            return "[modes] %s %s: FAILED %s" % (cell, r["profiler"], r["failed"])
        s = "[modes] %s %-10s %s %.0f/s (load %.1f)" % (cell, r["profiler"], what,
                                                     w[key[0]][key[1]], w["loadavg"])
        progs = dict(r.get("programs") or {})
        if r.get("empty"):
            progs["(empty program)"] = r["empty"]
        if progs:
            s += "; " + ", ".join("%s %d runs %.0f ns/run" % (k, v["runs"], v["ns"] / v["runs"])
                                  for k, v in sorted(progs.items()))
        if "samples" in r:
            s += "; %d samples, %.2f s CPU" % (r["samples"], r["cpu_s"])
        return s

    def cell_other(self, cells):
        """The idle target and the ping-pong beside it: the pingpong cell's
        alternation, then (switch) one window with BPF statistics."""
        out = {}
        idle = pp = None
        try:
            idle = self.workload(IDLE_TARGET, "idle", [], 3, 1, "idle")
            pp = self.pingpong()
            idle.wait_ready()
            pp.wait_ready()
            time.sleep(0.5)
            procs = dict(pingpong=pp, target=idle)
            key = ("pingpong", "events_per_s")
            if "pingpong" in cells:
                seq = []
                for i in range(PINGPONG_REPS):
                    seq.append(self.unprofiled(procs))
                    self.log(self.describe("pingpong", seq[-1], key, "round trips"))
                    seq.append(self.profiled("pyprof-bpf", self.ours(idle.pid, "off-cpu"),
                                             procs))
                    self.log(self.describe("pingpong", seq[-1], key, "round trips"))
                seq.append(self.unprofiled(procs))
                self.log(self.describe("pingpong", seq[-1], key, "round trips"))
                out["pingpong"] = dict(seq=seq)
            if "switch" in cells:
                r = self.with_stats(idle.pid, procs)
                self.log(self.describe("switch (a)", r, key, "ping-pong round trips"))
                out["switch_other"] = r
        finally:
            for w in (pp, idle):
                if w is not None:
                    w.close()
        return out

    def cell_switchy(self):
        sw = None
        try:
            sw = self.workload(IDLE_TARGET, "switchy", [SWITCHY_DEPTH], 4, 2, "switchy")
            sw.wait_ready()
            time.sleep(0.5)
            procs = dict(target=sw)
            key = ("target", "events_per_s")
            before = self.unprofiled(procs)
            self.log(self.describe("switch (b)", before, key, "round trips"))
            r = self.with_stats(sw.pid, procs)
            self.log(self.describe("switch (b)", r, key, "round trips"))
            after = self.unprofiled(procs)
            self.log(self.describe("switch (b)", after, key, "round trips"))
            return dict(switch_target=dict(profiled=r, before=before, after=after))
        finally:
            if sw is not None:
                sw.close()

    def cell_gil(self):
        g = None
        cpy = peers.CPython315()
        why = cpy.unavailable()
        order = ["pyprof-bpf"] + (["cpython"] if not why else [])
        try:
            g = self.workload(GIL_TARGET, "gil", [GIL["threads"], GIL["depth"], GIL["units"],
                                                  GIL["sleep"]], 2 + GIL["threads"],
                              GIL["threads"], "gil")
            g.wait_ready()
            time.sleep(0.5)
            procs = dict(target=g)
            key = ("target", "work_per_s")
            seq = [self.unprofiled(procs)]
            self.log(self.describe("gil", seq[-1], key, "units"))
            for i in range(GIL_REPS):
                for who in (order if i % 2 == 0 else order[::-1]):
                    if who == "pyprof-bpf":
                        r = self.profiled(who, self.ours(g.pid, "wall"), procs)
                    else:
                        run = peers.Run(g.pid, RATE, int(CPYTHON_START_S + WINDOW_S + 1.5),
                                        self.ctx.work[0], self.ctx.work[1])
                        argv = cpy.command(run)
                        j = argv.index("attach") + 1
                        argv = argv[:j] + ["--mode", "wall"] + argv[j:]
                        r = self.profiled(who, argv, procs, run=run)
                    seq.append(r)
                    self.log(self.describe("gil", r, key, "units"))
                seq.append(self.unprofiled(procs))
                self.log(self.describe("gil", seq[-1], key, "units"))
            stats = self.with_stats(g.pid, procs, "wall")
            self.log(self.describe("gil (statistics)", stats, key, "units"))
            return dict(gil=dict(seq=seq, params=GIL, rate=RATE, stats=stats,
                                 cpython_unavailable=why))
        finally:
            if g is not None:
                g.close()

    def run(self, cells):
        t0 = time.monotonic()
        out = dict(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                   cells=list(cells), window_s=WINDOW_S, settle_s=SETTLE_S,
                   cpython_start_s=CPYTHON_START_S, rate=RATE, loadavg_start=os.getloadavg())
        if "switch" in cells or "pingpong" in cells:
            out.update(self.cell_other(cells))
        if "switch" in cells:
            out.update(self.cell_switchy())
        if "gil" in cells:
            out.update(self.cell_gil())
        out["elapsed_s"] = time.monotonic() - t0
        out["loadavg_end"] = os.getloadavg()
        return out


# -- figures from a saved run (report.py) ------------------------------------

def ratios(seq, who, value):
    """Each profiled window of WHO over the mean of the nearest unprofiled
    windows before and after it: [(ratio, profiled value, unprofiled mean)].
    value(window) -> the figure (or a (proc, field) pair of the window)."""
    if isinstance(value, tuple):
        proc, field = value
        value = lambda w: w[proc][field]      # noqa: E731
    out = []
    for i, r in enumerate(seq):
        if r["profiler"] != who or "failed" in r:
            continue
        around = []
        for rng in (range(i - 1, -1, -1), range(i + 1, len(seq))):
            for j in rng:
                if seq[j]["profiler"] == "none":
                    around.append(value(seq[j]["window"]))
                    break
        if not around or None in around:
            continue
        base = sum(around) / len(around)
        val = value(r["window"])
        if val is None:
            continue
        out.append((val / base if base > 0 else None, val, base))
    return out


def per_cpu_s(proc, field):
    """value() for ratios(): FIELD per CPU-second of PROC."""
    return lambda w: w[proc][field] / w[proc]["cores"] if w[proc]["cores"] > 0 else None


def spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return dict(median=statistics.median(vals), min=min(vals), max=max(vals), n=len(vals))
