"""-e EVENT (issue #35): Python stacks taken at a perf event or a tracepoint
instead of the CPU clock, on every interpreter version (one of each,
lib.interps.PARAMS), against tests/targets/events_mix.py, whose one thread
does what the event counts in a function of its own:

- test_page_faults: grow() touches fresh anonymous pages (4 MiB a round,
  logged with its start and end) while spin() computes. Under -e
  page-faults (a software event: every fault sampled by default), at least
  90% of the samples' weight in grow(), and the pages its samples stand
  for (the periods perf-script prints, times the page size) within 10% of
  the bytes grow() touched in the rounds inside the recording (a round cut
  by either end counted as possibly in). The event is named in every
  sample's header.
- test_openat_tracepoint: opener() opens /dev/null in a loop while spin()
  computes. Under -e syscalls:sys_enter_openat, every sample in opener()
  (none in the computing thread), each a single hit; with -c 5, each
  sample weighs 5.
- test_context_switches: napper() sleeps 1 ms in a loop while the main
  thread sleeps 1 s: under -e context-switches (cs), napper() has at least
  80% of the weight.
- test_several_events: -e cpu-clock,page-faults on the faults target: each
  event's samples, kept apart as stackcollapse-perf.pl --event-filter keeps
  them (FlameGraph's rules, tests/lib/formats.py), give grow() the shares
  the single-event runs give (page faults: >= 90% in both; CPU: within 15
  points, the page-fault samples' own cost being CPU time of grow()'s
  thread); no event root frame in perf-script stacks; a raw recording
  reported as pprof (go tool pprof: one sample type per event), collapsed
  (an event root frame each), a flame graph (Chromium: a choice of event,
  each event's tree in its unit), and `report -e` one event's top table;
  `top` ends with a snapshot per event.
- test_event_errors: an unknown event, a tracepoint that does not exist, a
  malformed one, -c without -e, -e in another mode or with the remote
  backend: each one line on stderr naming the problem (then argp's hint
  at --help, for a usage error), a non-zero exit. A
  hardware event: on a machine without a CPU PMU (this one), the error
  says so; where there is one, it records.
- test_event_formats: pprof's sample type page-faults/count (read by go
  tool pprof), the flame graph's unit, speedscope's "none"; a raw
  recording keeps the event (report's flame graph and perf-script say it).

- test_memory_mode: --mode memory weighs each page fault by its page, in
  bytes: grow()'s within 10% of what it touched, and every writer says bytes.

- test_filters: --filter in the kernel's syntax, compiled for the BPF
  program: six expressions over numbers and the filename string keep all of
  opener()'s hits or none, as they must; test_openat_tracepoint adds, on
  every interpreter, a filter that excludes every hit.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_events.py </dev/null
"""
import glob
import json
import re
import os
import shutil
import subprocess

import pytest

from lib.interps import PARAMS
from lib import formats as tf
from lib.perf import only_event, parse_perf
from lib.procs import TARGETS, out_path, start, wait_file
from lib.recorder import Recorder
from lib.tool import binary

pytestmark = [pytest.mark.bpf, pytest.mark.root]

CHUNK = 4 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
SECS = 2
HINT = "Try `pyprof-bpf record --help' or `pyprof-bpf record --usage' for more information."


def target(interp, procs, tmp_path, kind):
    """events_mix.py KIND on interp: (process, its pid, READY's host path)."""
    seen, host = out_path(interp, procs, tmp_path, f"ev-{kind}")
    procs.cleanup_file(host + ".rounds")
    p, _ = start(interp, procs, tmp_path, "events_mix.py", [seen, kind], f"events-{kind}")
    wait_file(p, host, f"events_mix.py {kind} on {interp.label}")
    with open(host) as f:
        pid = int(f.read())
    return p, pid, host


def record(procs, tmp_path, pid, args, name):
    out = str(tmp_path / f"{name}.perf")
    rec = Recorder(procs, tmp_path, pid, ["-d", SECS, "-o", out] + args, name=name)
    rec.wait_started().finish(SECS)
    return parse_perf(open(out, "rb").read()), rec


def in_function(s, fn):
    return any(f.python and f.func == fn for f in s.frames)


def weight_share(samples, fn):
    total = sum(s.period for s in samples)
    return sum(s.period for s in samples if in_function(s, fn)) / max(total, 1)


@pytest.mark.parametrize("interp", PARAMS)
def test_page_faults(interp, procs, tmp_path):
    p, pid, host = target(interp, procs, tmp_path, "faults")
    samples, rec = record(procs, tmp_path, pid, ["-e", "page-faults"], "faults")
    assert "on page-faults, every event" in rec.stderr, rec.stderr
    assert samples, rec.stderr
    assert {s.event for s in samples} == {"page-faults"}
    check_grow_bytes(samples, host, PAGE, f"faults {interp.label}")


def check_grow_bytes(samples, host, scale, what):
    """grow() has 90% of the weight, and its weight x scale is the bytes
    of the rounds READY.rounds says it ran inside the recording, within 10%."""
    share = weight_share(samples, "grow")
    got = scale * sum(s.period for s in samples if in_function(s, "grow"))
    lo_ns, hi_ns = min(s.ts for s in samples) * 1000, max(s.ts for s in samples) * 1000
    inside = partial = 0
    with open(host + ".rounds") as f:
        for line in f:
            a, b = map(int, line.split())
            if a >= lo_ns and b <= hi_ns:
                inside += 1
            elif a <= hi_ns and b >= lo_ns:
                partial += 1
    print(f"\nEV {what}: {len(samples)} samples, grow {100 * share:.1f}%, "
          f"{got >> 20} MiB of faults, rounds {inside} inside + {partial} cut "
          f"({inside * CHUNK >> 20}-{(inside + partial) * CHUNK >> 20} MiB)")
    assert share >= 0.9, f"grow() has {100 * share:.1f}% of the page faults"
    assert inside >= 5, f"only {inside} rounds of grow() inside the recording"
    assert 0.9 * inside * CHUNK <= got <= 1.1 * (inside + partial) * CHUNK, \
        (f"{got} bytes of faults in grow(), it touched {inside * CHUNK} to "
         f"{(inside + partial) * CHUNK}")


@pytest.mark.parametrize("interp", [PARAMS[0], PARAMS[-1]])
def test_memory_mode(interp, procs, tmp_path):
    """--mode memory: the page faults weighed in bytes, in every writer.
    The samples are test_page_faults' (every interpreter kind there); the
    weighing is the resolver's, the same for all, so the oldest and the
    newest kind here. perf-script's periods are bytes (grow()'s within 10%
    of what it touched); pprof's sample type is memory/bytes (go tool pprof
    reads it), the flame graph's and speedscope's unit bytes; a raw
    recording keeps the mode (report's flame graph says bytes)."""
    p, pid, host = target(interp, procs, tmp_path, "faults")
    samples, rec = record(procs, tmp_path, pid, ["--mode", "memory"], "memory")
    assert f"in memory mode (every page fault, {PAGE} bytes each)" in rec.stderr, rec.stderr
    assert "memory mode: at page-faults events, weighed in bytes of pages" in rec.stderr
    assert {s.event for s in samples} == {"page-faults"}
    assert all(s.period % PAGE == 0 for s in samples)
    check_grow_bytes(samples, host, 1, f"memory {interp.label}")
    if interp != PARAMS[-1].values[0]:
        return
    outs = {ext: str(tmp_path / f"m.{ext}") for ext in ("pb.gz", "speedscope.json", "pyprof")}
    for ext, out in outs.items():
        Recorder(procs, tmp_path, pid, ["-d", 1, "--mode", "memory", "-o", out],
                 name=f"mem-{ext}").wait_started().finish(1)
    r = go_pprof_raw(outs["pb.gz"])
    assert "PeriodType: memory bytes" in r, r[:500]
    assert "samples/count memory/bytes[dflt]" in r, r[:500]
    ss = json.load(open(outs["speedscope.json"]))
    assert {pr["unit"] for pr in ss["profiles"]} == {"bytes"}, ss["profiles"][0]["unit"]
    out = str(tmp_path / "report.html")
    r = subprocess.run([binary(), "report", "-i", outs["pyprof"], "-o", out],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert '"unit":"bytes"' in open(out, encoding="utf-8").read()
    # top's snapshots (no terminal) weigh bytes too
    r = subprocess.run([binary(), "top", "-p", str(pid), "--mode", "memory", "-d", "1"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().split("\n\n")[-1].splitlines()
    assert "memory mode, at page-faults" in last[0], last[0]
    assert last[3].split()[2:4] == ["OwnBytes", "AllBytes"], last[3]
    assert last[4].split()[4] == "grow" and last[4].split()[2].endswith("MiB"), last[4]


def go_pprof_raw(path):
    """What `go tool pprof -raw` prints of a profile."""
    go = shutil.which("go")
    assert go, "go is missing: run scripts/install-consumers.sh (golang-go)"
    r = subprocess.run([go, "tool", "pprof", "-raw", path], capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, HOME=os.environ.get("HOME", "/root"),
                                PPROF_TMPDIR="/tmp"))
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("interp", PARAMS)
def test_openat_tracepoint(interp, procs, tmp_path):
    p, pid, host = target(interp, procs, tmp_path, "openat")
    ev = "syscalls:sys_enter_openat"
    samples, rec = record(procs, tmp_path, pid, ["-e", ev], "openat")
    assert f"on {ev}, every event" in rec.stderr, rec.stderr
    print(f"\nEV openat {interp.label}: {len(samples)} samples")
    assert len(samples) >= 20, rec.stderr
    bad = [s.describe() for s in samples if not in_function(s, "opener")]
    assert not bad, f"{len(bad)} samples outside opener(): {bad[:3]}"
    assert {s.event for s in samples} == {ev} and {s.period for s in samples} == {1}
    samples, rec = record(procs, tmp_path, pid, ["-e", ev, "-c", "5"], "openat5")
    assert f"on {ev}, one event in 5" in rec.stderr, rec.stderr
    assert samples and {s.period for s in samples} == {5}
    assert all(in_function(s, "opener") for s in samples)
    # --filter: a filename opener() never opens leaves none of its opens
    # (and its closes, unfiltered, show it ran meanwhile)
    opens, _ = opens_and_closes(procs, tmp_path, pid, 'filename == "/etc/no"', "openat-none")
    assert not opens, len(opens)


FILTERS = [
    # (filter, all of opener's hits pass): os.open() adds O_CLOEXEC (0x80000)
    ('filename == "/dev/null"', True),
    ('filename ~ "/dev/*" && flags & 0x80000', True),
    ('filename ~ "*/null" || dfd == 1', True),
    ("!(flags & 0x80000)", False),
    ('flags < 100 || filename ~ "/tmp/*"', False),
    ("common_pid == 1", False),
]


def opens_and_closes(procs, tmp_path, pid, expr, name):
    """openat filtered by @expr and close unfiltered, in one recording: each
    open of opener() is followed by its close, so without a loss the two
    counts match whatever the machine's load lets it run."""
    samples, rec = record(procs, tmp_path, pid, ["-e", f"{OPENAT},{CLOSE}", "--filter", expr],
                          name)
    assert "the hits matching --filter" in rec.stderr, rec.stderr
    opens = [s for s in samples if s.event == OPENAT]
    closes = [s for s in samples if s.event == CLOSE and in_function(s, "opener")]
    assert len(closes) >= 10, (expr, len(closes), rec.stderr)
    return opens, closes


OPENAT, CLOSE = "syscalls:sys_enter_openat", "syscalls:sys_enter_close"


@pytest.mark.slow  # ~14 s: make test only (make check's 5-minute budget)
def test_filters(procs, tmp_path):
    """--filter's kernel syntax, evaluated by the BPF program on the hit's
    record: numbers, a user string pointer (the filename) exact, as prefix
    and suffix, && || ! and parentheses; each keeps every open of opener()
    (as many as its closes, unfiltered in the same recording, within 10%)
    or none."""
    interp = PARAMS[-1].values[0]
    p, pid, host = target(interp, procs, tmp_path, "openat")
    for i, (expr, passes) in enumerate(FILTERS):
        opens, closes = opens_and_closes(procs, tmp_path, pid, expr, f"filter{i}")
        print(f"\nEV filter {expr!r}: {len(opens)} opens, {len(closes)} closes")
        if passes:
            assert abs(len(opens) - len(closes)) <= 0.1 * len(closes) + 2, \
                (expr, len(opens), len(closes))
            assert all(in_function(s, "opener") for s in opens), expr
        else:
            assert not opens, (expr, len(opens))


@pytest.mark.parametrize("interp", PARAMS)
def test_context_switches(interp, procs, tmp_path):
    p, pid, host = target(interp, procs, tmp_path, "sleeps")
    samples, rec = record(procs, tmp_path, pid, ["-e", "cs"], "cs")
    assert "on context-switches, every event" in rec.stderr, rec.stderr
    share = weight_share(samples, "napper")
    print(f"\nEV cs {interp.label}: {len(samples)} samples, napper {100 * share:.1f}%")
    assert len(samples) >= 100, rec.stderr
    assert share >= 0.8, f"napper() has {100 * share:.1f}% of the context switches"
    assert {s.event for s in samples} == {"context-switches"}


def test_event_formats(procs, tmp_path):
    """The formats say what the weights count: pprof's sample type
    page-faults/count (go tool pprof reads it), the flame graph's unit
    page-faults, speedscope's "none"; perf-script names the event."""
    interp = PARAMS[-1].values[0]
    p, pid, host = target(interp, procs, tmp_path, "faults")
    outs = {ext: str(tmp_path / f"f.{ext}") for ext in ("pb.gz", "html", "speedscope.json")}
    for ext, out in outs.items():
        rec = Recorder(procs, tmp_path, pid, ["-d", 1, "-e", "page-faults", "-o", out],
                       name=f"fmt-{ext}")
        rec.wait_started().finish(1)
    r = go_pprof_raw(outs["pb.gz"])
    assert "PeriodType: page-faults count" in r, r[:500]
    assert "samples/count page-faults/count[dflt]" in r, r[:500]
    html = open(outs["html"], encoding="utf-8").read()
    assert '"unit":"page-faults"' in html
    ss = json.load(open(outs["speedscope.json"]))
    assert {pr["unit"] for pr in ss["profiles"]} == {"none"}, ss["profiles"][0]["unit"]
    # a raw recording keeps the event: report's views say it as record's do
    raw = str(tmp_path / "f.pyprof")
    Recorder(procs, tmp_path, pid, ["-d", 1, "-e", "page-faults", "-o", raw],
             name="fmt-raw").wait_started().finish(1)
    for ext in ("html", "perf"):
        out = str(tmp_path / f"report.{ext}")
        r = subprocess.run([binary(), "report", "-i", raw, "-o", out], capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        data = open(out, encoding="utf-8").read()
        if ext == "html":
            assert '"unit":"page-faults"' in data
        else:
            assert {s.event for s in parse_perf(data.encode())} == {"page-faults"}


def run_record(args):
    return subprocess.run([binary(), "record"] + args, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args,says", [
    (["-e", "pagefaults"], "unknown event pagefaults"),
    (["-e", "nosuch:thing"], "event nosuch:thing: no such tracepoint"),
    (["-e", "../x:y"], "a tracepoint is SUBSYS:NAME"),
    (["-c", "10"], "-c N counts the events of -e EVENT"),
    (["-e", "page-faults", "-c", "0"], "invalid count"),
    (["-e", "page-faults", "--mode", "wall"], "-e EVENT takes samples at an event: cpu mode's"),
    (["-e", "page-faults", "--backend", "remote"], "-e EVENT is for the BPF backend"),
    (["-e", "syscalls:sys_enter_openat", "--events", "thread"], "attached once for the whole"),
    (["--mode", "memory", "-e", "cs"], "--mode memory takes its samples at page-faults"),
    (["--mode", "memory", "--backend", "remote"], "--mode memory is for the BPF backend"),
    (["-e", "cs,context-switches"], "context-switches given twice"),
    (["-e", "cs,faults,minor-faults,major-faults,cpu-migrations"], "at most 4 events at once"),
    (["-e", "cs,"], "an empty event name"),
    (["-e", "cs,nosuch"], "unknown event nosuch"),
    (["-e", "cpu-clock,page-faults", "--events", "thread"], "several events are opened on every"),
    (["-e", "syscalls:sys_enter_openat", "--filter", "bogus == 1"],
     "the kernel's filter syntax refuses it for syscalls:sys_enter_openat"),
    (["-e", "syscalls:sys_enter_openat", "--filter", "flags =="], "the kernel's filter syntax"),
    (["-e", "syscalls:sys_enter_openat", "--filter", 'filename ~ "*x*"'],
     "only a prefix (abc*) or a suffix (*abc) compiles"),
    (["--filter", "flags == 1"], "--filter is for a tracepoint's hits"),
    (["-e", "cs", "--filter", "flags == 1"], "--filter is for a tracepoint's hits"),
])
def test_event_errors(args, says, tmp_path):
    r = run_record(["-p", str(os.getpid()), "-d", "1", "-o", str(tmp_path / "x")] + args)
    assert r.returncode != 0, r.stderr
    first, _, rest = r.stderr.partition("\n")
    assert says in first, r.stderr
    # nothing else but argp's hint, which it wraps
    assert " ".join(rest.split()) in ("", HINT), r.stderr


def test_hardware_event(procs, tmp_path):
    """cycles: the clear error where the CPU exposes no counters (no cpu
    PMU under /sys/bus/event_source/devices), else a recording."""
    pmus = [os.path.basename(d) for d in glob.glob("/sys/bus/event_source/devices/*")]
    has_cpu_pmu = any(d == "cpu" or d.startswith(("cpu_", "armv8")) for d in pmus)
    if has_cpu_pmu:
        p, pid, host = target(PARAMS[0].values[0], procs, tmp_path, "openat")
        samples, rec = record(procs, tmp_path, pid, ["-e", "cycles"], "cycles")
        assert samples and {s.event for s in samples} == {"cycles"}, rec.stderr
        return
    r = run_record(["-p", str(os.getpid()), "-d", "1", "-e", "cycles", "-o",
                    str(tmp_path / "x")])
    assert r.returncode != 0
    assert "event cycles: this machine exposes no hardware counters" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def grow_share(folded):
    """grow()'s share of the weight of collapsed text (bytes)."""
    total = mine = 0
    for line in folded.splitlines():
        stack, _, w = line.rpartition(b" ")
        total += int(w)
        mine += int(w) if re.search(rb"(^|;)py::grow:", stack) else 0
    return mine / max(total, 1)


@pytest.mark.slow  # ~14 s: make test only (make check's 5-minute budget)
def test_several_events(procs, tmp_path, node_env):
    interp = PARAMS[-1].values[0]
    p, pid, host = target(interp, procs, tmp_path, "faults")
    raw = str(tmp_path / "multi.pyprof")
    samples, rec = record(procs, tmp_path, pid, ["-e", "cpu-clock,page-faults", "--raw", raw],
                          "multi")
    assert "on cpu-clock at 99 Hz, page-faults every event" in rec.stderr, rec.stderr
    assert re.search(r"per event: cpu-clock \d+ samples \(\d+ ns\); page-faults \d+ samples",
                     rec.stderr), rec.stderr
    assert {s.event for s in samples} == {"cpu-clock", "page-faults"}
    assert not any(f.func.startswith("[") and f.func.endswith("]") and
                   f.func[1:-1] in ("cpu-clock", "page-faults") for s in samples for f in s.frames)
    data = open(tmp_path / "multi.perf", "rb").read()
    multi = {ev: grow_share(tf.stackcollapse_perf(only_event(data, ev)))
             for ev in ("cpu-clock", "page-faults")}
    single = {}
    for ev in ("cpu-clock", "page-faults"):
        record(procs, tmp_path, pid, ["-e", ev], f"single-{ev}")
        single[ev] = grow_share(tf.stackcollapse_perf(open(tmp_path / f"single-{ev}.perf",
                                                           "rb").read()))
    print(f"\nEV several: grow's share multi {multi}, single {single}")
    assert multi["page-faults"] >= 0.9 and single["page-faults"] >= 0.9, (multi, single)
    assert abs(multi["cpu-clock"] - single["cpu-clock"]) <= 0.15, (multi, single)
    check_several_reports(raw, tmp_path, node_env)
    r = subprocess.run([binary(), "top", "-p", str(pid), "-e", "cpu-clock,page-faults", "-d", "1"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    heads = [b.splitlines()[0] for b in r.stdout.strip().split("\n\n")[-2:]]
    assert "at cpu-clock (e: next of 2 events)" in heads[0], heads
    assert "at page-faults (e: next of 2 events)" in heads[1], heads


def check_several_reports(raw, tmp_path, node_env):
    """A raw recording at two events, reported in the formats that keep events apart."""
    def report(*args):
        r = subprocess.run([binary(), "report", "-i", raw] + list(args), capture_output=True,
                           timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        return r.stdout
    out = {ext: str(tmp_path / f"rep.{ext}") for ext in ("pb.gz", "folded", "html")}
    for path in out.values():
        report("-o", path)
    r = go_pprof_raw(out["pb.gz"])
    assert "samples/count cpu-clock/nanoseconds[dflt] page-faults/count" in r, r[:500]
    roots = {line.split(b";")[1] for line in open(out["folded"], "rb").read().splitlines()}
    assert roots == {b"[cpu-clock]", b"[page-faults]"}, roots
    fg = tf.node(node_env, "flamegraph_events.cjs", out["html"], "grow")
    assert not fg["errors"] and not fg["blocked"], fg
    assert fg["options"] == ["cpu-clock", "page-faults"], fg["options"]
    assert fg["first"]["zoomed"] == "[cpu-clock]", fg["first"]
    pf = fg["views"]["page-faults"]
    assert pf["zoomed"] == "[page-faults]" and "[cpu-clock]" not in pf["drawn"], pf
    m = re.search(r"\(([\d.]+)% of page-faults.*\), \d+ page-faults$", pf["tooltip"] or "")
    assert m and float(m.group(1)) >= 90, pf["tooltip"]
    assert fg["views"]["cpu-clock"]["tooltip"].endswith(" CPU"), fg["views"]["cpu-clock"]
    top = report("-e", "page-faults", "--format", "top").decode()
    assert re.match(r"\d+ samples in 1 thread, \d+ page-faults events\n", top), top[:200]
    r = subprocess.run([binary(), "report", "-i", raw, "-e", "cycles"], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "-e cycles: the recording was taken at cpu-clock,page-faults" \
        in r.stderr, r.stderr
