"""Issue #24, items 5 and 7: `--format jsonl` and `--format chrome-trace`, on
real recordings of a real target (tests/targets/stream_mix.py on the sid
3.14 interpreter, which names its OS threads), read by real readers.

- jsonl: every line through json.loads, its fields typed; streamed: lines
  are in the file while the recorder still runs (it is stopped with SIGINT
  only once they are); `report` of the raw recording made besides gives the
  same samples, and its perf-script the same times, pids, tids, weights and
  events (the same clock); the hot function's share of the main thread's
  samples (3/4 of its CPU time by construction) within 4.5 binomial sigmas.
- chrome-trace: the JSON structure checked here (ph, name, ts, dur, pid,
  tid; named tracks; ts non-decreasing per track; slices properly nested),
  then through speedscope's own trace-event importer (the npm package's app
  in headless Chromium, test_formats.py's driver): a profile per thread,
  named; hot's total 3/4 of hot + cold within the same tolerance.
  `--mode wall` on a thread sleeping 0.2 s in a loop: its
  `[syscall] clock_nanosleep` slices (but the first and last, cut by the
  recording's window) last 0.2 s (at least the sleep, at most 20 ms more:
  the timer's wake-up); two threads contending for the GIL get `[GIL wait]`
  slices; every off-CPU leaf's slices add up to its samples' weights in
  jsonl (report of the same raw recording) to the microsecond, so each
  interval is a slice of its real length. (`--mode gil` marks CPU samples
  [GIL released]; waiting for the GIL is an off-CPU interval: wall mode.)
- Both formats from the ASan/UBSan build (.output/san/pyprof-bpf) once,
  without a sanitizer report.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_views_stream.py </dev/null
"""
import collections
import contextlib
import json
import math
import os
import re
import signal
import subprocess
import time

import pytest

from lib import pyenvs
from lib import formats as tf
from lib.tool import binary
from lib.interps import by_label
from lib.rawfile import ok, run

pytestmark = [pytest.mark.bpf, pytest.mark.root]

INTERP = "sid-3.14"
TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets", "stream_mix.py")
HOT_SHARE = 0.75        # hot(): 3 ms of CPU time, cold(): 1 ms (stream_mix.py)
NAP_NS = 200_000_000    # the sleeper's time.sleep
SIGMAS = 4.5            # a binomial share off by more: < 1e-5 of correct runs
SAN = os.path.join(pyenvs.REPO, ".output", "san", "pyprof-bpf")


@contextlib.contextmanager
def target(*flags, secs=120):
    """stream_mix.py running with @flags: its pid (chroot execs the interpreter)."""
    interp = by_label(INTERP)
    argv = interp.argv([interp.stage(TARGET), str(secs)] + list(flags))
    with contextlib.ExitStack() as stack:
        p = stack.enter_context(subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True))
        stack.callback(os.killpg, p.pid, signal.SIGKILL)   # before Popen's wait
        started = p.stdout.readline()
        assert started == b"ready\n", f"the target on {interp} did not start"
        yield p.pid


def share_ok(share, n, p, what):
    """@share measured on @n samples: @p within SIGMAS binomial sigmas."""
    tol = SIGMAS * math.sqrt(p * (1 - p) / n)
    assert n >= 200, f"{what}: only {n} samples"
    assert abs(share - p) <= tol, f"{what}: {share:.3f} of {n} samples, want {p} +- {tol:.3f}"


# ---- jsonl ----

FIELDS = {"time_ns": int, "pid": int, "tid": int, "thread": str, "comm": str,
          "weight_ns": int, "status": str, "event": str, "frames": list}
FRAME_FIELDS = {"function": str, "file": str, "line": int, "kind": str}
KINDS = {"python", "native", "kernel", "marker"}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.endswith("\n")
    out = []
    for line in text[:-1].split("\n"):     # JSON Lines: "\n" only (not U+2028)
        s = json.loads(line)
        assert set(s) == set(FIELDS), s
        for k, t in FIELDS.items():
            assert type(s[k]) is t, (k, s)
        assert s["weight_ns"] > 0 and s["frames"], s
        for fr in s["frames"]:
            assert set(fr) == set(FRAME_FIELDS), fr
            for k, t in FRAME_FIELDS.items():
                assert type(fr[k]) is t, (k, fr)
            assert fr["kind"] in KINDS, fr
            assert "%20" not in fr["function"], fr     # never escaped
        out.append(s)
    return out


def record_streaming(pid, out, raw, extra=()):
    """Record until lines are in @out while the recorder runs, then SIGINT it."""
    p = subprocess.Popen([binary(), "-p", str(pid), "-F", "499", "-o", str(out),
                          "--raw", str(raw)] + list(extra), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines_live, deadline = 0, time.monotonic() + 60
    try:
        while time.monotonic() < deadline and p.poll() is None:
            if os.path.exists(out):     # created before sampling starts
                with open(out, "rb") as f:
                    lines_live = f.read().count(b"\n")
            if lines_live >= 600:       # over a second of the main thread at 499 Hz
                break
            time.sleep(0.1)
        assert p.poll() is None, f"the recorder ended: {p.stderr.read().decode()}"
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode(errors="replace")
    return lines_live, err


PERF_HDR = re.compile(rb"^\S+ +(\d+)/(\d+) +\[\d+\] +(\d+)\.(\d{6}): +(\d+) (\S+): $")


def perf_headers(path):
    with open(path, "rb") as f:
        return [m.groups() for m in map(PERF_HDR.match, f.read().split(b"\n")) if m]


def test_jsonl_streams_and_reads(tmp_path):
    out, raw = tmp_path / "rec.jsonl", tmp_path / "rec.pyprof"
    with target("--hot") as pid:
        lines_live, _ = record_streaming(pid, out, raw)
    assert lines_live >= 600, f"only {lines_live} lines while recording (not streamed)"
    samples = read_jsonl(out)
    assert len(samples) >= lines_live
    main = [s for s in samples if s["tid"] == pid]
    assert all(s["pid"] == pid and s["event"] == "cpu-clock" for s in samples)
    names = [[fr["function"] for fr in s["frames"]] for s in main]
    hot = sum("hot" in n for n in names)
    cold = sum("cold" in n for n in names)
    share_ok(hot / (hot + cold), hot + cold, HOT_SHARE, "hot's share of the main thread")
    top = [s for s, n in zip(main, names) if "hot" in n][0]["frames"]
    assert [fr["function"] for fr in top[-3:]] == ["main", "hot", "spin"], top
    assert top[-1]["kind"] == "python" and top[-1]["file"].endswith("stream_mix.py")
    assert top[-1]["line"] > 0

    # report of the raw recording: the same samples; its perf-script: the same clock.
    rep, perf = tmp_path / "rep.jsonl", tmp_path / "rep.perf"
    ok(run(["report", "-i", raw, "--format", "jsonl", "-o", rep]), "report jsonl")
    assert read_jsonl(rep) == samples
    ok(run(["report", "-i", raw, "-o", perf]), "report perf-script")
    hdrs, last = perf_headers(perf), 0
    assert len(hdrs) == len(samples)
    for h, s in zip(hdrs, samples):
        last = max(last, s["time_ns"] // 1000)
        assert (int(h[0]), int(h[1]), int(h[2]) * 10**6 + int(h[3]), int(h[4]),
                h[5].decode()) == (s["pid"], s["tid"], last, s["weight_ns"], s["event"])


# ---- chrome-trace ----

def check_trace(path):
    """The Trace Event Format as we promise it: {track: [X events]}, {track: name}."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc["displayTimeUnit"] == "ms"
    tracks, names, procs = collections.defaultdict(list), {}, {}
    for ev in doc["traceEvents"]:
        assert type(ev["pid"]) is int and type(ev["tid"]) is int, ev
        key = (ev["pid"], ev["tid"])
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name"), ev
            assert type(ev["args"]["name"]) is str
            (names if ev["name"] == "thread_name" else procs)[
                key if ev["name"] == "thread_name" else ev["pid"]] = ev["args"]["name"]
            continue
        assert ev["ph"] == "X", ev
        assert type(ev["name"]) is str and ev["name"], ev
        assert ev["cat"] in KINDS, ev
        assert type(ev["ts"]) is int and type(ev["dur"]) is int, ev    # microseconds
        assert ev["dur"] > 0, ev
        assert key in names, f"a slice before its track's name: {ev}"
        tracks[key].append(ev)
    for key, evs in tracks.items():
        assert key[0] in procs
        stack = []
        for a, b in zip(evs, evs[1:]):
            assert b["ts"] >= a["ts"], f"time goes backwards on {key}: {a} {b}"
        for ev in evs:
            while stack and stack[-1] <= ev["ts"]:
                stack.pop()
            assert not stack or ev["ts"] + ev["dur"] <= stack[-1], \
                f"a slice not nested on {key}: {ev}"
            stack.append(ev["ts"] + ev["dur"])
    return doc, tracks, names


def ss_totals(exp):
    """{tid: {frame name: total}} from speedscope's export (evented profiles)."""
    out = {}
    for prof in exp["profiles"]:
        m = re.search(r"tid:? (\d+)", prof["name"])
        assert m, prof["name"]
        tot, open_ = collections.Counter(), {}
        for ev in prof["events"]:
            # speedscope names a trace event's frame "name {args as JSON}"
            name = exp["shared"]["frames"][ev["frame"]]["name"].split(" {")[0]
            if ev["type"] == "O":
                open_[ev["frame"]] = open_.get(ev["frame"], []) + [ev["at"]]
            else:
                tot[name] += ev["at"] - open_[ev["frame"]].pop()
        assert not any(open_.values()), f"{prof['name']}: slices left open"
        out[int(m.group(1))] = (prof["name"], tot)
    return out


def slice_totals(evs):
    tot = collections.Counter()
    for ev in evs:
        tot[ev["name"]] += ev["dur"]
    return tot


@pytest.mark.slow
def test_chrome_trace_cpu(node_env, tmp_path):  # noqa: F811
    out, raw = tmp_path / "rec.trace.json", tmp_path / "rec.pyprof"
    with target("--hot") as pid:
        ok(run(["-p", pid, "-F", "499", "-d", "4", "-o", out, "--raw", raw]), "record")
    doc, tracks, names = check_trace(out)
    assert (pid, pid) in tracks
    rep = tmp_path / "rep.jsonl"
    ok(run(["report", "-i", raw, "-o", rep]), "report jsonl")
    main = [s for s in read_jsonl(rep) if s["tid"] == pid]
    funcs = [{fr["function"] for fr in s["frames"]} for s in main]
    n_hot, n_cold = sum("hot" in f for f in funcs), sum("cold" in f for f in funcs)
    # Slices merge: main() is in every sample, so its slices are the runs of
    # samples no further apart than two periods (each stands for the period
    # before it; a gap up to a period is the thread running unsampled).
    times = sorted(s["time_ns"] for s in main)
    runs = 1 + sum(b - a > 2 * s["weight_ns"] for a, b, s in zip(times, times[1:], main))
    mains = [ev for ev in tracks[(pid, pid)] if ev["name"] == "main"]
    assert len(mains) == runs < len(main), (len(mains), runs, len(main))
    exp = tf.speedscope_import(node_env, out, "rec.trace.json", tmp_path)
    got = ss_totals(exp)
    assert set(got) == {tid for _, tid in tracks}, (got.keys(), tracks.keys())
    for (_, tid), name in names.items():
        assert name in got[tid][0], (name, got[tid][0])
    tot = got[pid][1]
    assert tot["hot"] > tot["cold"] > 0, tot
    # speedscope's times are the slices': hot's share by time as in the samples.
    share_ok(tot["hot"] / (tot["hot"] + tot["cold"]), n_hot + n_cold, HOT_SHARE,
             "hot's share in speedscope")
    hot_slices = [ev for ev in tracks[(pid, pid)] if ev["name"] == "hot"]
    assert abs(tot["hot"] - sum(ev["dur"] for ev in hot_slices)) < 1


@pytest.mark.slow
def test_chrome_trace_wall_intervals(node_env, tmp_path):  # noqa: F811
    out, raw = tmp_path / "rec.trace.json", tmp_path / "rec.pyprof"
    with target("--sleeper", "--contenders") as pid:
        ok(run(["-p", pid, "-F", "99", "-d", "4", "--mode", "wall", "-o", out,
                "--raw", raw]), "record")
    doc, tracks, names = check_trace(out)
    assert {"sleeper", "contend_a", "contend_b"} <= set(names.values()), names
    tid_of = {name: tid for (_, tid), name in names.items()}
    # Every off-CPU leaf's slices are its samples' intervals (report of the
    # same samples), one slice each, of its length to the microsecond.
    rep = tmp_path / "rep.jsonl"
    ok(run(["report", "-i", raw, "-o", rep]), "report jsonl")
    weights = collections.defaultdict(lambda: collections.defaultdict(list))
    for s in read_jsonl(rep):
        markers = [fr["function"] for fr in s["frames"] if fr["kind"] == "marker"]
        if s["event"] == "offcpu-time" and markers:     # why: kernel frames follow
            weights[s["tid"]][markers[-1]].append(s["weight_ns"] / 1000)
    for (_, tid), evs in tracks.items():
        for leaf, ws in weights[tid].items():
            durs = sorted(ev["dur"] for ev in evs if ev["name"] == leaf)
            # under a microsecond: maybe no slice; each end rounded
            assert sum(w >= 1 for w in ws) <= len(durs) <= len(ws), (tid, leaf)
            assert abs(sum(durs) - sum(ws)) <= len(ws) + 1, (tid, leaf, sum(durs), sum(ws))
            big = sorted(w for w in ws if w >= 1000)
            assert all(abs(a - b) <= 1 for a, b in zip(big, durs[len(durs) - len(big):])), \
                (tid, leaf, big, durs)
    naps = [ev for ev in tracks[(pid, tid_of["sleeper"])]
            if ev["name"] == "[syscall] clock_nanosleep"]
    assert len(naps) >= 10, naps
    for who in ("contend_a", "contend_b"):
        gil = [ev for ev in tracks[(pid, tid_of[who])] if ev["name"] == "[GIL wait]"]
        assert len(gil) >= 10, f"{who}: {len(gil)} [GIL wait] slices"
    # speedscope reads the same intervals.
    exp = tf.speedscope_import(node_env, out, "rec.trace.json", tmp_path)
    got = ss_totals(exp)
    for who, leaf in (("sleeper", "[syscall] clock_nanosleep"), ("contend_a", "[GIL wait]")):
        tid = tid_of[who]
        want = sum(ev["dur"] for ev in tracks[(pid, tid)] if ev["name"] == leaf)
        assert abs(got[tid][1][leaf] - want) <= 1, (who, got[tid][1][leaf], want)


# ---- the writers alone, on test_formats.py's workload (names of every kind) ----

STATUS_MARKER = {"truncated": "[truncated]", "no_pystate": "[no-python-state]",
                 "read_fault": "[read-fault]"}


def test_writers_on_the_formats_workload(produce, samples):  # noqa: F811
    """Through tests/tools/outdrv.c: every sample's frames as given (only
    bytes that are not UTF-8 replaced), and a well-formed trace of them."""
    got = read_jsonl(produce("w.jsonl"))
    assert len(got) == len(samples)
    for g, s in zip(got, samples):
        want = [(tf.lossy(fn), tf.lossy(file), line, "python")
                for fn, file, line, _ in reversed(s["frames"])]
        if s["status"] != "complete" or not s["frames"]:
            want.insert(0, (STATUS_MARKER.get(s["status"], "[no-python-frames]"), "", 0,
                            "marker"))
        assert [tuple(fr.values()) for fr in g["frames"]] == want
        assert (g["time_ns"], g["tid"], g["thread"], g["weight_ns"], g["status"]) == \
            (s["ts"], s["tid"], tf.lossy(s["thread"]), s["period"],
             STATUS_MARKER.get(s["status"], "[complete]")[1:-1])
    doc, tracks, names = check_trace(produce("w.trace.json"))
    assert sorted(names.values()) == sorted(tf.lossy(n) for _, n in tf.THREADS)
    slice_names = {ev["name"] for evs in tracks.values() for ev in evs}
    assert {tf.lossy(fn) for fn, _, _, _ in tf.WEIRD} <= slice_names


# ---- the sanitizer build ----

@pytest.mark.slow
def test_formats_under_asan(tmp_path):
    assert os.access(SAN, os.X_OK), f"{SAN} is missing: run `make san`"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    with target("--sleeper", "--contenders") as pid:
        for fmt in ("jsonl", "chrome-trace"):
            out = tmp_path / ("rec." + fmt)
            p = subprocess.run([SAN, "-p", str(pid), "-d", "2", "--mode", "wall", "--format",
                                fmt, "-o", str(out)], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=180, env=env)
            err = p.stderr.decode(errors="replace")
            assert p.returncode == 0 and "Sanitizer" not in err and \
                "runtime error" not in err, err
            if fmt == "jsonl":
                assert len(read_jsonl(out)) > 100
            else:
                assert sum(map(len, check_trace(out)[1].values())) > 100
