"""Issue #10's modes end to end (--mode cpu|off-cpu|wall|gil), on real
interpreters with real BPF, against what the targets' threads really did.

One interpreter per minor version, 3.11 to 3.15 (the first of each that
tests/pyenvs.py lists, debug builds aside: pyenv 3.11 and 3.12 with a shared
libpython, the sid root's static 3.13, 3.14 and 3.15 in a chroot); a
missing version is a failure.

The truth (tests/tools/modes_truth.py) is never pyprof-bpf's: a poller
process running SCHED_FIFO reads every thread's state in /proc/PID/task/TID/
stat every 0.5 ms (R: on a CPU or waiting for one; S, D: asleep) and its CPU
time (schedstat) every 5 ms, so CPU = the schedstat delta, runnable = time in
R - CPU, blocked = time in S or D, each with the polls' quantisation error
(printed; a tenth of a point or so). The reason of the blocked time is known
by construction (tests/targets/modes_mix.py): its sleep, lock and recv threads
block in their call for a time the target's own timers give (the requested
sleep, the lock's timeout, the feeder process's send time), so the rest of
their blocked time is the GIL; spin, gil_a and gil_b never block but for the
GIL; fsync's uninterruptible sleep (D) is its time in fsync(). Shares are
compared over the recording's own window: from the start of the first
off-CPU interval (a thread blocked since before the start is counted from
it) to the last sample. (schedstat's run_delay would give the runnable time
directly, but on this kernel it sometimes counts a whole sleep as run delay:
a 200 ms timed futex wait that the target's timers and pyprof-bpf both saw
blocked came back as +200.4 ms of run_delay; it is printed beside the polled
value, not used.)

a. test_wall (every version): `--mode wall -F 999 -d 3 --events cpu` on
   modes_mix: every sample well formed (below); every thread's total weight
   within 2% of the recording's length; for each thread (but main) and each
   reason (CPU, [runnable], [GIL wait], [syscall] NAME) the share of its time
   within 3 points of the truth (runnable, GIL wait and fsync: plus twice the
   polls' error, a few tenths of a point).
b. test_off_cpu (every version): `--mode off-cpu -d 2`: off-CPU samples only;
   each thread's off-CPU total within 2% of the recording of its time off a
   CPU; each reason's share of it within 3 points of the truth; the sleeping
   thread in `[syscall] clock_nanosleep` under do_nanosleep, the recv thread
   in `[syscall] recvfrom` under tcp_recvmsg, the lock thread in
   `[syscall] futex` (not [GIL wait]) under futex_wait with lock_waiter as
   its Python leaf, the GIL contenders in [GIL wait] under futex_wait, fsync
   in `[syscall] fsync` under ext4_sync_file (every blocked sample but the
   one opened at the start, which has no kernel stack, must have them).
c. test_gil_mode (every version): `--mode gil`: CPU samples only; spin
   (hashing without the GIL) [GIL released] in >= 95% of its samples,
   gil_a/gil_b (pure Python) in <= 5%.
d. test_http_off_cpu (every version): off-CPU on the stdlib's
   ThreadingHTTPServer under load from a client process
   (tests/targets/modes_http.py): the handler threads wait in
   `[syscall] recvfrom` (under handle_one_request, tcp_recvmsg) and
   `[syscall] sendto` (under do_GET, tcp_sendmsg), sendto's share of the two
   within 5 points of what the handlers' own timers say, the two >= 85% of
   their off-CPU time; the accept loop (serve_forever) in `[syscall] poll` (ppoll on 3.15)
   under PollSelector.select and do_sys_poll for >= 95% of its time.
e. test_gc (every version): gc.collect() in a loop over cyclic garbage
   (tests/targets/modes_gc.py), cpu mode: <GC> on the collector's samples
   within 3 points of its own share of CPU inside gc.collect() (timed with
   thread_time_ns), and >= 90% on 3.15; <GC> as the leaf of the Python frames,
   at the collect line or in the allocating code (automatic collections);
   never on the other thread (<= 1%).
f. test_perf_script_consumers (sid-3.14): off-CPU and wall perf-script read
   by FlameGraph's stackcollapse-perf.pl rules (test_formats.py): collapsed
   weight == sum of the periods, per event (the script keeps the first event
   type it sees unless told), Python frames, `[syscall]%20NAME` and kernel
   names intact; by the Firefox Profiler's rules: every sample, per thread,
   kernel frames kept as such ([kernel.kallsyms]); by speedscope in Chromium:
   it imports every sample of the first event type, one profile per thread
   with our stacks (its perf importer weighs by timestamps, not periods: the
   weights it shows are printed, not asserted), and our own speedscope file
   (report of the same raw recording) through the same importer keeps the
   weights exactly.
g. test_remote (every version): `--backend remote` on modes_mix: wall: every
   thread about the same number of samples (each tick takes all); cpu: each
   thread's share of the ticks within 10 points of its time in state R
   (running or runnable); gil: at most one thread per tick holds the GIL, spin
   [GIL released] in >= 90%; `--mode off-cpu` refused with an error naming
   it, exit status non-zero.

Every sample is checked for its shape (and at most 0.5% of the samples may
have a frame without a name: <unknown>, [read-fault], [truncated],
[no-python-state], [eval-entry]): a header and frames as test_record parses
them, the address the FNV-1a of the symbol, Python frames (py::, dso
= file), kernel frames (dso [kernel.kallsyms]) and pyprof-bpf's own; an
off-CPU sample has exactly one reason frame ([syscall] NAME, [GIL wait] or
[runnable]) between its Python frames and its kernel frames; a CPU sample has
none and no kernel frame; [GIL released] only in gil mode, as the leaf; <GC>
only leafward of every Python frame.

Each test prints its numbers on lines starting "MODES" (pytest -s).

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_modes.py
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import uuid

import pytest

from lib import formats as tf
from lib.tool import binary
from lib.interps import PARAMS, SUPPORTED, VERSIONS
from lib.procs import out_path, stage_unique, stderr_of, wait_json
from lib.recorder import Recorder
from lib.perf import FRAME, HEADER, fnv1a, machine_steal, only_event

pytestmark = [pytest.mark.bpf, pytest.mark.root]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))
import modes_truth as mt  # noqa: E402

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
MIX = os.path.join(TARGETS, "modes_mix.py")
HZ = 999
SECS = 3
ROLES = ("spin", "gil_a", "gil_b", "sleep", "lock", "recv", "fsync", "main")
SHARE_TOL = 0.03
TOTAL_TOL = 0.02
# The fsync thread (pwrite of 1 MiB and fsync in a loop) against its truth,
# which rests on its schedstat CPU time: 1 run in 6 here its off-CPU total
# falls 2-3.4% of the window short of the window less that CPU time (the
# other roles stay within 0.5%), its [runnable] share 3-4 points short of
# run_delay's; in wall mode, ticks put it on a CPU 3.4 points more than
# schedstat does (a CI run). Not lost intervals: the program notes every
# switch-out, and over 10 s of the same mix its on-CPU spans between
# tracepoints agree with sum_exec_runtime to 6 us a switch. The cause is not
# found (this VM's kernel also leaves out some switch-ins from idle, which
# perf's own sched_switch events show). Its total gets 4% of the window
# (a loss of 1 in 25 of its intervals still fails), its cpu and [runnable]
# shares 4 points more; its [syscall] fsync share and kernel frames are
# held as every role's.
FSYNC_TOTAL_TOL = 0.04
# Wall mode: the same tick bias on the CPU-bound spinner. Its ticks put it
# on a CPU 2-5% (relative) more than schedstat does, with no steal, and its
# total runs over the window by 0.7-2.1% (20 runs over the five
# interpreters on a 2-vCPU Firecracker VM, 6.18, HZ 250); its [runnable]
# falls short by about as much. Its total may run over by 3%.
WALL_TOTAL_OVER = 0.03
FSYNC_SHARE_EXTRA = 0.04
KERNEL = "[kernel.kallsyms]"
OURS = "[pyprof-bpf]"


def test_every_version_is_there():
    assert {(3, 11), (3, 12), (3, 13), (3, 14), (3, 15)} <= set(VERSIONS), (
        f"test interpreters found: {sorted(i.label for i in SUPPORTED)}")


def report(what, interp, **numbers):
    fields = " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in numbers.items())
    print(f"\nMODES {what} {interp.label} {fields}")


# --------------------------------------------------------------------------
# perf-script with off-CPU samples

class Frame:
    __slots__ = ("sym", "dso", "text", "kind", "func", "file", "line")

    def __init__(self, sym, dso):
        self.sym, self.dso = sym, dso
        self.func = self.file = self.line = None
        if sym.startswith("py::"):
            self.kind = "py"
            self.func, self.file, self.line = tf.decode_text(sym)
            self.text = sym
        elif dso == KERNEL:
            self.kind = "kernel"
            self.text = sym
        else:
            self.kind = "ours"
            self.text = urllib.parse.unquote(sym)

    def __repr__(self):
        return f"{self.func}@{self.line}" if self.kind == "py" else self.text


class Sample:
    __slots__ = ("pid", "tid", "ts", "period", "event", "frames", "lineno")

    def describe(self):
        fr = list(reversed(self.frames))
        txt = " > ".join(map(repr, fr if len(fr) <= 10 else fr[:3] + ["..."] + fr[-7:]))
        return f"tid {self.tid} {self.event} {self.period} ns at {self.ts / 1e6:.6f}: {txt}"

    @property
    def reason(self):
        """"cpu", or the reason frame of an off-CPU sample (None: none)."""
        if self.event == "cpu-clock":
            return "cpu"
        for f in self.frames:
            if f.kind == "ours" and (f.text.startswith("[syscall] ") or
                                     f.text in ("[GIL wait]", "[runnable]", "[blocked]")):
                return f.text
        return None

    def has(self, name, kind=None):
        return any(f.text == name and (kind is None or f.kind == kind) for f in self.frames)


def parse_perf(data):
    """Every sample of a perf-script text, strictly (test_record's header
    and frame lines; an empty line after every sample, the last one too)."""
    text = data.decode("utf-8")
    if text and not text.endswith("\n\n"):
        pytest.fail(f"perf-script output does not end with an empty line: ...{text[-300:]!r}")
    samples, cur, known = [], None, {}
    for i, line in enumerate(text.split("\n")[:-1], 1):
        if cur is None:
            m = HEADER.match(line)
            if not m:
                pytest.fail(f"perf-script line {i}: expected a sample header, got {line!r}")
            cur = Sample()
            cur.pid, cur.tid = int(m["pid"]), int(m["tid"])
            cur.ts = int(m["secs"]) * 1000000 + int(m["usecs"])
            cur.period, cur.event, cur.frames, cur.lineno = int(m["period"]), m["event"], [], i
        elif line == "":
            if not cur.frames:
                pytest.fail(f"perf-script line {cur.lineno}: a sample without frames")
            samples.append(cur)
            cur = None
        elif line in known:
            cur.frames.append(known[line])
        else:
            m = FRAME.match(line)
            if not m:
                pytest.fail(f"perf-script line {i}: expected a frame line, got {line!r}")
            sym = m["sym"]
            if m["dso"] == "[kernel.kallsyms]":
                # as perf prints a kernel frame: its address, sym+0xoff
                km = re.fullmatch(r"(.+)\+0x[0-9a-f]+", sym)
                if km:
                    sym = km.group(1)
                if km and int(m["addr"].strip(), 16) < 0xffff800000000000:
                    pytest.fail(f"perf-script line {i}: not a kernel address: {line!r}")
            elif int(m["addr"].strip(), 16) != fnv1a(sym):
                pytest.fail(f"perf-script line {i}: address is not the FNV-1a of the "
                            f"symbol: {line!r}")
            fr = Frame(sym, m["dso"])
            if fr.kind == "py" and fr.dso != tf.escape(fr.file, False):
                pytest.fail(f"perf-script line {i}: dso {fr.dso!r} is not the file")
            if fr.kind == "kernel" and not re.fullmatch(r"[A-Za-z_][\w.$]*", fr.sym):
                pytest.fail(f"perf-script line {i}: not a kernel function name: {line!r}")
            if fr.kind == "ours" and not (fr.dso == OURS and fr.text[:1] in "[<"):
                pytest.fail(f"perf-script line {i}: a frame that is neither Python, kernel "
                            f"nor [synthetic]: {line!r}")
            cur.frames.append(fr)
            known[line] = fr
    assert cur is None
    return samples


REASON = re.compile(r"\[syscall\] [a-z0-9_]+|\[GIL wait\]|\[runnable\]|\[blocked\]")


def shape_problem(s, mode):
    """Why sample s is not shaped as mode's samples are, or None."""
    events = {"cpu": {"cpu-clock"}, "gil": {"cpu-clock"}, "off-cpu": {"offcpu-time"},
              "wall": {"cpu-clock", "offcpu-time"}}[mode]
    if s.event not in events:
        return f"event {s.event} in {mode} mode"
    if s.period <= 0:
        return "period 0"
    reasons = [k for k, f in enumerate(s.frames) if f.kind == "ours" and REASON.fullmatch(f.text)]
    py = [k for k, f in enumerate(s.frames) if f.kind == "py"]
    kern = [k for k, f in enumerate(s.frames) if f.kind == "kernel"]
    for k, f in enumerate(s.frames):
        if f.kind == "ours" and f.text == "[GIL released]" and (mode != "gil" or k != 0):
            return "[GIL released] not as the leaf of a gil-mode sample"
        if f.kind == "ours" and f.text == "<GC>" and py and k > min(py):
            return "<GC> rootward of a Python frame"
    if s.event == "cpu-clock":
        if reasons or kern:
            return "a CPU sample with an off-CPU reason or kernel frames"
        return None
    if len(reasons) != 1:
        return f"{len(reasons)} reason frames in an off-CPU sample"
    r = reasons[0]
    if any(k > r for k in kern) or any(k < r for k in py):
        return "kernel frames rootward or Python frames leafward of the reason"
    return None


UNNAMED = {"[no-python-state]", "[read-fault]", "[truncated]", "[eval-entry]"}
MAX_UNNAMED = 0.005     # as tests/test_real_programs.py


def unnamed(s):
    """Whether s has a frame without a name."""
    return any(f.kind == "py" and (f.func in ("", "<unknown>") or f.file in ("", "<unknown>"))
               or f.kind == "ours" and (f.text in UNNAMED or f.text.startswith("[status-"))
               for f in s.frames)


def check_shapes(samples, mode, what):
    """Every sample well formed, at most MAX_UNNAMED of them (by count) with
    a frame without a name."""
    bad = [f"{shape_problem(s, mode)}: {s.describe()}" for s in samples
           if shape_problem(s, mode)]
    if bad:
        pytest.fail(f"{what}: {len(bad)} of {len(samples)} samples are not well formed "
                    f"(first 6):\n  " + "\n  ".join(bad[:6]), pytrace=False)
    nameless = [s for s in samples if unnamed(s)]
    if len(nameless) > MAX_UNNAMED * len(samples):
        by = collections.Counter(s.event for s in nameless)
        pytest.fail(f"{what}: {len(nameless)} of {len(samples)} samples have a frame without a "
                    f"name ({dict(by)}), e.g.:\n  "
                    + "\n  ".join(s.describe() for s in nameless[:4]), pytrace=False)


def window(samples):
    """(lo, hi) in ns: the recording's span as its samples cover it. An
    off-CPU sample is timed at the end of its interval (its switch-in, which
    its blocked and runnable parts share); a CPU tick covers the period
    before it. A thread blocked since before the start has its first
    interval start at the start."""
    first = {}
    for s in samples:
        if s.event == "offcpu-time":
            f = first.get(s.tid)
            if f is None or s.ts < f[0]:
                first[s.tid] = [s.ts, s.period]
            elif s.ts == f[0]:
                f[1] += s.period
    starts = [ts * 1000 - w for ts, w in first.values()]
    starts += [s.ts * 1000 - s.period for s in samples if s.event == "cpu-clock"]
    return min(starts), max(s.ts * 1000 for s in samples)


# --------------------------------------------------------------------------
# modes_mix

@pytest.fixture
def disk_dir(request):
    """make(interp) -> (seen, host): a fresh directory on the root file
    system's disk (/var/tmp, inside the chroot for the sid root)."""
    made = []

    def make(interp):
        seen = f"/var/tmp/pyprof-modes-{uuid.uuid4().hex[:8]}"
        host = interp.host_path(seen)
        os.makedirs(host)
        made.append(host)
        return seen, host
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


class Mix:
    """modes_mix.py running, its threads polled."""

    def __init__(self, interp, procs, tmp_path, disk_dir, poll_states=True):
        self.interp = interp
        self.what = f"modes_mix.py on {interp.label}"
        script = stage_unique(interp, MIX, procs)
        info_seen, info_host = out_path(interp, procs, tmp_path, "mix.json")
        log_seen, self.log_host = out_path(interp, procs, tmp_path, "mix.log")
        self.log_copy = str(tmp_path / "mix.log.copy")
        dseen, _ = disk_dir(interp)
        self.p = procs.start(interp.argv([script, info_seen, log_seen, dseen, "90"]),
                             str(tmp_path / "mix.stderr"))
        self.info = wait_json(self.p, info_host, self.what)
        with open(str(tmp_path / "mix.info.json"), "w") as f:
            json.dump(self.info, f)
        assert self.info["python"] == interp.version_str, self.info
        assert set(self.info["tids"]) == set(ROLES), self.info
        self.role_of = {tid: r for r, tid in self.info["tids"].items()}
        self.poller = mt.Poller(self.info["pid"], list(self.info["tids"].values()),
                                fast=list(self.info["tids"].values()) if poll_states else [],
                                out=str(tmp_path / "poll.json"))
        self.stopped = False
        time.sleep(0.3)       # every thread in its loop

    def alive(self):
        if self.p.poll() is not None:
            pytest.fail(f"{self.what} exited {self.p.returncode} (a negative status: killed by "
                        f"that signal) while it was recorded; stderr:\n{stderr_of(self.p)}",
                        pytrace=False)

    def stop(self):
        if not self.stopped:
            time.sleep(0.15)      # the LOG is written every 50 ms
            self.alive()
            self.poller.stop()
            self.stopped = True
            shutil.copyfile(self.log_host, self.log_copy)   # for a post-mortem
            if self.p.poll() is not None:
                pytest.fail(f"{self.what} exited {self.p.returncode}; stderr:\n"
                            f"{stderr_of(self.p)}")
        return self

    def close(self):
        if not self.stopped:
            try:
                self.poller.stop()
            except Exception:       # noqa: BLE001 - the test failed already
                pass
            self.stopped = True

    def truth(self, lo, hi):
        return mt.truth(self.info, mt.read_log(self.log_host), self.poller, lo, hi)


@pytest.fixture
def mixes():
    made = []
    yield made
    for m in made:
        m.close()


def record(procs, tmp_path, pid, mode, secs, extra=(), name=None, hz=HZ):
    name = name or mode
    out = str(tmp_path / f"{name}.perf")
    args = ["--mode", mode, "-F", hz, "-d", secs, "-o", out] + list(extra)
    rec = Recorder(procs, tmp_path, pid, args, name=name, retry_torn=True).wait_started()
    rec.finish(secs)
    with open(out, "rb") as f:
        data = f.read()
    return rec, out, data


def steal_share(t0, steal0):
    """The share of the CPUs' time the hypervisor took since (monotonic t0,
    steal0). A vCPU given back fires its missed cpu-clock tick where its
    thread was: on this VM that is often a wake-up (a GIL hand-over) or a
    page fault, so ticks bunch there. A share a sample measures may move by
    up to twice this."""
    w = time.monotonic() - t0
    return max(0.0, machine_steal() - steal0) / (os.cpu_count() * max(w, 1e-3))


def per_thread(samples, role_of):
    """{role: Counter(reason: ns)}; samples of unknown tids under their tid."""
    out = collections.defaultdict(collections.Counter)
    for s in samples:
        out[role_of.get(s.tid, s.tid)][s.reason] += s.period
    return out


def compare_shares(got, want, denom_got, denom_want, tol):
    """[(reason, got share, want share)] where they differ by more than tol
    (tol: a number, or {reason: number})."""
    bad = []
    for r in sorted(set(got) | set(want), key=str):
        g = got.get(r, 0) / denom_got
        w = want.get(r, 0) / denom_want
        t = tol.get(r, SHARE_TOL) if isinstance(tol, dict) else tol
        if abs(g - w) > t:
            bad.append((r, g, w))
    return bad


def fmt_shares(got, want, denom_got, denom_want):
    keys = sorted(set(got) | set(want), key=str)
    return ",".join(f"{str(k).replace(' ', '_')}={100 * got.get(k, 0) / denom_got:.1f}/"
                    f"{100 * want.get(k, 0) / denom_want:.1f}" for k in keys)


def errors(truth):
    """The polls' errors per role (points), schedstat's run_delay beside the
    polled runnable time, and the machine's steal time (seconds), for the
    record."""
    return {"poll_err_pts": ",".join(f"{r}={100 * (t['_err'] + t.get('_fsync_err', 0)):.2f}"
                                     for r, t in truth.items()),
            "runnable_polled_vs_run_delay_s": ",".join(
                f"{r}={t['[runnable]'] / 1e9:.3f}/{t['_run_delay'] / 1e9:.3f}"
                for r, t in truth.items()),
            "steal_s": f"{next(iter(truth.values()))['_steal'] / 1e9:.3f}"}


def truth_reasons(t):
    return {k: v for k, v in t.items() if k.startswith("[") or k == "cpu"}


def tolerance(t, w, denom):
    """3 points, plus twice the polls' error (a share of the window w) where
    the truth rests on them, as a share of denom; plus the machine's steal
    time where the truth's runnable/blocked split counts it (modes_truth); plus
    the polls' disagreement with schedstat's run_delay on [runnable] and [GIL
    wait]."""
    e = 2 * (t["_err"] + t.get("_fsync_err", 0)) * w / denom
    # steal spread evenly over the CPUs and the window, met by the thread
    # in its time in R, twice over
    st = 2 * t["_steal"] / (os.cpu_count() * w) * (t["cpu"] + t["[runnable]"]) / denom
    # the truth's runnable time, polled, against the kernel's own run_delay:
    # where they disagree (CI under load: spin 0.425 s polled, 0.397 s
    # run_delay, no steal) the truth is known only that well, and the time
    # moves between [runnable] and [GIL wait]
    rd = abs(t["[runnable]"] - t["_run_delay"]) / denom
    return collections.defaultdict(lambda: SHARE_TOL, {
        "[runnable]": SHARE_TOL + 2 * t["_err"] * w / denom + st + rd,
        "[GIL wait]": SHARE_TOL + e + st + rd, "[syscall] fsync": SHARE_TOL + e,
        "cpu": SHARE_TOL + st})


def steal_met(t, w):
    """The steal (ns) the thread met: its truth's off-CPU time counts it
    (schedstat's CPU time leaves it out) while the program saw the thread on
    a CPU. The polls count it in R, schedstat's run_delay does not, so the
    difference measures it, give or take twice the polls' error."""
    return max(0, t["[runnable]"] - t["_run_delay"]) + 2 * t["_err"] * w


@pytest.mark.parametrize("interp", PARAMS)
def test_wall(interp, procs, tmp_path, disk_dir, mixes):
    mix = Mix(interp, procs, tmp_path, disk_dir)
    mixes.append(mix)
    rec, _, data = record(procs, tmp_path, mix.info["pid"], "wall", SECS, ["--events", "cpu"])
    mix.stop()
    assert "wall mode" in rec.stderr and "per-cpu events" in rec.stderr.lower(), rec.stderr
    samples = parse_perf(data)
    check_shapes(samples, "wall", mix.what)
    lo, hi = window(samples)
    w = hi - lo
    truth, calls = mix.truth(lo, hi)
    got = per_thread(samples, mix.role_of)
    problems = []
    if abs(w / 1e9 - SECS) > 0.05 or abs(rec.summary(exact=False)["secs"] - SECS) > 0.05:
        problems.append(f"the recording spans {w / 1e9:.3f} s (summary: "
                        f"{rec.summary(exact=False)['secs']} s), -d was {SECS}")
    for tid in [k for k in got if not isinstance(k, str)]:
        problems.append(f"samples of tid {tid}, not a thread of the target: "
                        f"{sum(got[tid].values())} ns")
    for role in ROLES:
        g, t = got.get(role, collections.Counter()), truth[role]
        total = sum(g.values())
        line = dict(total=total / 1e9, calls=calls[role])
        # a tick the hypervisor held the vCPU through is lost (cpu-clock's
        # timer fires once when the vCPU is back), so the total may fall
        # short by the steal the thread met
        if total - w > WALL_TOTAL_OVER * w or w - total > TOTAL_TOL * w + steal_met(t, w):
            problems.append(f"{role}: total weight {total / 1e9:.3f} s, the recording "
                            f"{w / 1e9:.3f} s ({100 * (total / w - 1):+.1f}%)")
        if None in g:
            problems.append(f"{role}: {g[None]} ns of off-CPU samples without a reason")
        if role != "main":
            tol = tolerance(t, w, w)
            if role == "fsync":
                tol["cpu"] += FSYNC_SHARE_EXTRA
                tol["[runnable]"] += FSYNC_SHARE_EXTRA
            for r, gs, ws in compare_shares(g, truth_reasons(t), max(total, 1), w, tol):
                problems.append(f"{role}: {r} {100 * gs:.1f}% of its time, the truth "
                                f"{100 * ws:.1f}%")
            line["shares"] = fmt_shares(g, truth_reasons(t), max(total, 1), w)
        report("wall", interp, role=role, **line)
    report("wall", interp, window=w / 1e9, samples=len(samples), polls=mix.poller.polls,
           poll_misses=mix.poller.misses, **errors(truth))
    if problems:
        pytest.fail(f"{mix.what}, wall mode ({len(samples)} samples, window "
                    f"{w / 1e9:.3f} s; shares as measured/truth):\n  "
                    + "\n  ".join(problems), pytrace=False)


# The kernel function each blocked reason must show (its first interval,
# opened at the start from userspace, has no kernel stack).
KERNEL_OF = {
    "sleep": ("[syscall] clock_nanosleep", ("do_nanosleep", "hrtimer_nanosleep")),
    "lock": ("[syscall] futex", ("futex_wait", "__futex_wait")),
    "recv": ("[syscall] recvfrom", ("tcp_recvmsg",)),
    "fsync": ("[syscall] fsync", ("ext4_sync_file", "do_fsync")),
    "gil_a": ("[GIL wait]", ("futex_wait", "__futex_wait")),
    "gil_b": ("[GIL wait]", ("futex_wait", "__futex_wait")),
}
# The Python function running the call, the leaf of the Python frames.
PY_LEAF = {"sleep": "sleeper", "lock": "lock_waiter", "recv": "receiver", "fsync": "fsyncer",
           "gil_a": "contend", "gil_b": "contend", "spin": "spin"}


def py_leaf(s):
    """The function of the innermost Python frame of s (None: none)."""
    return next((f.func for f in s.frames if f.kind == "py"), None)


@pytest.mark.parametrize("interp", PARAMS)
def test_off_cpu(interp, procs, tmp_path, disk_dir, mixes):
    mix = Mix(interp, procs, tmp_path, disk_dir)
    mixes.append(mix)
    secs = 2
    rec, _, data = record(procs, tmp_path, mix.info["pid"], "off-cpu", secs)
    mix.stop()
    assert "off-cpu mode" in rec.stderr, rec.stderr
    samples = parse_perf(data)
    check_shapes(samples, "off-cpu", mix.what)
    lo, hi = window(samples)
    w = hi - lo
    truth, calls = mix.truth(lo, hi)
    got = per_thread(samples, mix.role_of)
    problems = []
    if abs(w / 1e9 - secs) > 0.05:
        problems.append(f"the recording spans {w / 1e9:.3f} s, -d was {secs}")
    by_role = collections.defaultdict(list)
    for s in samples:
        by_role[mix.role_of.get(s.tid, s.tid)].append(s)
    for role in ROLES:
        g, t = got.get(role, collections.Counter()), truth[role]
        off_truth = w - t["cpu"]
        total = sum(g.values())
        line = dict(total=total / 1e9, off_truth=off_truth / 1e9)
        if abs(total - off_truth) > ((FSYNC_TOTAL_TOL if role == "fsync" else TOTAL_TOL) * w
                                     + steal_met(t, w)):
            problems.append(f"{role}: off-CPU weight {total / 1e9:.3f} s, its time off a CPU "
                            f"{off_truth / 1e9:.3f} s")
        if role != "main":
            want = {k: v for k, v in truth_reasons(t).items() if k != "cpu"}
            tol = tolerance(t, w, off_truth)
            if role == "fsync":
                tol["[runnable]"] += FSYNC_SHARE_EXTRA
            for r, gs, ws in compare_shares(g, want, max(total, 1), off_truth, tol):
                problems.append(f"{role}: {r} {100 * gs:.1f}% of its off-CPU time, the truth "
                                f"{100 * ws:.1f}%")
            line["shares"] = fmt_shares(g, want, max(total, 1), off_truth)
        # kernel frames and the Python leaf of the reason it exists for
        if role in KERNEL_OF:
            reason, funcs = KERNEL_OF[role]
            ss = sorted([s for s in by_role[role] if s.reason == reason], key=lambda s: s.ts)
            first_ts = min((s.ts for s in by_role[role]), default=None)
            rest = [s for s in ss if s.ts != first_ts]
            no_k = [s for s in rest if not any(s.has(f, "kernel") for f in funcs)]
            if not rest:
                problems.append(f"{role}: no {reason} sample")
            elif no_k:
                problems.append(f"{role}: {len(no_k)} of {len(rest)} {reason} samples have no "
                                f"kernel frame {' or '.join(funcs)}: {no_k[0].describe()}")
            leaf = [s for s in ss if py_leaf(s) != PY_LEAF[role]]
            if leaf:
                problems.append(f"{role}: {len(leaf)} {reason} samples whose Python leaf is "
                                f"not {PY_LEAF[role]}: {leaf[0].describe()}")
            line["kernel_checked"] = len(rest)
        report("off-cpu", interp, role=role, **line)
    report("off-cpu", interp, window=w / 1e9, samples=len(samples), polls=mix.poller.polls,
           poll_misses=mix.poller.misses, **errors(truth))
    if problems:
        pytest.fail(f"{mix.what}, off-cpu mode ({len(samples)} samples, window "
                    f"{w / 1e9:.3f} s; shares as measured/truth):\n  "
                    + "\n  ".join(problems) + f"\npyprof-bpf said:\n{rec.stderr}", pytrace=False)


@pytest.mark.parametrize("interp", PARAMS)
def test_gil_mode(interp, procs, tmp_path, disk_dir, mixes):
    mix = Mix(interp, procs, tmp_path, disk_dir, poll_states=False)
    mixes.append(mix)
    t0, steal0 = time.monotonic(), machine_steal()
    rec, _, data = record(procs, tmp_path, mix.info["pid"], "gil", 1.5, ["--events", "cpu"])
    steal = steal_share(t0, steal0)
    mix.stop()
    assert "gil mode" in rec.stderr, rec.stderr
    samples = parse_perf(data)
    check_shapes(samples, "gil", mix.what)
    n, rel = collections.Counter(), collections.Counter()
    for s in samples:
        role = mix.role_of.get(s.tid, s.tid)
        n[role] += 1
        rel[role] += s.frames[0].text == "[GIL released]"
    share = {r: rel[r] / n[r] for r in n}
    report("gil", interp, samples=len(samples), steal_share=f"{steal:.3f}", **{
        f"{r}_released": f"{rel[r]}/{n[r]}" for r in ROLES if n[r]})
    problems = []
    if n["spin"] < 50 or share.get("spin", 0) < 0.95 - 2 * steal:
        problems.append(f"spin (hashing with the GIL released) has [GIL released] in "
                        f"{rel['spin']} of its {n['spin']} samples (want >= "
                        f"{100 * (0.95 - 2 * steal):.1f}%: 95% less twice the steal)")
    for r in ("gil_a", "gil_b"):
        if n[r] < 50 or share.get(r, 1) > 0.05 + 2 * steal:
            problems.append(f"{r} (pure Python) has [GIL released] in {rel[r]} of its "
                            f"{n[r]} samples (want <= {100 * (0.05 + 2 * steal):.1f}%: 5% "
                            f"plus twice the steal)")
    if problems:
        pytest.fail(f"{mix.what}, gil mode:\n  " + "\n  ".join(problems), pytrace=False)


# --------------------------------------------------------------------------
# a real server

def poll_syscall(interp):
    # selectors.PollSelector: poll() on 3.11-3.14, ppoll() on 3.15 (strace)
    return "[syscall] ppoll" if interp.version >= (3, 15) else "[syscall] poll"


@pytest.mark.slow
@pytest.mark.parametrize("interp", PARAMS)
def test_http_off_cpu(interp, procs, tmp_path):
    what = f"modes_http.py on {interp.label}"
    script = stage_unique(interp, os.path.join(TARGETS, "modes_http.py"), procs)
    info_seen, info_host = out_path(interp, procs, tmp_path, "http.json")
    log_seen, log_host = out_path(interp, procs, tmp_path, "http.log")
    p = procs.start(interp.argv([script, info_seen, log_seen, "90"]),
                    str(tmp_path / "http.stderr"))
    info = wait_json(p, info_host, what)
    secs = 2
    rec, _, data = record(procs, tmp_path, info["pid"], "off-cpu", secs)
    time.sleep(0.15)
    samples = parse_perf(data)
    check_shapes(samples, "off-cpu", what)
    lo, hi = window(samples)
    logged = collections.defaultdict(list)
    with open(log_host) as f:
        for line in f:
            tid, *v = map(int, line.split())
            logged[tid].append(v)
    handlers = set(logged)
    # The handlers' own timers: sending is T_SEND0..T_SEND1, waiting for the
    # next request is T_SEND1..the next T_REQ (both clipped to the window).
    send = recv = 0
    for tid, reqs in logged.items():
        reqs.sort()
        for k, (t_req, t0, t1) in enumerate(reqs):
            send += mt.overlap(t0, t1, lo, hi)
            if k + 1 < len(reqs):
                recv += mt.overlap(t1, reqs[k + 1][0], lo, hi)
    h = collections.Counter()
    serve = collections.Counter()
    problems = []
    # Each thread's first interval was opened at the start, from userspace:
    # it has no kernel stack.
    first = {}
    for s in samples:
        first.setdefault(s.tid, s.ts)
    for s in samples:
        opened = s.ts == first[s.tid]
        if s.tid in handlers:
            h[s.reason] += s.period
            if s.reason == "[syscall] recvfrom":
                if not s.has("tcp_recvmsg", "kernel") and not opened:
                    problems.append(f"a handler's recvfrom without tcp_recvmsg: {s.describe()}")
                if not any(f.kind == "py" and f.func.endswith("handle_one_request")
                           for f in s.frames):
                    problems.append(f"a handler's recvfrom outside handle_one_request: "
                                    f"{s.describe()}")
            if s.reason == "[syscall] sendto":
                if not s.has("tcp_sendmsg", "kernel") and not opened:
                    problems.append(f"a handler's sendto without tcp_sendmsg: {s.describe()}")
                if not any(f.kind == "py" and f.func == "Handler.do_GET" for f in s.frames):
                    problems.append(f"a handler's sendto outside do_GET: {s.describe()}")
        elif s.tid == info["serve_tid"]:
            ok = (s.reason == poll_syscall(interp)
                  and any(f.kind == "py" and f.func.endswith("serve_forever") for f in s.frames)
                  and any(f.kind == "py" and f.func.endswith("Selector.select")
                          for f in s.frames))
            serve["poll" if ok else s.reason] += s.period
            if ok and not s.has("do_sys_poll", "kernel") and not opened:
                problems.append(f"serve_forever's poll without do_sys_poll: {s.describe()}")
    ht = sum(h.values())
    st = sum(serve.values())
    io = h["[syscall] recvfrom"] + h["[syscall] sendto"]
    want_send = send / max(send + recv, 1)
    got_send = h["[syscall] sendto"] / max(io, 1)
    report("http", interp, samples=len(samples), handlers=len(handlers),
           handler_io=io / max(ht, 1), send_of_io=got_send, send_of_io_own=want_send,
           serve_poll=serve["poll"] / max(st, 1),
           handler=",".join(f"{str(k).replace(' ', '_')}={100 * v / max(ht, 1):.1f}"
                            for k, v in h.most_common()))
    if len(handlers) < 3 or ht < 1e9:
        problems.append(f"only {len(handlers)} handler threads, {ht / 1e9:.3f} s off-CPU")
    if io < 0.85 * ht:
        problems.append(f"the handlers waited in recvfrom or sendto {100 * io / ht:.1f}% of "
                        f"their off-CPU time (want >= 85%): {dict(h)}")
    if abs(got_send - want_send) > 0.05:
        problems.append(f"sendto is {100 * got_send:.1f}% of the handlers' recvfrom+sendto, "
                        f"their own timers say {100 * want_send:.1f}%")
    if st < 0.9 * (hi - lo) or serve["poll"] < 0.95 * st:
        problems.append(f"serve_forever: {100 * serve['poll'] / max(st, 1):.1f}% of its "
                        f"{st / 1e9:.3f} s off-CPU in {poll_syscall(interp)} under "
                        f"select(): {dict(serve)}")
    if problems:
        pytest.fail(f"{what}, off-cpu mode:\n  " + "\n  ".join(problems[:12]), pytrace=False)


# --------------------------------------------------------------------------
# <GC>

@pytest.mark.slow
@pytest.mark.parametrize("interp", PARAMS)
def test_gc(interp, procs, tmp_path):
    what = f"modes_gc.py on {interp.label}"
    script = stage_unique(interp, os.path.join(TARGETS, "modes_gc.py"), procs)
    info_seen, info_host = out_path(interp, procs, tmp_path, "gc.json")
    log_seen, log_host = out_path(interp, procs, tmp_path, "gc.log")
    p = procs.start(interp.argv([script, info_seen, log_seen, "90"]),
                    str(tmp_path / "gc.stderr"))
    info = wait_json(p, info_host, what)
    time.sleep(0.5)
    t0, steal0 = time.monotonic(), machine_steal()
    rec, _, data = record(procs, tmp_path, info["pid"], "cpu", 2, ["--events", "cpu"])
    steal = steal_share(t0, steal0)
    time.sleep(0.15)
    samples = parse_perf(data)
    check_shapes(samples, "cpu", what)
    lo, hi = window(samples)
    deadline = time.monotonic() + 20      # the log is written after each round
    while True:
        rows = []
        with open(log_host) as f:
            for line in f:
                if line.endswith("\n"):
                    rows.append(tuple(map(int, line.split())))
        if rows and rows[-1][0] > hi:
            break
        if p.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what}: its log does not reach the end of the recording (exit "
                        f"status {p.poll()}); stderr:\n{stderr_of(p)}")
        time.sleep(0.05)

    def at(t):
        i = next((k for k, r in enumerate(rows) if r[0] >= t), None)
        if i is None or i == 0:
            pytest.fail(f"{what}: its log does not cover {t}")
        a, b = rows[i - 1], rows[i]
        f = (t - a[0]) / (b[0] - a[0])
        return [x + f * (y - x) for x, y in zip(a[1:], b[1:])]
    c0, g0 = at(lo)
    c1, g1 = at(hi)
    own = (g1 - g0) / (c1 - c0)
    collector, other = info["tids"]["collector"], info["tids"]["other"]
    n, gc_n, bad = collections.Counter(), collections.Counter(), []
    for s in samples:
        who = "collector" if s.tid == collector else "other" if s.tid == other else "rest"
        n[who] += 1
        if s.has("<GC>", "ours"):
            gc_n[who] += 1
            leaf = next((f for f in s.frames if f.kind == "py"), None)
            if who == "collector" and not (
                    leaf and (leaf.func == "collect_loop" and leaf.line == info["collect_line"]
                              or leaf.func in ("make_garbage", "Node.__init__"))):
                bad.append(f"<GC> under {leaf!r}: {s.describe()}")
    share = gc_n["collector"] / max(n["collector"], 1)
    oshare = gc_n["other"] / max(n["other"], 1)
    report("gc", interp, samples=len(samples), collector=n["collector"],
           gc_share=share, own_collect_share=own, other=n["other"], other_gc=oshare,
           steal_share=f"{steal:.3f}")
    problems = []
    if n["collector"] < 300:
        problems.append(f"only {n['collector']} samples of the collector")
    if abs(share - own) > SHARE_TOL + 2 * steal:
        problems.append(f"<GC> on {100 * share:.1f}% of the collector's samples, it spent "
                        f"{100 * own:.1f}% of its CPU time in gc.collect() (allowed: "
                        f"{100 * (SHARE_TOL + 2 * steal):.1f} points, twice the steal "
                        f"{100 * steal:.1f}% included)")
    if interp.version >= (3, 15) and share < 0.90:
        problems.append(f"3.15 (gc.frame): <GC> on only {100 * share:.1f}% of the "
                        f"collector's samples, want >= 90%")
    if n["other"] < 50 or oshare > 0.01:
        problems.append(f"<GC> on {gc_n['other']} of the other thread's {n['other']} samples "
                        f"(it never collects)")
    if bad:
        problems.append(f"{len(bad)} <GC> samples not under the collect line or the "
                        f"allocating code: {bad[:3]}")
    if problems:
        pytest.fail(f"{what}:\n  " + "\n  ".join(problems), pytrace=False)


# --------------------------------------------------------------------------
# perf-script's consumers

def run_tool(args):
    p = subprocess.run([binary()] + args, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, f"pyprof-bpf {' '.join(args)}: {p.stderr.decode()}"
    return p


@pytest.mark.slow
def test_perf_script_consumers(node_env, procs, tmp_path, disk_dir, mixes):  # noqa: F811
    interp = VERSIONS[(3, 14)]
    mix = Mix(interp, procs, tmp_path, disk_dir, poll_states=False)
    mixes.append(mix)
    raws = {}
    for mode in ("off-cpu", "wall"):
        raws[mode] = str(tmp_path / f"{mode}.pyprof")
        extra = ["--raw", raws[mode]] + (["--events", "cpu"] if mode == "wall" else [])
        record(procs, tmp_path, mix.info["pid"], mode, 2, extra, hz=499)
    mix.stop()
    problems, numbers = [], {}
    for mode, raw in raws.items():
        perf = str(tmp_path / f"{mode}.report.perf")
        run_tool(["report", "-i", raw, "--format", "perf-script", "-o", perf])
        data = open(perf, "rb").read()
        samples = parse_perf(data)
        check_shapes(samples, mode, f"{mode} report")
        events = collections.Counter(s.event for s in samples)
        periods = collections.Counter()
        for s in samples:
            periods[s.event] += s.period
        want_events = {"off-cpu": {"offcpu-time"}, "wall": {"offcpu-time", "cpu-clock"}}[mode]
        if set(events) != want_events:
            problems.append(f"{mode}: events {dict(events)}, want {sorted(want_events)}")
        # FlameGraph: the default keeps the first event type; each event's
        # samples alone keep all of their weight.
        first = samples[0].event
        folded = tf.stackcollapse_perf(data)
        fw = sum(int(l.rsplit(b" ", 1)[1]) for l in folded.splitlines())
        if fw != periods[first]:
            problems.append(f"{mode}: stackcollapse-perf (first event {first}) sums "
                            f"{fw} ns, the {first} periods {periods[first]} ns")
        for ev in want_events:
            f2 = tf.stackcollapse_perf(only_event(data, ev))
            w2 = sum(int(l.rsplit(b" ", 1)[1]) for l in f2.splitlines())
            numbers[f"{mode}_{ev}_ns"] = w2
            if w2 != periods[ev]:
                problems.append(f"{mode}: stackcollapse-perf --event-filter={ev} sums {w2} "
                                f"ns, its periods {periods[ev]} ns")
            texts = set()
            for line in f2.decode("utf-8").splitlines():
                texts.update(line.rsplit(" ", 1)[0].split(";")[1:])
            want_texts = {f.sym for s in samples if s.event == ev for f in s.frames}
            if texts != want_texts:
                problems.append(f"{mode}/{ev}: stackcollapse-perf's frames differ from ours: "
                                f"{sorted(texts ^ want_texts)[:6]}")
        if mode == "off-cpu":
            ours = str(tmp_path / "off.folded")
            run_tool(["report", "-i", raw, "--format", "collapsed", "-o", ours])
            if tf.recollapse(tf.stackcollapse_perf(data, kernel=True,
                                                   exempt={b"[pyprof-bpf]"})) != \
                    open(ours, "rb").read():
                problems.append("off-cpu: our collapsed output is not stackcollapse-perf "
                                "--kernel's of our perf-script (same raw recording)")
        # Firefox: every sample, per thread, kernel frames as kernel frames.
        ff = tf.firefox_perf(data.decode("utf-8"))
        per_tid = collections.Counter(s.tid for s in samples)
        if collections.Counter(x["tid"] for x in ff) != per_tid:
            problems.append(f"{mode}: the Firefox rules read other samples per thread")
        kern = sum(1 for x in ff for raw_, dso in x["stack"] if "kallsyms" in dso)
        kern_ours = sum(1 for s in samples for f in s.frames if f.kind == "kernel")
        if kern != kern_ours:
            problems.append(f"{mode}: Firefox sees {kern} kernel frames, we wrote {kern_ours}")
        for x, s in zip(ff, samples):
            if tuple(r for r, _ in x["stack"]) != tuple(f.sym for f in reversed(s.frames)):
                problems.append(f"{mode}: Firefox reads another stack for {s.describe()}")
                break
        # speedscope's perf importer, in Chromium: the first event type, a
        # profile per thread, our stacks (it weighs by timestamps).
        os.makedirs(tmp_path / f"ss-{mode}")
        exp = tf.speedscope_import(node_env, perf, f"{mode}.linux-perf.txt",
                                   tmp_path / f"ss-{mode}")
        got = tf.exported_texts(exp, lambda f: f["name"])
        want = collections.defaultdict(set)
        wsum = collections.Counter()
        for s in samples:
            if s.event == first:
                want[s.tid].add(tuple(f.sym for f in reversed(s.frames)))
                wsum[s.tid] += s.period
        if set(got) != set(want):
            problems.append(f"{mode}: speedscope's threads {sorted(got)}, ours with "
                            f"{first} samples {sorted(want)}")
        for tid in set(got) & set(want):
            if not set(got[tid]) <= want[tid]:
                problems.append(f"{mode}: speedscope shows stacks we never wrote for tid {tid}")
        ss_w = sum(sum(v.values()) for v in got.values())
        numbers[f"{mode}_speedscope_weight_s"] = ss_w
        numbers[f"{mode}_{first}_periods_s"] = sum(wsum.values()) / 1e9
        if mode == "off-cpu":
            # Our own speedscope file through the same importer: weights intact.
            sj = str(tmp_path / "off.speedscope.json")
            run_tool(["report", "-i", raw, "--format", "speedscope", "-o", sj])
            os.makedirs(tmp_path / "ss-json")
            exp = tf.speedscope_import(node_env, sj, "off.speedscope.json", tmp_path / "ss-json")
            got_w = collections.Counter()
            for tid, st in tf.exported_texts(exp, tf.ss_text).items():
                got_w[tid] += sum(st.values())
            want_w = collections.Counter()
            for s in samples:
                want_w[s.tid] += s.period
            numbers["speedscope_json_ns"] = sum(got_w.values())
            if got_w != want_w:
                problems.append(f"off-cpu: our speedscope file, imported, weighs "
                                f"{sum(got_w.values())} ns, the periods {sum(want_w.values())}"
                                f" ns ({dict(got_w)} vs {dict(want_w)})")
    report("consumers", interp, **numbers)
    if problems:
        pytest.fail("perf-script with off-CPU samples, read by its consumers:\n  "
                    + "\n  ".join(problems[:12]), pytrace=False)


# --------------------------------------------------------------------------
# the remote backend

def ticks(samples):
    """The samples grouped by tick. The output has no tick number: the
    remote backend reads the threads of one tick one after the other (each
    once, within ~0.1 ms, up to ~1 ms when it is preempted) and the next tick
    comes a period (5 ms here) after the last began, and at least a quarter
    period (1.25 ms) after the last ended when it is behind: a gap over 1 ms,
    or a thread seen again, starts a tick."""
    out, last = [], None
    for s in sorted(samples, key=lambda s: s.ts):
        if last is None or s.ts - last > 1000 or any(x.tid == s.tid for x in out[-1]):
            out.append([])
        out[-1].append(s)
        last = s.ts
    return out


@pytest.mark.parametrize("interp", PARAMS)
def test_remote(interp, procs, tmp_path, disk_dir, mixes):
    mix = Mix(interp, procs, tmp_path, disk_dir)
    mixes.append(mix)
    hz, secs = 199, 1
    got = {}
    for mode in ("wall", "cpu", "gil"):
        mix.alive()
        rec, _, data = record(procs, tmp_path, mix.info["pid"], mode, secs,
                              ["--backend", "remote"], hz=hz)
        assert f"{mode} mode" in rec.stderr and "remote backend" in rec.stderr, rec.stderr
        samples = parse_perf(data)
        check_shapes(samples, mode if mode != "wall" else "cpu", f"remote {mode}")
        got[mode] = samples
    mix.stop()
    refused = subprocess.run([binary(), "record", "-p", str(mix.info["pid"]), "--backend",
                              "remote", "--mode", "off-cpu", "-d", "1", "-o",
                              str(tmp_path / "refused.perf")],
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    problems = []
    err = refused.stderr.decode("utf-8", "replace")
    if refused.returncode == 0 or "off-cpu" not in err or not re.search(r"BPF|bpf", err):
        problems.append(f"--backend remote --mode off-cpu: exit {refused.returncode}, "
                        f"stderr {err!r} (want refused, naming off-cpu and the BPF backend)")
    if os.path.exists(tmp_path / "refused.perf") and os.path.getsize(tmp_path / "refused.perf"):
        problems.append("--backend remote --mode off-cpu wrote a recording")
    # wall: every thread every tick
    wc = collections.Counter(mix.role_of.get(s.tid, s.tid) for s in got["wall"])
    if set(wc) != set(ROLES) or min(wc.values()) < 0.97 * max(wc.values()):
        problems.append(f"wall: samples per thread {dict(wc)}: not every thread every tick")
    # cpu: the threads in state R at each tick, against the kernel's account
    cs = got["cpu"]
    tk = ticks(cs)
    lo, hi = min(s.ts for s in cs) * 1000, max(s.ts for s in cs) * 1000
    truth, _ = mix.truth(lo, hi)
    cc = collections.Counter(mix.role_of.get(s.tid, s.tid) for s in cs)
    cpu_line = {}
    for role in ROLES:
        t = truth[role]
        want = (t["cpu"] + t["[runnable]"]) / (hi - lo)
        share = cc[role] / max(len(tk), 1)
        cpu_line[role] = f"{100 * share:.1f}/{100 * want:.1f}"
        if abs(share - want) > 0.10:
            problems.append(f"cpu: {role} in {100 * share:.1f}% of the {len(tk)} ticks, in "
                            f"state R {100 * want:.1f}% of the time")
    # gil: one holder at most per tick
    gt = ticks(got["gil"])
    two = [t for t in gt if sum(1 for s in t if s.frames[0].text != "[GIL released]") > 1]
    gsp = [s for s in got["gil"] if mix.role_of.get(s.tid) == "spin"]
    rel = sum(1 for s in gsp if s.frames[0].text == "[GIL released]")
    if two:
        problems.append(f"gil: {len(two)} of {len(gt)} ticks have more than one thread "
                        f"holding the GIL: {[s.describe() for s in two[0]]}")
    if len(gsp) < 20 or rel < 0.9 * len(gsp):
        problems.append(f"gil: spin (hashing without the GIL) [GIL released] in {rel} of "
                        f"{len(gsp)} samples")
    report("remote", interp, wall=dict(wc), cpu_ticks=len(tk), gil_ticks=len(gt),
           gil_spin_released=f"{rel}/{len(gsp)}",
           cpu_share_of_ticks_vs_R=",".join(f"{k}={v}" for k, v in cpu_line.items()))
    if problems:
        pytest.fail(f"{mix.what}, remote backend:\n  " + "\n  ".join(problems), pytrace=False)
