#!/usr/bin/env python3
"""Issue #13 item 5: what pyprof-bpf costs the processes it does not profile
(`scripts/bench --bystander-only`; a full or --quick `scripts/bench` run ends
with it).

Per-CPU events put a timer on every CPU, whatever runs there; per-thread
events tick only while the target's threads run (and cost at each of their
context switches). Measured here: a CPU-bound bystander pinned on each CPU
(taskset), counting iterations into a file shared through the page cache,
while pyprof-bpf records an unrelated target (a Python doing ~2 ms of work
every ~10 ms, on any CPU) with `--events cpu` and with `--events thread`, at
99 Hz, 1 kHz and 10 kHz; and with no profiler at all.

Rounds interleave: each round visits the six profiled conditions in a
shuffled order with a window without any profiler before each and after the
last (B P B P ... P B), so every profiled window has baseline windows on
both sides, as close in time as can be; this shared machine's load drifts,
and the ratio of a window to the mean of its two neighbours cancels most of
it. A profiled window starts SETTLE_S after pyprof-bpf says it samples (its
start-up, the verifier's ~0.3-0.5 s of CPU, is not a steady cost) and ends
before it is stopped (SIGINT) and writes its output. Figures, per condition,
medians over the rounds: the bystanders' iterations per second (both CPUs
summed, and each) against the neighbouring baselines, and their iterations
per CPU-second of their own (the scheduler's share taken out: what the
timer's interrupts cost the work itself); pyprof-bpf's own CPU in the window
(which competes with the bystanders on a machine with no idle CPU).
Target: >= 0.99 at 99 Hz.

Then the profiled process against itself unprofiled (the "self" phase; the
main benchmark's twin runs beside its target, on CPUs whose timers
pyprof-bpf programs, so per-CPU events tick on the twin too and its ratio
hides their cost): a CPU-bound Python, alone on the machine, its loop
SELF_DEPTH frames deep reading the clock as the bystander does, in the same
interleaved rounds, every profiled window recording that very process. Its
short interruptions above the neighbouring baselines are what each sample
costs it (the interrupt and the BPF program's walk of its stack, run in its
own context); its iterations per second and per CPU-second against the
neighbours say the same through the noise.

Every process started here is killed on every way out.
"""
import argparse
import json
import mmap
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

import cell_files

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procstat                   # noqa: E402
from hostwide import BENCH_DIR, REPO, Procs, copy_binary, log   # noqa: E402

PYTHON = "/usr/bin/python3"
RATES = (99, 1000, 10000)
EVENTS = ("cpu", "thread")
SETTLE_S = 0.5
TARGET = 0.99

TARGET_CODE = r"""
import time
def target_work():
    x = 0
    for i in range(40000):
        x += i
    return x
while True:
    target_work()
    time.sleep(0.008)
"""


SELF_DEPTH = 25
# The measured loop (a bystander's, depth 0; the self phase's target's,
# SELF_DEPTH Python frames down, so that each sample walks a stack of some
# depth). It reads the clock at every step (~0.15 us apart): a gap of
# 1.5-60 us between two reads is an interruption on its CPU (a timer
# interrupt and what runs in it, a BPF program included); longer ones are
# the scheduler's (another task ran). Slots: steps/1000, ns lost in short
# gaps, how many.
LOOP_CODE = r"""
import mmap, sys, time
with open(sys.argv[1], "w+b") as f:
    f.truncate(24)
    m = mmap.mmap(f.fileno(), 24)
slot = memoryview(m).cast("Q")
pc = time.perf_counter_ns


def spin():
    n = lost = gaps = 0
    last = pc()
    while True:
        for i in range(1000):
            t = pc()
            d = t - last
            last = t
            if 1500 < d < 60000:
                lost += d
                gaps += 1
        n += 1
        slot[1] = lost
        slot[2] = gaps
        slot[0] = n


def down(k):
    if k:
        down(k - 1)
    else:
        spin()


down(int(sys.argv[2]))
"""


class Counter:
    def __init__(self, path):
        self.path = path
        self.map = None

    def read(self):
        """(steps/1000, ns lost in short gaps, gaps)."""
        if self.map is None:
            try:
                with open(self.path, "rb") as f:
                    if os.fstat(f.fileno()).st_size < 24:
                        return 0, 0, 0
                    self.map = mmap.mmap(f.fileno(), 24, access=mmap.ACCESS_READ)
            except OSError:
                return 0, 0, 0
        v = memoryview(self.map).cast("Q")
        n = v[0]
        return n, v[1], v[2]


def snap(bys):
    return time.monotonic(), [(c.read(), procstat.cpu_ns(p.pid)) for p, c in bys]


def window(bys, secs):
    a = snap(bys)
    time.sleep(secs)
    b = snap(bys)
    dt = b[0] - a[0]
    per = []
    for (r0, c0), (r1, c1) in zip(a[1], b[1]):
        cpu_s = (c1 - c0) / 1e9 if c1 and c0 and c1 > c0 else None
        n = r1[0] - r0[0]
        per.append(dict(iters_s=n / dt, iters_cpu_s=n / cpu_s if cpu_s else None,
                        cpu=cpu_s / dt if cpu_s else None,
                        lost=(r1[1] - r0[1]) / 1e9 / cpu_s if cpu_s else None,
                        gaps=(r1[2] - r0[2]) / cpu_s if cpu_s else None))
    return dict(secs=dt, per=per, iters_s=sum(x["iters_s"] for x in per))


def run(binary, rounds, secs, workdir, logdir, phase="bystanders", seed=13):
    """phase "bystanders": a pinned bystander per CPU, pyprof-bpf on another
    process; "self": one CPU-bound process, pyprof-bpf on it."""
    procs = Procs()
    ncpu = os.cpu_count()
    res = dict(phase=phase, rounds=rounds, secs=secs, cpus=ncpu, loadavg_start=os.getloadavg(),
               started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), windows=[])
    rng = random.Random(seed)
    try:
        bys = []
        if phase == "self":
            path = os.path.join(workdir, "self.count")
            target = procs.start([PYTHON, "-c", LOOP_CODE, path, str(SELF_DEPTH)])
            bys.append((target, Counter(path)))
        else:
            for cpu in range(ncpu):
                path = os.path.join(workdir, "bystander%d.count" % cpu)
                p = procs.start(["taskset", "-c", str(cpu), PYTHON, "-c", LOOP_CODE, path,
                                     "0"])
                bys.append((p, Counter(path)))
            target = procs.start([PYTHON, "-c", TARGET_CODE])
        deadline = time.monotonic() + 20
        while any(c.read()[0] == 0 for _, c in bys):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in bys):
                raise RuntimeError("the %s did not start" % ("target" if phase == "self"
                                                              else "bystanders"))
            time.sleep(0.05)
        time.sleep(1)
        conds = [(ev, rate) for ev in EVENTS for rate in RATES]
        t0 = time.monotonic()
        for rnd in range(1, rounds + 1):
            order = conds[:]
            rng.shuffle(order)
            seq = []
            for c in order:
                seq += [None, c]
            seq.append(None)
            for cond in seq:
                if target.poll() is not None or any(p.poll() is not None for p, _ in bys):
                    raise RuntimeError("the target or a bystander died")
                if cond is None:
                    w = window(bys, secs)
                    w.update(round=rnd, events=None, rate=None)
                else:
                    w = profiled(binary, procs, target.pid, cond, bys, secs, workdir, logdir,
                                 rnd, phase)
                res["windows"].append(w)
                log("[%4.0fs] %s round %d %s: %s %.0f iterations/s%s" % (
                    time.monotonic() - t0, phase, rnd,
                    "%s %d Hz" % cond if cond else "no profiler",
                    "the target" if phase == "self" else "bystanders", w["iters_s"],
                    ", pyprof-bpf %.1f%% of a core" % (100 * w["pyprof_cpu"])
                    if cond else ""))
    finally:
        procs.kill_all()
    res["loadavg_end"] = os.getloadavg()
    return res


def profiled(binary, procs, pid, cond, bys, secs, workdir, logdir, rnd, tag):
    events, rate = cond
    errpath = os.path.join(logdir, "%s-%s-%d-r%d.log" % (tag, events, rate, rnd))
    out = os.path.join(workdir, "bystander.folded")
    with open(errpath, "w") as ef:
        p = procs.start([binary, "-p", str(pid), "-F", str(rate), "--events", events,
                         "-d", str(int(secs + 60)), "--format", "collapsed", "-o", out], ef)
    deadline = time.monotonic() + 60
    while True:
        with open(errpath) as f:
            t = f.read()
        if "pyprof-bpf: sampling" in t:
            break
        if p.poll() is not None or time.monotonic() > deadline:
            procs.kill(p)
            raise RuntimeError("pyprof-bpf did not start: %s" % t.strip()[-300:])
        time.sleep(0.02)
    want = "per-CPU events" if events == "cpu" else "per-thread events"
    if want not in t:
        procs.kill(p)
        raise RuntimeError("pyprof-bpf --events %s did not say %s: %s" % (events, want, t))
    time.sleep(SETTLE_S)
    c0 = procstat.cpu_ns(p.pid)
    w = window(bys, secs)
    c1 = procstat.cpu_ns(p.pid)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    procs.kill(p)
    time.sleep(0.3)
    with open(errpath) as f:
        t = f.read()
    m = re.search(r"(\d+) samples in ([\d.]+) s", t)
    w.update(round=rnd, events=events, rate=rate, samples=int(m.group(1)) if m else None,
             pyprof_cpu=(c1 - c0) / 1e9 / w["secs"] if c0 and c1 else 0.0,
             status=p.returncode)
    try:
        os.unlink(out)
    except OSError:
        pass
    return w


def ratios(res):
    """{(events, rate): [per-window dicts of ratios to the neighbouring baselines]}."""
    ws = res["windows"]
    out = {}
    for i, w in enumerate(ws):
        if w["events"] is None:
            continue
        nb = [ws[j] for j in (i - 1, i + 1) if 0 <= j < len(ws) and ws[j]["events"] is None]
        if not nb:
            continue
        r = dict(round=w["round"], pyprof_cpu=w["pyprof_cpu"])
        r["all"] = w["iters_s"] / statistics.mean(b["iters_s"] for b in nb)
        r["each"] = [w["per"][k]["iters_s"] / statistics.mean(b["per"][k]["iters_s"] for b in nb)
                     for k in range(len(w["per"]))]
        pc = [(w["per"][k]["iters_cpu_s"], [b["per"][k]["iters_cpu_s"] for b in nb])
              for k in range(len(w["per"]))]
        r["per_cpu_s"] = statistics.mean(a / statistics.mean(bb) for a, bb in pc
                                         if a and all(bb)) if all(a and all(bb)
                                                                  for a, bb in pc) else None
        # short interruptions of the bystanders above the baselines': the
        # share of their CPU time lost, and how many more per CPU-second
        lg = [(w["per"][k]["lost"], w["per"][k]["gaps"], [b["per"][k] for b in nb])
              for k in range(len(w["per"]))]
        if all(lo is not None and ga is not None and all(b["lost"] is not None for b in bb)
               for lo, ga, bb in lg):
            r["lost"] = statistics.mean(lo - statistics.mean(b["lost"] for b in bb)
                                        for lo, _, bb in lg)
            r["gaps"] = statistics.mean(ga - statistics.mean(b["gaps"] for b in bb)
                                        for _, ga, bb in lg)
        out.setdefault((w["events"], w["rate"]), []).append(r)
    return out


def summary(res):
    rs = ratios(res)
    out = {}
    for key, v in rs.items():
        alls = [r["all"] for r in v]
        out[key] = dict(median=statistics.median(alls), lo=min(alls), hi=max(alls),
                        each=[statistics.median(r["each"][k] for r in v)
                              for k in range(len(v[0]["each"]))],
                        per_cpu_s=statistics.median(r["per_cpu_s"] for r in v
                                                    if r["per_cpu_s"] is not None)
                        if any(r["per_cpu_s"] is not None for r in v) else None,
                        pyprof_cpu=statistics.median(r["pyprof_cpu"] for r in v), n=len(v))
        lost = [r["lost"] for r in v if "lost" in r]
        if lost:
            out[key].update(lost=statistics.median(lost), lost_lo=min(lost), lost_hi=max(lost),
                            gaps=statistics.median(r["gaps"] for r in v if "gaps" in r))
    return out


def lost_cells(v, rate):
    """A summary row's short-interruption cells: CPU lost (range), more
    interruptions per CPU-s, us each, kept; "-" where not measured."""
    if "lost" not in v:
        return "-", "-", "-", "-"
    each = "%.1f" % (1e6 * v["lost"] / v["gaps"]) if v["gaps"] > rate / 4 else "-"
    return ("%.2f%% (%.2f to %.2f)" % (100 * v["lost"], 100 * v["lost_lo"], 100 * v["lost_hi"]),
            "%.0f" % v["gaps"], each, "%.4f" % (1 - v["lost"]))


def text(res):
    s = summary(res)
    la0 = ", ".join("%.1f" % x for x in res["loadavg_start"][:3])
    la1 = ", ".join("%.1f" % x for x in res["loadavg_end"][:3])
    base = [w["iters_s"] for w in res["windows"] if w["events"] is None]
    lines = ["## What pyprof-bpf costs the processes it does not profile (issue #13 item 5)", "",
             "A CPU-bound bystander pinned on each of the %d CPUs; pyprof-bpf records an "
             "unrelated target (~20%% of a core); %d rounds of %g-s windows, every profiled "
             "window between two without a profiler. %s, %s; load average %s at the start, %s "
             "at the end; the bystanders' iterations/s without a profiler: median %.0f "
             "(%.0f-%.0f)." % (res["cpus"], res["rounds"], res["secs"], res["started"],
                               res.get("git", ""), la0, la1, statistics.median(base),
                               min(base), max(base)), "",
             "| events | Hz | bystanders' throughput (both CPUs) | range | each CPU | per "
             "CPU-second of their own | CPU lost to short interruptions, above the "
             "baselines (range) | more interruptions per CPU-s | us each | kept: 1 - lost "
             "| pyprof-bpf's CPU (of a core) |",
             "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for ev in EVENTS:
        for rate in RATES:
            v = s.get((ev, rate))
            if not v:
                continue
            lost, gaps, each, kept = lost_cells(v, rate)
            lines.append("| %s | %d | %.3f | %.3f-%.3f | %s | %s | %s | %s | %s | %s | %.1f%% |"
                         % (ev, rate, v["median"], v["lo"], v["hi"],
                            " / ".join("%.3f" % e for e in v["each"]),
                            "%.3f" % v["per_cpu_s"] if v["per_cpu_s"] else "-", lost, gaps,
                            each, kept, 100 * v["pyprof_cpu"]))
    lines.append("")
    # The verdict is on the share kept after the short interruptions: the
    # throughput of a window against its neighbours follows this shared
    # machine's load (other engineers' tests) far more than the profiler.
    for ev in EVENTS:
        v = s.get((ev, 99))
        if v and "lost" in v:
            lines.append("- %s events at 99 Hz: the bystanders keep %.4f of their CPU time "
                         "(target >= %.2f): %s; their throughput %.3f, per CPU-second %s "
                         "(within this machine's noise: baselines %.0f-%.0f iterations/s)" % (
                             ev, 1 - v["lost"], TARGET,
                             "**met**" if 1 - v["lost"] >= TARGET else "**not met**",
                             v["median"], "%.3f" % v["per_cpu_s"] if v["per_cpu_s"] else "-",
                             min(base), max(base)))
    lines.append("")
    return "\n".join(lines)


def auto_events(rate, ncpu):
    """What `--events auto` picks for one process (user/commands/record.c)."""
    return "cpu" if rate <= 1000 and ncpu * rate <= 200000 else "thread"


def text_self(res):
    s = summary(res)
    la0 = ", ".join("%.1f" % x for x in res["loadavg_start"][:3])
    la1 = ", ".join("%.1f" % x for x in res["loadavg_end"][:3])
    base = [w["iters_s"] for w in res["windows"] if w["events"] is None]
    lines = ["## What pyprof-bpf costs the process it profiles, against itself unprofiled "
             "(issue #13 item 5)", "",
             "One CPU-bound Python alone on the %d CPUs, its loop %d frames deep; %d rounds of "
             "%g-s windows, every window recording it between two without a profiler (never "
             "an unprofiled twin beside it, which per-CPU timers would tick on too). %s, %s; "
             "load average %s at the start, %s at the end; its iterations/s without a "
             "profiler: median %.0f (%.0f-%.0f)." % (
                 res["cpus"], SELF_DEPTH, res["rounds"], res["secs"], res["started"],
                 res.get("git", ""), la0, la1, statistics.median(base), min(base), max(base)),
             "",
             "| events | Hz | `auto` picks | its CPU lost to short interruptions, above the "
             "baselines (range) | more interruptions per CPU-s | us each | kept: 1 - lost | "
             "throughput vs itself unprofiled (range) | per CPU-second of its own | "
             "pyprof-bpf's CPU (of a core) |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for ev in EVENTS:
        for rate in RATES:
            v = s.get((ev, rate))
            if not v:
                continue
            lost, gaps, each, kept = lost_cells(v, rate)
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %.3f (%.3f-%.3f) | %s | %.1f%% |"
                         % (ev, rate, "yes" if auto_events(rate, res["cpus"]) == ev else "",
                            lost, gaps, each, kept, v["median"], v["lo"], v["hi"],
                            "%.3f" % v["per_cpu_s"] if v["per_cpu_s"] else "-",
                            100 * v["pyprof_cpu"]))
    lines.append("")
    for rate in RATES:
        c, t = s.get(("cpu", rate)), s.get(("thread", rate))
        if c and t and "lost" in c and "lost" in t:
            lines.append("- %d Hz: the target keeps %.4f of its CPU time with per-CPU events, "
                         "%.4f with per-thread ones; `auto` picks %s." % (
                             rate, 1 - c["lost"], 1 - t["lost"], auto_events(rate, res["cpus"])))
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    """res: {"bystanders": phase result, "self": phase result} (either may be
    missing)."""
    t = ""
    for phase, fn in (("bystanders", text), ("self", text_self)):
        r = res.get(phase)
        if r is None:
            continue
        r["summary"] = {"%s-%d" % k: v for k, v in summary(r).items()}
        r["git"], r["version"] = res.get("git", ""), res.get("version", "")
        t += fn(r) + "\n"
    return cell_files.write(outdir, "bystander", res, t, BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --bystander-only",
                                 description="issue #13 item 5: a pinned CPU-bound bystander's "
                                             "throughput per CPU while pyprof-bpf records "
                                             "another process, per-CPU and per-thread events")
    ap.add_argument("--bystander-rounds", type=int, default=3, metavar="N")
    ap.add_argument("--bystander-secs", type=float, default=4.0, metavar="S",
                    help="seconds of each window (default 4)")
    ap.add_argument("--bystander-phases", default="bystanders,self", metavar="LIST",
                    help="bystanders (a pinned process per CPU, another one profiled), self "
                         "(the profiled process against itself unprofiled), or both "
                         "(default)")
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-bystander)"
                    % BENCH_DIR)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        log("bystander: must run as root")
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp + "-bystander"))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        phases = [x for x in args.bystander_phases.split(",") if x]
        bad = [x for x in phases if x not in ("bystanders", "self")]
        if bad or not phases:
            log("bystander: --bystander-phases: unknown phase %s (bystanders, self)"
                % ",".join(bad or ["''"]))
            return 2
        n = len(phases) * args.bystander_rounds * (len(EVENTS) * len(RATES) * 2 + 1)
        log("bystander: %s, %d rounds each, %d windows of %g s (about %.0f s); results in %s" % (
            " and ".join(phases), args.bystander_rounds, n, args.bystander_secs,
            n * args.bystander_secs + len(phases) * args.bystander_rounds * 6 * 2.5, outdir))
        res = {}
        for phase in phases:
            res[phase] = run(binary, args.bystander_rounds, args.bystander_secs, outdir, logdir,
                             phase)
    except KeyboardInterrupt:
        log("bystander: interrupted")
        return 130
    except (RuntimeError, OSError, procstat.BenchError) as e:
        log("bystander: ERROR: %s" % e)
        return 2
    res["git"] = git
    res["version"] = version
    print(save(outdir, res))
    log("bystander: %s/bystander.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
