"""Raw recordings and `pyprof-bpf report`, on a real recording.

A CPU-bound target (two threads; `hot` does about twice the work of `warm`)
runs on the sid 3.14 interpreter and is recorded with `-F 199 -d 2`.

- Byte identity, as the issue states it: `record -o out.X --raw rec.pyprof`
  writes format X and the raw recording from the very same samples in one
  run; `report -i rec.pyprof -o rep.X` must write the same bytes, for every
  format (with --threads --no-lines too, and with the remote backend).
- The recording is decoded here by a second reader, written from the format
  spec in user/output/rawrec.h, not from rawrec_reader.c. Its samples, fed to the writers
  through tests/tools/outdrv.c (test_formats.py's driver), give the bytes
  `report` wrote: report's output depends on the samples alone; and its
  collapsed output is what test_formats' model predicts from them.
- The reports are read by test_formats.py's consumers (its helpers, imported):
  stackcollapse-perf.pl's and the Firefox Profiler's rules on perf-script,
  the speedscope schema and app (headless Chromium), npm pprof-format, the
  flame graphs in headless Chromium, the top table; the profile shows the
  known split.
- Truncated recordings (cut copies, a recorder killed with SIGKILL) report
  their complete samples with a warning; corrupt and foreign files fail with
  one clear line and leave no output file.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_report.py </dev/null
"""
import collections
import os
import re
import signal
import subprocess
import time
import uuid
import zlib

import pytest

from lib import formats as tf
from lib.tool import binary, one_error_line
from lib.interps import by_label
from lib.rawfile import decode, ok, run

pytestmark = [pytest.mark.bpf, pytest.mark.root]

INTERP = "sid-3.14"
RECORD = ["-F", "199", "-d", "2"]

TARGET = r'''
import os, sys, threading

def hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def warm(n):
    s = 0
    for i in range(n):
        s += i
    return s

def work():
    while True:
        hot(40000)
        warm(20000)

threading.Thread(target=work, name="worker", daemon=True).start()
print("ready", flush=True)
work()
'''

# name: (output file name, options given to both record and report)
FORMATS = {
    "perf-script": ("out.txt", []),
    "collapsed": ("out.folded", []),
    "speedscope": ("out.speedscope.json", []),
    "pprof": ("out.pb.gz", []),
    "flamegraph-html": ("out.html", []),
    "flamegraph-svg": ("out.svg", []),
    "top": ("top.txt", ["--format", "top"]),
    "jsonl": ("out.jsonl", []),
    "chrome-trace": ("out.trace.json", []),
    "collapsed-threads-no-lines": ("out.folded", ["--threads", "--no-lines"]),
    "collapsed-remote": ("out.folded", ["--backend", "remote"]),
}
OUTDRV_FLAGS = {"--threads": ["-t"], "--no-lines": ["-n"]}


# ---- a second reader of the raw format, from the spec in user/output/rawrec.h ----


# ---- the target and its recordings ----

@pytest.fixture(scope="module")
def target(tmp_path_factory):
    interp = by_label(INTERP)
    d = tmp_path_factory.mktemp("target")
    src = d / f"cpu_split_{uuid.uuid4().hex[:8]}.py"
    src.write_text(TARGET)
    seen = interp.stage(str(src))
    p = subprocess.Popen(interp.argv([seen]), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == b"ready\n", f"the target on {interp} did not start"
        yield p.pid     # chroot execs the interpreter: the same pid
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        try:
            os.unlink(interp.host_path(seen))
        except FileNotFoundError:
            pass


@pytest.fixture(scope="module")
def recorded(target, tmp_path_factory):
    """recorded(key) -> (dir, out, raw, rep): one recording to FORMATS[key] plus
    rec.pyprof from the same samples, and `report` of rec.pyprof."""
    cache = {}

    def get(key):
        if key not in cache:
            name, opts = FORMATS[key]
            d = tmp_path_factory.mktemp(key)
            out, raw, rep = d / name, d / "rec.pyprof", d / ("rep-" + name)
            ok(run(["-p", target] + RECORD + ["-o", out, "--raw", raw] + opts),
               f"record {key}")
            ok(run(["report", "-i", raw, "-o", rep] + [o for o in opts if o not in
                                                       ("--backend", "remote")]),
               f"report {key}")
            cache[key] = (d, out, raw, rep)
        return cache[key]
    return get


def samples_of(raw):
    hdr, samples, complete = decode(raw)
    assert complete
    return hdr, samples


# ---- byte identity ----

@pytest.mark.parametrize("key", list(FORMATS))
def test_report_is_byte_identical_to_recording(recorded, key):
    d, out, raw, rep = recorded(key)
    want, got = tf.read(out), tf.read(rep)
    assert len(want) > 100
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                  min(len(got), len(want)))
        raise AssertionError(f"{rep} differs from {out} at byte {at} of {len(got)}/"
                             f"{len(want)}:\n report: {got[max(0, at - 300):at + 300]!r}\n"
                             f" record: {want[max(0, at - 300):at + 300]!r}")
    hdr, samples = samples_of(raw)
    assert len(samples) > 50, "too few samples to mean anything"
    assert hdr["backend"] == ("remote" if "remote" in key else "bpf")


@pytest.mark.parametrize("key", list(FORMATS))
def test_writers_give_the_same_bytes_from_the_decoded_samples(recorded, outdrv, key):
    """rawrec.h read independently; the writers (via outdrv) fed those samples."""
    d, out, raw, rep = recorded(key)
    hdr, samples = samples_of(raw)
    name, opts = FORMATS[key]
    path = d / ("outdrv-" + name)
    fmt = opts[opts.index("--format") + 1] if "--format" in opts else None
    cmd = [outdrv, "-o", str(path), "-S", str(hdr["start_time"])]
    cmd += (["-f", fmt] if fmt else []) + sum((OUTDRV_FLAGS.get(o, []) for o in opts), [])
    tf.run(cmd, input=tf.outdrv_input(samples).encode(), stdin=None)
    assert tf.read(path) == tf.read(rep)


def test_header_and_samples(recorded, target):
    d, out, raw, rep = recorded("collapsed")
    hdr, samples = samples_of(raw)
    interp = by_label(INTERP)
    assert hdr["pid"] == target and hdr["freq"] == 199 and hdr["period"] == 10**9 // 199
    assert hdr["python"] == interp.version_str and hdr["comm"].startswith("python3")
    assert abs(hdr["start_time"] / 1e9 - time.time()) < 600
    assert all(hdr["start_mono"] - 10**9 < s["ts"] for s in samples)
    assert len({s["tid"] for s in samples}) == 2
    # The collapsed output is what test_formats' model predicts from the samples.
    assert tf.read(rep) == tf.model_collapsed(samples)


def test_stdin_and_stdout(recorded):
    d, out, raw, rep = recorded("collapsed")
    with open(raw, "rb") as f:
        p = ok(run(["report", "-", "--format", "collapsed", "-q"], stdin=f), "report -")
    assert p.stdout == tf.read(out) and p.stderr == b""


# ---- the consumers of test_formats.py read the reports ----

def split(samples):
    """Own weight of hot and warm (complete samples)."""
    own = collections.Counter()
    for s in samples:
        if s["frames"] and s["status"] == "complete":
            own[s["frames"][0][0]] += s["period"]
    return own


def test_profile_shows_the_split(recorded):
    hdr, samples = samples_of(recorded("collapsed")[2])
    own = split(samples)
    assert own["hot"] > 1.3 * own["warm"] > 0, own


@pytest.mark.slow
def test_perf_script_consumers(recorded, tmp_path):
    d, out, raw, rep = recorded("perf-script")
    hdr, samples = samples_of(raw)
    text = tf.read(rep)
    # stackcollapse-perf.pl's rules on the perf-script report of one recording
    # give the collapsed report of the same recording, byte for byte.
    folded = tmp_path / "same.folded"
    ok(run(["report", "-i", raw, "-o", folded]), "report to collapsed")
    assert tf.recollapse(tf.stackcollapse_perf(text)) == tf.read(folded) == \
        tf.model_collapsed(samples)
    ff = tf.firefox_perf(text.decode("utf-8"))
    assert len(ff) == len(samples)
    for got, s in zip(ff, samples):
        assert (got["pid"], got["tid"]) == (s["pid"], s["tid"])
        assert tuple(raw_ for raw_, _ in got["stack"]) == tf.model_stack(s)


@pytest.mark.slow
def test_speedscope_consumers(recorded, node_env, tmp_path):
    d, out, raw, rep = recorded("speedscope")
    hdr, samples = samples_of(raw)
    v = tf.node(node_env, "validate_speedscope.cjs", rep)
    assert v["valid"], v["errors"]
    want = collections.defaultdict(collections.Counter)
    for s in samples:
        want[s["tid"]][tf.model_stack(s, json_=True)] += s["period"]
    exp = tf.speedscope_import(node_env, rep, "p.speedscope.json", tmp_path)
    assert tf.exported_texts(exp, tf.ss_text) == want


@pytest.mark.slow
def test_pprof_consumer(recorded, node_env):
    d, out, raw, rep = recorded("pprof")
    hdr, samples = samples_of(raw)
    dec = tf.node(node_env, "pprof_decode.cjs", rep)
    assert dec["gzipped"] and dec["period"] == hdr["period"]
    assert abs(dec["timeNanos"] - hdr["start_time"]) < 1000  # the decoder's JS Number
    counts, cpu = tf.pprof_stacks(dec)
    want_n, want_w = collections.Counter(), collections.Counter()
    for s in samples:
        want_n[tf.model_stack(s, json_=True)] += 1
        want_w[tf.model_stack(s, json_=True)] += s["period"]
    assert counts == want_n and cpu == want_w


@pytest.mark.slow
@pytest.mark.parametrize("key", ["flamegraph-html", "flamegraph-svg"])
def test_flamegraph_consumer(recorded, node_env, tmp_path, key):
    d, out, raw, rep = recorded(key)
    hdr, samples = samples_of(raw)
    res = tf.node(node_env, "flamegraph_check.cjs", rep, "hot", "^warm ", tmp_path)
    assert res["errors"] == [] and res["blocked"] == [], res
    frames = [f for f in res["frames"] if not f["dim"]]
    widest = {}
    for f in frames:
        if f["name"] in ("hot", "warm"):
            widest[f["name"]] = max(widest.get(f["name"], 0), f["width"])
    assert widest["hot"] > widest["warm"] > 0
    assert "hot" in res["tooltip"]
    for f in res["searched"]:
        assert f["match"] == (f["name"] == "warm"), f
    assert res["title"].startswith("%s (pid %d)" % (hdr["comm"], hdr["pid"]))


def test_top_consumer(recorded):
    d, out, raw, rep = recorded("top")
    hdr, samples = samples_of(raw)
    lines = tf.read(rep).decode("utf-8").splitlines()
    assert lines[0].startswith("%d samples in 2 threads" % len(samples))
    rows = [re.match(r"\s*(\d+)\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(\S+) ", l) for l in lines[2:]]
    own = {m.group(2): int(m.group(1)) for m in rows if m}
    assert list(own)[0] == "hot" and own["hot"] > own["warm"]


# ---- truncated, corrupt and foreign recordings ----

def collapsed_report(raw, tmp_path, name):
    out = tmp_path / name
    p = run(["report", "-i", raw, "-o", out])
    return p, out


def first_sample_cut(data, tmp_path):
    """The shortest prefix of @data that decodes to a sample (the source files'
    records come first and may fill most of a short recording)."""
    lo, hi = 10, len(data)
    path = tmp_path / "prefix.pyprof"
    while lo < hi:
        mid = (lo + hi) // 2
        path.write_bytes(data[:mid])
        try:
            has = bool(decode(path)[1])
        except (AssertionError, zlib.error):    # a cut before the magic is whole
            has = False
        lo, hi = (lo, mid) if has else (mid + 1, hi)
    return lo


def test_truncated_copies(recorded, tmp_path):
    d, out, raw, rep = recorded("collapsed")
    data = tf.read(raw)
    first = first_sample_cut(data, tmp_path)
    for cut in ((first + len(data)) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}.pyprof"
        path.write_bytes(data[:cut])
        hdr, samples, complete = decode(path)
        assert not complete and samples
        p, folded = collapsed_report(path, tmp_path, f"cut{cut}.folded")
        ok(p, f"report of {path}")
        err = p.stderr.decode()
        assert re.search(r"warning: .* is truncated .*: reported its %d complete samples"
                         % len(samples), err), err
        assert tf.read(folded) == tf.model_collapsed(samples)
    # Cut before anything could be decoded: one clear line, no output.
    path = tmp_path / "cut10.pyprof"
    path.write_bytes(data[:10])
    p, folded = collapsed_report(path, tmp_path, "cut10.folded")
    assert "truncated before its header" in one_error_line(p, "report of 10 bytes")
    assert not folded.exists()


def flushed_samples(raw):
    """How many samples a recording being written holds so far (0 before its
    header is flushed)."""
    try:
        return len(decode(raw)[1])
    except (FileNotFoundError, AssertionError, zlib.error):
        return 0


def test_killed_recording(target, tmp_path):
    raw = tmp_path / "killed.pyprof"
    p = subprocess.Popen([binary(), "-p", str(target), "-F", "199", "-o", str(raw)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        # the writer flushes every second of samples: wait for a flush with
        # more than 20 of them
        deadline = time.monotonic() + 60
        while flushed_samples(raw) <= 20:
            assert p.poll() is None, p.stderr.read().decode()
            assert time.monotonic() < deadline, "no samples flushed in 60 s"
            time.sleep(0.1)
    finally:
        p.kill()
        p.wait(timeout=30)
    hdr, samples, complete = decode(raw)
    assert not complete and len(samples) > 20
    p, folded = collapsed_report(raw, tmp_path, "killed.folded")
    ok(p, "report of a killed recording")
    assert b"is truncated" in p.stderr
    assert tf.read(folded) == tf.model_collapsed(samples)


def test_corrupt_and_foreign_files(recorded, tmp_path):
    d, out, raw, rep = recorded("collapsed")
    data = tf.read(raw)
    # A byte in the middle that zlib sees damaged (the 4-byte markers of the
    # writer's flushes, when damaged, read as the stream ending there).
    for i in range(len(data) // 2, len(data)):
        flipped = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
        try:
            zlib.decompressobj(wbits=31).decompress(flipped)
        except zlib.error:
            break
    bad = tmp_path / "bad.pyprof"
    bad.write_bytes(flipped)
    for path, want in [(bad, "is corrupt"),
                       (recorded("pprof")[1], "is not a pyprof-bpf raw recording (it is gzip"),
                       (out, "is not a pyprof-bpf raw recording"),
                       (tmp_path / "missing.pyprof", "cannot open")]:
        p, folded = collapsed_report(path, tmp_path, "x.folded")
        line = one_error_line(p, f"report of {path}")
        assert want in line and str(path) in line, line
        assert not folded.exists()
    empty = tmp_path / "empty.pyprof"
    empty.write_bytes(b"")
    assert "is empty" in one_error_line(collapsed_report(empty, tmp_path, "x.folded")[0],
                                        "report of an empty file")


# ---- the command line ----

def test_cli(recorded, tmp_path):
    p = ok(run(["report", "--help"]), "report --help")
    assert b"EXAMPLES:" in p.stdout and b"report -i rec.pyprof" in p.stdout
    assert b"--raw" in ok(run(["record", "--help"]), "record --help").stdout
    for args, want in [(["report"], "a raw recording is needed"),
                       (["report", "-i", "x.pyprof", "-o", "y.pyprof"], "what to write"),
                       (["report", "-i", "x.pyprof", "--format", "raw"], "what to write"),
                       (["-p", "1", "-o", "a.pyprof", "--raw", "b.pyprof"], "--raw"),
                       (["-p", "1", "--format", "raw", "--raw", "b.pyprof"], "--raw")]:
        p = run(args)
        assert p.returncode == 64 and want in p.stderr.decode(), (args, p.stderr)  # EX_USAGE
    raw = recorded("collapsed")[2]
    p = run(["report", "-i", raw, "--format", "nonsense"])
    assert "unknown output format" in one_error_line(p, "--format nonsense")
    p = ok(run(["report", "-i", raw, "--format", "collapsed"]), "report to stdout")
    assert re.search(rb"process \d+ \(python3[^)]*, Python 3\.14\.\d+\) recorded on .* "
                     rb"with the bpf backend at 199 Hz: \d+ samples in 2\.\d\d s", p.stderr), \
        p.stderr
