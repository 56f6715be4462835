"""Issue #11's cells: what --native costs, beside perf's DWARF unwinding
(`scripts/bench --native CELLS`, alone with `--native-only`).

cost   the CPU per sample of `pyprof-bpf --native` (perf-script output to a
       file) and of `perf record -e cpu-clock --call-graph dwarf` followed by
       `perf script` (perf unwinds there, later: that is its unwinding cost),
       on the same target, one after the other, at 99 Hz and 999 Hz, each at
       a short and a long duration, ROUNDS rounds in alternating order. Two
       figures per profiler and rate: the CPU per sample of each run (start-up
       included: pyprof-bpf's is mostly the kernel verifying its BPF programs,
       ~0.15-0.2 s here; perf script's is reading the DSOs' symbols), and the
       marginal CPU per sample, (CPU of the long runs - CPU of the short
       ones) / (their samples' difference): what one more sample costs.
       pyprof-bpf runs twice: with its default stack copy (32 KB) and with
       perf's (--stack-size 8192, perf's default dump size). The target: tests/targets/native_paths.py
       in sid's python3.14 (Debian's build: no frame pointers), its zlib and
       sorted(key=) threads. pyprof-bpf's CPU is its process's (user + system,
       start-up included) plus the run time of its BPF programs (the kernel's
       BPF statistics: the stack copy and the walk); perf's is perf record's
       process plus perf script's. perf's own in-kernel sample cost (its 8 KB
       stack copy, in the target's context) is not in its figure: the ratio
       favours perf there. Target: pyprof-bpf <= 1/3 of perf per sample.
long   `pyprof-bpf --native --kernel -F 999` (collapsed output, the
       aggregating kind) on all five native paths for --native-long MINUTES
       (default 10): its VmRSS and VmHWM every 10 s. Target: <= 64 MB after
       10 minutes.
"""
import json
import os
import re
import shutil
import subprocess
import time

import procstat

import cell_files

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PATHS_PY = os.path.join(REPO, "tests", "targets", "native_paths.py")
CELLS = ("cost", "long")
RATES = ((99, (4, 16)), (999, (3, 10)))     # (Hz, (short, long) seconds sampled)
ROUNDS = 2
PYTHON = "/usr/bin/python3.14"
COST_PATHS = "zlib,sort"
LONG_PATHS = "sort,qsort,zlib,hashlib,read"


NAMES = {"pyprof": "pyprof-bpf --native", "pyprof-8k": "pyprof-bpf --native --stack-size 8192",
         "perf": "perf record --call-graph dwarf + perf script"}


def estimate_s(cells, long_min=10):
    s = 0
    if "cost" in cells:
        s += ROUNDS * sum(3 * (a + b) + 45 for _, (a, b) in RATES)
    if "long" in cells:
        s += long_min * 60 + 10
    return s


class Native:
    def __init__(self, ctx, sid, log):
        self.ctx, self.sid, self.log = ctx, sid, log
        shutil.copy(PATHS_PY, ctx.work[0])

    def _target(self, paths, tag):
        info_root = "%s/native-%s.json" % (self.ctx.work[1], tag)
        info_host = os.path.join(self.ctx.work[0], "native-%s.json" % tag)
        logf = open(os.path.join(self.ctx.logdir, "native-target-%s.log" % tag), "w")
        p = self.ctx.children.start(["chroot", self.sid, PYTHON,
                                     "%s/native_paths.py" % self.ctx.work[1], info_root, paths],
                                    logf)
        deadline = time.monotonic() + 60
        while not os.path.exists(info_host):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("native_paths.py did not start (%s)" % tag)
            time.sleep(0.05)
        return p

    def _run(self, argv, logpath, stdout=None, during=None):
        """Runs argv to its end; (exit status, rusage, its log text)."""
        with open(logpath, "w") as logf:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or logf,
                                 stderr=logf, start_new_session=True)
            self.ctx.children.procs.append(p)
            while True:
                if during:
                    during(p)
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if wpid == p.pid:
                    break
                time.sleep(0.2)
            p.returncode = os.waitstatus_to_exitcode(status)
            self.ctx.children.procs.remove(p)
        with open(logpath) as f:
            return p.returncode, ru, f.read()

    def _pyprof(self, pid, rate, dur, tag, extra=()):
        out = os.path.join(self.ctx.work[0], "native-%s.perf" % tag)
        progs = {}

        def scan(p):
            if "progs" not in progs:
                progs["progs"] = procstat.BpfPrograms(p.pid)
            progs["progs"].scan()
        with procstat.BpfStats():
            rc, ru, text = self._run([self.ctx.binary, "-p", str(pid), "--native", "-F",
                                      str(rate), "-d", str(dur), "-o", out] + list(extra),
                                     os.path.join(self.ctx.logdir, "native-%s.log" % tag),
                                     during=scan)
            bpf_ns = progs["progs"].totals()[0] if "progs" in progs else 0
            if "progs" in progs:
                progs["progs"].close()
        m = re.search(r"(\d+) samples in ([\d.]+) s", text)
        if rc or not m:
            raise RuntimeError("pyprof-bpf --native failed (%d): %s" % (rc, text[-300:]))
        cut = re.search(r"--native: (\d+) of (\d+) samples could not", text)
        os.unlink(out)
        return dict(samples=int(m.group(1)), cpu_s=ru.ru_utime + ru.ru_stime,
                    bpf_s=bpf_ns / 1e9, cut=int(cut.group(1)) if cut else 0,
                    maxrss_mb=ru.ru_maxrss / 1024)

    def _perf(self, pid, rate, dur, tag):
        data = os.path.join(self.ctx.work[0], "native-%s.data" % tag)
        txt = os.path.join(self.ctx.work[0], "native-%s.txt" % tag)
        rc, ru, text = self._run(["perf", "record", "-e", "cpu-clock", "--call-graph", "dwarf",
                                  "-F", str(rate), "-p", str(pid), "-o", data, "--", "sleep",
                                  str(dur)],
                                 os.path.join(self.ctx.logdir, "native-%s-record.log" % tag))
        m = re.search(r"perf record: Captured and wrote .*\((\d+) samples\)", text)
        if rc or not m:
            raise RuntimeError("perf record failed (%d): %s" % (rc, text[-300:]))
        rec_s = ru.ru_utime + ru.ru_stime
        with open(txt, "w") as out:
            rc, ru2, text2 = self._run(["perf", "script", "-i", data],
                                       os.path.join(self.ctx.logdir,
                                                    "native-%s-script.log" % tag), stdout=out)
        if rc:
            raise RuntimeError("perf script failed (%d): %s" % (rc, text2[-300:]))
        with open(txt, "rb") as f:
            blocks = f.read().count(b"\n\n")
        size = os.path.getsize(data)
        os.unlink(data)
        os.unlink(txt)
        return dict(samples=int(m.group(1)), script_samples=blocks, record_s=rec_s,
                    script_s=ru2.ru_utime + ru2.ru_stime,
                    cpu_s=rec_s + ru2.ru_utime + ru2.ru_stime, data_mb=size / 1e6,
                    maxrss_mb=max(ru.ru_maxrss, ru2.ru_maxrss) / 1024)

    def cost(self):
        res = []
        if not shutil.which("perf"):
            self.log("bench: native: perf is not installed: no cost cells")
            return res
        target = self._target(COST_PATHS, "cost")
        try:
            for rnd in range(ROUNDS):
                for rate, durs in RATES:
                    order = ["pyprof", "perf", "pyprof-8k"]
                    if rnd % 2:
                        order.reverse()
                    for who, dur in [(w, d) for d in durs for w in order]:
                        tag = "%s-%d-%d-%d" % (who, rate, dur, rnd)
                        if who == "perf":
                            r = self._perf(target.pid, rate, dur, tag)
                        else:
                            r = self._pyprof(target.pid, rate, dur, tag,
                                             ["--stack-size", "8192"] if who == "pyprof-8k"
                                             else [])
                        r.update(profiler=who, rate=rate, seconds=dur, round=rnd + 1)
                        r["us_per_sample"] = 1e6 * (r["cpu_s"] + r.get("bpf_s", 0)) / \
                            max(1, r["samples"])
                        res.append(r)
                        self.log("bench: native %s %d Hz %d s round %d: %d samples, %.1f "
                                 "us/sample" % (who, rate, dur, rnd + 1, r["samples"],
                                                r["us_per_sample"]))
        finally:
            self.ctx.children.kill(target)
        return res

    def long(self, minutes):
        target = self._target(LONG_PATHS, "long")
        out = os.path.join(self.ctx.work[0], "native-long.folded")
        timeline = []
        t0 = time.monotonic()
        last = [0.0]

        def sample(p):
            now = time.monotonic()
            if now - last[0] < 10:
                return
            last[0] = now
            st = procstat.status(p.pid)
            if st:
                timeline.append((round(now - t0), st.get("VmRSS"), st.get("VmHWM")))
        try:
            rc, ru, text = self._run([self.ctx.binary, "-p", str(target.pid), "--native",
                                      "--kernel", "-F", "999", "-d", str(int(minutes * 60)),
                                      "-o", out],
                                     os.path.join(self.ctx.logdir, "native-long.log"),
                                     during=sample)
        finally:
            self.ctx.children.kill(target)
        m = re.search(r"(\d+) samples in ([\d.]+) s", text)
        if rc or not m:
            raise RuntimeError("pyprof-bpf --native --kernel failed (%d): %s" % (rc, text[-300:]))
        return dict(minutes=minutes, samples=int(m.group(1)), timeline=timeline,
                    vmhwm_mb=max([ru.ru_maxrss] + [h for _, _, h in timeline if h]) / 1024,
                    final_rss_mb=timeline[-1][1] / 1024 if timeline else None,
                    cpu_us=1e6 * (ru.ru_utime + ru.ru_stime) / max(1, int(m.group(1))))


def run(ctx, sid, cells, long_min, log):
    n = Native(ctx, sid, log)
    out = {}
    if "cost" in cells:
        out["cost"] = n.cost()
    if "long" in cells:
        log("bench: native: --native --kernel at 999 Hz for %g min" % long_min)
        out["long"] = n.long(long_min)
    return out


def marginal(cost, rate, who, bpf=True):
    """(CPU of the long runs - CPU of the short runs) / their samples' difference, in us."""
    durs = dict(RATES)[rate]
    rs = [r for r in cost if r["rate"] == rate and r["profiler"] == who]
    short = [r for r in rs if r["seconds"] == durs[0]]
    long_ = [r for r in rs if r["seconds"] == durs[1]]
    if not short or not long_:
        return None
    cpu = lambda v: sum(r["cpu_s"] + (r.get("bpf_s", 0) if bpf else 0) for r in v) / len(v)
    n = lambda v: sum(r["samples"] for r in v) / len(v)
    if n(long_) <= n(short):
        return None
    return 1e6 * (cpu(long_) - cpu(short)) / (n(long_) - n(short))


def text(res):
    lines = ["## --native: CPU per sample beside perf --call-graph dwarf (issue #11)", ""]
    cost = res.get("cost") or []
    if cost:
        lines += ["| Hz | profiler | s | round | samples | CPU (s) | of which perf script / BPF "
                  "(s) | CPU/sample (us) |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in cost:
            extra = r.get("script_s") if r["profiler"] == "perf" else r.get("bpf_s")
            lines.append("| %d | %s | %d | %d | %d | %.2f | %.2f | %.1f |" % (
                r["rate"], NAMES[r["profiler"]], r["seconds"], r["round"], r["samples"],
                r["cpu_s"] + r.get("bpf_s", 0), extra or 0, r["us_per_sample"]))
        lines.append("")
        for (rate, durs), who in [(rd, w) for rd in RATES for w in ("pyprof", "pyprof-8k")]:
            ours = [r for r in cost if r["rate"] == rate and r["profiler"] == who]
            theirs = [r for r in cost if r["rate"] == rate and r["profiler"] == "perf"]
            if ours and theirs:
                a = sum(r["cpu_s"] + r["bpf_s"] for r in ours) / sum(r["samples"] for r in ours)
                b = sum(r["cpu_s"] for r in theirs) / sum(r["samples"] for r in theirs)
                lines.append("- %d Hz, %s, every run (start-up included): %.1f us/sample, "
                             "perf %.1f us/sample: ratio %.3f (target <= 0.333: %s)"
                             % (rate, NAMES[who], a * 1e6, b * 1e6, a / b,
                                "met" if a / b <= 1 / 3 else "MISSED"))
                ma, mb = marginal(cost, rate, who), marginal(cost, rate, "perf")
                mu = marginal(cost, rate, who, bpf=False)
                if ma is not None and mb:
                    lines.append("- %d Hz, %s, marginal (%d s runs against %d s runs): "
                                 "%.1f us/sample (%.1f without its BPF programs' time, which "
                                 "perf's in-kernel copy has no counterpart of here), perf "
                                 "%.1f us/sample: ratio %.3f (%s), %.3f without BPF"
                                 % (rate, NAMES[who], durs[1], durs[0], ma, mu, mb, ma / mb,
                                    "met" if ma / mb <= 1 / 3 else "MISSED", mu / mb))
        lines.append("")
    lg = res.get("long")
    if lg:
        lines.append("--native --kernel -F 999 for %g min: %d samples, VmHWM %.1f MB, final "
                     "VmRSS %.1f MB (target <= 64 MB: %s), %.1f us CPU per sample" % (
                         lg["minutes"], lg["samples"], lg["vmhwm_mb"], lg["final_rss_mb"] or 0,
                         "met" if lg["vmhwm_mb"] <= 64 else "MISSED", lg["cpu_us"]))
        lines.append("")
    return "\n".join(lines)


def save(outdir, res):
    return cell_files.write(outdir, "native", res, text(res))
