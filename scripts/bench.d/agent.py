#!/usr/bin/env python3
"""Issue #21 item 6: what `pyprof-bpf agent` costs (`scripts/bench
--agent-only [--agent-secs N] [--agent-base-secs N]`; not part of a full or
--quick run: it is long by nature).

The host: 20 Python processes of a service-like mix (agent_workload.py), of
the interpreters of /var/cache/pyprof-bpf/pythons.txt (Debian's 3.11, pyenv's
3.11-3.13 and the sid root's 3.13-3.15 through chroot; 3.10, unsupported, and
the debug 3.14d left out): 2 batch workers computing in bursts (~40% of a core
each), 3 web services of 8 request-handler threads (~5% each), 15 daemons
waking every ~1 s (5 of them with a heartbeat thread). About 0.9 of a core in
all. Each is named svc-KIND-N (its comm and OTEL_SERVICE_NAME).

A store: sink.c, a C HTTP server on the loopback address answering 200 to
every request (not a Python: -a would sample a Python receiver too).

Three phases on the same running processes: BASE s unprofiled, then
`pyprof-bpf agent -a --comm '^svc-' --window 15 --output-dir DIR --push
pyroscope=http://127.0.0.1:PORT --spool-dir DIR` for SECS s (stopped with
SIGTERM, which ships the last window), then BASE s unprofiled again. --comm
keeps the shared machine's other Pythons (others' test runs) out of the
measure; the agent still meets and looks at them at their first tick.

Measured, every 10 s: the agent's CPU (utime + stime from /proc/PID/stat,
and its process CPU clock), its BPF programs' run time (kernel statistics,
procstat.BpfPrograms: run in the targets' context, reported apart), its
VmRSS, RssAnon, RssFile, smaps_rollup's Pss_Anon, threads and descriptors;
the services' units of work and the time spent in them. Reported: the
agent's CPU as a share of one core (whole run, and steady: from its second
window on), RSS at the start, the end and its slope (KB/min, a least-squares
fit from the third minute on, and over the last half), the profiles and
samples it delivered (its per-window log lines, the store's count of
requests and bytes, the files in --output-dir), and each kind's throughput
profiled over unprofiled (units per second spent working: what interrupts
take shows there; the mean of the two unprofiled phases as the reference).

Every process started here is killed on every way out (each leads its own
session and dies with the driver).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procstat                   # noqa: E402
from hostwide import Procs, copy_binary, interpreters   # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
BENCH_DIR = os.path.join(CACHE, "bench")
SID = os.path.join(CACHE, "sid")
RATE = 19                  # the agent's default
WINDOW = 15
TICK_S = 10                # the timeline's step
CPU_TARGET = 1.0           # % of one core (issue #21 item 6)
CLK_TCK = os.sysconf("SC_CLK_TCK")
COMM_RE = "^svc-"

# (kind, threads, interpreter labels in turn, how many)
MIX = [
    ("batch", 1, ["system-3.11", "sid-3.15"], 2),
    ("web", 8, ["pyenv-3.12.1", "sid-3.14", "pyenv-3.13.0"], 3),
    ("idle", 1, ["system-3.11", "pyenv-3.11.7", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.13",
                 "sid-3.14", "sid-3.15"], 10),
    ("idle", 2, ["pyenv-3.12.1", "sid-3.15", "system-3.11", "pyenv-3.13.0", "sid-3.13"], 5),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build_sink():
    """sink.c compiled into BENCH_DIR/sink-<hash of the source>/."""
    src = os.path.join(HERE, "sink.c")
    with open(src, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    d = os.path.join(BENCH_DIR, "sink-" + digest)
    exe = os.path.join(d, "sink")
    if os.access(exe, os.X_OK):
        return exe
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("no C compiler (cc, gcc, clang) for %s" % src)
    os.makedirs(d, exist_ok=True)
    tmp = "%s.tmp-%d" % (exe, os.getpid())
    r = subprocess.run([cc, "-O2", "-Wall", "-o", tmp, src], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s %s failed: %s" % (cc, src, (r.stderr or r.stdout).strip()[-600:]))
    os.rename(tmp, exe)
    return exe


def read_slots(path, n=None):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    k = len(data) // 8 if n is None else n
    if len(data) < 8 * k:
        return None
    return struct.unpack("<%dQ" % k, data[:8 * k])


class Service:
    def __init__(self, kind, threads, interp, name, counters_host, counters_seen):
        self.kind, self.threads, self.interp, self.name = kind, threads, interp, name
        self.counters = counters_host
        self.seen = counters_seen
        self.proc = None
        self.pid = None

    def argv(self, code):
        label, argv, root = self.interp
        cmd = argv + ["-c", code, self.seen, self.kind, self.name, str(self.threads)]
        return (["chroot", root] + cmd) if root else cmd

    def totals(self):
        """(units, ns spent in them) over its threads."""
        s = read_slots(self.counters, 1 + 2 * self.threads)
        if not s:
            return None
        return sum(s[1::2]), sum(s[2::2])


def proc_stat_cpu(pid):
    """utime + stime of pid from /proc/PID/stat, in seconds (None once gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def memory(pid):
    """{VmRSS, RssAnon, RssFile, Pss_Anon, Threads, fds} in kB (counts for the last two)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                m = re.match(r"(VmRSS|VmHWM|RssAnon|RssFile|RssShmem|Threads):\s+(\d+)", line)
                if m:
                    out[m.group(1)] = int(m.group(2))
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                m = re.match(r"(Pss_Anon|Pss_File|Anonymous|Pss):\s+(\d+) kB", line)
                if m:
                    out[m.group(1)] = int(m.group(2))
        out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        pass
    return out


def fit_slope(points):
    """Least-squares slope of [(minutes, kB)]: kB a minute (None with < 3 points)."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if not sxx:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx


def snapshot(services):
    """{kind: [units, busy ns, cpu ns]} now, and the per-service totals."""
    kinds = {}
    for s in services:
        t = s.totals() or (0, 0)
        c = procstat.cpu_ns(s.pid) or 0
        k = kinds.setdefault(s.kind, [0, 0, 0])
        k[0] += t[0]
        k[1] += t[1]
        k[2] += c
    return kinds


def phase_rates(a, b, dt):
    """{kind: {units_per_busy_s, units_per_s, cores}} between two snapshots."""
    out = {}
    allu = allb = allc = 0
    for kind in a:
        du, db, dc = (b[kind][i] - a[kind][i] for i in range(3))
        allu, allb, allc = allu + du, allb + db, allc + dc
        out[kind] = dict(units=du, units_per_busy_s=du / (db / 1e9) if db else None,
                         units_per_s=du / dt, cores=dc / 1e9 / dt,
                         units_per_cpu_s=du / (dc / 1e9) if dc else None)
    out["all"] = dict(units=allu, units_per_busy_s=allu / (allb / 1e9) if allb else None,
                      units_per_s=allu / dt, cores=allc / 1e9 / dt,
                      units_per_cpu_s=allu / (allc / 1e9) if allc else None)
    return out


def run_phase(name, secs, services, on_tick=None):
    """secs of the services' work, a snapshot every TICK_S; on_tick(t) at each."""
    t0 = time.monotonic()
    s0 = snapshot(services)
    ticks = []
    nxt = t0 + TICK_S
    while True:
        now = time.monotonic()
        end = t0 + secs
        wake = min(nxt, end, now + 1) if on_tick else min(nxt, end)
        time.sleep(max(0, wake - now))
        now = time.monotonic()
        if on_tick:
            on_tick(now)
        if now >= nxt:
            ticks.append((round(now - t0, 1), snapshot(services)))
            nxt += TICK_S
        dead = [s.name for s in services if s.proc.poll() is not None]
        if dead:
            raise RuntimeError("services exited during the %s phase: %s" % (name, dead))
        if now >= end:
            break
    s1 = snapshot(services)
    dt = time.monotonic() - t0
    res = dict(name=name, seconds=dt, rates=phase_rates(s0, s1, dt))
    # each 10-s step's all-kinds capacity (its spread shows the machine's noise)
    prev, steps = (0.0, s0), []
    for t, s in ticks:
        r = phase_rates(prev[1], s, t - prev[0])["all"]
        steps.append(r["units_per_busy_s"])
        prev = (t, s)
    res["steps_units_per_busy_s"] = steps
    return res


def start_services(procs, workdir_host, workdir_seen):
    with open(os.path.join(HERE, "agent_workload.py")) as f:
        code = f.read()
    by_label = {i[0]: i for i in interpreters()}
    services, n = [], {}
    for kind, threads, labels, count in MIX:
        for k in range(count):
            label = labels[k % len(labels)]
            interp = by_label.get(label)
            if interp is None:
                raise RuntimeError("interpreter %s missing from pythons.txt" % label)
            i = n[kind] = n.get(kind, 0) + 1
            name = "svc-%s-%d" % (kind, i)
            fn = name + ".counters"
            seen_dir = workdir_seen if interp[2] else workdir_host
            s = Service(kind, threads, interp, name, os.path.join(workdir_host, fn),
                        os.path.join(seen_dir, fn))
            env = dict(os.environ, OTEL_SERVICE_NAME=name)
            s.proc = subprocess.Popen(s.argv(code), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True, env=env,
                                      preexec_fn=procs_die_with_parent)
            procs.items.append(s.proc)
            services.append(s)
    for s in services:
        s.pid = s.proc.pid       # chroot execs the interpreter: the same pid
    deadline = time.monotonic() + 30
    while True:
        waiting = [s.name for s in services if (read_slots(s.counters, 1) or (0,))[0] != 1]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("services not running after 30 s: %s" % waiting)
        time.sleep(0.2)
    for s in services:
        with open("/proc/%d/comm" % s.pid) as f:
            comm = f.read().strip()
        if comm != s.name:
            raise RuntimeError("%s (pid %d) is named %r" % (s.name, s.pid, comm))
    return services


def procs_die_with_parent():
    import hostwide
    hostwide._die_with_parent()


def parse_agent_log(text):
    res = dict(windows=0, profiles=0, samples=0, window_lines=0, late=0)
    for m in re.finditer(r"agent: (\d+) profiles?, (\d+) samples in (\d+) windows?"
                         r"(?: \((\d+) late\))?", text):
        res["window_lines"] += 1
        res["profiles"] += int(m.group(1))
        res["samples"] += int(m.group(2))
        res["windows"] += int(m.group(3))
        res["late"] += int(m.group(4) or 0)
    m = re.search(r"agent: pyroscope \S+: (\d+) profiles sent, (\d+) refused, (\d+) left",
                  text)
    if m:
        res["sent"], res["refused"], res["left"] = (int(x) for x in m.groups())
    m = re.search(r"pyprof-bpf: (\d+) Python process", text)
    res["pythons_met"] = int(m.group(1)) if m else None
    m = re.search(r"pyprof-bpf: (\d+) other processes met", text)
    res["others_met"] = int(m.group(1)) if m else None
    res["errors"] = [ln for ln in text.splitlines()
                     if re.search(r"could not|unusable|refused \(|past its bounds|"
                                  r"profiles wait|error|fail", ln, re.I)
                     and not re.search(r" 0 errors", ln)][:10]
    return res


def run(binary, secs, base, workdir_host, workdir_seen, logdir, progress):
    procs = Procs()
    res = dict(seconds=secs, base_seconds=base, rate=RATE, window=WINDOW,
               loadavg_start=os.getloadavg(), cpus=os.cpu_count(),
               started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    try:
        services = start_services(procs, workdir_host, workdir_seen)
        res["services"] = [dict(name=s.name, kind=s.kind, threads=s.threads,
                                python=s.interp[0], pid=s.pid) for s in services]
        log("agent: %d services running; %d s unprofiled" % (len(services), base))
        time.sleep(3)       # their start-up is not the steady host
        sink_counters = os.path.join(workdir_host, "sink.counters")
        sink = procs.start([build_sink(), "0", sink_counters])
        deadline = time.monotonic() + 10
        while not (read_slots(sink_counters, 4) or (0,))[0]:
            if time.monotonic() > deadline or sink.poll() is not None:
                raise RuntimeError("the sink did not start listening")
            time.sleep(0.05)
        port = read_slots(sink_counters, 4)[0]

        res["base1"] = run_phase("unprofiled (before)", base, services)
        log("agent: before: %.0f units/busy-s, services %.2f cores" % (
            res["base1"]["rates"]["all"]["units_per_busy_s"],
            res["base1"]["rates"]["all"]["cores"]))

        outdir = os.path.join(workdir_host, "profiles")
        spool = os.path.join(workdir_host, "spool")
        os.makedirs(outdir)
        argv = [binary, "agent", "-a", "--comm", COMM_RE, "--window", str(WINDOW),
                "--output-dir", outdir, "--spool-dir", spool,
                "--push", "pyroscope=http://127.0.0.1:%d" % port]
        res["command"] = " ".join(argv)
        errpath = os.path.join(logdir, "agent.log")
        timeline = []
        with procstat.BpfStats() as stats, open(errpath, "w") as ef:
            res["bpf_stats"] = stats.how
            tl = time.monotonic()
            p = procs.start(argv, ef)
            progs = procstat.BpfPrograms(p.pid)
            state = dict(ready=None, next_mem=tl)
            sink_cpu0 = procstat.cpu_ns(sink.pid) or 0

            def tick(now):
                progs.scan()
                if p.poll() is not None:
                    raise RuntimeError("the agent exited early (status %s): %s" % (
                        p.returncode, open(errpath).read().strip()[-600:]))
                if state["ready"] is None:
                    with open(errpath) as f:
                        if "agent: sampling" in f.read():
                            state["ready"] = now
                            res["startup_s"] = now - tl
                if now >= state["next_mem"] - 0.05:
                    state["next_mem"] += TICK_S
                    bpf_ns, bpf_runs = progs.totals()
                    row = dict(t=round(now - tl, 1), cpu_s=proc_stat_cpu(p.pid),
                               cpu_ns=procstat.cpu_ns(p.pid), bpf_ns=bpf_ns, bpf_runs=bpf_runs)
                    row.update(memory(p.pid))
                    row["sink"] = read_slots(sink_counters, 4)[1:]
                    timeline.append(row)
                    if len(timeline) % 6 == 0:
                        progress(dict(res, timeline=timeline))

            tick(time.monotonic())
            try:
                res["profiled"] = run_phase("agent", secs, services, tick)
                cpu_before_stop = proc_stat_cpu(p.pid)
                t_stop = time.monotonic()
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    raise RuntimeError("the agent still runs 60 s after SIGTERM")
                res["stop_s"] = time.monotonic() - t_stop
                res["wall_s"] = time.monotonic() - tl
                bpf_ns, bpf_runs = progs.totals()
            finally:
                progs.close()
            procs.items.remove(p)
        res["sink_cpu_s"] = ((procstat.cpu_ns(sink.pid) or 0) - sink_cpu0) / 1e9
        with open(errpath) as f:
            text = f.read()
        res["exit_status"] = p.returncode
        res["cpu_before_stop_s"] = cpu_before_stop
        res["bpf_s"], res["bpf_runs"] = bpf_ns / 1e9, bpf_runs
        res["timeline"] = timeline
        res["log"] = parse_agent_log(text)
        res["log_tail"] = text.strip().splitlines()[-8:]
        sc = read_slots(sink_counters, 4)
        res["sink"] = dict(requests=sc[1], bytes=sc[2], refused=sc[3])
        files = [f for f in os.listdir(outdir) if f.endswith(".pb.gz")]
        res["files"] = len(files)
        res["files_bytes"] = sum(os.path.getsize(os.path.join(outdir, f)) for f in files)
        res["files_services"] = len({f.rsplit("-", 2)[0] for f in files})
        shutil.rmtree(outdir, ignore_errors=True)
        log("agent: stopped; %d s unprofiled" % base)
        res["base2"] = run_phase("unprofiled (after)", base, services)
        res["loadavg_end"] = os.getloadavg()
    finally:
        procs.kill_all()
    return res


def ratio(res, kind, key):
    b = [res[ph]["rates"][kind].get(key) for ph in ("base1", "base2")]
    a = res["profiled"]["rates"][kind].get(key)
    if None in b or a is None or not sum(b):
        return None
    return a / (sum(b) / 2)


def derive(res):
    """The figures of the report, from the timeline."""
    tl = [r for r in res["timeline"] if r.get("cpu_ns") is not None and r.get("VmRSS")]
    d = {}
    last = tl[-1]
    # whole: from the agent's start to its last sample before SIGTERM; its
    # whole life (exit included) from the CPU it had at the end
    d["cpu_pct_stat"] = 100.0 * res["cpu_before_stop_s"] / last["t"] if last["t"] else None
    d["cpu_pct"] = 100.0 * last["cpu_ns"] / 1e9 / last["t"]
    d["bpf_pct"] = 100.0 * last["bpf_ns"] / 1e9 / last["t"]
    # steady: from the second window on (start-up and the first window out)
    t0 = (res.get("startup_s") or 0) + 2 * WINDOW
    first = next((r for r in tl if r["t"] >= t0), None)
    if first and last["t"] - first["t"] >= TICK_S:
        dt = last["t"] - first["t"]
        d["steady_s"] = dt
        d["steady_cpu_pct"] = 100.0 * (last["cpu_ns"] - first["cpu_ns"]) / 1e9 / dt
        d["steady_cpu_pct_stat"] = 100.0 * (last["cpu_s"] - first["cpu_s"]) / dt
        d["steady_bpf_pct"] = 100.0 * (last["bpf_ns"] - first["bpf_ns"]) / 1e9 / dt
        d["steady_bpf_runs_per_s"] = (last["bpf_runs"] - first["bpf_runs"]) / dt
    warm = [r for r in tl if r["t"] >= 120] or tl
    d["rss_start_kb"] = warm[0]["VmRSS"]
    d["rss_start_t"] = warm[0]["t"]
    d["rss_end_kb"] = last["VmRSS"]
    d["rss_min_kb"] = min(r["VmRSS"] for r in tl)
    d["rss_max_kb"] = max(r["VmRSS"] for r in tl)
    d["hwm_kb"] = max(r.get("VmHWM", 0) for r in tl)
    for key in ("VmRSS", "RssAnon", "RssFile", "Pss_Anon"):
        d["slope_" + key] = fit_slope([(r["t"] / 60, r[key]) for r in warm if key in r])
    half = [r for r in tl if r["t"] >= last["t"] / 2]
    d["slope_half_VmRSS"] = fit_slope([(r["t"] / 60, r["VmRSS"]) for r in half])
    d["slope_half_RssAnon"] = fit_slope([(r["t"] / 60, r["RssAnon"]) for r in half
                                         if "RssAnon" in r])
    d["anon_start_kb"], d["anon_end_kb"] = warm[0].get("RssAnon"), last.get("RssAnon")
    d["file_start_kb"], d["file_end_kb"] = warm[0].get("RssFile"), last.get("RssFile")
    d["fds"] = (warm[0].get("fds"), last.get("fds"))
    d["threads"] = (warm[0].get("Threads"), last.get("Threads"))
    return d


def kb(v):
    return "-" if v is None else "%.1f MB" % (v / 1024)


def text(res):
    d = res["derived"]
    lg = res["log"]
    la0 = ", ".join("%.1f" % x for x in res["loadavg_start"][:3])
    la1 = ", ".join("%.1f" % x for x in res.get("loadavg_end", (0, 0, 0))[:3])
    minutes = res["profiled"]["seconds"] / 60
    lines = ["## pyprof-bpf agent on 20 service-like Pythons (issue #21 item 6)", "",
             "%s, %s; %.1f min profiled between two %.0f-s unprofiled phases; load "
             "average %s at the start, %s at the end (%d CPUs)." % (
                 res["started"], res.get("git", ""), minutes, res["base_seconds"], la0, la1,
                 res["cpus"]), "",
             "`%s`" % re.sub(r"/\S+/pyprof-bpf ", "pyprof-bpf ", res["command"]), ""]
    cpu = d.get("steady_cpu_pct", d["cpu_pct"])
    lines.append("- agent CPU (its process: user + system), whole run (start-up, %.1f s to "
                 "sampling, included): **%.2f%%** of one core (/proc/PID/stat utime+stime: "
                 "%.2f%%); steady (%.0f s from its second window): **%.2f%%** (stat: %.2f%%)"
                 % (res.get("startup_s") or 0, d["cpu_pct"], d["cpu_pct_stat"] or 0,
                    d.get("steady_s", 0), cpu, d.get("steady_cpu_pct_stat", 0)))
    lines.append("- its BPF programs (run in the sampled tasks' context): %.3f%% of one core "
                 "(%.0f runs/s); process + BPF, steady: %.2f%%: target <= %.0f%% %s" % (
                     d.get("steady_bpf_pct", d["bpf_pct"]), d.get("steady_bpf_runs_per_s", 0),
                     cpu + d.get("steady_bpf_pct", d["bpf_pct"]), CPU_TARGET,
                     "**met**" if cpu + d.get("steady_bpf_pct", 0) <= CPU_TARGET
                     else "**not met**"))
    lines.append("- VmRSS %s at %.0f s, %s at the end (min %s, max %s, VmHWM %s); slope from "
                 "the third minute: %s KB/min (RssAnon %s, RssFile %s, Pss_Anon %s); over the "
                 "last half: %s KB/min (RssAnon %s)" % (
                     kb(d["rss_start_kb"]), d["rss_start_t"], kb(d["rss_end_kb"]),
                     kb(d["rss_min_kb"]), kb(d["rss_max_kb"]), kb(d["hwm_kb"]),
                     *("-" if d[k] is None else "%+.1f" % d[k] for k in (
                         "slope_VmRSS", "slope_RssAnon", "slope_RssFile", "slope_Pss_Anon",
                         "slope_half_VmRSS", "slope_half_RssAnon"))))
    lines.append("- RssAnon %s -> %s, RssFile %s -> %s; threads %s -> %s, descriptors %s -> %s"
                 % (kb(d["anon_start_kb"]), kb(d["anon_end_kb"]), kb(d["file_start_kb"]),
                    kb(d["file_end_kb"]), d["threads"][0], d["threads"][1], d["fds"][0],
                    d["fds"][1]))
    marks, step, nxt = [], (60 if minutes <= 15 else 300), 0
    for r in res["timeline"]:
        if r.get("VmRSS") and r["t"] >= nxt:
            marks.append("%.0f min %.1f" % (r["t"] / 60, r["VmRSS"] / 1024))
            nxt += step
    lines.append("- VmRSS over time (MB): " + ", ".join(marks))
    lines.append("- delivered: %d profiles, %d samples in %d windows (%.1f profiles a window, "
                 "of 20 processes: the daemons, ~1.5 ms of CPU a second, meet a 19-Hz tick "
                 "in few windows); the store answered %d requests (%.0f KB), %d refused; "
                 "the agent's count: %s sent, %s refused, %s left; --output-dir: %d files "
                 "(%.0f KB) of %d services" % (
                     lg["profiles"], lg["samples"], lg["windows"],
                     lg["profiles"] / max(1, lg["windows"]), res["sink"]["requests"],
                     res["sink"]["bytes"] / 1e3, res["sink"]["refused"], lg.get("sent", "?"),
                     lg.get("refused", "?"), lg.get("left", "?"), res["files"],
                     res["files_bytes"] / 1e3, res["files_services"]))
    if lg.get("pythons_met") is not None:
        lines.append("- met on a CPU and looked at: %d of the 20 services (the others never "
                     "ran at a tick), and %s other processes of the shared host (%.1f/s: "
                     "others' builds and tests; each looked at once, not sampled)" % (
                         lg["pythons_met"], lg["others_met"],
                         (lg["others_met"] or 0) / max(1, res["profiled"]["seconds"])))
    if lg["late"]:
        lines.append("- late samples (a closed window's): %d" % lg["late"])
    if lg["errors"]:
        lines.append("- the agent's log says: " + " / ".join(lg["errors"][:3]))
    lines.append("- stop: %.2f s from SIGTERM to exit, status %s; the store's CPU (sink.c): "
                 "%.2f s" % (res["stop_s"], res["exit_status"], res["sink_cpu_s"]))
    lines += ["", "| services | units/busy-s before | profiled | after | profiled / mean of "
              "unprofiled | per CPU-s, profiled / unprofiled | units/s, profiled / unprofiled "
              "| cores (before, profiled, after) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for kind in ("batch", "web", "idle", "all"):
        r = [res[ph]["rates"][kind] for ph in ("base1", "profiled", "base2")]
        rt, rw = ratio(res, kind, "units_per_busy_s"), ratio(res, kind, "units_per_s")
        rc = ratio(res, kind, "units_per_cpu_s")
        lines.append("| %s | %.0f | %.0f | %.0f | %s | %s | %s | %.3f, %.3f, %.3f |" % (
            kind, *(x["units_per_busy_s"] or 0 for x in r),
            *("-" if v is None else "%.3f" % v for v in (rt, rc, rw)),
            *(x["cores"] for x in r)))
    steps = {ph: res[ph]["steps_units_per_busy_s"] for ph in ("base1", "profiled", "base2")}
    sp = ["%s %.0f-%.0f" % (ph, min(v), max(v)) for ph, v in steps.items() if v]
    lines += ["", "- the all-services capacity over 10-s steps (units/busy-s, min-max): "
              + "; ".join(sp), ""]
    return "\n".join(lines)


def save(outdir, res, final=True):
    name = "agent.json" if final else "agent-progress.json"
    with open(os.path.join(outdir, name), "w") as f:
        json.dump(res, f, indent=1)
    if not final:
        return None
    t = text(res)
    with open(os.path.join(outdir, "agent.md"), "w") as f:
        f.write(t)
    if os.path.dirname(outdir) == BENCH_DIR:
        shutil.copy(os.path.join(outdir, "agent.md"), os.path.join(BENCH_DIR, "latest-agent.md"))
    return t


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --agent-only",
                                 description="issue #21 item 6: pyprof-bpf agent's cost on 20 "
                                             "service-like Pythons, beside them unprofiled")
    ap.add_argument("--agent-secs", type=int, default=180, metavar="N",
                    help="seconds the agent runs (default 180; the issue's figure: 3600)")
    ap.add_argument("--agent-base-secs", type=int, default=60, metavar="N",
                    help="seconds of each unprofiled phase, before and after (default 60)")
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-agent)" % BENCH_DIR)
    ap.add_argument("--report", metavar="JSON",
                    help="print the report of a finished run's agent.json again, and exit")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            res = json.load(f)
        logpath = os.path.join(os.path.dirname(args.report), "logs", "agent.log")
        if os.path.exists(logpath):
            with open(logpath) as f:
                res["log"] = parse_agent_log(f.read())
        res["derived"] = derive(res)
        print(text(res))
        return 0
    if os.geteuid() != 0:
        log("agent: must run as root")
        return 2
    if args.agent_secs < 4 * WINDOW:
        log("agent: --agent-secs must be at least %d" % (4 * WINDOW))
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    outdir = os.path.abspath(args.out or os.path.join(BENCH_DIR, stamp + "-agent"))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    # The work directory sits inside the sid root, so chrooted services see it.
    wname = "pyprof-agent-bench-%d" % os.getpid()
    work_host, work_seen = os.path.join(SID, "tmp", wname), "/tmp/" + wname
    os.makedirs(work_host, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        binary, version = copy_binary(args.binary, outdir)
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        log("agent: 20 services, %d s unprofiled, %d s with the agent, %d s unprofiled "
            "(about %.0f min); results in %s" % (args.agent_base_secs, args.agent_secs,
                                                 args.agent_base_secs,
                                                 (args.agent_secs + 2 * args.agent_base_secs
                                                  + 20) / 60, outdir))
        res = run(binary, args.agent_secs, args.agent_base_secs, work_host, work_seen, logdir,
                  lambda r: save(outdir, r, final=False))
        res["git"], res["version"] = git, version
        res["derived"] = derive(res)
    except KeyboardInterrupt:
        log("agent: interrupted")
        return 130
    except (RuntimeError, OSError, procstat.BenchError) as e:
        log("agent: ERROR: %s" % e)
        return 2
    finally:
        shutil.rmtree(work_host, ignore_errors=True)
    print(save(outdir, res))
    log("agent: %s/agent.md" % outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
