#!/usr/bin/env python3
"""Issue #21 item 6: what `pyprof-bpf agent` costs (`scripts/bench
--agent-only [--agent-secs N] [--agent-base-secs N] [--agent-push KINDS]`;
not part of a full or --quick run: it is long by nature); issue #36: what its
OTLP push costs beside its Pyroscope push (`--agent-push pyroscope,otlp`).

The host: 20 Python processes of a service-like mix (agent_workload.py), of
the interpreters of /var/cache/pyprof-bpf/pythons.txt (Debian's 3.11, pyenv's
3.11-3.13 and the sid root's 3.13-3.15 through chroot; 3.10, unsupported, and
the debug 3.14d left out): 2 batch workers computing in bursts (~40% of a core
each), 3 web services of 8 request-handler threads (~5% each), 15 daemons
waking every ~1 s (5 of them with a heartbeat thread). About 0.9 of a core in
all. Each is named svc-KIND-N (its comm and OTEL_SERVICE_NAME).

A store: sink.c, a C HTTP server on the loopback address answering 200 to
every request (not a Python: -a would sample a Python receiver too).

Phases on the same running processes: BASE s unprofiled, then
`pyprof-bpf agent -a --comm '^svc-' --window 15 --output-dir DIR --push
KIND=http://127.0.0.1:PORT --spool-dir DIR` for SECS s (stopped with
SIGTERM, which ships the last window), then BASE s unprofiled again. --comm
keeps the shared machine's other Pythons (others' test runs) out of the
measure; the agent still meets and looks at them at their first tick.

--agent-push KINDS (pyroscope, otlp, parca, comma-separated; the sink answers
200 to any of them) picks KIND. The default, pyroscope, is the one agent
phase of issue #21's runs, unchanged. With two or more kinds (issue #36:
`--agent-push pyroscope,otlp`), the agent runs once per kind and then once
more per kind in reverse order (A B B A), SECS s each, a fresh agent each
time (its own spool and output directories, the same sink): on a shared
machine whose load drifts over the run, the mirrored order weighs a steady
drift on each kind alike, where A then B would charge it to one; and the
two phases of a kind show how far the machine's noise alone moves the
figure. Parca's kind has not been run here.

Measured, every 10 s: the agent's CPU (utime + stime from /proc/PID/stat,
and its process CPU clock), its BPF programs' run time (kernel statistics,
procstat.BpfPrograms: run in the targets' context, reported apart), its
VmRSS, RssAnon, RssFile, smaps_rollup's Pss_Anon, threads and descriptors;
the services' units of work and the time spent in them; and, within ~1 s of
each window line of the agent's log, the agent's CPU then. Reported, for
each agent phase: the agent's CPU as a share of one core (whole run, and
steady: from its second window on), its CPU a window and a sample (from its
second window's close to its last before SIGTERM: the CPU between the two
over the windows and samples closed in between; the first window is
partial and meets the whole host), RSS at the start, the end and its slope
(KB/min, a least-squares fit from the third minute on, and over the last
half), the profiles and samples it delivered (its per-window log lines, its
final line per store, whatever the kind, the store's count of requests and
bytes in the phase, the files in --output-dir), and each kind of service's
throughput profiled over unprofiled (units per second spent working: what
interrupts take shows there; the mean of the two unprofiled phases as the
reference). With two or more push kinds, also each kind's sums over its
phases and its ratio to the first kind: the agent's CPU a window, a sample
and its steady share.

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
KINDS = ("pyroscope", "otlp", "parca")   # --agent-push: the agent's push kinds

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
    # one final line per --push, whatever its kind: "pyprof-bpf agent: KIND URL: N
    # profiles sent, R refused, L left in the spool"
    res["stores"] = [dict(kind=m.group(1), url=m.group(2), sent=int(m.group(3)),
                          refused=int(m.group(4)), left=int(m.group(5)))
                     for m in re.finditer(r"agent: (\w+) (\S+): (\d+) profiles sent, (\d+) "
                                          r"refused, (\d+) left", text)]
    if res["stores"]:
        for k in ("sent", "refused", "left"):
            res[k] = sum(s[k] for s in res["stores"])
    m = re.search(r"pyprof-bpf: (\d+) Python process", text)
    res["pythons_met"] = int(m.group(1)) if m else None
    m = re.search(r"pyprof-bpf: (\d+) other processes met", text)
    res["others_met"] = int(m.group(1)) if m else None
    res["errors"] = [ln for ln in text.splitlines()
                     if re.search(r"could not|unusable|refused \(|past its bounds|"
                                  r"profiles wait|error|fail", ln, re.I)
                     and not re.search(r" 0 errors", ln)][:10]
    return res


def phase_order(kinds):
    """One agent phase per kind; with more than one kind, each twice, mirrored
    (A B B A): a drift of the shared machine's load over the run weighs on
    every kind alike, and each kind's two phases show the noise."""
    return list(kinds) if len(kinds) == 1 else list(kinds) + list(reversed(kinds))


def run_agent(ph, idx, binary, secs, services, procs, sink, sink_counters, port,
              workdir_host, logdir, progress):
    """One agent phase: `pyprof-bpf agent ... --push KIND=sink` for secs s on
    the running services, stopped by SIGTERM; its figures into ph."""
    kind = ph["kind"]
    outdir = os.path.join(workdir_host, "profiles-%d" % idx)
    spool = os.path.join(workdir_host, "spool-%d" % idx)
    os.makedirs(outdir)
    argv = [binary, "agent", "-a", "--comm", COMM_RE, "--window", str(WINDOW),
            "--output-dir", outdir, "--spool-dir", spool,
            "--push", "%s=http://127.0.0.1:%d" % (kind, port)]
    ph["command"] = " ".join(argv)
    ph["log_file"] = "agent.log" if idx == 0 and ph.get("only") else \
        "agent-%d-%s.log" % (idx + 1, kind)
    errpath = os.path.join(logdir, ph["log_file"])
    ph["loadavg_start"] = os.getloadavg()
    timeline = ph["timeline"] = []
    closes = ph["closes"] = []      # each window line of the log, as it came
    sc0 = read_slots(sink_counters, 4)
    with procstat.BpfStats() as stats, open(errpath, "w") as ef:
        ph["bpf_stats"] = stats.how
        tl = time.monotonic()
        p = procs.start(argv, ef)
        progs = procstat.BpfPrograms(p.pid)
        state = dict(ready=None, next_mem=tl, lines=0)
        sink_cpu0 = procstat.cpu_ns(sink.pid) or 0

        def tick(now):
            progs.scan()
            if p.poll() is not None:
                raise RuntimeError("the agent exited early (status %s): %s" % (
                    p.returncode, open(errpath).read().strip()[-600:]))
            with open(errpath) as f:
                txt = f.read()
            if state["ready"] is None and "agent: sampling" in txt:
                state["ready"] = now
                ph["startup_s"] = now - tl
            lg = None
            if txt.count(" samples in ") > state["lines"]:
                # a window closed (seen within ~1 s): the agent's CPU then, to
                # share it among the windows and samples closed in between
                lg = parse_agent_log(txt)
                state["lines"] = lg["window_lines"]
                bpf_ns, _ = progs.totals()
                closes.append(dict(t=round(now - tl, 1), windows=lg["windows"],
                                   profiles=lg["profiles"], samples=lg["samples"],
                                   cpu_ns=procstat.cpu_ns(p.pid), bpf_ns=bpf_ns,
                                   sink=read_slots(sink_counters, 4)[1:]))
            if now >= state["next_mem"] - 0.05:
                state["next_mem"] += TICK_S
                bpf_ns, bpf_runs = progs.totals()
                row = dict(t=round(now - tl, 1), cpu_s=proc_stat_cpu(p.pid),
                           cpu_ns=procstat.cpu_ns(p.pid), bpf_ns=bpf_ns, bpf_runs=bpf_runs)
                row.update(memory(p.pid))
                row["sink"] = read_slots(sink_counters, 4)[1:]
                lg = lg or parse_agent_log(txt)
                row["samples"], row["windows"] = lg["samples"], lg["windows"]
                timeline.append(row)
                if len(timeline) % 6 == 0:
                    progress()

        tick(time.monotonic())
        try:
            ph["profiled"] = run_phase(ph["label"], secs, services, tick)
            cpu_before_stop = proc_stat_cpu(p.pid)
            t_stop = time.monotonic()
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                raise RuntimeError("the agent still runs 60 s after SIGTERM")
            ph["stop_s"] = time.monotonic() - t_stop
            ph["wall_s"] = time.monotonic() - tl
            bpf_ns, bpf_runs = progs.totals()
        finally:
            progs.close()
        procs.items.remove(p)
    ph["loadavg_end"] = os.getloadavg()
    ph["sink_cpu_s"] = ((procstat.cpu_ns(sink.pid) or 0) - sink_cpu0) / 1e9
    with open(errpath) as f:
        text = f.read()
    ph["exit_status"] = p.returncode
    ph["cpu_before_stop_s"] = cpu_before_stop
    ph["bpf_s"], ph["bpf_runs"] = bpf_ns / 1e9, bpf_runs
    ph["log"] = parse_agent_log(text)
    ph["log_tail"] = text.strip().splitlines()[-8:]
    sc = read_slots(sink_counters, 4)
    ph["sink"] = dict(requests=sc[1] - sc0[1], bytes=sc[2] - sc0[2], refused=sc[3] - sc0[3])
    files = [f for f in os.listdir(outdir) if f.endswith(".pb.gz")]
    ph["files"] = len(files)
    ph["files_bytes"] = sum(os.path.getsize(os.path.join(outdir, f)) for f in files)
    ph["files_services"] = len({f.rsplit("-", 2)[0] for f in files})
    shutil.rmtree(outdir, ignore_errors=True)
    shutil.rmtree(spool, ignore_errors=True)


def run(binary, kinds, secs, base, workdir_host, workdir_seen, logdir, progress):
    procs = Procs()
    order = phase_order(kinds)
    res = dict(seconds=secs, base_seconds=base, rate=RATE, window=WINDOW, push=list(kinds),
               order=order, loadavg_start=os.getloadavg(), cpus=os.cpu_count(),
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

        res["agents"] = []
        seen = {}
        for idx, kind in enumerate(order):
            seen[kind] = seen.get(kind, 0) + 1
            label = kind if order.count(kind) == 1 else "%s %d" % (kind, seen[kind])
            ph = dict(kind=kind, label=label, only=len(order) == 1)
            res["agents"].append(ph)
            log("agent: phase %d of %d: the agent with --push %s for %d s" % (
                idx + 1, len(order), kind, secs))
            run_agent(ph, idx, binary, secs, services, procs, sink, sink_counters, port,
                      workdir_host, logdir, lambda: progress(res))
            ph["derived"] = derive(ph)
            d = ph["derived"]
            log("agent: %s: steady %.3f%% of a core; %s ms a window, %s us a sample; %d "
                "samples, the store %d requests (%.0f KB)" % (
                    label, d.get("steady_cpu_pct", d["cpu_pct"]),
                    fmt(d.get("win_ms_per_window"), "%.2f"),
                    fmt(d.get("win_us_per_sample"), "%.1f"), ph["log"]["samples"],
                    ph["sink"]["requests"], ph["sink"]["bytes"] / 1e3))
        log("agent: stopped; %d s unprofiled" % base)
        res["base2"] = run_phase("unprofiled (after)", base, services)
        res["loadavg_end"] = os.getloadavg()
    finally:
        procs.kill_all()
    return res


def ratio(res, ph, kind, key):
    b = [res[p]["rates"][kind].get(key) for p in ("base1", "base2")]
    a = ph["profiled"]["rates"][kind].get(key)
    if None in b or a is None or not sum(b):
        return None
    return a / (sum(b) / 2)


def derive(ph):
    """The figures of one agent phase, from its timeline and its windows' closes."""
    tl = [r for r in ph["timeline"] if r.get("cpu_ns") is not None and r.get("VmRSS")]
    d = {}
    last = tl[-1]
    # whole: from the agent's start to its last sample before SIGTERM; its
    # whole life (exit included) from the CPU it had at the end
    d["cpu_pct_stat"] = 100.0 * ph["cpu_before_stop_s"] / last["t"] if last["t"] else None
    d["cpu_pct"] = 100.0 * last["cpu_ns"] / 1e9 / last["t"]
    d["bpf_pct"] = 100.0 * last["bpf_ns"] / 1e9 / last["t"]
    # steady: from the second window on (start-up and the first window out)
    t0 = (ph.get("startup_s") or 0) + 2 * WINDOW
    first = next((r for r in tl if r["t"] >= t0), None)
    if first and last["t"] - first["t"] >= TICK_S:
        dt = last["t"] - first["t"]
        d["steady_s"] = dt
        d["steady_cpu_pct"] = 100.0 * (last["cpu_ns"] - first["cpu_ns"]) / 1e9 / dt
        d["steady_cpu_pct_stat"] = 100.0 * (last["cpu_s"] - first["cpu_s"]) / dt
        d["steady_bpf_pct"] = 100.0 * (last["bpf_ns"] - first["bpf_ns"]) / 1e9 / dt
        d["steady_bpf_runs_per_s"] = (last["bpf_runs"] - first["bpf_runs"]) / dt
    # per window and per sample: from the close of its second window (the first
    # is partial, and meets the whole host) to the last close before SIGTERM,
    # the CPU between the two over the windows and samples closed after the first
    cl = [c for c in ph.get("closes", []) if c.get("cpu_ns") is not None]
    if len(cl) >= 3:
        a, b = cl[1], cl[-1]
        cpu = (b["cpu_ns"] - a["cpu_ns"]) / 1e9
        bpf = (b["bpf_ns"] - a["bpf_ns"]) / 1e9
        nw, ns = b["windows"] - a["windows"], b["samples"] - a["samples"]
        d.update(win_s=b["t"] - a["t"], win_windows=nw, win_samples=ns,
                 win_profiles=b["profiles"] - a["profiles"], win_cpu_s=cpu, win_bpf_s=bpf,
                 win_requests=b["sink"][0] - a["sink"][0],
                 win_ms_per_window=1e3 * cpu / nw if nw else None,
                 win_us_per_sample=1e6 * cpu / ns if ns else None,
                 win_bpf_ms_per_window=1e3 * bpf / nw if nw else None)
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


def by_kind(res):
    """{kind: sums over its phases} and the ratios of each kind to the first."""
    out = {}
    for ph in res["agents"]:
        d, lg = ph["derived"], ph["log"]
        k = out.setdefault(ph["kind"], dict(phases=0, steady_s=0.0, steady_cpu_s=0.0,
                                            win_cpu_s=0.0, win_windows=0, win_samples=0,
                                            profiles=0, samples=0, requests=0, bytes=0))
        k["phases"] += 1
        k["steady_s"] += d.get("steady_s", 0)
        k["steady_cpu_s"] += d.get("steady_cpu_pct", 0) / 100 * d.get("steady_s", 0)
        for key in ("win_cpu_s", "win_windows", "win_samples"):
            k[key] += d.get(key, 0)
        k["profiles"] += lg["profiles"]
        k["samples"] += lg["samples"]
        k["requests"] += ph["sink"]["requests"]
        k["bytes"] += ph["sink"]["bytes"]
    for k in out.values():
        k["steady_cpu_pct"] = 100 * k["steady_cpu_s"] / k["steady_s"] if k["steady_s"] else None
        k["ms_per_window"] = 1e3 * k["win_cpu_s"] / k["win_windows"] if k["win_windows"] \
            else None
        k["us_per_sample"] = 1e6 * k["win_cpu_s"] / k["win_samples"] if k["win_samples"] \
            else None
    ref = out[res["agents"][0]["kind"]]
    for k in out.values():
        k["ratio"] = {key: (k[key] / ref[key] if k[key] and ref[key] else None)
                      for key in ("steady_cpu_pct", "ms_per_window", "us_per_sample")}
    return out


def kb(v):
    return "-" if v is None else "%.1f MB" % (v / 1024)


def fmt(v, f):
    return "-" if v is None else f % v


def phase_lines(ph):
    d = ph["derived"]
    lg = ph["log"]
    minutes = ph["profiled"]["seconds"] / 60
    lines = ["`%s`" % re.sub(r"/\S+/pyprof-bpf ", "pyprof-bpf ", ph["command"]), ""]
    cpu = d.get("steady_cpu_pct", d["cpu_pct"])
    lines.append("- agent CPU (its process: user + system), whole run (start-up, %.1f s to "
                 "sampling, included): **%.2f%%** of one core (/proc/PID/stat utime+stime: "
                 "%.2f%%); steady (%.0f s from its second window): **%.2f%%** (stat: %.2f%%)"
                 % (ph.get("startup_s") or 0, d["cpu_pct"], d["cpu_pct_stat"] or 0,
                    d.get("steady_s", 0), cpu, d.get("steady_cpu_pct_stat", 0)))
    if d.get("win_windows"):
        lines.append("- from its second window's close to its last before SIGTERM (%.0f s, %d "
                     "windows, %d samples, %d profiles): **%.2f ms** of CPU a window, **%.1f "
                     "us** a sample (its BPF programs: %.2f ms a window)" % (
                         d["win_s"], d["win_windows"], d["win_samples"], d["win_profiles"],
                         d["win_ms_per_window"], d["win_us_per_sample"] or 0,
                         d["win_bpf_ms_per_window"]))
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
    for r in ph["timeline"]:
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
                     lg["profiles"] / max(1, lg["windows"]), ph["sink"]["requests"],
                     ph["sink"]["bytes"] / 1e3, ph["sink"]["refused"], lg.get("sent", "?"),
                     lg.get("refused", "?"), lg.get("left", "?"), ph["files"],
                     ph["files_bytes"] / 1e3, ph["files_services"]))
    if lg.get("pythons_met") is not None:
        lines.append("- met on a CPU and looked at: %d of the 20 services (the others never "
                     "ran at a tick), and %s other processes of the shared host (%.1f/s: "
                     "others' builds and tests; each looked at once, not sampled)" % (
                         lg["pythons_met"], lg["others_met"],
                         (lg["others_met"] or 0) / max(1, ph["profiled"]["seconds"])))
    if lg["late"]:
        lines.append("- late samples (a closed window's): %d" % lg["late"])
    if lg["errors"]:
        lines.append("- the agent's log says: " + " / ".join(lg["errors"][:3]))
    lines.append("- stop: %.2f s from SIGTERM to exit, status %s; the store's CPU (sink.c): "
                 "%.2f s" % (ph["stop_s"], ph["exit_status"], ph["sink_cpu_s"]))
    return lines


def comparison_lines(res):
    """The phases side by side, each kind's sums, and their ratios to the first kind."""
    ks = by_kind(res)
    first = res["agents"][0]["kind"]
    lines = ["| phase | agent CPU, steady, % of a core | windows | samples | CPU a window | "
             "CPU a sample | BPF a window | delivered: profiles, samples | store: requests, "
             "KB | others met | load average |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for ph in res["agents"]:
        d, lg = ph["derived"], ph["log"]
        lines.append("| %s | %s | %s | %s | %s ms | %s us | %s ms | %d, %d | %d, %.0f | %s | "
                     "%.1f-%.1f |" % (
                         ph["label"], fmt(d.get("steady_cpu_pct"), "%.3f%%"),
                         d.get("win_windows", "-"), d.get("win_samples", "-"),
                         fmt(d.get("win_ms_per_window"), "%.2f"),
                         fmt(d.get("win_us_per_sample"), "%.1f"),
                         fmt(d.get("win_bpf_ms_per_window"), "%.2f"), lg["profiles"],
                         lg["samples"], ph["sink"]["requests"], ph["sink"]["bytes"] / 1e3,
                         fmt(lg.get("others_met"), "%d"), ph["loadavg_start"][0],
                         ph["loadavg_end"][0]))
    if len(ks) > 1 or any(k["phases"] > 1 for k in ks.values()):
        for kind, k in ks.items():
            lines.append("| **%s, its %d phases** | %s | %d | %d | **%s ms** | **%s us** | | "
                         "%d, %d | %d, %.0f | | |" % (
                             kind, k["phases"], fmt(k["steady_cpu_pct"], "%.3f%%"),
                             k["win_windows"], k["win_samples"],
                             fmt(k["ms_per_window"], "%.2f"), fmt(k["us_per_sample"], "%.1f"),
                             k["profiles"], k["samples"], k["requests"], k["bytes"] / 1e3))
    lines.append("")
    lines.append("(CPU a window / a sample: the agent process's, from its second window's "
                 "close to its last before SIGTERM, over the windows and samples closed in "
                 "between; steady share: from its second window to the end.)")
    for kind, k in ks.items():
        if kind == first:
            continue
        r = k["ratio"]
        lines.append("")
        lines.append("- **%s / %s**, the agent's CPU: **%s** a window, **%s** a sample, %s "
                     "of the steady share of a core" % (
                         kind, first, fmt(r["ms_per_window"], "%.3f"),
                         fmt(r["us_per_sample"], "%.3f"), fmt(r["steady_cpu_pct"], "%.3f")))
    for kind, k in ks.items():
        per = [p["derived"].get("win_ms_per_window") for p in res["agents"]
               if p["kind"] == kind]
        if len(per) > 1 and None not in per:
            lines.append("- %s's phases: %s ms a window (spread %.0f%% of their mean: the "
                         "noise of the shared machine)" % (
                             kind, ", ".join("%.2f" % x for x in per),
                             100 * (max(per) - min(per)) / (sum(per) / len(per))))
    return lines


def text(res):
    agents = res["agents"]
    la0 = ", ".join("%.1f" % x for x in res["loadavg_start"][:3])
    la1 = ", ".join("%.1f" % x for x in res.get("loadavg_end", (0, 0, 0))[:3])
    if len(agents) == 1:
        minutes = agents[0]["profiled"]["seconds"] / 60
        lines = ["## pyprof-bpf agent on 20 service-like Pythons (issue #21 item 6)", "",
                 "%s, %s; %.1f min profiled between two %.0f-s unprofiled phases; load "
                 "average %s at the start, %s at the end (%d CPUs)." % (
                     res["started"], res.get("git", ""), minutes, res["base_seconds"], la0,
                     la1, res["cpus"]), ""]
        lines += phase_lines(agents[0])
    else:
        lines = ["## pyprof-bpf agent on 20 service-like Pythons: %s on the same processes"
                 % ", ".join("--push " + k for k in res["push"]), "",
                 "%s, %s; %d agent phases of %.0f s (%s) between two %.0f-s unprofiled "
                 "phases; load average %s at the start, %s at the end (%d CPUs)." % (
                     res["started"], res.get("git", ""), len(agents), res["seconds"],
                     ", ".join(p["label"] for p in agents), res["base_seconds"], la0, la1,
                     res["cpus"]), ""]
        lines += comparison_lines(res)
        for i, ph in enumerate(agents):
            lines += ["", "### phase %d: %s" % (i + 1, ph["label"]), ""]
            lines += phase_lines(ph)
    names = ["base1"] + ["agent %d" % i for i in range(len(agents))] + ["base2"]
    phases = [res["base1"]] + [p["profiled"] for p in agents] + [res["base2"]]
    if len(agents) == 1:
        cols, each = "profiled", ""
    else:
        cols = " | ".join(p["label"] for p in agents)
        each = " (%s)" % ", ".join(p["label"] for p in agents)
    lines += ["", "| services | units/busy-s before | %s | after | profiled / mean of "
              "unprofiled%s | per CPU-s, profiled / unprofiled | units/s, profiled / "
              "unprofiled | cores (before, %s, after) |" % (
                  cols, each, "profiled" if len(agents) == 1 else
                  ", ".join(p["label"] for p in agents)),
              "| --- | ---: | %s---: | ---: | ---: | ---: | --- |" % ("---: | " * len(agents))]
    for kind in ("batch", "web", "idle", "all"):
        r = [x["rates"][kind] for x in phases]
        rat = [", ".join(fmt(ratio(res, p, kind, key), "%.3f") for p in agents)
               for key in ("units_per_busy_s", "units_per_cpu_s", "units_per_s")]
        lines.append("| %s | %s | %s | %s |" % (
            kind, " | ".join("%.0f" % (x["units_per_busy_s"] or 0) for x in r),
            " | ".join(rat), ", ".join("%.3f" % x["cores"] for x in r)))
    sp = ["%s %.0f-%.0f" % (("profiled" if len(agents) == 1 else agents[i - 1]["label"])
                            if 0 < i <= len(agents) else names[i], min(v), max(v))
          for i, v in enumerate(x["steps_units_per_busy_s"] for x in phases) if v]
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


def old_form(res):
    """An agent.json of one agent phase, from before --agent-push, in today's form."""
    keys = ("command", "bpf_stats", "startup_s", "profiled", "stop_s", "wall_s", "exit_status",
            "cpu_before_stop_s", "bpf_s", "bpf_runs", "timeline", "log", "log_tail", "sink",
            "sink_cpu_s", "files", "files_bytes", "files_services")
    ph = dict(kind="pyroscope", label="pyroscope", only=True, log_file="agent.log",
              loadavg_start=res["loadavg_start"], loadavg_end=res.get("loadavg_end"))
    ph.update((k, res.pop(k)) for k in keys if k in res)
    res.update(push=["pyroscope"], order=["pyroscope"], agents=[ph])
    return res


def parse_push(value):
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad or len(set(kinds)) != len(kinds):
        raise argparse.ArgumentTypeError("a comma-separated list of distinct kinds of %s"
                                         % ", ".join(KINDS))
    return kinds


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench --agent-only",
                                 description="issue #21 item 6: pyprof-bpf agent's cost on 20 "
                                             "service-like Pythons, beside them unprofiled; "
                                             "issue #36: its push kinds side by side")
    ap.add_argument("--agent-secs", type=int, default=180, metavar="N",
                    help="seconds the agent runs in each of its phases (default 180; issue "
                         "#21's figure: 3600)")
    ap.add_argument("--agent-base-secs", type=int, default=60, metavar="N",
                    help="seconds of each unprofiled phase, before and after (default 60)")
    ap.add_argument("--agent-push", type=parse_push, default=["pyroscope"], metavar="KINDS",
                    help="the push kinds, comma-separated (%s; default pyroscope: one agent "
                         "phase). With two or more, each runs twice, mirrored (A B B A), on "
                         "the same services, and the report compares them (the CPU a window "
                         "and a sample, each kind over the first)" % ", ".join(KINDS))
    ap.add_argument("--binary", default=os.path.join(REPO, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-agent)" % BENCH_DIR)
    ap.add_argument("--report", metavar="JSON",
                    help="print the report of a finished run's agent.json again, and exit")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            res = json.load(f)
        if "agents" not in res:
            res = old_form(res)
        for ph in res["agents"]:
            logpath = os.path.join(os.path.dirname(args.report), "logs", ph["log_file"])
            if os.path.exists(logpath):
                with open(logpath) as f:
                    ph["log"] = parse_agent_log(f.read())
            ph["derived"] = derive(ph)
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
        order = phase_order(args.agent_push)
        log("agent: 20 services, %d s unprofiled, %d s with the agent (%s), %d s unprofiled "
            "(about %.0f min); results in %s" % (
                args.agent_base_secs, args.agent_secs * len(order),
                ", ".join("--push %s %d s" % (k, args.agent_secs) for k in order),
                args.agent_base_secs,
                (len(order) * (args.agent_secs + 10) + 2 * args.agent_base_secs + 20) / 60,
                outdir))
        res = run(binary, args.agent_push, args.agent_secs, args.agent_base_secs, work_host,
                  work_seen, logdir, lambda r: save(outdir, r, final=False))
        res["git"], res["version"] = git, version
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
