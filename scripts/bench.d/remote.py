#!/usr/bin/env python3
"""Issue #26's benchmark cell: the remote backend beside --blocking, CPython
3.15's own profiler (with and without --blocking) and the BPF backend, one
after the other on the same running programs (`scripts/bench --remote-only
[--remote-secs N]`; never part of a full or --quick run).

The programs: tests/targets/real_sympy.py, real_docutils.py and
real_stdlib.py (tests/test_real_programs.py's programs whose stacks move
fastest: the ones its --blocking cases run), and docutils_sections.py
("docutils-sections": docutils rendering one 60-section document, a bullet
list and a note in each section, again and again: issue #38 item 3's
workload, on which the remote backend gave up 2-4.5% of its stacks; its
tree walks nest generators as deep as the document), each on the sid
root's python3.15 (Debian's python3-sympy, python3-docutils), started as
that test starts them (the script staged into the root's /tmp, `chroot ROOT
python3.15 SCRIPT SECONDS`, "ready" on stdout when its loop starts), but in a private mount
namespace with /proc mounted inside the root (as tests/test_views_callgraph.py's
start(mount_proc=True) and async_chains.py do), so that CPython's profiler,
run in the root through `nsenter --mount --target=PID`, sees the same pids.

For each program, on one running target: N s unprofiled, then N s each (-d N)
of, in this order,
  remote            pyprof-bpf -p PID --backend remote -F 999 -d N --format collapsed
  remote-blocking   the same with --blocking (the target's threads stopped by
                    ptrace for each tick's reads)
  bpf               pyprof-bpf -p PID -F 999 -d N --format collapsed
                    (the default backend; the start line must say bpf)
  cpython           python3.15 -m profiling.sampling attach -r 1khz -d N --collapsed PID
  cpython-blocking  the same with --blocking
(CPython's default --mode wall, main thread only: the programs have one
thread, always on the CPU.) Measured for each:
- samples taken (ours: its end summary's "N samples", [read-fault] ones
  included; CPython's: "Captured N samples", its failed reads included);
- the unread share: ours, the weight of the collapsed stacks with a
  [read-fault] frame over all the weight (with the summary's "N errors"
  beside it, and the share of every unnamed marker by
  tests/tools/unnamed_share.py); CPython's, its printed "Error rate" (the
  samples whose read raised: a torn or failed read, no stack written);
- the profiler's CPU per sample: its process's utime + stime (wait4's
  rusage, start-up and exit included) over its samples taken, and over its
  samples read (unread ones left out); without start-up too (ours: its CPU
  when it printed its "sampling process" line; CPython's: an `attach -d 0`
  run on the same target beforehand); for the BPF backend also its BPF
  programs' run time (kernel BPF statistics), which the kernel charges to the
  target's ticks;
- --blocking: the stop share pyprof-bpf prints ("the target's threads were
  stopped N times, X ms each on average, Y% of the time"); CPython prints
  none;
- the target's CPU (cores) over the sampling: the programs report no progress
  while they run (only a total at their end), so no throughput; a stopped
  thread is off the CPU, so --blocking shows here. Ours over the -d window
  from its "sampling process" line; CPython's over the seconds it says it
  sampled, up to its exit.

Every process started here is killed on every way out (each leads its own
session and gets SIGKILL if this driver dies).
"""
import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import procstat                   # noqa: E402
import unnamed_share              # noqa: E402
from hostwide import Procs, copy_binary   # noqa: E402

import cell_files

TARGETS = os.path.join(REPO, "tests", "targets")
CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
SID = os.path.join(CACHE, "sid")
PYTHON = "/usr/bin/python3.15"
HZ = 999
# program -> its script in tests/targets
SCRIPTS = {"sympy": "real_sympy.py", "docutils": "real_docutils.py", "stdlib": "real_stdlib.py",
           "docutils-sections": "docutils_sections.py"}
PROGRAMS = tuple(SCRIPTS)
# (key, label, argv after the binary (ours) or after `attach` (CPython))
RUNS = (
    ("remote", "pyprof-bpf --backend remote", ["--backend", "remote"]),
    ("remote-blocking", "pyprof-bpf --backend remote --blocking",
     ["--backend", "remote", "--blocking"]),
    ("bpf", "pyprof-bpf (BPF backend)", []),
    ("cpython", "CPython 3.15 profiling.sampling", []),
    ("cpython-blocking", "CPython 3.15 profiling.sampling --blocking", ["--blocking"]),
)
LABELS = {k: label for k, label, _ in RUNS}
READY_TIMEOUT = 120


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Error(Exception):
    """An error of the benchmark itself."""


def interp_cpu(series, t):
    """The CPU (ns) at time t of [(time, cpu_ns)], linearly interpolated
    (clamped to its ends)."""
    if not series:
        return None
    if t <= series[0][0]:
        return series[0][1]
    for (t0, c0), (t1, c1) in zip(series, series[1:]):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
    return series[-1][1]


def cores_between(series, a, b):
    ca, cb = interp_cpu(series, a), interp_cpu(series, b)
    if ca is None or cb is None or b <= a:
        return None
    return (cb - ca) / 1e9 / (b - a)


class Bench:
    def __init__(self, binary, secs, programs, work, logdir):
        self.binary, self.secs, self.programs = binary, secs, programs
        self.work_host, self.work_seen = work
        self.logdir = logdir
        self.procs = Procs()
        self.target = None
        self.prog = None

    def host(self, name):
        return os.path.join(self.work_host, name)

    def seen(self, name):
        return self.work_seen + "/" + name

    def logpath(self, name):
        return os.path.join(self.logdir, "%s-%s" % (self.prog, name))

    # ----------------------------------------------------------------------
    # the target

    def start(self, prog):
        self.prog = prog
        script = SCRIPTS[prog]
        shutil.copy(os.path.join(TARGETS, script), self.host(script))
        # it outlives every window: the unprofiled one, five profiled ones
        # and CPython's `-d 0` run, with their start-ups
        lifetime = 6 * (self.secs + 20) + 60
        cmd = "mount -t proc proc %s && exec chroot %s %s %s %d" % (
            os.path.join(SID, "proc"), SID, PYTHON, self.seen(script), lifetime)
        out = open(self.logpath("target.log"), "w")
        # sh and chroot exec: the Popen's pid is the Python's
        self.target = self.procs.start(["unshare", "--mount", "--propagation", "private",
                                        "sh", "-c", cmd], out)
        out.close()
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            with open(self.logpath("target.log")) as f:
                text = f.read()
            if re.search(r"^ready$", text, re.M):
                break
            if self.target.poll() is not None:
                raise Error("%s exited (%s) before ready: %s" % (
                    script, self.target.returncode, text.strip()[-600:]))
            if time.monotonic() > deadline:
                raise Error("%s did not print ready in %d s" % (script, READY_TIMEOUT))
            time.sleep(0.05)
        with open("/proc/%d/comm" % self.target.pid) as f:
            if not f.read().startswith("python"):
                raise Error("the target's pid %d is not the Python" % self.target.pid)
        time.sleep(1)           # warm-up: the specializer

    def stop(self):
        if self.target is not None:
            self.procs.kill(self.target)
            self.target = None

    def alive(self):
        if self.target.poll() is not None:
            raise Error("%s exited (%s) during the run" % (SCRIPTS[self.prog],
                                                      self.target.returncode))

    # ----------------------------------------------------------------------
    # one profiler run

    def run_profiler(self, argv, logname, during=None):
        """argv to its end, the target's CPU polled meanwhile: (exit status,
        rusage, stderr+stdout text, [(time, target cpu ns)], start, end)."""
        path = self.logpath(logname)
        series = []
        with open(path, "w") as out:
            t_start = time.monotonic()
            series.append((t_start, procstat.cpu_ns(self.target.pid)))
            p = self.procs.start(argv, out)
            deadline = t_start + self.secs + 120
            while True:
                if during:
                    during(p)
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                now = time.monotonic()
                c = procstat.cpu_ns(self.target.pid)
                if c is not None:
                    series.append((now, c))
                if wpid == p.pid:
                    break
                if now > deadline:
                    raise Error("%s ran 120 s past its duration" % argv[0])
                time.sleep(0.05)
            p.returncode = os.waitstatus_to_exitcode(status)
            self.procs.items.remove(p)
        with open(path) as f:
            return p.returncode, ru, f.read(), series, t_start, now

    def ours(self, key, extra):
        out = self.host("%s.folded" % key)
        logname = "%s.log" % key
        st = {"progs": None, "startup_s": None, "t_sampling": None}

        def during(p):
            if key == "bpf":
                if st["progs"] is None:
                    st["progs"] = procstat.BpfPrograms(p.pid)
                st["progs"].scan()
            if st["t_sampling"] is None:
                with open(self.logpath(logname)) as f:
                    if "sampling process" in f.read():
                        st["t_sampling"] = time.monotonic()
                        ns = procstat.cpu_ns(p.pid)
                        st["startup_s"] = ns / 1e9 if ns is not None else None
        try:
            rc, ru, text, series, t0, t1 = self.run_profiler(
                [self.binary, "-p", str(self.target.pid)] + extra +
                ["-F", str(HZ), "-d", str(self.secs), "--format", "collapsed", "-o", out],
                logname, during)
            bpf_ns, bpf_runs = st["progs"].totals() if st["progs"] else (0, 0)
        finally:
            if st["progs"]:
                st["progs"].close()
        m = re.search(r"(\d+) samples in ([\d.]+) s .*?, (\d+) lost, (\d+) truncated, "
                      r"(\d+) errors", text)
        if rc or not m or not os.path.exists(out):
            raise Error("pyprof-bpf %s exited %d: %s" % (" ".join(extra), rc,
                                                         text.strip()[-600:]))
        b = re.search(r"sampling process \d+ .* with the (\w+) backend", text)
        backend = b.group(1).lower() if b else "?"     # "BPF" or "remote"
        want = "bpf" if key == "bpf" else "remote"
        if backend != want:
            raise Error("pyprof-bpf %s sampled with the %s backend, not %s: %s" % (
                " ".join(extra), backend, want, text.strip()[-600:]))
        samples, seconds = int(m.group(1)), float(m.group(2))
        r = dict(backend=backend, samples=samples, seconds=seconds, lost=int(m.group(3)),
                 truncated=int(m.group(4)), errors=int(m.group(5)),
                 cpu_s=ru.ru_utime + ru.ru_stime, startup_cpu_s=st["startup_s"],
                 bpf_s=bpf_ns / 1e9, bpf_runs=bpf_runs, maxrss_mb=ru.ru_maxrss / 1024,
                 summary=[ln for ln in text.strip().splitlines() if ln.startswith("pyprof-bpf:")])
        s = re.search(r"--blocking: the target's threads were stopped (\d+) times, ([\d.]+) ms "
                      r"each on average, ([\d.]+)% of the time", text)
        if s:
            r.update(stops=int(s.group(1)), stop_ms=float(s.group(2)),
                     stop_pct=float(s.group(3)))
        elif "--blocking" in extra:
            raise Error("pyprof-bpf --blocking did not say how long the threads were "
                        "stopped: %s" % text.strip()[-600:])
        with open(out, "rb") as f:
            folded = f.read()
        with gzip.open(self.logpath("%s.folded.gz" % key), "wb") as f:
            f.write(folded)
        os.unlink(out)
        sh = unnamed_share.measure(unnamed_share.parse(
            folded.decode("utf-8", "surrogateescape")))
        r.update(weight=sh.total, read_fault_weight=sh.by_marker.get("[read-fault]", 0),
                 unnamed_share=sh.share,
                 markers={k: v / sh.total for k, v in sh.by_marker.items()} if sh.total else {},
                 claims={k: v / sh.total for k, v in sh.by_claim.items()} if sh.total else {})
        r["unread"] = r["read_fault_weight"] / sh.total if sh.total else None
        r["read"] = samples - round(samples * (r["unread"] or 0))
        if st["t_sampling"] is not None:
            r["target_cores"] = cores_between(series, st["t_sampling"],
                                              min(st["t_sampling"] + seconds, t1))
        else:
            r["target_cores"] = cores_between(series, t0, t1)
        r["target_cores_run"] = cores_between(series, t0, t1)
        return r

    def cpython_argv(self, extra, secs, name):
        return (["nsenter", "--mount", "--target=%d" % self.target.pid, "chroot", SID, PYTHON,
                 "-m", "profiling.sampling", "attach"] + extra +
                ["-r", "1khz", "-d", str(secs), "--collapsed", "-o", self.seen(name),
                 str(self.target.pid)])

    def cpython(self, key, extra):
        name = "%s.collapsed" % key
        rc, ru, text, series, t0, t1 = self.run_profiler(
            self.cpython_argv(extra, self.secs, name), "%s.log" % key)
        m = re.search(r"Captured ([\d,]+) samples? in ([\d.]+) seconds", text)
        e = re.search(r"Error rate: ([\d.]+)", text)
        if rc or not m or not e or not os.path.exists(self.host(name)):
            raise Error("profiling.sampling attach %s exited %d: %s" % (
                " ".join(extra), rc, text.strip()[-600:]))
        missed = re.search(r"missed ([\d,]+) samples", text)
        n, seconds = int(m.group(1).replace(",", "")), float(m.group(2))
        errors = round(n * float(e.group(1)) / 100)
        weight = empty = 0
        with open(self.host(name), encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                stack, _, w = line.rstrip("\n").rpartition(" ")
                weight += int(w)
                if all(re.fullmatch(r"tid:\d+", x) for x in stack.split(";")):
                    empty += int(w)
        with open(self.host(name), "rb") as f, \
                gzip.open(self.logpath("%s.collapsed.gz" % key), "wb") as g:
            shutil.copyfileobj(f, g)
        os.unlink(self.host(name))
        r = dict(samples=n, seconds=seconds, error_pct=float(e.group(1)), errors=errors,
                 unread=errors / n if n else None, read=n - errors,
                 missed=int(missed.group(1).replace(",", "")) if missed else 0,
                 weight=weight, empty_stacks=empty,
                 cpu_s=ru.ru_utime + ru.ru_stime, bpf_s=0.0, maxrss_mb=ru.ru_maxrss / 1024,
                 summary=[ln for ln in text.strip().splitlines()
                          if re.match(r"(Captured|Sample rate|Error rate|Warning)", ln)])
        r["target_cores"] = cores_between(series, max(t0, t1 - seconds), t1)
        r["target_cores_run"] = cores_between(series, t0, t1)
        return r

    def cpython_startup(self):
        """(CPU s, wall s) of `attach -d 0` on the target: CPython's profiler's
        start-up and exit, no sample taken (run outside the windows)."""
        name = "cpython-d0.collapsed"
        t = time.monotonic()
        rc, ru, text, _, _, _ = self.run_profiler(self.cpython_argv([], 0, name),
                                                  "cpython-d0.log")
        if rc:
            raise Error("profiling.sampling attach -d 0 exited %d: %s" % (rc, text.strip()[-600:]))
        if os.path.exists(self.host(name)):
            os.unlink(self.host(name))
        return ru.ru_utime + ru.ru_stime, time.monotonic() - t

    def idle(self):
        c0, t0 = procstat.cpu_ns(self.target.pid), time.monotonic()
        time.sleep(self.secs)
        c1, t1 = procstat.cpu_ns(self.target.pid), time.monotonic()
        return dict(target_cores=(c1 - c0) / 1e9 / (t1 - t0), seconds=t1 - t0)

    # ----------------------------------------------------------------------

    def run(self):
        res = dict(seconds=self.secs, hz=HZ, programs=list(self.programs), windows=[],
                   loadavg_start=os.getloadavg(), cpus=os.cpu_count(),
                   started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        probe = subprocess.run(["chroot", SID, PYTHON, "-c", "import profiling.sampling, sympy, "
                                "docutils; import sys; print(sys.version.split()[0])"],
                               capture_output=True, text=True, timeout=120)
        if probe.returncode:
            raise Error("python3.15 in %s lacks profiling.sampling, sympy or docutils (make "
                        "setup installs them there): %s" % (SID, probe.stderr.strip()[-300:]))
        res["python"] = probe.stdout.strip()
        try:
            with procstat.BpfStats() as stats:
                res["bpf_stats"] = stats.how
                for prog in self.programs:
                    log("remote: %s: starting" % SCRIPTS[prog])
                    self.start(prog)
                    try:
                        d0_cpu, d0_wall = self.cpython_startup()
                        log("remote: %s: unprofiled, %d s" % (prog, self.secs))
                        self.alive()
                        r = self.idle()
                        r.update(program=prog, who="base")
                        res["windows"].append(r)
                        log("remote:   target %.2f cores" % r["target_cores"])
                        for key, label, extra in RUNS:
                            log("remote: %s: %s, %d s" % (prog, label, self.secs))
                            self.alive()
                            if key.startswith("cpython"):
                                r = self.cpython(key, extra)
                                r.update(startup_cpu_s=d0_cpu, startup_wall_s=d0_wall)
                            else:
                                r = self.ours(key, extra)
                            self.alive()
                            r.update(program=prog, who=key)
                            derive(r)
                            res["windows"].append(r)
                            log("remote:   %s" % brief(r))
                    finally:
                        self.stop()
        finally:
            self.procs.kill_all()
        res["loadavg_end"] = os.getloadavg()
        return res


def derive(r):
    n = max(1, r["samples"])
    r["samples_per_s"] = r["samples"] / max(r["seconds"], 1e-3)
    r["us_per_sample"] = 1e6 * r["cpu_s"] / n
    r["us_per_read_sample"] = 1e6 * r["cpu_s"] / max(1, r["read"])
    r["us_per_sample_bpf"] = 1e6 * (r["cpu_s"] + r["bpf_s"]) / n
    if r.get("startup_cpu_s") is not None:
        r["us_per_sample_steady"] = 1e6 * max(0.0, r["cpu_s"] - r["startup_cpu_s"]) / n
        r["us_per_sample_steady_bpf"] = r["us_per_sample_steady"] + 1e6 * r["bpf_s"] / n
    else:
        r["us_per_sample_steady"] = r["us_per_sample_steady_bpf"] = None


def brief(r):
    s = "%d samples, unread %s, CPU %.3f s (%.1f us/sample" % (
        r["samples"], pct(r["unread"]), r["cpu_s"], r["us_per_sample"])
    if r["bpf_s"]:
        s += ", %.1f with BPF" % r["us_per_sample_bpf"]
    s += ")"
    if r.get("stop_pct") is not None:
        s += ", stopped %.1f%% of the time" % r["stop_pct"]
    if r.get("target_cores") is not None:
        s += ", target %.2f cores" % r["target_cores"]
    return s


def pct(x, digits=1):
    return "-" if x is None else "%.*f%%" % (digits, 100 * x)


# --------------------------------------------------------------------------
# the report

def text(res):
    lines = ["## The remote backend beside --blocking, CPython 3.15 and BPF (issue #26)", ""]
    lines.append("%s; python3.15 %s in the sid root; %d s windows at %d Hz (CPython: -r 1khz) "
                 "on one running target per program, one after the other; %d CPUs, load "
                 "average %s at the start, %s at the end; pyprof-bpf %s (%s); BPF "
                 "statistics: %s" % (
                     res["started"], res.get("python", "?"), res["seconds"], res["hz"],
                     res["cpus"], "/".join("%.1f" % x for x in res["loadavg_start"]),
                     "/".join("%.1f" % x for x in res["loadavg_end"]),
                     re.sub(r"^pyprof-bpf ", "", res.get("version", "?")), res.get("git", "?"),
                     res.get("bpf_stats", "?")))
    lines.append("")
    lines += ["| program | profiler | samples | /s | unread | CPU/sample (us) | "
              "CPU/read sample (us) | CPU/sample w/o start-up (us) | stopped | "
              "target cores |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def num(v, fmt):
        return "-" if v is None else fmt % v
    for prog in res["programs"]:
        for w in res["windows"]:
            if w["program"] != prog:
                continue
            if w["who"] == "base":
                lines.append("| %s | unprofiled | | | | | | | | %.2f |" % (
                    prog, w["target_cores"]))
                continue
            bpf = w["who"] == "bpf"
            lines.append("| %s | %s | %d | %.0f | %s | %s | %s | %s | %s | %s |" % (
                prog, LABELS[w["who"]], w["samples"], w["samples_per_s"], pct(w["unread"], 2),
                "%.1f%s" % (w["us_per_sample"], " (%.1f +BPF)" % w["us_per_sample_bpf"]
                            if bpf else ""),
                num(w["us_per_read_sample"], "%.1f"),
                "%s%s" % (num(w["us_per_sample_steady"], "%.1f"),
                          " (%s +BPF)" % num(w["us_per_sample_steady_bpf"], "%.1f")
                          if bpf and w["us_per_sample_steady"] is not None else ""),
                "%.1f%% (%d x %.3f ms)" % (w["stop_pct"], w["stops"], w["stop_ms"])
                if w.get("stop_pct") is not None else "-",
                num(w.get("target_cores"), "%.2f")))
    lines.append("")
    lines.append("unread: ours, the [read-fault] weight of the collapsed output over all of "
                 "it; CPython's, its \"Error rate\" (failed reads, no stack written). "
                 "CPU/sample: the profiler process's user + system time, start-up included, "
                 "over its samples taken; the BPF backend's also with its programs' run time "
                 "(charged to the target's ticks). Start-up: ours up to its \"sampling "
                 "process\" line, CPython's an `attach -d 0` run on the same target. target "
                 "cores: the target's CPU over the sampling (the programs report no "
                 "throughput while they run).")
    lines.append("")
    for w in res["windows"]:
        if w["who"] == "base":
            continue
        extra = []
        if w["who"].startswith("cpython"):
            extra.append("error rate %.2f%% (%d samples), %d missed (behind its schedule), "
                         "%d samples in its output (%d without a frame), start-up + exit "
                         "CPU %.3f s" % (w["error_pct"], w["errors"], w["missed"], w["weight"],
                                         w["empty_stacks"], w["startup_cpu_s"]))
        else:
            extra.append("%d errors, %d lost, %d truncated in its summary; unnamed %s%s; "
                         "start-up CPU %s s" % (
                             w["errors"], w["lost"], w["truncated"], pct(w["unnamed_share"], 2),
                             " (%s)" % ", ".join("%s %s" % (k, pct(v, 2)) for k, v in
                                                  sorted(w["markers"].items(),
                                                         key=lambda kv: -kv[1]))
                             if w["markers"] else "",
                             num(w["startup_cpu_s"], "%.3f")))
            if w["bpf_s"]:
                extra.append("BPF %.3f s (%.1f us/sample)" % (
                    w["bpf_s"], 1e6 * w["bpf_s"] / max(1, w["samples"])))
        lines.append("- %s, %s: %s" % (w["program"], LABELS[w["who"]], "; ".join(extra)))
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "remote", res, text(res), BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --remote-only",
                                 description="issue #26: the remote backend, --blocking, "
                                             "CPython 3.15's profiling.sampling (and "
                                             "--blocking) and the BPF backend on real programs")
    ap.add_argument("--remote-secs", type=int, default=5, metavar="N",
                    help="each window's length (default 5)")
    ap.add_argument("--remote-programs", default=",".join(PROGRAMS), metavar="LIST",
                    help="of %s (default: all)" % ",".join(PROGRAMS))
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-remote)" % BENCH_DIR)
    ap.add_argument("--report", metavar="JSON",
                    help="print the report of a finished run's remote.json again, and exit")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            print(text(json.load(f)))
        return 0
    if os.geteuid() != 0:
        log("remote: must run as root")
        return 2
    programs = [p for p in args.remote_programs.split(",") if p]
    if args.remote_secs < 1 or not programs or any(p not in PROGRAMS for p in programs):
        log("remote: --remote-secs must be at least 1, --remote-programs of %s" %
            ",".join(PROGRAMS))
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp + "-remote"))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    # the work directory sits inside the sid root, where the target sees it
    wname = "pyprof-remote-bench-%d" % os.getpid()
    work = (os.path.join(SID, "tmp", wname), "/tmp/" + wname)
    os.makedirs(work[0], exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("remote: %d programs, 6 windows of %d s each (about %.0f s); results in %s" % (
            len(programs), args.remote_secs,
            len(programs) * (6 * (args.remote_secs + 2) + 15), outdir))
        res = Bench(binary, args.remote_secs, programs, work, logdir).run()
        res["git"], res["version"] = git, version
    except KeyboardInterrupt:
        log("remote: interrupted")
        return 130
    except (Error, RuntimeError, OSError, procstat.BenchError, subprocess.SubprocessError) as e:
        log("remote: ERROR: %s" % e)
        return 2
    finally:
        shutil.rmtree(work[0], ignore_errors=True)
    print(save(outdir, res))
    log("remote: %s/remote.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
