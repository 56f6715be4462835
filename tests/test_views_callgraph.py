"""The call-graph views (issue #24, item 6): `--format pstats` and
`--format callgrind`, read by their real readers.

The target is tests/targets/callgraph_split.py: hot/warm/cold by a known
split that it times itself, a caller calling hot from two lines, and a
six-deep recursion calling hot. Each recording is read by

- pstats: `pstats.Stats` of the test runner's Python and of the newest
  interpreter (sid's 3.15, a script run in its root): the same table, hot
  first by tottime, the columns as CPython 3.15's sampling profiler fills
  them (cc = samples executing, nc = samples on the stack once however deep
  it recursed, tt/ct = their time), the callers of hot split as the target
  timed it; and CPython 3.15's own profiler (`python3.15 -m
  profiling.sampling attach --pstats`) beside ours on the same target: the
  same meaning of the columns, the same ranking and shares;
- callgrind: `callgrind_annotate` (Debian's valgrind): self, inclusive
  (--inclusive=yes) and per-line costs (--auto=yes), no warning about the
  file.

Shares are compared with what the target timed, within Z standard errors of
a share of that many samples (Z = 4.5: about 7 in a million per assertion,
under 1 in 1000 for the whole file); the rest are exact identities.
`report -i rec.pyprof` writes the same bytes as recording straight to the
format, and the ASan/UBSan build writes both formats once without a report.
"""
import json
import marshal
import math
import os
import pstats
import re
import shutil
import subprocess

import pytest

from lib import pyenvs
from lib.tool import binary
from lib.interps import SUPPORTED, by_label
from lib.procs import out_path, stage_unique
from lib.recorder import RECORD_SLACK, Recorder
from lib.callgraph import HZ, SECS, Z, check_share, record, start

pytestmark = [pytest.mark.bpf, pytest.mark.root]

NEWEST = "sid-3.15"
SAN = os.path.join(pyenvs.REPO, ".output", "san", "pyprof-bpf")


def report(raw, out):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    proc = subprocess.run([binary(), "report", "-i", raw, "-o", out], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, err
    assert "Sanitizer" not in err and "runtime error" not in err, err
    return out


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        da, db = fa.read(), fb.read()
    assert da == db, f"{b} ({len(db)} bytes) differs from {a} ({len(da)} bytes)"


# --------------------------------------------------------------------------
# pstats

READ_PSTATS = r"""
import io, json, marshal, pstats, sys
out = []
for path in sys.argv[1:]:
    st = pstats.Stats(path, stream=io.StringIO())
    st.sort_stats("tottime").print_stats()
    st.print_callers()
    rows = [[list(k), cc, nc, tt, ct,
             [[list(ck), list(cv) if isinstance(cv, tuple) else cv] for ck, cv in cal.items()]]
            for k, (cc, nc, tt, ct, cal) in st.stats.items()]
    out.append({"class": type(st).__name__, "order": [list(k) for k in st.fcn_list],
                "rows": rows, "printed": st.stream.getvalue()})
print(json.dumps(out))
"""


OWN_READ = ("import json, pstats, sys; st = pstats.Stats(sys.argv[1]).sort_stats('tottime'); "
            "print(json.dumps([list(st.fcn_list[0]), len(st.stats)]))")


def plain(v):
    """Only the marshal types the writer is documented to use."""
    if isinstance(v, dict):
        return all(plain(k) and plain(x) for k, x in v.items())
    if isinstance(v, tuple):
        return all(plain(x) for x in v)
    return type(v) in (int, float, str)


def read_newest(paths, procs, tmp_path):  # noqa: F811
    """pstats.Stats of sid's python3.15 on each file, as JSON: {class,
    order (sort_stats('tottime')), rows, printed}."""
    interp = by_label(NEWEST)
    seen = []
    for p in paths:
        tmp = str(tmp_path / os.path.basename(p))
        if tmp != p:
            shutil.copyfile(p, tmp)
        seen.append(stage_unique(interp, tmp, procs))
    script_tmp = str(tmp_path / "read_pstats.py")
    with open(script_tmp, "w") as f:
        f.write(READ_PSTATS)
    proc = subprocess.run(interp.argv([stage_unique(interp, script_tmp, procs)] + seen),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"python3.15's pstats failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def as_stats(doc):
    """The rows of read_newest() back as a pstats dict with tuple keys."""
    return {tuple(k): (cc, nc, tt, ct, {tuple(ck): tuple(cv) if isinstance(cv, list) else cv
                                        for ck, cv in cal})
            for k, cc, nc, tt, ct, cal in doc["rows"]}


def by_function(stats):
    """CPython's file keys each executing line: sum (cc, nc, tt, ct) and the
    callers' sample counts per (file, function). nc sums exactly for a
    function that is on a stack once (the target's hot, warm, cold, caller)."""
    out = {}
    for (file, _line, fn), (cc, nc, tt, ct, cal) in stats.items():
        row = out.setdefault((file, fn), [0, 0, 0.0, 0.0, {}])
        for i, v in enumerate((cc, nc, tt, ct)):
            row[i] += v
        for (cfile, _cl, cfn), v in cal.items():
            row[4][(cfile, cfn)] = row[4].get((cfile, cfn), 0) + (v if isinstance(v, int)
                                                                   else v[1])
    return out


def check_columns(stats, what):
    """The columns as CPython 3.15's sampling profiler fills them: tt and ct
    are cc and nc samples of one period each (cpu mode at a fixed rate);
    cc <= nc. Returns the period in seconds."""
    period = None
    for key, (cc, nc, tt, ct, _cal) in stats.items():
        assert 0 <= cc <= nc, f"{what}: {key}: cc {cc} > nc {nc}"
        if nc and period is None:
            period = ct / nc
        assert math.isclose(tt, cc * period, rel_tol=1e-9, abs_tol=1e-12), (
            f"{what}: {key}: tottime {tt} is not {cc} samples of {period} s")
        assert math.isclose(ct, nc * period, rel_tol=1e-9, abs_tol=1e-12), (
            f"{what}: {key}: cumtime {ct} is not {nc} samples of {period} s")
    return period


NONE = (0, 0, 0.0, 0.0, {})     # the row of a function no sample met


def check_pstats(target, stats, own, nsamples, what):
    """Our pstats dict against the target's own timing and the identities
    that hold for it."""
    a, b, warm, cold, rec = own
    hot, caller, recf, cycle = (target.key(f) for f in ("hot", "caller", "rec", "cycle"))
    # warm and cold may be missing from a short recording on a busy machine
    # (no sample); the share checks weigh that. The others hold 10%+.
    for k in (hot, caller, recf, cycle):
        assert k in stats, f"{what}: {k} missing: {sorted(stats)[:40]}"
    row = lambda f: stats.get(target.key(f), NONE)  # noqa: E731
    period = check_columns(stats, what)
    assert abs(period * HZ - 1) < 0.01, f"{what}: a sample is {period} s at {HZ} Hz"
    # Every sample ends in exactly one function.
    assert sum(v[0] for v in stats.values()) == nsamples, what
    # hot calls no Python function: on the stack = executing, less the
    # samples of a marker below it (<GC>).
    below = sum(v[4][hot][1] for k, v in stats.items() if hot in v[4])
    assert stats[hot][1] == stats[hot][0] + below, (what, stats[hot][:4], below)
    # The recursion counts once per sample: every sample with rec on the
    # stack has cycle's call of it, once.
    rc = stats[recf][4]
    assert set(rc) == {cycle, recf}, f"{what}: rec called by {sorted(rc)}"
    assert rc[cycle][1] == stats[recf][1], (what, stats[recf][:4], rc[cycle])
    assert math.isclose(rc[cycle][3], stats[recf][3], rel_tol=1e-9), what
    # hot's callers: caller (from two lines, one key) and rec, split as timed.
    hc = stats[hot][4]
    assert set(hc) == {caller, recf}, f"{what}: hot called by {sorted(hc)}"
    assert hc[caller][0] + hc[recf][0] == stats[hot][0], what
    check_share(f"{what}: hot's samples called from caller", hc[caller][0],
                hc[caller][0] + hc[recf][0], a + b, a + b + rec)
    # The hot/warm/cold split, and rec's cumulative share (the recursion
    # counted six times would be six times as much).
    tts = {f: row(f)[0] for f in ("hot", "warm", "cold")}
    check_share(f"{what}: hot's share of hot+warm+cold", tts["hot"], sum(tts.values()),
                a + b + rec, a + b + rec + warm + cold)
    subtrees = sum(row(f)[1] for f in ("caller", "warm", "cold", "rec"))
    check_share(f"{what}: rec's cumulative share", stats[recf][1], subtrees,
                rec, a + b + warm + cold + rec)


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_pstats(interp, procs, tmp_path):  # noqa: F811
    """A recording to .pstats, read by this Python's pstats and by 3.15's."""
    target = start(interp, procs, tmp_path)
    out, raw, own, rec = record(target, procs, tmp_path, "rec.pstats")
    nsamples = rec.summary()["samples"]
    st = pstats.Stats(out)
    st.sort_stats("tottime")
    assert st.fcn_list[0] == target.key("hot"), st.fcn_list[:5]
    ours = st.stats
    check_pstats(target, ours, own, nsamples, interp.label)
    with open(out, "rb") as f:
        data = marshal.load(f)
    assert data == ours, "pstats changed what it loaded"
    assert plain(data), "a value marshal wrote is not a dict, tuple, int, float or str"
    # The target's own interpreter's pstats (3.11 to 3.15).
    proc = subprocess.run(interp.argv(["-c", OWN_READ, stage_unique(interp, out, procs)]),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{interp.label}'s pstats: {proc.stderr}"
    assert json.loads(proc.stdout) == [list(target.key("hot")), len(ours)], proc.stdout
    newest = read_newest([out], procs, tmp_path)[0]
    assert newest["class"] == "Stats", newest["class"]
    assert tuple(newest["order"][0]) == target.key("hot"), newest["order"][:5]
    assert as_stats(newest) == ours, "3.15's pstats reads another table"
    assert "hot" in newest["printed"] and "was called by" in newest["printed"]
    # report turns the raw recording into the same bytes.
    same_bytes(out, report(raw, str(tmp_path / "report.pstats")))
    own_hot = (own[0] + own[1] + own[4]) / (sum(own))
    print(f"{interp.label}: {nsamples} samples; hot {ours[target.key('hot')][0]} executing, "
          f"own hot share {100 * own_hot:.1f}%")


def their_profiler(target, seen_out, secs):
    """CPython 3.15's own sampling profiler attached to the target (in its
    mount namespace), cpu mode at our rate, pstats output."""
    cmd = ["nsenter", "--mount", f"--target={target.pid}"] + target.interp.argv(
        ["-m", "profiling.sampling", "attach", "--mode", "cpu", "-r", str(HZ), "-d", str(secs),
         "--pstats", "-o", seen_out, str(target.pid)])
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.slow
def test_pstats_beside_cpython_profiler(procs, tmp_path):  # noqa: F811
    """Ours and CPython 3.15's profiler on the same 3.15 target at once: the
    same meaning of the columns, hot first, the same hot/warm/cold ranking
    and shares (within the two samples' errors), the same callers of hot."""
    interp = by_label(NEWEST)
    target = start(interp, procs, tmp_path, mount_proc=True)
    seen, host = out_path(interp, procs, tmp_path, "theirs.pstats")
    out = str(tmp_path / "ours.pstats")
    rec = Recorder(procs, tmp_path, target.pid, ["-F", HZ, "-d", SECS, "-o", out]).wait_started()
    st0 = target.stats()
    theirs_p = their_profiler(target, seen, SECS)
    procs.items.append(theirs_p)
    try:
        their_out = theirs_p.communicate(timeout=SECS + RECORD_SLACK)[0]
    except subprocess.TimeoutExpired:
        pytest.fail("python3.15 -m profiling.sampling did not finish")
    rec.wait(SECS + RECORD_SLACK).check_ok()
    a, b, warm, cold, recns = (y - x for x, y in zip(st0, target.stats()))
    assert theirs_p.returncode == 0 and os.path.exists(host), their_out
    their_doc, our_doc = read_newest([host, out], procs, tmp_path)
    # Their marker makes 3.15's pstats a SampledStats (ours: no marker, so
    # that 3.11-3.14 read it).
    assert their_doc["class"] == "SampledStats" and our_doc["class"] == "Stats"
    theirs, ours = as_stats(their_doc), as_stats(our_doc)
    check_columns(theirs, "CPython's profiler")
    check_columns(ours, "ours")
    tf, of = by_function(theirs), by_function(ours)
    names = [(target.file, f) for f in ("hot", "warm", "cold")]
    own = {"hot": a + b + recns, "warm": warm, "cold": cold}
    for agg, who in ((tf, "CPython's profiler"), (of, "ours")):
        cc = [agg.get(n, NONE)[0] for n in names]
        top = max(agg, key=lambda k: agg[k][2])
        assert top == names[0], f"{who}: {top} first by tottime"
        check_share(f"{who}: hot's share of hot+warm+cold", cc[0], sum(cc), own["hot"],
                    sum(own.values()))
        # warm before cold wherever this many samples decide it
        ew, ec = (sum(cc) * own[f] / sum(own.values()) for f in ("warm", "cold"))
        if ew - ec > Z * math.sqrt(ew + ec):
            assert cc[1] > cc[2], f"{who}: warm {cc[1]} samples, cold {cc[2]}"
        assert set(agg[names[0]][4]) == {(target.file, "caller"), (target.file, "rec")}, (
            who, agg[names[0]][4])
    nt = sum(tf.get(n, NONE)[0] for n in names)
    no = sum(of.get(n, NONE)[0] for n in names)
    pt, po = tf[names[0]][0] / nt, of[names[0]][0] / no
    pool = (tf[names[0]][0] + of[names[0]][0]) / (nt + no)
    tol = Z * math.sqrt(pool * (1 - pool) * (1 / nt + 1 / no))
    assert abs(pt - po) <= tol, (
        f"hot's share of hot+warm+cold: theirs {100 * pt:.1f}% of {nt}, ours {100 * po:.1f}% "
        f"of {no} (allowed {100 * tol:.1f} points)")
    print(f"hot share: CPython's profiler {100 * pt:.1f}% of {nt} samples, ours "
          f"{100 * po:.1f}% of {no}")


# --------------------------------------------------------------------------
# callgrind

CC = r"(\.|[\d,]+ \(\s*[\d.]+%\))"
FN_ROW = re.compile(rf"^\s*{CC}\s+{CC}\s+(\S.*)$")


def annotate(path, *args, cwd=None):
    """callgrind_annotate on path: its stdout; it must not warn."""
    exe = shutil.which("callgrind_annotate")
    assert exe, "callgrind_annotate is missing: run scripts/install-deps.sh (valgrind)"
    proc = subprocess.run([exe, "--threshold=100"] + list(args) + [path], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "WARNING" not in proc.stdout, proc.stderr
    return proc.stdout


def num(cc):
    return 0 if cc == "." else int(cc.split(" ")[0].replace(",", ""))


def functions(text):
    """{file:function: (ns, samples)} of the function table."""
    out = {}
    part = text.split("file:function\n", 1)[1].split("\n-- ", 1)[0]
    for line in part.splitlines():
        m = FN_ROW.match(line)
        if m and not line.startswith("-"):
            out[m.group(3).strip()] = (num(m.group(1)), num(m.group(2)))
    return out


def annotated_source(text, file):
    """{line: (ns, samples)} and {line: {callee: (ns, samples, calls)}} of
    the file's auto-annotated source (shown whole: --context)."""
    part = text.split(f"-- Auto-annotated source: {file}\n", 1)[1]
    part = part.split("\n", 1)[1]      # its rule of dashes
    lines, calls, no = {}, {}, 0
    for row in part.splitlines():
        if row.startswith("--------"):
            break
        m = re.match(rf"^\s*{CC}\s+{CC}\s+=> (.+) \(([\d,]+)x\)$", row)
        if m:
            calls.setdefault(no, {})[m.group(3)] = (num(m.group(1)), num(m.group(2)),
                                                     num(m.group(4)))
            continue
        m = re.match(rf"^\s*{CC}\s+{CC}", row)
        if m:
            no += 1
            lines[no] = (num(m.group(1)), num(m.group(2)))
    return lines, calls


@pytest.mark.slow
def test_callgrind(procs, tmp_path):  # noqa: F811
    """A recording to callgrind.out.N through callgrind_annotate: hot's
    self cost and share, its caller's and rec's inclusive cost (the
    recursion once), per line: hot's loop, caller's two call sites of hot
    split as timed; the same numbers as the pstats of the same recording."""
    interp = by_label("pyenv-3.12.1")
    target = start(interp, procs, tmp_path)
    out, raw, own, rec = record(target, procs, tmp_path, "callgrind.out.1")
    a, b, warm, cold, recns = own
    nsamples = rec.summary()["samples"]
    with open(out) as f:
        head = f.read(200)
    assert head.startswith("# callgrind format\nversion: 1\ncreator: pyprof-bpf\n"), head
    same_bytes(out, report(raw, str(tmp_path / "again.callgrind")))
    ps = pstats.Stats(report(raw, str(tmp_path / "rec.pstats"))).stats
    fq = {f: f"{target.file}:{f}" for f in ("hot", "warm", "cold", "caller", "rec", "cycle")}

    self_ = functions(annotate(out, cwd=str(tmp_path)))
    total = sum(v[1] for v in self_.values())
    assert total == nsamples, (total, nsamples)
    period = self_[fq["hot"]][0] / self_[fq["hot"]][1]
    assert abs(period * HZ / 1e9 - 1) < 0.01, period
    for f in ("hot", "warm", "cold"):
        mine = self_.get(fq[f], (0, 0))
        assert mine[1] == ps.get(target.key(f), NONE)[0], (f, mine, ps.get(target.key(f)))
        assert mine[0] == round(mine[1] * period), (f, mine)
    assert max(self_, key=lambda k: self_[k][0]) == fq["hot"], self_
    leaf = sum(self_.get(fq[f], (0, 0))[1] for f in ("hot", "warm", "cold"))
    check_share("callgrind: hot's self share of hot+warm+cold", self_[fq["hot"]][1], leaf,
                a + b + recns, a + b + recns + warm + cold)

    incl = functions(annotate(out, "--inclusive=yes", cwd=str(tmp_path)))
    for f in ("caller", "rec", "cycle", "hot"):
        assert incl[fq[f]][1] == ps[target.key(f)][1], (f, incl[fq[f]], ps[target.key(f)][:4])
    subtrees = sum(incl.get(fq[f], (0, 0))[1] for f in ("caller", "warm", "cold", "rec"))
    check_share("callgrind: caller's inclusive share", incl[fq["caller"]][1], subtrees,
                a + b, a + b + warm + cold + recns)
    check_share("callgrind: rec's inclusive share", incl[fq["rec"]][1], subtrees,
                recns, a + b + warm + cold + recns)

    text = annotate(out, "--auto=yes", "--context=100000", cwd=str(tmp_path))
    lines, calls = annotated_source(text, target.file)
    first = target.layout["first"]
    # All of hot's self cost sits on hot's lines; nearly all of it on its loop.
    # A sample may also land on its def (RESUME), `x = 0` or `return x` once
    # in a few hundred calls of ~10 ms each (seen: 1 of 581 on CI).
    body = {no: lines[no][1] for no in lines
            if first["hot"] <= no < first["warm"] and lines[no][1]}
    assert sum(body.values()) == self_[fq["hot"]][1], (body, lines)
    loop = {no: n for no, n in body.items() if first["hot"] + 2 <= no <= first["hot"] + 3}
    assert len(loop) == 2, body
    assert sum(body.values()) - sum(loop.values()) <= max(3, sum(body.values()) // 100), body
    sa, sb = target.line("caller->hot:a"), target.line("caller->hot:b")
    ca, cb = calls[sa][fq["hot"]], calls[sb][fq["hot"]]
    assert ca[1] + cb[1] == ps[target.key("hot")][4][target.key("caller")][1], (ca, cb)
    check_share("callgrind: caller's call site a of hot", ca[1], ca[1] + cb[1], a, a + b)
    assert calls[target.line("rec->hot")][fq["hot"]][1] == ps[target.key("hot")][4][
        target.key("rec")][1], calls
    print(f"callgrind: {nsamples} samples, hot self {self_[fq['hot']][1]}, caller inclusive "
          f"{incl[fq['caller']][1]}, call sites a/b {ca[1]}/{cb[1]} (own {a / (a + b):.3f})")


@pytest.mark.slow
def test_formats_under_asan(procs, tmp_path, monkeypatch):  # noqa: F811
    """The ASan/UBSan build records both formats once without a report."""
    assert os.access(SAN, os.X_OK), f"{SAN} is missing: build it with `make san`"
    monkeypatch.setattr(pyenvs, "BINARY", SAN)
    target = start(by_label("pyenv-3.13.0"), procs, tmp_path)
    for i, name in enumerate(("rec.pstats", "callgrind.out.7")):
        out, raw, own, rec = record(target, procs, tmp_path, name, name=f"san{i}")
        again = report(raw, str(tmp_path / f"again{i}" / name))
        assert "Sanitizer" not in rec.stderr and "runtime error" not in rec.stderr, rec.stderr
        same_bytes(out, again)
    st = pstats.Stats(str(tmp_path / "rec.pstats"))
    assert st.sort_stats("tottime").fcn_list[0] == target.key("hot")
    annotate(str(tmp_path / "callgrind.out.7"), cwd=str(tmp_path))
