#!/usr/bin/env python3
"""Issue #13 item 4: what `pyprof-bpf -a` costs on a host full of Pythons
(`scripts/bench --hostwide-only [--hostwide-secs N]`; a full or --quick
`scripts/bench` run ends with it, at the default 60 s).

The host: IDLE idle Python processes (default 200) and BUSY busy ones
(default 4), of mixed versions (every interpreter of
/var/cache/pyprof-bpf/pythons.txt in turn: the sid root's static 3.13-3.15 and
3.14d through chroot, pyenv's shared-libpython builds, Debian's 3.11; 3.10 too,
which pyprof-bpf does not support: an unsupported Python must cost nothing
either), one in three in its own PID namespace (`unshare --pid --fork
--mount-proc`). An idle one sleeps ~1 s and does ~0.1 ms of work, as a daemon
does, so some of them meet a tick and are looked at; a busy one spins in
busy_spin() all the time. Then `pyprof-bpf -a -F 99 -d SECS --format
collapsed -o FILE` records the whole host (other engineers' processes too: it
is a shared machine).

Measured: pyprof-bpf's CPU time (user + system of its process, from wait4's
rusage and, for the steady window, its process CPU clock) plus its BPF
programs' run time (kernel statistics, procstat.BpfPrograms), as a share of
one core, over the whole run (start-up included: the verifier's ~0.3-0.5 s)
and over a steady window (from 5 s after it starts sampling to its last
second); its peak RSS (VmHWM polled each second, and rusage's maxrss).
Checked: every busy process has samples under its own root in the output
(`COMM (pid N)`, the host pid); how many idle ones were seen.
Targets: CPU <= 1% of one core, RSS <= 64 MB.

Every process started here is killed on every way out (each leads its own
session; the PID-namespace ones through unshare --kill-child too).
"""
import argparse
import ctypes
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
PYTHONS = os.path.join(CACHE, "pythons.txt")
RATE = 99
STEADY_SKIP_S = 5          # the steady window starts this long after sampling starts
CPU_TARGET = 1.0           # % of one core
RSS_TARGET_MB = 64

IDLE_CODE = r"""
import os, time

import cell_files
def idle_tick():
    s = 0
    for i in range(2000):
        s += i
    return s
p = 0.7 + (os.getpid() % 61) / 100.0
while True:
    time.sleep(p)
    idle_tick()
"""
BUSY_CODE = r"""
def busy_spin():
    while True:
        x = 0
        for i in range(10000):
            x += i
busy_spin()
"""
# The busy ones: one of each kind (a static build in a chroot and a PID
# namespace, one in a chroot alone, a shared libpython, Debian's static 3.11).
BUSY_PICK = [("sid-3.15", True), ("sid-3.14", False), ("pyenv-3.12.1", False),
             ("system-3.11", False)]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child: SIGKILL when the driver dies, even by SIGKILL (kept
    across exec; unshare --kill-child passes it on to its own child)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Procs:
    """Every process started here, each leading its own session, so that all
    of them (and only them) are killed on the way out."""

    def __init__(self):
        self.items = []

    def start(self, argv, out=subprocess.DEVNULL):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                             start_new_session=True, preexec_fn=_die_with_parent)
        self.items.append(p)
        return p

    def kill(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log("hostwide: process %d did not die after SIGKILL" % p.pid)
        if p in self.items:
            self.items.remove(p)

    def kill_all(self):
        # SIGKILL every group first, then reap: 200 waits one by one after
        # each kill would leave the rest running meanwhile.
        for p in self.items:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in list(self.items):
            self.kill(p)


def interpreters():
    """[(label, argv prefix, chroot root or None)] from pythons.txt."""
    out = []
    with open(PYTHONS) as f:
        for line in f:
            parts = line.strip().split("\t")
            if len(parts) != 2:
                continue
            label, how = parts
            if how.startswith("chroot:"):
                _, root, exe = how.split(":", 2)
                out.append((label, [exe], root))
            else:
                out.append((label, [how], None))
    return out


def command(interp, code, pidns):
    label, argv, root = interp
    cmd = argv + ["-c", code]
    if root:
        cmd = ["chroot", root] + cmd
    if pidns:
        cmd = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"] + cmd
    return cmd


def leaf_pid(pid, timeout=10):
    """The host pid running Python under pid (unshare's child), once it runs it."""
    deadline = time.monotonic() + timeout
    while True:
        cur = pid
        for _ in range(4):
            try:
                with open("/proc/%d/task/%d/children" % (cur, cur)) as f:
                    kids = f.read().split()
            except OSError:
                kids = []
            if not kids:
                break
            cur = int(kids[0])
        try:
            with open("/proc/%d/comm" % cur) as f:
                if f.read().startswith("python"):
                    return cur
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("no python under pid %d" % pid)
        time.sleep(0.02)


def roots(path):
    """{host pid: weight (ns of CPU)} of the collapsed output's process roots."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, w = line.rstrip("\n").rpartition(" ")
            for part in stack.split(";")[:3]:
                m = re.fullmatch(r".* \(pid (\d+)\)", urllib.parse.unquote(part))
                if m:
                    pid = int(m.group(1))
                    out[pid] = out.get(pid, 0) + int(w or 0)
                    break
    return out


def copy_binary(src, outdir):
    """A copy of the pyprof-bpf under test: the tree is shared, someone may
    relink it meanwhile."""
    dst = os.path.join(outdir, "pyprof-bpf")
    for _ in range(10):
        shutil.copy2(src, dst)
        r = subprocess.run([dst, "--version"], capture_output=True, text=True)
        if r.returncode == 0:
            return dst, r.stdout.strip()
        time.sleep(1)
    raise RuntimeError("%s --version fails: %s" % (src, r.stderr.strip()))


def run(binary, secs, idle_n, busy_n, logdir, workdir):
    procs = Procs()
    interps = interpreters()
    by_label = {i[0]: i for i in interps}
    res = dict(seconds=secs, rate=RATE, idle=idle_n, busy=busy_n,
               loadavg_start=os.getloadavg(),
               started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    try:
        t0 = time.monotonic()
        idle = []
        for k in range(idle_n):
            interp = interps[k % len(interps)]
            idle.append((interp[0], k % 3 == 2, procs.start(command(interp, IDLE_CODE,
                                                                     k % 3 == 2))))
        busy = []
        for k in range(busy_n):
            label, pidns = BUSY_PICK[k % len(BUSY_PICK)]
            interp = by_label.get(label) or interps[-1]
            busy.append((interp[0], pidns, procs.start(command(interp, BUSY_CODE, pidns))))
        idle_pids = {}
        for label, pidns, p in idle:
            idle_pids[leaf_pid(p.pid)] = (label, pidns)
        busy_pids = {}
        for label, pidns, p in busy:
            busy_pids[leaf_pid(p.pid)] = (label, pidns)
        dead = [p.pid for _, _, p in idle + busy if p.poll() is not None]
        if dead:
            raise RuntimeError("%d of the host's processes exited at start" % len(dead))
        res["start_s"] = time.monotonic() - t0
        log("hostwide: %d idle and %d busy Pythons running (%.1f s to start them); "
            "pyprof-bpf -a -F %d -d %d" % (idle_n, busy_n, res["start_s"], RATE, secs))
        time.sleep(2)       # their start-up (imports, site) is not the steady host

        out = os.path.join(workdir, "hostwide.folded")
        errpath = os.path.join(logdir, "hostwide-pyprof.log")
        timeline = []
        with procstat.BpfStats() as stats, open(errpath, "w") as ef:
            res["bpf_stats"] = stats.how
            tl = time.monotonic()
            p = procs.start([binary, "-a", "-F", str(RATE), "-d", str(secs), "--format",
                             "collapsed", "-o", out], ef)
            progs = procstat.BpfPrograms(p.pid)
            ready = steady0 = steady1 = None
            done = None
            try:
                while done is None:
                    time.sleep(0.25)
                    now = time.monotonic()
                    progs.scan()
                    if ready is None:
                        with open(errpath) as f:
                            if "pyprof-bpf: sampling" in f.read():
                                ready = now
                                res["startup_s"] = ready - tl
                    st = procstat.status(p.pid)
                    if st and (not timeline or now - timeline[-1][0] - tl >= 1):
                        timeline.append((round(now - tl, 1), st.get("VmRSS"), st.get("VmHWM")))
                    # the steady window: from STEADY_SKIP_S after sampling
                    # starts to 1 s before its duration ends
                    if ready is not None and steady0 is None and now >= ready + STEADY_SKIP_S:
                        steady0 = (now, procstat.cpu_ns(p.pid), progs.totals())
                    if ready is not None and steady0 is not None and \
                            now <= ready + secs - 1:
                        c = procstat.cpu_ns(p.pid)
                        if c is not None:
                            steady1 = (now, c, progs.totals())
                    wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if wpid == p.pid:
                        done = (status, ru)
                        p.returncode = os.waitstatus_to_exitcode(status)
                        procs.items.remove(p)
                    elif now > tl + secs + 180:
                        raise RuntimeError("pyprof-bpf -a still running 180 s after its "
                                           "duration")
                status, ru = done
                bpf_ns, bpf_runs = progs.totals()
            finally:
                progs.close()
        wall = time.monotonic() - tl
        with open(errpath) as f:
            text = f.read()
        if p.returncode:
            raise RuntimeError("pyprof-bpf -a exited with status %d: %s"
                               % (p.returncode, text.strip()[-400:]))
        # the host's processes still all alive at the end?
        res["died"] = sum(1 for _, _, q in idle + busy if q.poll() is not None)
    finally:
        procs.kill_all()
    res["loadavg_end"] = os.getloadavg()
    m = re.search(r"(\d+) samples in ([\d.]+) s", text)
    res["samples"] = int(m.group(1)) if m else None
    res["summary"] = text.strip().splitlines()[-30:]
    m = re.search(r"pyprof-bpf: (\d+) Python process", text)
    res["pythons_met"] = int(m.group(1)) if m else None
    res["pythons_exited"] = len(re.findall(r"^ +\d+ .* samples, exited$", text, re.M))
    m = re.search(r"pyprof-bpf: (\d+) other processes met", text)
    res["others_met"] = int(m.group(1)) if m else None
    cpu_s = ru.ru_utime + ru.ru_stime
    res.update(wall_s=wall, user_s=ru.ru_utime, sys_s=ru.ru_stime, bpf_s=bpf_ns / 1e9,
               bpf_runs=bpf_runs)
    res["cpu_pct"] = 100.0 * (cpu_s + bpf_ns / 1e9) / wall
    if steady0 and steady1 and steady1[0] > steady0[0] + 1:
        dt = steady1[0] - steady0[0]
        res["steady_s"] = dt
        res["steady_cpu_pct"] = 100.0 * ((steady1[1] - steady0[1]) / 1e9 +
                                         (steady1[2][0] - steady0[2][0]) / 1e9) / dt
        res["steady_bpf_pct"] = 100.0 * (steady1[2][0] - steady0[2][0]) / 1e9 / dt
        res["steady_runs_per_s"] = (steady1[2][1] - steady0[2][1]) / dt
    res["vmhwm_mb"] = max([ru.ru_maxrss] + [h for _, _, h in timeline if h]) / 1024.0
    res["final_rss_mb"] = timeline[-1][1] / 1024.0 if timeline and timeline[-1][1] else None
    res["timeline"] = timeline
    got = roots(out)
    with open(out, "rb") as f:
        res["output_lines"] = sum(1 for _ in f)
    res["output_mb"] = os.path.getsize(out) / 1e6
    os.unlink(out)
    res["busy_found"] = [dict(pid=pid, python=lb, pidns=ns, weight=got.get(pid, 0))
                         for pid, (lb, ns) in busy_pids.items()]
    res["busy_missing"] = [b["pid"] for b in res["busy_found"] if not b["weight"]]
    res["idle_seen"] = sum(1 for pid in idle_pids if pid in got)
    res["idle_seen_supported"] = sum(1 for pid, (lb, _) in idle_pids.items()
                                     if pid in got and "3.10" not in lb)
    res["idle_unsupported"] = sum(1 for lb, _ in idle_pids.values() if "3.10" in lb)
    res["others_seen"] = len(set(got) - set(idle_pids) - set(busy_pids))
    res["weight_total"] = sum(got.values())
    return res


def verdict(ok):
    return "**met**" if ok else "**not met**"


def text(res):
    la0 = ", ".join("%.1f" % x for x in res["loadavg_start"][:3])
    la1 = ", ".join("%.1f" % x for x in res["loadavg_end"][:3])
    lines = ["## -a on a host of %d idle and %d busy Pythons (issue #13 item 4)" % (
        res["idle"], res["busy"]), "",
        "`pyprof-bpf -a -F %d -d %d --format collapsed`, %s, %s; load average %s at the start, "
        "%s at the end (%d CPUs)." % (res["rate"], res["seconds"], res["started"],
                                      res.get("git", ""), la0, la1, os.cpu_count()), ""]
    lines.append("- samples: %s; BPF program runs %d (%.0f/s)" % (
        res["samples"], res["bpf_runs"], res["bpf_runs"] / max(1, res["wall_s"])))
    lines.append("- CPU over the whole run (%.1f s, start-up included, %.2f s of it to the "
                 "first sample): user %.2f s + system %.2f s + BPF %.3f s = %.2f%% of one "
                 "core" % (res["wall_s"], res.get("startup_s") or 0, res["user_s"],
                           res["sys_s"], res["bpf_s"], res["cpu_pct"]))
    if "steady_cpu_pct" in res:
        lines.append("- CPU in the steady window (%.0f s, from %d s after sampling starts): "
                     "%.2f%% of one core, of which BPF %.3f%% (%.0f program runs/s)" % (
                         res["steady_s"], STEADY_SKIP_S, res["steady_cpu_pct"],
                         res["steady_bpf_pct"], res["steady_runs_per_s"]))
    cpu = res.get("steady_cpu_pct", res["cpu_pct"])
    lines.append("- target CPU <= %.0f%% of one core: whole run %.2f%% %s; steady %.2f%% %s" % (
        CPU_TARGET, res["cpu_pct"], verdict(res["cpu_pct"] <= CPU_TARGET), cpu,
        verdict(cpu <= CPU_TARGET)))
    lines.append("- peak RSS (VmHWM) %.1f MB, final VmRSS %.1f MB: target <= %d MB %s" % (
        res["vmhwm_mb"], res["final_rss_mb"] or 0, RSS_TARGET_MB,
        verdict(res["vmhwm_mb"] <= RSS_TARGET_MB)))
    marks = [(t, rss) for t, rss, _ in res["timeline"] if rss]
    if marks and res["seconds"] >= 120:
        step = 60 if res["seconds"] <= 900 else 300
        shown, nxt = [], 0
        for t, rss in marks:
            if t >= nxt:
                shown.append("%.0f s %.0f MB" % (t, rss / 1024))
                nxt += step
        lines.append("- VmRSS over time: " + ", ".join(shown))
    if res.get("output_lines") is not None:
        lines.append("- the collapsed output: %d distinct stacks, %.1f MB" % (
            res["output_lines"], res["output_mb"]))
    found = ", ".join("%s%s pid %d: %.1f s" % (b["python"], " (PID ns)" if b["pidns"]
                                               else "", b["pid"], b["weight"] / 1e9)
                      for b in res["busy_found"])
    lines.append("- busy processes found (their CPU time in the output): %d of %d (%s) %s" % (
        len(res["busy_found"]) - len(res["busy_missing"]), len(res["busy_found"]), found,
        verdict(not res["busy_missing"])))
    lines.append("- idle processes with samples: %d of %d (%d of them 3.10, unsupported: "
                 "never configured); Python processes not ours with samples: %d" % (
                     res["idle_seen"], res["idle"], res["idle_unsupported"],
                     res["others_seen"]))
    if res.get("pythons_met") is not None:
        lines.append("- met on a CPU and looked at (its summary): %d Python processes "
                     "(configured, with or without samples; %d of them ended during the "
                     "recording), %s other processes (the shared host's compilers, shells, "
                     "tests: %.1f/s)" % (
                         res["pythons_met"], res.get("pythons_exited", 0), res["others_met"],
                         (res["others_met"] or 0) / max(1, res["wall_s"])))
    if res.get("died"):
        lines.append("- WARNING: %d of the host's processes died during the run" % res["died"])
    lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "hostwide", res, text(res), BENCH_DIR)


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --hostwide-only",
                                 description="issue #13 item 4: pyprof-bpf -a's cost on a host "
                                             "of many idle and a few busy Pythons")
    ap.add_argument("--hostwide-secs", type=int, default=60, metavar="N",
                    help="seconds of recording (default 60; the issue's figure is 600)")
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--busy", type=int, default=4)
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-hostwide)"
                    % BENCH_DIR)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        log("hostwide: must run as root")
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp + "-hostwide"))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("hostwide: %d idle + %d busy Pythons, -a at %d Hz for %d s (about %.0f s); "
            "results in %s" % (args.idle, args.busy, RATE, args.hostwide_secs,
                               args.hostwide_secs + 30, outdir))
        res = run(binary, args.hostwide_secs, args.idle, args.busy, logdir, outdir)
    except KeyboardInterrupt:
        log("hostwide: interrupted")
        return 130
    except (RuntimeError, OSError, procstat.BenchError) as e:
        log("hostwide: ERROR: %s" % e)
        return 2
    res["git"] = git
    res["version"] = version
    print(save(outdir, res))
    log("hostwide: %s/hostwide.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
