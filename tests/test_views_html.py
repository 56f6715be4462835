"""The HTML views of issue #24: the heatmap and the differential flame graph.

Real recordings of real targets, opened in headless Chromium (the helpers of
tests/test_formats.py and tests/consumers/page_probe.cjs), read as a person
would: DOM queries, the screenshot's pixels, the hover text.

- heatmap: tests/targets/heat_main.py spends ~3/4 of its CPU on the line
  marked HOT in heat_lib.py and ~1/4 on the WARM line of its own file. The
  page ranks heat_lib.py first, colours the HOT line hottest (its own cell
  and its pixel), shows its figures as the samples say, leaves lines never
  executed plain, and flags a file modified after recording started. The
  .pyprof keeps the sources: `report` after they are deleted still shows
  them. A file whose lines the samples overrun is flagged. In a container
  whose source file became a symlink to a root-only host file, the file is
  not read (inotify watches the host file; tests/test_hostile_root.py); a
  target running as nobody that names a root-only file as its code's file
  gets no copy of it.
- diff: tests/targets/diff_split.py with alpha's share of the work 0.1,
  then 0.9 (two interpreters, so two comms): in `report --diff`'s flame graph alpha is red, beta blue, the
  hover text has both shares (as each recording's collapsed output gives
  them) and the change; the table lists alpha and beta first with the right
  signs.

Statistical bounds are 3.3 standard deviations of the counts involved
(< 1/1000 failures of a correct build).
"""
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from lib import pyenvs
from lib.formats import CONSUMERS, run
from lib.container import Container, Inotify, SECRET_NAME, SID_INTERPS

pytestmark = [pytest.mark.bpf, pytest.mark.root]

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.join(HERE, "targets")
INTERPS = pyenvs.supported()
# The heatmap's page is the same on every interpreter; its lines come from
# each one's line table (tests/test_linetable.py has them all): one of each
# kind, for the test budget (all eight passed).
HEAT_INTERPS = [i for i in INTERPS
                if i.label in ("sid-3.14", "sid-3.15", "pyenv-3.11.7", "pyenv-3.12.1")]
Z = 3.3


def probe(env, page, outdir, spec):
    p = run(["node", os.path.join(CONSUMERS, "page_probe.cjs"), page, str(outdir),
             json.dumps(spec)], env=env, timeout=180)
    res = json.loads(p.stdout)
    assert res["errors"] == [] and res["blocked"] == [], res
    return res


def rgb(css):
    return [int(x) for x in re.findall(r"\d+", css)[:3]]


def start(interp, script, args):
    proc = subprocess.Popen(interp.argv([script] + [str(a) for a in args]),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("ready"), f"target did not start: {line!r} {proc.stderr.read()}"
    return proc, int(line.split()[1])


def record(pid, out, secs=2.5, extra=()):
    return subprocess.Popen([pyenvs.BINARY, "record", "-F", "199", "-d", str(secs), "-p",
                             str(pid), "-o", str(out)] + list(extra),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_ok(p, what):
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, f"{what}: exit {p.returncode}\n{out}\n{err}"
    return out, err


def report(*args):
    return run([pyenvs.BINARY, "report", "-q"] + [str(a) for a in args]).stdout.decode()


# ---- heatmap ----

HEAT_SPEC = {"wait": "section.file", "pixelAt": "left",
             "select": {"files": "section.file", "rows": "tr.l.hot", "plain": "tr.l:not(.hot)",
                        "own": "tr.l.hot td.own", "info": "#hm-info", "stale": "p.stale"}}


def stage_heat(interp, tmp_path):
    """heat_main.py and heat_lib.py where the interpreter sees them; their host paths."""
    d = tmp_path / "src"
    d.mkdir()
    for f in ("heat_main.py", "heat_lib.py"):
        shutil.copyfile(os.path.join(TARGETS, f), d / f)
    seen = [interp.stage(str(d / f)) for f in ("heat_main.py", "heat_lib.py")]
    return seen, [interp.host_path(s) for s in seen]


def marked_row(res, mark):
    rows = [r for r in res["sel"]["rows"] if r["cells"][-1]["text"].rstrip().endswith(mark)]
    assert len(rows) == 1, (mark, [r["cells"][-1]["text"] for r in res["sel"]["rows"]])
    return rows[0]


def check_heat_page(res, seen_main, seen_lib):
    files = res["sel"]["files"]
    rows = res["sel"]["rows"]
    n = int(re.match(r"(\d+) samples", res["sel"]["info"][0]["text"]).group(1))
    # heat_lib.py (the HOT line) is ranked first, heat_main.py second.
    assert [f["attrs"]["data-path"] for f in files[:2]] == [seen_lib, seen_main], files
    hot, warm = marked_row(res, "# HOT"), marked_row(res, "# WARM")
    own = lambda r: int(r["attrs"]["data-own-n"])
    # The HOT line has the most own samples and the hottest colour, on screen too.
    assert max(rows, key=own) is hot
    cell = {c["cls"]: c for c in hot["cells"]}
    assert rgb(cell["own"]["bg"]) == [255, 40, 40] and rgb(cell["src"]["bg"]) == [255, 40, 40]
    # The screenshot: the own cell's figure is right-aligned, its left edge
    # is background: the hottest colour there.
    assert res["sel"]["own"][rows.index(hot)]["pixel"][:3] == [255, 40, 40]
    # Its figures: own and total shares of all samples, as its counts say.
    assert cell["own"]["text"] == "%.2f%%" % (100 * own(hot) / n)
    assert cell["tot"]["text"] == "%.2f%%" % (100 * int(hot["attrs"]["data-total-n"]) / n)
    assert cell["op"]["text"] == ""                  # the --opcodes column, not filled
    # 3/4 of the HOT+WARM samples are HOT's (same loop, 30000 vs 10000 items).
    k = own(hot) + own(warm)
    assert k >= 40, f"too few samples: {k}"
    frac = own(hot) / k
    assert abs(frac - 0.75) < Z * math.sqrt(0.75 * 0.25 / k) + 0.03, (own(hot), own(warm))
    wcell = {c["cls"]: c for c in warm["cells"]}
    assert 40 < rgb(wcell["own"]["bg"])[1] < 255     # lighter red than HOT's
    # Lines no sample was on are plain.
    assert res["sel"]["plain"], "no plain line"
    for r in res["sel"]["plain"]:
        assert all(c["bg"] == "rgba(0, 0, 0, 0)" for c in r["cells"]), r
        assert r["pixel"][:3] == [255, 255, 255], r


def test_heat_interps():
    assert len(HEAT_INTERPS) == 4, [i.label for i in HEAT_INTERPS]


@pytest.mark.slow
@pytest.mark.parametrize("interp", HEAT_INTERPS, ids=str)
def test_heatmap(interp, node_env, tmp_path):  # noqa: F811
    (seen_main, seen_lib), (host_main, host_lib) = stage_heat(interp, tmp_path)
    # heat_main.py "modified" after recording starts: its mtime in the future.
    future = time.time() + 3600
    os.utime(host_main, (future, future))
    proc, pid = start(interp, seen_main, [8])
    try:
        raw = record(pid, tmp_path / "rec.pyprof")
        live = record(pid, tmp_path / "live.heatmap.html")
        wait_ok(raw, "record -o rec.pyprof")
        wait_ok(live, "record -o live.heatmap.html")
    finally:
        proc.kill()
        proc.wait()
    for f in (host_main, host_lib):
        os.unlink(f)                # report has only the recording now
    page = tmp_path / "rec.heatmap.html"
    report("-i", tmp_path / "rec.pyprof", "-o", page)
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained
    res = probe(node_env, str(page), tmp_path, HEAT_SPEC)
    check_heat_page(res, seen_main, seen_lib)
    assert os.path.getsize(tmp_path / "page.png") > 5000     # a screenshot, not blank
    # The file modified after the start is flagged, the other is not.
    stale = res["sel"]["stale"]
    assert [s["attrs"]["data-why"] for s in stale] == ["changed"], stale
    files = res["sel"]["files"]
    assert "modified after" in files[1]["text"] and "modified" not in files[0]["text"]
    # The sources came from the recording: the deleted files' lines are there.
    assert "# HOT" in html and "def warm(n):" in html
    # Written straight by record, the same ranking and hottest line.
    live_res = probe(node_env, str(tmp_path / "live.heatmap.html"), tmp_path, HEAT_SPEC)
    check_heat_page(live_res, seen_main, seen_lib)


@pytest.mark.slow
def test_heatmap_lines_out_of_range(node_env, tmp_path):  # noqa: F811
    """heat_lib.py replaced (old mtime) after it was imported by a 1-line
    file: the samples name line 5 of a 1-line file, flagged."""
    interp = pyenvs.supported()[0]
    (seen_main, seen_lib), (host_main, host_lib) = stage_heat(interp, tmp_path)
    proc, pid = start(interp, seen_main, [5])
    try:
        with open(host_lib, "w") as f:
            f.write("x = 1\n")
        os.utime(host_lib, (1e9, 1e9))
        wait_ok(record(pid, tmp_path / "rec.pyprof", secs=1.5), "record")
    finally:
        proc.kill()
        proc.wait()
    page = tmp_path / "rec.heatmap.html"
    report("-i", tmp_path / "rec.pyprof", "--format", "heatmap", "-o", page)
    res = probe(node_env, str(page), tmp_path, HEAT_SPEC)
    lib = [f for f in res["sel"]["files"] if f["attrs"]["data-path"] == seen_lib]
    assert lib and "beyond this file's 1 lines" in lib[0]["text"], res["sel"]["files"]
    assert [s["attrs"]["data-why"] for s in res["sel"]["stale"]] == ["range"]
    # Its sampled line is listed, without text.
    assert any(r["attrs"]["data-line"] == "5" and r["cells"][-1]["text"] == ""
               for r in res["sel"]["rows"])


@pytest.mark.parametrize("interp", SID_INTERPS[:1], ids=str)
def test_heatmap_source_symlink_to_host(interp, tmp_path, host_files):  # noqa: F811
    """In a container, the target's source file becomes a symlink to a
    root-only host file: the recording does not open it (inotify), keeps
    no text of it, and says the source was not read; the control's own
    source file (the same path, a regular file in its root) is kept."""
    secret, fifo = host_files
    pages = {}
    for variant in ("own", "src-symlink"):
        d = tmp_path / variant
        d.mkdir()
        watch = Inotify([secret])
        c = Container(interp, d, variant, 4, secret, fifo)
        try:
            out, err = wait_ok(record(c.pid, d / "rec.pyprof", secs=2), "record")
        finally:
            rc, tout, terr = c.finish()
        opened = watch.events()
        watch.close()
        assert rc == 0 and tout.strip().endswith("ok"), f"target: {rc}\n{tout}\n{terr}"
        assert not opened, f"{variant}: a host file was opened on the target's behalf"
        raw = gzip.open(d / "rec.pyprof").read()
        assert SECRET_NAME.encode() not in raw
        report("-i", d / "rec.pyprof", "-o", d / "p.heatmap.html")
        pages[variant] = (d / "p.heatmap.html").read_text()
        assert SECRET_NAME not in pages[variant]
    assert "def burn(n):" in pages["own"]
    assert "def burn(n):" not in pages["src-symlink"]
    assert "could not be read in the target&#39;s root" in pages["src-symlink"] or \
        "could not be read in the target's root" in pages["src-symlink"]


def test_heatmap_foreign_file(tmp_path, host_files):  # noqa: F811
    """A target running as nobody names a root-only file as its code's file:
    its text is not copied (only a file the target's user owns, or anyone
    may read, is); the target's own script is."""
    secret, _ = host_files
    d = tempfile.mkdtemp(prefix="pyprof-heat-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        script = os.path.join(d, "heat_foreign.py")
        shutil.copyfile(os.path.join(TARGETS, "heat_foreign.py"), script)
        os.chmod(script, 0o644)
        interp = pyenvs.Interp("nobody", "/usr/bin/python3")
        interp.exe = "setpriv"
        proc, pid = start(interp, "--reuid=65534", ["--regid=65534", "--clear-groups",
                                                    "/usr/bin/python3", script, secret, 6])
        try:
            wait_ok(record(pid, tmp_path / "rec.pyprof", secs=1.5), "record")
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(d)
    raw = gzip.open(tmp_path / "rec.pyprof").read()
    assert SECRET_NAME.encode() not in raw
    page = tmp_path / "p.heatmap.html"
    report("-i", tmp_path / "rec.pyprof", "-o", page)
    html = page.read_text()
    assert SECRET_NAME not in html
    section = html[html.index('data-path="%s"' % secret):]
    assert "Source not kept" in section.split("</section>")[0]
    assert "def main():" in html


# ---- diff ----

def collapsed_share(path, fn):
    """Share of all samples with @fn on the stack, from `report --format collapsed`."""
    text = report("-i", path, "--format", "collapsed")
    total = hit = 0
    for line in text.splitlines():
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        if any(f.startswith("py::%s:" % fn) for f in stack.split(";")):
            hit += int(n)
    return hit, total


@pytest.mark.slow
def test_diff(node_env, tmp_path):  # noqa: F811
    # Two interpreters of the host (their comms differ: python3.X), one file.
    host = [i for i in pyenvs.supported() if not i.root]
    script = os.path.join(TARGETS, "diff_split.py")
    recs = []
    for interp, share in ((host[0], 0.1), (host[-1], 0.9)):
        proc, pid = start(interp, script, [share, 6])
        try:
            path = tmp_path / ("rec-%s.pyprof" % share)
            wait_ok(record(pid, path, secs=3), "record")
        finally:
            proc.kill()
            proc.wait()
        recs.append(path)
    base, new = recs
    shares = {}
    for fn in ("alpha", "beta"):
        (bh, bt), (nh, nt) = collapsed_share(base, fn), collapsed_share(new, fn)
        shares[fn] = (100 * bh / bt, 100 * nh / nt)
        # The workload moved ~2/3 of the time: far beyond the counts' noise.
        pb, pn = bh / bt, nh / nt
        sigma = math.sqrt(pb * (1 - pb) / bt + pn * (1 - pn) / nt)
        assert abs(pn - pb) > Z * sigma, (fn, bh, bt, nh, nt)
    assert shares["alpha"][1] > shares["alpha"][0] and shares["beta"][1] < shares["beta"][0]

    page = tmp_path / "diff.html"
    table = report("--diff", base, new, "-o", page)
    # The table: alpha and beta first, with the signs and shares of the recordings.
    rows = [l.split() for l in table.splitlines()[2:]]
    assert {r[-2] for r in rows[:2]} == {"alpha", "beta"}, table
    for r in rows[:2]:
        b, n = shares[r[-2]]
        assert float(r[0]) == pytest.approx(n - b, abs=0.011), (r, b, n)
        assert float(r[2].rstrip("%")) == pytest.approx(b, abs=0.006)
        assert float(r[3].rstrip("%")) == pytest.approx(n, abs=0.006)
        assert r[0].startswith("+" if r[-2] == "alpha" else "-")
    assert report("--diff", base, new, "--format", "top") == table

    spec = {"wait": "g.f", "pixelAt": "right", "select": {"frames": "g.f"},
            "hover": {"selector": "g.f", "text": "alpha (", "tip": "#fg-tip"}}
    res = probe(node_env, str(page), tmp_path, spec)
    assert "differential" in res["title"]
    frames = {f["title"].split(" ", 1)[0]: f for f in res["sel"]["frames"]
              if f["title"].startswith(("alpha ", "beta "))}
    a, b = rgb(frames["alpha"]["fill"]), rgb(frames["beta"]["fill"])
    assert a[0] == 255 and a[1] == a[2] < 200, a        # red: grew
    assert b[2] == 255 and b[0] == b[1] < 200, b        # blue: shrank
    assert frames["alpha"]["pixel"][:3] == a and frames["beta"]["pixel"][:3] == b
    m = re.search(r"base ([\d.]+)%, new ([\d.]+)%, change \+([\d.]+) points", res["tip"])
    assert m, res["tip"]
    ba, na = shares["alpha"]
    assert float(m.group(1)) == pytest.approx(ba, abs=0.006)
    assert float(m.group(2)) == pytest.approx(na, abs=0.006)
    assert float(m.group(3)) == pytest.approx(na - ba, abs=0.011)
