#!/usr/bin/env python3
"""Issue #33's benchmark cell: the two BPF programs the binary carries, side
by side on this host (`scripts/bench --programs-only [--programs-secs N]
[--programs-rounds N]`; never part of a full or --quick run).

  main     pyprof.bpf.o: its loops through bpf_loop (5.17+)
  noloop   pyprof_noloop.bpf.o: the same loops as bounded loops of global
           functions (the one for kernels 5.10-5.16)

The binary picks one by probing the kernel; PYPROF_BPF_PROGRAM=pyprof or
pyprof_noloop forces it. Each run is
  PYPROF_BPF_PROGRAM=P pyprof-bpf record -p PID -F 999 -d N -v --backend bpf
      --format collapsed -o FILE
and its -v line ("BPF program: P.bpf.o (PYPROF_BPF_PROGRAM says so);
verifier: pyprof_sample N insns ...") must name the program asked for.

Workloads (workload.py on the host's /usr/bin/python3, a fresh process per
workload and round, 1 s of warm-up): one thread 25 frames deep, 32 threads
25 deep, one thread 1,000 deep (under --max-depth's default 2048). In each
round every workload is recorded by both programs, main first in even rounds,
noloop first in odd ones. Measured per run:
- samples (its end summary), and the mean frames per sample of its output;
- pyprof_sample's run time over its runs and over the samples (kernel BPF
  statistics, held on for the whole cell as modes.py holds them; the
  program is found through the profiler's own descriptors, procstat.py):
  with per-CPU events it also runs, briefly, on ticks of other processes,
  so ns per run is an average over those too, ns per sample is all of its
  time over the samples taken;
- the profiler's CPU (user + system, wait4's rusage) per sample, and the
  same without its start-up (the CPU it had used when it printed its
  "sampling process" line: the verifier's load is in there).
Reported: the medians over rounds, and noloop/main.
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
import procstat                           # noqa: E402
from hostwide import Procs, copy_binary   # noqa: E402

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
PYTHON = "/usr/bin/python3"
HZ = 999
WORKLOADS = (("1x25", "1 thread x 25 deep", 1, 25),
             ("32x25", "32 threads x 25 deep", 32, 25),
             ("1x1000", "1 thread x 1,000 deep", 1, 1000))
PROGRAMS = (("main", "pyprof"), ("noloop", "pyprof_noloop"))
BPF_PROG = "pyprof_sample"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Error(Exception):
    """An error of the benchmark itself."""


def stats_sysctl():
    """kernel.bpf_stats_enabled (BpfStats restores it if it has to set it)."""
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            return f.read().strip()
    except OSError:
        return None


class Bench:
    def __init__(self, binary, secs, rounds, work, logdir):
        self.binary, self.secs, self.rounds = binary, secs, rounds
        self.work, self.logdir = work, logdir
        self.procs = Procs()

    def start_workload(self, key, threads, depth):
        counters = os.path.join(self.work, "%s.counters" % key)
        if os.path.exists(counters):
            os.unlink(counters)
        out = open(os.path.join(self.logdir, "workload-%s.log" % key), "a")
        p = self.procs.start([PYTHON, os.path.join(HERE, "workload.py"), counters,
                              str(threads), str(depth)], out)
        out.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                with open(counters, "rb") as f:
                    if struct.unpack("<Q", f.read(8))[0] == 1:
                        break
            except (OSError, struct.error):
                pass
            if p.poll() is not None:
                raise Error("workload %s exited (%s) before spinning" % (key, p.returncode))
            if time.monotonic() > deadline:
                raise Error("workload %s not spinning after 60 s" % key)
            time.sleep(0.05)
        time.sleep(1)               # warm-up: the specializer
        return p

    def record(self, pid, prog, name):
        out = os.path.join(self.work, name + ".folded")
        logpath = os.path.join(self.logdir, name + ".log")
        argv = ["env", "PYPROF_BPF_PROGRAM=" + prog, self.binary, "record", "-p", str(pid),
                "-F", str(HZ), "-d", str(self.secs), "-v", "--backend", "bpf",
                "--format", "collapsed", "-o", out]
        with open(logpath, "w") as logf:
            logf.write("$ %s\n" % " ".join(argv))
            logf.flush()
            p = self.procs.start(argv, logf)        # env execs: p.pid is the profiler
        progs = procstat.BpfPrograms(p.pid)
        startup_s = None
        try:
            deadline = time.monotonic() + self.secs + 120
            while True:
                progs.scan()
                if startup_s is None:
                    with open(logpath, errors="replace") as f:
                        if "sampling process" in f.read():
                            ns = procstat.cpu_ns(p.pid)
                            startup_s = ns / 1e9 if ns is not None else None
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if wpid == p.pid:
                    break
                if time.monotonic() > deadline:
                    raise Error("pyprof-bpf ran 120 s past its duration (log %s)" % logpath)
                time.sleep(0.05)
            p.returncode = os.waitstatus_to_exitcode(status)
            self.procs.items.remove(p)
            bpf_ns, bpf_runs = progs.per_program().get(BPF_PROG, (0, 0))
        finally:
            progs.close()
        with open(logpath, errors="replace") as f:
            text = f.read()
        tail = text.strip()[-600:]
        v = re.search(r"BPF program: (\S+) \(([^)]*)\); verifier: %s (\d+) insns" % BPF_PROG, text)
        m = re.search(r"(\d+) samples in ([\d.]+) s .*?, (\d+) lost, (\d+) truncated, "
                      r"(\d+) errors", text)
        if p.returncode or not v or not m or not os.path.exists(out):
            raise Error("PYPROF_BPF_PROGRAM=%s pyprof-bpf exited %d: %s" % (prog, p.returncode,
                                                                             tail))
        if v.group(1) != prog + ".bpf.o" or "PYPROF_BPF_PROGRAM" not in v.group(2):
            raise Error("PYPROF_BPF_PROGRAM=%s, but pyprof-bpf loaded %s (%s)" % (
                prog, v.group(1), v.group(2)))
        if not bpf_runs:
            raise Error("no run of %s counted: BPF statistics off? (log %s)" % (BPF_PROG, logpath))
        weight = frames = 0
        with open(out, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                stack, _, w = line.rstrip("\n").rpartition(" ")
                weight += int(w)
                frames += int(w) * (stack.count(";") + 1)
        os.unlink(out)
        samples = int(m.group(1))
        n = max(1, samples)
        cpu_s = ru.ru_utime + ru.ru_stime
        return dict(object=v.group(1), insns=int(v.group(3)), samples=samples,
                    seconds=float(m.group(2)), lost=int(m.group(3)),
                    truncated=int(m.group(4)), errors=int(m.group(5)),
                    frames_per_sample=frames / weight if weight else None,
                    bpf_ns=bpf_ns, bpf_runs=bpf_runs, ns_per_run=bpf_ns / bpf_runs,
                    ns_per_sample=bpf_ns / n, cpu_s=cpu_s, startup_cpu_s=startup_s,
                    us_per_sample=1e6 * cpu_s / n,
                    us_per_sample_steady=(1e6 * max(0.0, cpu_s - startup_s) / n
                                          if startup_s is not None else None),
                    maxrss_mb=ru.ru_maxrss / 1024)

    def run(self):
        res = dict(seconds=self.secs, rounds=self.rounds, hz=HZ, runs=[], cpus=os.cpu_count(),
                   kernel=os.uname().release, loadavg_start=os.getloadavg(),
                   sysctl_before=stats_sysctl(),
                   started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        res["python"] = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                                       capture_output=True, text=True).stdout.strip()
        try:
            with procstat.BpfStats() as stats:
                res["bpf_stats"] = stats.how
                for rnd in range(self.rounds):
                    order = PROGRAMS if rnd % 2 == 0 else PROGRAMS[::-1]
                    for key, label, threads, depth in WORKLOADS:
                        wl = self.start_workload(key, threads, depth)
                        try:
                            for who, prog in order:
                                log("programs: round %d/%d, %s, %s, %d s" % (
                                    rnd + 1, self.rounds, label, prog, self.secs))
                                r = self.record(wl.pid, prog, "r%d-%s-%s" % (rnd + 1, key, who))
                                if wl.poll() is not None:
                                    raise Error("workload %s exited during the run" % key)
                                r.update(round=rnd + 1, workload=key, who=who)
                                res["runs"].append(r)
                                log("programs:   %d samples, %s %.0f ns/run, %.0f ns/sample, "
                                    "CPU %.1f us/sample (%s w/o start-up), %d insns" % (
                                        r["samples"], BPF_PROG, r["ns_per_run"],
                                        r["ns_per_sample"], r["us_per_sample"],
                                        num(r["us_per_sample_steady"], "%.1f"), r["insns"]))
                        finally:
                            self.procs.kill(wl)
        finally:
            self.procs.kill_all()
        res["loadavg_end"] = os.getloadavg()
        res["sysctl_after"] = stats_sysctl()
        res["cells"] = summarize(res["runs"])
        return res


# the figures reported per cell: (key, column, format)
COLUMNS = (("insns", "verifier insns", "%d"),
           ("samples", "samples", "%.0f"),
           ("frames_per_sample", "frames/sample", "%.1f"),
           ("ns_per_run", BPF_PROG + " ns/run", "%.0f"),
           ("ns_per_sample", BPF_PROG + " ns/sample", "%.0f"),
           ("us_per_sample", "CPU/sample (us)", "%.1f"),
           ("us_per_sample_steady", "CPU/sample w/o start-up (us)", "%.1f"),
           ("startup_cpu_s", "start-up CPU (ms)", "%.0f"))


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(runs):
    """{workload: {who: {key: median}, "ratio": {key: noloop/main}}}."""
    out = {}
    for key, _, _, _ in WORKLOADS:
        cell = out[key] = {}
        for who, _ in PROGRAMS:
            mine = [r for r in runs if r["workload"] == key and r["who"] == who]
            cell[who] = {k: median([r[k] for r in mine]) for k, _, _ in COLUMNS}
        cell["ratio"] = {k: (cell["noloop"][k] / cell["main"][k]
                             if cell["main"][k] and cell["noloop"][k] is not None else None)
                         for k, _, _ in COLUMNS}
    return out


def num(v, fmt):
    return "-" if v is None else fmt % v


# --------------------------------------------------------------------------
# the report

def text(res):
    lines = ["## The BPF programs side by side: pyprof.bpf.o and pyprof_noloop.bpf.o (issue #33)",
             ""]
    lines.append("%s; kernel %s, %d CPUs; /usr/bin/python3 %s; workload.py, %d Hz, %d s per run, "
                 "%d interleaved rounds (medians); load average %s at the start, %s at the end; "
                 "pyprof-bpf %s (%s); BPF statistics: %s; kernel.bpf_stats_enabled %s before, %s "
                 "after" % (
                     res["started"], res["kernel"], res["cpus"], res.get("python", "?"),
                     res["hz"], res["seconds"], res["rounds"],
                     "/".join("%.1f" % x for x in res["loadavg_start"]),
                     "/".join("%.1f" % x for x in res["loadavg_end"]),
                     re.sub(r"^pyprof-bpf ", "", res.get("version", "?")), res.get("git", "?"),
                     res.get("bpf_stats", "?"), res.get("sysctl_before"),
                     res.get("sysctl_after")))
    lines.append("")
    lines.append("| workload | program | " + " | ".join(c for _, c, _ in COLUMNS) + " |")
    lines.append("| --- | --- |" + " ---: |" * len(COLUMNS))
    labels = {k: label for k, label, _, _ in WORKLOADS}
    for key, cell in res["cells"].items():
        for who, prog in PROGRAMS + (("ratio", None),):
            vals = []
            for k, _, fmt in COLUMNS:
                v = cell[who][k]
                if who == "ratio":
                    vals.append(num(v, "%.2f"))
                else:
                    vals.append(num(v * 1000 if k == "startup_cpu_s" and v is not None else v,
                                    fmt))
            lines.append("| %s | %s | %s |" % (labels[key], prog + ".bpf.o" if prog else
                                              "**noloop/main**", " | ".join(vals)))
    lines.append("")
    lines.append("%s ns/run: its run time (kernel BPF statistics) over its runs, which with "
                 "per-CPU events include brief ones on other processes' ticks; ns/sample: "
                 "all its run time over the samples taken. CPU/sample: the profiler "
                 "process's user + system time (wait4), start-up and exit included, over its "
                 "samples; w/o start-up: less the CPU it had used when it started sampling "
                 "(the verifier's load included). frames/sample: the mean stack length of "
                 "its collapsed output (its Python frames and the comm root)." % BPF_PROG)
    lines.append("")
    for key, _, _, _ in WORKLOADS:
        for who, prog in PROGRAMS:
            rs = [r for r in res["runs"] if r["workload"] == key and r["who"] == who]
            lines.append("- %s, %s: ns/run %s; ns/sample %s; CPU us/sample %s; samples %s; "
                         "lost/truncated/errors %s" % (
                             labels[key], prog,
                             ", ".join("%.0f" % r["ns_per_run"] for r in rs),
                             ", ".join("%.0f" % r["ns_per_sample"] for r in rs),
                             ", ".join("%.1f" % r["us_per_sample"] for r in rs),
                             ", ".join("%d" % r["samples"] for r in rs),
                             ", ".join("%d/%d/%d" % (r["lost"], r["truncated"], r["errors"])
                                       for r in rs)))
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "programs", res, text(res), BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --programs-only",
                                 description="issue #33: pyprof.bpf.o and pyprof_noloop.bpf.o "
                                             "side by side on this host")
    ap.add_argument("--programs-secs", type=int, default=5, metavar="N",
                    help="each run's length (default 5)")
    ap.add_argument("--programs-rounds", type=int, default=3, metavar="N",
                    help="interleaved rounds (default 3)")
    cell_files.add_common_args(ap, "programs", BENCH_DIR, REPO)
    args = ap.parse_args(argv)
    if cell_files.reprint(args, text):
        return 0
    if os.geteuid() != 0:
        log("programs: must run as root")
        return 2
    if args.programs_secs < 1 or args.programs_rounds < 1:
        log("programs: --programs-secs and --programs-rounds must be at least 1")
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir, logdir = cell_files.make_outdir(args, "programs", BENCH_DIR, stamp)
    work = os.path.join(outdir, "work")
    os.makedirs(work, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("programs: %d rounds x %d workloads x 2 programs, %d s each (about %.0f s); "
            "results in %s" % (args.programs_rounds, len(WORKLOADS), args.programs_secs,
                               args.programs_rounds * len(WORKLOADS) *
                               (2 * (args.programs_secs + 2) + 2), outdir))
        res = Bench(binary, args.programs_secs, args.programs_rounds, work, logdir).run()
        res["git"], res["version"] = git, version
    except KeyboardInterrupt:
        log("programs: interrupted")
        return 130
    except (Error, RuntimeError, OSError, procstat.BenchError, subprocess.SubprocessError) as e:
        log("programs: ERROR: %s" % e)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(save(outdir, res))
    log("programs: %s/programs.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
