#!/usr/bin/env python3
"""Issue #35's benchmark cell: what sampling at every event costs the target
(`scripts/bench --events-only [--events-secs N] [--events-rounds N]`; never
part of a full or --quick run).

Workloads (events_workload.py on the host's /usr/bin/python3, one process
per workload for the whole cell, 1 s of warm-up), each counting its
operations in a file:
  faults   4 MiB mapped, a byte written per page, unmapped: a page fault an
           operation; event page-faults
  openat   open and close /dev/null: an openat an operation; event
           syscalls:sys_enter_openat

Phases, in rounds (their order turned by one each round), each a window of
N seconds over which the workload's operations are counted (read once the
profiler is attached, and N s later):
  none     nobody profiles it
  pyprof   pyprof-bpf record -p PID -e EVENT (every event: a Python stack per
           page fault / openat), collapsed to a file
  perf     perf record -e EVENT -c 1 -g -p PID (every event: a frame-pointer
           call chain each), to a file in the cell's work directory
Reported per workload: the operations a second in each phase (the median
over rounds) and each profiled phase's over the unprofiled one; the
profiler's CPU (user + system, wait4's rusage) and its samples (pyprof-bpf's
summary; perf's "Captured ... (N samples)").
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import cell_files                         # noqa: E402
from hostwide import Procs, copy_binary   # noqa: E402

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
PYTHON = "/usr/bin/python3"
PERF = "/usr/bin/perf"
WORKLOADS = (("faults", "page-faults"), ("openat", "syscalls:sys_enter_openat"))
PHASES = ("none", "pyprof", "perf")
ATTACH_S = 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Error(Exception):
    """An error of the benchmark itself."""


def counter(path):
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


class Bench:
    def __init__(self, binary, secs, rounds, work, logdir):
        self.binary, self.secs, self.rounds = binary, secs, rounds
        self.work, self.logdir = work, logdir
        self.procs = Procs()

    def start_workload(self, kind):
        path = os.path.join(self.work, kind + ".counter")
        out = open(os.path.join(self.logdir, "workload-%s.log" % kind), "a")
        p = self.procs.start([PYTHON, os.path.join(HERE, "events_workload.py"), path, kind],
                             out)
        out.close()
        deadline = time.monotonic() + 60
        while not os.path.exists(path) or os.path.getsize(path) < 8:
            if p.poll() is not None or time.monotonic() > deadline:
                raise Error("workload %s did not start" % kind)
            time.sleep(0.05)
        time.sleep(1)
        return p, path

    def argv(self, phase, pid, event, name):
        if phase == "pyprof":
            return [self.binary, "record", "-p", str(pid), "-e", event, "-d",
                    str(self.secs + 1), "--format", "collapsed",
                    "-o", os.path.join(self.work, name + ".folded")]
        return [PERF, "record", "-e", event, "-c", "1", "-g", "-p", str(pid),
                "-o", os.path.join(self.work, name + ".data"), "--", "sleep",
                str(self.secs + 1)]

    def attached(self, phase, logpath, t0):
        """pyprof-bpf: its start line; perf: half a second (no such line)."""
        if phase == "perf":
            return time.monotonic() - t0 >= 0.5
        with open(logpath, errors="replace") as f:
            return "pyprof-bpf: sampling process" in f.read()

    def window(self, phase, pid, path, event, name):
        """(operations a second over the window, profiler CPU s, samples)."""
        logpath = os.path.join(self.logdir, name + ".log")
        p = None
        if phase != "none":
            argv = self.argv(phase, pid, event, name)
            with open(logpath, "w") as logf:
                logf.write("$ %s\n" % " ".join(argv))
                logf.flush()
                p = self.procs.start(argv, logf)
            t0 = time.monotonic()
            while not self.attached(phase, logpath, t0):
                if p.poll() is not None or time.monotonic() - t0 > ATTACH_S:
                    raise Error("%s did not attach (log %s)" % (phase, logpath))
                time.sleep(0.02)
        c0, w0 = counter(path), time.monotonic()
        time.sleep(self.secs)
        c1, w1 = counter(path), time.monotonic()
        if p is None:
            return (c1 - c0) / (w1 - w0), None, None
        _, status, ru = os.wait4(p.pid, 0)
        self.procs.items.remove(p)
        if os.waitstatus_to_exitcode(status) != 0:
            raise Error("%s exited %s (log %s)" % (phase, status, logpath))
        with open(logpath, errors="replace") as f:
            text = f.read()
        m = (re.search(r"pyprof-bpf: (\d+) samples in", text) if phase == "pyprof" else
             re.search(r"\((\d+) samples\)", text))
        return (c1 - c0) / (w1 - w0), ru.ru_utime + ru.ru_stime, int(m.group(1)) if m else None

    def run(self):
        res = {"secs": self.secs, "rounds": self.rounds, "runs": []}
        try:
            for kind, event in WORKLOADS:
                p, path = self.start_workload(kind)
                for rnd in range(self.rounds):
                    order = PHASES[rnd % 3:] + PHASES[:rnd % 3]
                    for phase in order:
                        name = "%s-%s-%d" % (kind, phase, rnd)
                        rate, cpu, samples = self.window(phase, p.pid, path, event, name)
                        log("events: %s %s round %d: %.0f ops/s%s" % (
                            kind, phase, rnd + 1, rate,
                            "" if cpu is None else ", CPU %.2f s, %s samples" % (cpu, samples)))
                        res["runs"].append({"workload": kind, "event": event, "phase": phase,
                                            "round": rnd, "ops_per_s": rate, "cpu_s": cpu,
                                            "samples": samples})
                self.procs.kill(p)
        finally:
            self.procs.kill_all()
        return res


def text(res):
    lines = ["## -e EVENT: the target's throughput while every event is sampled (issue #35)",
             "",
             "%d rounds of %d s windows; medians over rounds. pyprof-bpf: `record -e EVENT` "
             "(a Python stack per event); perf: `perf record -e EVENT -c 1 -g` (a "
             "frame-pointer call chain per event)." % (res["rounds"], res["secs"]),
             "",
             "| workload | event | phase | ops/s | of unprofiled | profiler CPU (s) | "
             "samples |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for kind, event in WORKLOADS:
        runs = [r for r in res["runs"] if r["workload"] == kind]
        base = statistics.median(r["ops_per_s"] for r in runs if r["phase"] == "none")
        for phase in PHASES:
            rs = [r for r in runs if r["phase"] == phase]
            if not rs:
                continue
            rate = statistics.median(r["ops_per_s"] for r in rs)
            cpu = [r["cpu_s"] for r in rs if r["cpu_s"] is not None]
            smp = [r["samples"] for r in rs if r["samples"] is not None]
            lines.append("| %s | `%s` | %s | %.0f | %.3f | %s | %s |" % (
                kind, event, phase, rate, rate / base if base else 0,
                "%.2f" % statistics.median(cpu) if cpu else "-",
                "%d" % statistics.median(smp) if smp else "-"))
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "events", res, text(res), BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --events-only",
                                 description="issue #35: the target's throughput while "
                                             "pyprof-bpf -e and perf record -e sample every "
                                             "event")
    ap.add_argument("--events-secs", type=int, default=4, metavar="N",
                    help="each window's length (default 4)")
    ap.add_argument("--events-rounds", type=int, default=3, metavar="N",
                    help="rounds (default 3)")
    cell_files.add_common_args(ap, "events", BENCH_DIR, REPO)
    args = ap.parse_args(argv)
    if cell_files.reprint(args, text):
        return 0
    if os.geteuid() != 0:
        log("events: must run as root")
        return 2
    if not os.access(PERF, os.X_OK):
        log("events: %s is missing: scripts/install-peers.sh installs it" % PERF)
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir, logdir = cell_files.make_outdir(args, "events", BENCH_DIR, stamp)
    work = os.path.join(outdir, "work")
    os.makedirs(work, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("events: %d rounds x %d workloads x %d phases, %d s each (about %.0f s); "
            "results in %s" % (args.events_rounds, len(WORKLOADS), len(PHASES),
                               args.events_secs, args.events_rounds * len(WORKLOADS) *
                               len(PHASES) * (args.events_secs + 2), outdir))
        res = Bench(binary, args.events_secs, args.events_rounds, work, logdir).run()
        res["git"], res["version"] = git, version
    except KeyboardInterrupt:
        log("events: interrupted")
        return 130
    except (Error, RuntimeError, OSError, subprocess.SubprocessError) as e:
        log("events: ERROR: %s" % e)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(save(outdir, res))
    log("events: %s/events.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
