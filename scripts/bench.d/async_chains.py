#!/usr/bin/env python3
"""Issue #22's benchmark cell: `record --async` beside CPython 3.15's own
`profiling.sampling attach --async-aware`, one after the other on the same
running program (`scripts/bench --async-only [--async-secs N]
[--async-rounds N]`; never part of a full or --quick run).

The program: tests/targets/async_chain_aiohttp.py on the sid root's python3.15
(Debian's python3-aiohttp), KIND task: each request's handler awaits a named
sub-task work-N doing ~2 ms of pure-Python CPU work in cpu_work(); driven by
tests/targets/async_chain_clients.py (4 client threads in another process)
and the server's own 3 in-loop client tasks, as in tests/test_async_chains.py.
The server runs in a private mount namespace with /proc mounted inside the
root (as tests/test_asyncio.py does), so CPython's profiler, run in the root
through `nsenter --mount --target=SERVER`, sees the same pids and paths.

Each round: N s unprofiled, then `pyprof-bpf record -p PID --async -F 999 -d
N --format collapsed`, then `python3.15 -m profiling.sampling attach
--async-aware -r 1000 -d N --collapsed PID` (its default --async-mode
running: the running task's stack, as ours); one more unprofiled window at
the end. Measured for each profiled window:
- samples taken; lost/errored: ours from its end summary on stderr (lost,
  errors, and --async's unread/cut counts), CPython's from its own summary
  ("Captured N samples", "Error rate: X" in % of them, "missed N samples");
- the named-chain share: of the samples whose innermost Python frame is
  cpu_work(), the share whose stack is the whole chain, by the criterion of
  tests/test_async_chains.py's whole_chain() (kind task, as of cbba2c0):
  exactly three tasks, each marker followed by that task's frames: the
  connection's task Task-N outermost (its frames ending in aiohttp's
  RequestHandler.start, which awaits the request's task), the request's
  task Task-N (RequestHandler._handle_request ... handle()), the sub-task
  work-N with cpu_work() alone under it; no marker anywhere. CPython's collapsed
  lines are read into the same shape: `tid:N` left out, `<task>:NAME:0` is
  the task marker `<task NAME>`, `file:QUALNAME:line` a frame QUALNAME; any
  other `<...>` entry (<GC>, <native>) is a marker, which breaks a chain;
- CPU per sample: the profiler process's utime + stime (wait4's rusage: the
  whole run, start-up included; ours also without its start-up, up to its
  "sampling process" line) over its samples taken; for pyprof-bpf also its
  BPF programs' run time (kernel BPF statistics, procstat.BpfPrograms),
  which the kernel charges to the target's ticks, added in a second figure;
- the target's throughput: the out-of-process clients' answered requests a
  second (their count file, rewritten every 0.2 s, timed by its mtime), and
  the server's CPU (cores), profiled and in the unprofiled windows.

The sample rates mean different things: ours samples each thread 999 times a
second of its CPU time (an idle loop is not sampled), CPython's samples the
process 1,000 times a second of wall time (a sample with no task running
yields no stack in --async-aware mode); the shares and the CPU per sample
taken compare, the raw counts do not.

Every process started here is killed on every way out (each leads its own
session and gets SIGKILL if this driver dies).
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procstat                   # noqa: E402
from hostwide import Procs, copy_binary   # noqa: E402

import cell_files

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGETS = os.path.join(REPO, "tests", "targets")
CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
SID = os.path.join(CACHE, "sid")
PYTHON = "/usr/bin/python3.15"
HZ_OURS, HZ_THEIRS = 999, 1000
PERIOD = 1000000000 // HZ_OURS        # ns: one of our samples' weight in collapsed output
CLIENT_THREADS = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")
NAMES = {"ours": "pyprof-bpf record --async -F 999",
         "cpython": "profiling.sampling attach --async-aware -r 1000"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Error(Exception):
    """An error of the benchmark itself."""


# --------------------------------------------------------------------------
# stacks, read into one shape: [names outermost first] with weights in samples

def read_ours(path):
    """[(names, samples)] of pyprof-bpf's collapsed output: a Python frame is
    its function's qualified name, a task marker `<task NAME>`, anything else
    its text (pyprof-bpf's markers are `[...]`)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, w = line.rstrip("\n").rpartition(" ")
            names = []
            for text in stack.split(";")[1:]:           # the comm left out
                if text.startswith("py::"):
                    names.append(urllib.parse.unquote(text[4:]).rsplit(":", 2)[0])
                else:
                    names.append(urllib.parse.unquote(text))
            out.append((names, round(int(w) / PERIOD)))
    return out


def read_cpython(path):
    """[(names, samples)] of profiling.sampling's --collapsed output: `tid:N`
    left out, `<task>:NAME:0` made `<task NAME>`, `file:QUALNAME:line` made
    QUALNAME, any other `<...>` (<GC>, <native>) kept as a marker."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, w = line.rstrip("\n").rpartition(" ")
            names = []
            for text in stack.split(";"):
                if re.fullmatch(r"tid:\d+", text):
                    continue
                m = re.fullmatch(r"<task>:(.*):\d+", text)
                if m:
                    names.append("<task %s>" % m.group(1))
                elif text.startswith("<"):
                    names.append("[%s]" % text.strip("<>"))
                else:
                    parts = text.rsplit(":", 2)
                    names.append(parts[1] if len(parts) == 3 else "[%s]" % text)
            out.append((names, int(w)))
    return out


def is_task(f):
    return f.startswith("<task ")


def is_marker(f):
    return f.startswith("[")


def task_name(m):
    return m[len("<task "):-1]


def whole_chain(fs):
    """None when fs is a sub-task's whole chain (tests/test_async_chains.py's
    whole_chain(), kind task), else why not."""
    if not fs or not is_task(fs[0]):
        return "no root task marker outermost"
    if any(is_marker(f) for f in fs):
        return "a marker: " + " ".join(f for f in fs if is_marker(f))
    marks = [i for i, f in enumerate(fs) if is_task(f)]
    if not re.fullmatch(r"work-\d+", task_name(fs[marks[-1]])):
        return "innermost task %s" % fs[marks[-1]]
    if fs[marks[-1] + 1:] != ["cpu_work"]:
        return "the sub-task's frames: %s" % fs[marks[-1] + 1:]
    if len(marks) != 3:
        return "%d tasks, not the connection's, the request's and the sub-task" % len(marks)
    for a, b in zip(marks, marks[1:]):
        if b == a + 1:
            return "%s without frames" % fs[a]
        if not re.fullmatch(r"Task-\d+", task_name(fs[a])):
            return "awaiter %s" % fs[a]
    # aiohttp 3.14: the connection's task (RequestHandler.start) awaits the
    # request's, which it started eagerly
    if fs[marks[1] - 1] != "RequestHandler.start":
        return "the root task's frames end in %s" % fs[marks[1] - 1]
    handler = fs[marks[-2] + 1:marks[-1]]
    if handler[-1:] != ["handle"]:
        return "the handler's task ends in %s" % handler[-4:]
    if handler[0] != "RequestHandler._handle_request":
        return "the handler's task starts with %s" % handler[0]
    return None


def chains(stacks):
    """The named-chain figures of [(names, samples)]."""
    total = work = whole = marked = 0
    reasons, examples, tasks = collections.Counter(), {}, set()
    for fs, w in stacks:
        total += w
        if any(f in ("[task-frames-unread]", "[tasks-truncated]", "[task-cycle]", "[torn]")
               for f in fs):
            marked += w
        inner = next((f for f in reversed(fs) if not is_task(f) and not is_marker(f)), None)
        if inner != "cpu_work":
            continue
        work += w
        why = whole_chain(fs)
        if why is None:
            whole += w
            tasks.add(fs[max(i for i, f in enumerate(fs) if is_task(f))])
        else:
            key = why.split(":")[0]
            reasons[key] += w
            examples.setdefault(key, ";".join(fs)[:1500])
    return dict(stack_samples=total, cpu_work=work, whole=whole,
                share=whole / work if work else None, work_tasks=len(tasks),
                chain_markers=marked, not_whole=dict(reasons), examples=examples)


# --------------------------------------------------------------------------
# the program and its clients

def answered(path):
    """(requests the clients had answered, when: the count file's mtime, s)."""
    for _ in range(50):
        try:
            st = os.stat(path)
            with open(path) as f:
                return int(f.read()), st.st_mtime_ns / 1e9
        except (OSError, ValueError):
            time.sleep(0.02)
    raise Error("cannot read the clients' count file %s" % path)


class Bench:
    def __init__(self, binary, secs, rounds, work, logdir):
        self.binary, self.secs, self.rounds = binary, secs, rounds
        self.work_host, self.work_seen = work
        self.logdir = logdir
        self.procs = Procs()
        self.server = self.clients = None

    def host(self, name):
        return os.path.join(self.work_host, name)

    def seen(self, name):
        return self.work_seen + "/" + name

    def logfile(self, name):
        return open(os.path.join(self.logdir, name), "w")

    def start(self):
        for f in ("async_chain_aiohttp.py", "async_chain_clients.py"):
            shutil.copy(os.path.join(TARGETS, f), self.host(f))
        probe = subprocess.run(["chroot", SID, PYTHON, "-c", "import aiohttp, profiling.sampling"],
                               capture_output=True, text=True, timeout=120)
        if probe.returncode:
            raise Error("python3.15 in %s lacks aiohttp or profiling.sampling (make test-deps "
                        "installs python3-aiohttp there): %s" % (SID, probe.stderr.strip()[-300:]))
        # the server in a mount namespace of its own with /proc mounted in the root;
        # sh and chroot exec, so the Popen's pid is the Python's
        cmd = "mount -t proc proc %s && exec chroot %s %s %s %s task" % (
            os.path.join(SID, "proc"), SID, PYTHON, self.seen("async_chain_aiohttp.py"),
            self.seen("port"))
        self.server = self.procs.start(["unshare", "--mount", "--propagation", "private",
                                        "sh", "-c", cmd], self.logfile("server.log"))
        port = self.wait_file(self.server, "port", "the aiohttp server")
        with open("/proc/%d/comm" % self.server.pid) as f:
            if not f.read().startswith("python"):
                raise Error("the server's pid %d is not the Python" % self.server.pid)
        self.clients = self.procs.start(["chroot", SID, PYTHON,
                                         self.seen("async_chain_clients.py"), port.strip(),
                                         self.seen("count"), str(CLIENT_THREADS)],
                                        self.logfile("clients.log"))
        self.wait_file(self.clients, "count", "the clients")
        deadline = time.monotonic() + 30
        while answered(self.host("count"))[0] < 50:
            if time.monotonic() > deadline:
                raise Error("the clients got fewer than 50 answers in 30 s")
            time.sleep(0.1)
        time.sleep(2)           # warm-up: the first connections, the specializer

    def wait_file(self, p, name, what):
        deadline = time.monotonic() + 60
        while not os.path.exists(self.host(name)):
            if p.poll() is not None:
                raise Error("%s exited (%s): see %s" % (what, p.returncode, self.logdir))
            if time.monotonic() > deadline:
                raise Error("%s did not start in 60 s" % what)
            time.sleep(0.05)
        with open(self.host(name)) as f:
            return f.read()

    def alive(self):
        for p, what in ((self.server, "the server"), (self.clients, "the clients")):
            if p.poll() is not None:
                raise Error("%s exited (%s) during the run" % (what, p.returncode))

    # ----------------------------------------------------------------------

    def window(self, run):
        """Runs run() (which returns a dict), with the throughput and the
        server's CPU over it added."""
        self.alive()
        n0, t0 = answered(self.host("count"))
        c0 = procstat.cpu_ns(self.server.pid)
        w0 = time.monotonic()
        r = run()
        w1 = time.monotonic()
        c1 = procstat.cpu_ns(self.server.pid)
        n1, t1 = answered(self.host("count"))
        self.alive()
        r.update(requests=n1 - n0, req_per_s=(n1 - n0) / max(t1 - t0, 1e-3),
                 server_cores=(c1 - c0) / 1e9 / (w1 - w0), elapsed_s=w1 - w0)
        return r

    def idle(self):
        time.sleep(self.secs)
        return {}

    def run_profiler(self, argv, logname, during=None):
        """argv to its end: (exit status, rusage, stderr+stdout text)."""
        path = os.path.join(self.logdir, logname)
        with open(path, "w") as out:
            p = self.procs.start(argv, out)
            deadline = time.monotonic() + self.secs + 120
            while True:
                if during:
                    during(p)
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if wpid == p.pid:
                    break
                if time.monotonic() > deadline:
                    raise Error("%s ran %d s past its duration" % (argv[0], 120))
                time.sleep(0.05)
            p.returncode = os.waitstatus_to_exitcode(status)
            self.procs.items.remove(p)
        with open(path) as f:
            return p.returncode, ru, f.read()

    def ours(self, tag):
        out = self.host("ours-%s.folded" % tag)
        st = {"progs": None, "startup_s": None}

        def during(p):
            if st["progs"] is None:
                st["progs"] = procstat.BpfPrograms(p.pid)
            st["progs"].scan()
            if st["startup_s"] is None:
                with open(os.path.join(self.logdir, "ours-%s.log" % tag)) as f:
                    if "sampling process" in f.read():
                        ns = procstat.cpu_ns(p.pid)
                        st["startup_s"] = ns / 1e9 if ns is not None else None
        try:
            rc, ru, text = self.run_profiler(
                [self.binary, "record", "-p", str(self.server.pid), "--async", "-F",
                 str(HZ_OURS), "-d", str(self.secs), "--format", "collapsed", "-o", out],
                "ours-%s.log" % tag, during)
            bpf_ns, bpf_runs = st["progs"].totals() if st["progs"] else (0, 0)
        finally:
            if st["progs"]:
                st["progs"].close()
        m = re.search(r"(\d+) samples in ([\d.]+) s .*?, (\d+) lost, (\d+) truncated, "
                      r"(\d+) errors", text)
        if rc or not m:
            raise Error("pyprof-bpf record exited %d: %s" % (rc, text.strip()[-600:]))
        a = re.search(r"--async: (.*)", text)
        r = dict(samples=int(m.group(1)), seconds=float(m.group(2)), lost=int(m.group(3)),
                 truncated=int(m.group(4)), errors=int(m.group(5)),
                 async_summary=a.group(1) if a else None,
                 cpu_s=ru.ru_utime + ru.ru_stime, startup_cpu_s=st["startup_s"],
                 bpf_s=bpf_ns / 1e9, bpf_runs=bpf_runs, maxrss_mb=ru.ru_maxrss / 1024)
        r.update(chains(read_ours(out)))
        os.unlink(out)
        return r

    def cpython(self, tag):
        name = "cpython-%s.collapsed" % tag
        rc, ru, text = self.run_profiler(
            ["nsenter", "--mount", "--target=%d" % self.server.pid, "chroot", SID, PYTHON,
             "-m", "profiling.sampling", "attach", "--async-aware", "-r", str(HZ_THEIRS),
             "-d", str(self.secs), "--collapsed", "-o", self.seen(name), str(self.server.pid)],
            "cpython-%s.log" % tag)
        m = re.search(r"Captured ([\d,]+) samples? in ([\d.]+) seconds", text)
        e = re.search(r"Error rate: ([\d.]+)", text)
        if rc or not m or not e or not os.path.exists(self.host(name)):
            raise Error("profiling.sampling attach exited %d: %s" % (rc, text.strip()[-600:]))
        missed = re.search(r"missed ([\d,]+) samples", text)
        n = int(m.group(1).replace(",", ""))
        r = dict(samples=n, seconds=float(m.group(2)), error_pct=float(e.group(1)),
                 errors=round(n * float(e.group(1)) / 100),
                 missed=int(missed.group(1).replace(",", "")) if missed else 0,
                 cpu_s=ru.ru_utime + ru.ru_stime, bpf_s=0.0, maxrss_mb=ru.ru_maxrss / 1024)
        r.update(chains(read_cpython(self.host(name))))
        shutil.copy(self.host(name), os.path.join(self.logdir, name))   # kept: it is small
        os.unlink(self.host(name))
        return r

    def cpython_startup(self, tag):
        """The CPU of `attach --async-aware -d 0` on the server: its start-up
        and exit, no sample taken (run outside the windows)."""
        name = "cpython-%s-d0.collapsed" % tag
        rc, ru, text = self.run_profiler(
            ["nsenter", "--mount", "--target=%d" % self.server.pid, "chroot", SID, PYTHON,
             "-m", "profiling.sampling", "attach", "--async-aware", "-r", str(HZ_THEIRS),
             "-d", "0", "--collapsed", "-o", self.seen(name), str(self.server.pid)],
            "cpython-%s-d0.log" % tag)
        if rc:
            raise Error("profiling.sampling attach -d 0 exited %d: %s" % (rc, text.strip()[-600:]))
        if os.path.exists(self.host(name)):
            os.unlink(self.host(name))
        return ru.ru_utime + ru.ru_stime

    def run(self):
        res = dict(seconds=self.secs, rounds=self.rounds, windows=[],
                   loadavg_start=os.getloadavg(), cpus=os.cpu_count(),
                   started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        try:
            with procstat.BpfStats() as stats:
                res["bpf_stats"] = stats.how
                self.start()
                res["server_threads"] = procstat.thread_count(self.server.pid)
                for rnd in range(1, self.rounds + 1):
                    for who, fn in (("base", self.idle), ("ours", self.ours),
                                    ("cpython", self.cpython)):
                        log("async: round %d: %s, %d s" % (rnd, who, self.secs))
                        tag = "%d" % rnd
                        startup = self.cpython_startup(tag) if who == "cpython" else None
                        r = self.window(fn if who == "base" else (lambda fn=fn: fn(tag)))
                        r.update(who=who, round=rnd)
                        if startup is not None:
                            r["startup_cpu_s"] = startup
                        res["windows"].append(r)
                        log("async:   %s" % brief(r))
                log("async: unprofiled, %d s" % self.secs)
                r = self.window(self.idle)
                r.update(who="base", round=self.rounds + 1)
                res["windows"].append(r)
                log("async:   %s" % brief(r))
        finally:
            self.procs.kill_all()
        res["loadavg_end"] = os.getloadavg()
        return res


def brief(r):
    s = "%.0f req/s, server %.2f cores" % (r["req_per_s"], r["server_cores"])
    if r["who"] != "base":
        s += ", %d samples, named chain %s of %d cpu_work samples, CPU %.3f s%s" % (
            r["samples"], pct(r["share"]), r["cpu_work"], r["cpu_s"],
            ", BPF %.3f s" % r["bpf_s"] if r["who"] == "ours" else "")
    return s


def pct(x):
    return "-" if x is None else "%.1f%%" % (100 * x)


# --------------------------------------------------------------------------
# the report

def summary(res):
    """Per profiler, over its windows: the sums and the derived figures."""
    out = {}
    base = [w for w in res["windows"] if w["who"] == "base"]
    base_rps = sum(w["req_per_s"] for w in base) / len(base)
    base_cores = sum(w["server_cores"] for w in base) / len(base)
    for who in ("ours", "cpython"):
        ws = [w for w in res["windows"] if w["who"] == who]
        s = {k: sum(w.get(k) or 0 for w in ws) for k in (
            "samples", "errors", "lost", "missed", "cpu_s", "bpf_s", "cpu_work", "whole",
            "stack_samples", "chain_markers", "seconds", "startup_cpu_s")}
        s["rounds"] = len(ws)
        s["share"] = s["whole"] / s["cpu_work"] if s["cpu_work"] else None
        s["us_per_sample"] = 1e6 * s["cpu_s"] / max(1, s["samples"])
        s["us_per_sample_bpf"] = 1e6 * (s["cpu_s"] + s["bpf_s"]) / max(1, s["samples"])
        if all(w.get("startup_cpu_s") is not None for w in ws):
            s["us_per_sample_steady"] = 1e6 * (s["cpu_s"] - s["startup_cpu_s"]) / max(1, s["samples"])
            s["us_per_sample_steady_bpf"] = 1e6 * (s["cpu_s"] + s["bpf_s"] - s["startup_cpu_s"]) \
                / max(1, s["samples"])
        s["samples_per_s"] = s["samples"] / max(s["seconds"], 1e-3)
        s["cpu_pct"] = 100 * s["cpu_s"] / max(s["seconds"], 1e-3)
        s["req_per_s"] = sum(w["req_per_s"] for w in ws) / len(ws)
        s["throughput_ratio"] = s["req_per_s"] / base_rps if base_rps else None
        s["server_cores"] = sum(w["server_cores"] for w in ws) / len(ws)
        s["not_whole"] = collections.Counter()
        for w in ws:
            s["not_whole"].update(w["not_whole"])
        s["work_tasks"] = sum(w["work_tasks"] for w in ws)
        out[who] = s
    out["base"] = dict(req_per_s=base_rps, server_cores=base_cores, windows=len(base))
    return out


def text(res):
    s = summary(res)
    o, c = s["ours"], s["cpython"]
    lines = ["## asyncio chains: record --async beside CPython's --async-aware (issue #22)", ""]
    lines.append("%s; %s, %d rounds of %d s windows (unprofiled, pyprof-bpf, CPython), one "
                 "more unprofiled window at the end; %d CPUs, load average %s at the start, "
                 "%s at the end; pyprof-bpf %s (%s); BPF statistics: %s" % (
                     res["started"], "aiohttp server (python3.15, %d thread(s)) with 4 "
                     "out-of-process client threads and 3 in-loop client tasks" %
                     res.get("server_threads", 0), res["rounds"], res["seconds"], res["cpus"],
                     "/".join("%.1f" % x for x in res["loadavg_start"]),
                     "/".join("%.1f" % x for x in res["loadavg_end"]),
                     re.sub(r"^pyprof-bpf ", "", res.get("version", "?")), res.get("git", "?"), res.get("bpf_stats", "?")))
    lines.append("")

    def ratio(a, b):
        return "-" if a is None or not b else "%.2f" % (a / b)

    def cell(v, fmt="%d"):
        return "-" if v is None else fmt % v
    rows = [
        ("samples taken", o["samples"], c["samples"], "%d"),
        ("samples a second (ours: of the server's CPU time; CPython's: of wall time)",
         o["samples_per_s"], c["samples_per_s"], "%.0f"),
        ("lost / errored samples (ours: lost + errors; CPython's: its error rate)",
         o["lost"] + o["errors"], c["errors"], "%d"),
        ("samples with a stack in the output", o["stack_samples"], c["stack_samples"], "%d"),
        ("samples in cpu_work()", o["cpu_work"], c["cpu_work"], "%d"),
        ("of which the whole named chain", o["whole"], c["whole"], "%d"),
        ("**named-chain share**", o["share"] and 100 * o["share"],
         c["share"] and 100 * c["share"], "%.1f%%"),
        ("distinct work-N sub-tasks seen (sum over rounds)", o["work_tasks"], c["work_tasks"],
         "%d"),
        ("profiler CPU, user + system (s)", o["cpu_s"], c["cpu_s"], "%.3f"),
        ("profiler CPU, % of one core", o["cpu_pct"], c["cpu_pct"], "%.2f"),
        ("**CPU per sample (us), process**", o["us_per_sample"], c["us_per_sample"], "%.1f"),
        ("BPF programs' run time (s; charged to the target's ticks)", o["bpf_s"], None, "%.3f"),
        ("**CPU per sample (us), process + BPF**", o["us_per_sample_bpf"], c["us_per_sample"],
         "%.1f"),
        ("profiler start-up + exit CPU (s; ours: up to its \"sampling process\" line; "
         "CPython's: an `attach -d 0` run)", o["startup_cpu_s"] / o["rounds"],
         c["startup_cpu_s"] / c["rounds"], "%.3f"),
        ("CPU per sample (us), process without start-up", o.get("us_per_sample_steady"),
         c.get("us_per_sample_steady"), "%.1f"),
        ("CPU per sample (us), process + BPF without start-up",
         o.get("us_per_sample_steady_bpf"), c.get("us_per_sample_steady"), "%.1f"),
        ("BPF run time per sample (us)", 1e6 * o["bpf_s"] / max(1, o["samples"]), None, "%.1f"),
        ("server's answered requests/s (out-of-process clients)", o["req_per_s"],
         c["req_per_s"], "%.0f"),
        ("  profiled / unprofiled (%.0f req/s)" % s["base"]["req_per_s"],
         o["throughput_ratio"], c["throughput_ratio"], "%.3f"),
        ("server's CPU, cores (unprofiled: %.2f)" % s["base"]["server_cores"],
         o["server_cores"], c["server_cores"], "%.2f"),
    ]
    lines += ["| over %d rounds | pyprof-bpf | CPython 3.15 | pyprof-bpf / CPython |"
              % res["rounds"], "| --- | ---: | ---: | ---: |"]
    for label, a, b, fmt in rows:
        lines.append("| %s | %s | %s | %s |" % (label, cell(a, fmt), cell(b, fmt),
                                                 ratio(a, b)))
    lines.append("")
    lines += ["| round | window | s | samples | lost/err | cpu_work | whole | share | CPU (s) "
              "| BPF (s) | us/sample (+BPF) | req/s | server cores |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: | ---: |"]
    for w in res["windows"]:
        if w["who"] == "base":
            lines.append("| %d | unprofiled | %.1f | | | | | | | | | %.0f | %.2f |" % (
                w["round"], w["elapsed_s"], w["req_per_s"], w["server_cores"]))
            continue
        le = w["errors"] + w.get("lost", 0)
        lines.append("| %d | %s | %.1f | %d | %d | %d | %d | %s | %.3f | %s | %.1f | %.0f | "
                     "%.2f |" % (w["round"], "pyprof-bpf" if w["who"] == "ours" else "CPython",
                                 w["seconds"], w["samples"], le, w["cpu_work"], w["whole"],
                                 pct(w["share"]), w["cpu_s"],
                                 "%.3f" % w["bpf_s"] if w["who"] == "ours" else "-",
                                 1e6 * (w["cpu_s"] + w["bpf_s"]) / max(1, w["samples"]),
                                 w["req_per_s"], w["server_cores"]))
    lines.append("")
    for who in ("ours", "cpython"):
        nw = s[who]["not_whole"]
        if nw:
            lines.append("- %s, cpu_work samples not whole: %s" % (
                NAMES[who], ", ".join("%s: %d" % kv for kv in nw.most_common())))
            ex = next(w["examples"] for w in res["windows"] if w["who"] == who and w["examples"])
            for k, v in list(ex.items())[:3]:
                lines.append("  - e.g. (%s) `%s`" % (k, v[:400]))
    for w in res["windows"]:
        if w["who"] == "ours" and w.get("async_summary"):
            lines.append("- pyprof-bpf round %d: --async: %s" % (w["round"], w["async_summary"]))
        if w["who"] == "cpython":
            lines.append("- CPython round %d: error rate %.2f%%, %d samples missed (behind its "
                         "schedule)" % (w["round"], w["error_pct"], w["missed"]))
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "async", res, text(res), BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --async-only",
                                 description="issue #22: record --async beside CPython 3.15's "
                                             "profiling.sampling --async-aware on an aiohttp "
                                             "application")
    ap.add_argument("--async-secs", type=int, default=10, metavar="N",
                    help="each window's length (default 10)")
    ap.add_argument("--async-rounds", type=int, default=2, metavar="N",
                    help="rounds of unprofiled, pyprof-bpf, CPython (default 2)")
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-async)" % BENCH_DIR)
    ap.add_argument("--report", metavar="JSON",
                    help="print the report of a finished run's async.json again, and exit")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            print(text(json.load(f)))
        return 0
    if os.geteuid() != 0:
        log("async: must run as root")
        return 2
    if args.async_secs < 2 or args.async_rounds < 1:
        log("async: --async-secs must be at least 2, --async-rounds at least 1")
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp + "-async"))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    # the work directory sits inside the sid root, where the server sees it
    wname = "pyprof-async-bench-%d" % os.getpid()
    work = (os.path.join(SID, "tmp", wname), "/tmp/" + wname)
    os.makedirs(work[0], exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("async: %d rounds of 3 windows of %d s (about %.0f s); results in %s" % (
            args.async_rounds, args.async_secs,
            (3 * args.async_rounds + 1) * (args.async_secs + 2) + 15, outdir))
        res = Bench(binary, args.async_secs, args.async_rounds, work, logdir).run()
        res["git"], res["version"] = git, version
    except KeyboardInterrupt:
        log("async: interrupted")
        return 130
    except (Error, RuntimeError, OSError, procstat.BenchError, subprocess.SubprocessError) as e:
        log("async: ERROR: %s" % e)
        return 2
    finally:
        shutil.rmtree(work[0], ignore_errors=True)
    print(save(outdir, res))
    log("async: %s/async.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
