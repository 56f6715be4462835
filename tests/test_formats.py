"""Every output format read by a real consumer, and the same profile in each.

A synthetic workload with a known CPU split (under a 30-deep stack: `hot` 60%,
`warm` 30%, `cold` 10%, in three threads, plus names full of characters that
break parsers, and samples that are not whole stacks) goes through the
writers (tests/tools/outdrv.c, built here against user/output/), and:

- perf-script, collapsed with stackcollapse-perf.pl's rules (reimplemented
  below from FlameGraph's script, NOTES section 5), equals our collapsed output
  byte for byte, and every frame decodes back to its function, file and line;
  the Firefox Profiler's rules read the same threads, times and frames;
- our collapsed output equals what the documented naming rule predicts;
- speedscope (npm `speedscope`, its real app in headless Chromium) imports the
  perf-script output (its linux-perf importer), our speedscope JSON (which
  also validates against the schema the package ships) and our pprof; what it
  exports again has the same stacks and weights;
- pprof, decoded by npm `pprof-format`, has the same stacks and totals;
- the HTML and SVG flame graphs render in headless Chromium: the hot frame is
  the widest, drawn in its colour, with a tooltip; a search paints exactly the
  matching frames magenta and reports their share; a click zooms;
- the top table ranks hot, warm, cold with the right shares.

Tools are installed, never skipped: scripts/install-consumers.sh puts the npm
packages in /var/cache/pyprof-bpf/node; gcc and chromium must be there
(scripts/install-deps.sh), or the tests fail saying what is missing.

To run the same checks on a real recording, make `produce()` call
`pyprof-bpf report -i REC --format FMT -o OUT` instead of outdrv, and derive
the expected model from the collapsed output.
"""
import collections
import json
import re
import urllib.parse

import pytest

from lib.formats import (
    COLD, HOT, PERIOD, THREADS, WARM, decode_text, escape, exported_texts, firefox_perf,
    frame_text, lossy, model_collapsed, model_stack, node, pprof_stacks, read, recollapse,
    speedscope_import, ss_text, stackcollapse_perf)


# ---- the naming rule of user/output/frame_name.c, written again from its comment ----


# ---- the synthetic workload ----


def relossy(text):
    """A collapsed frame text as it reads once its names went through JSON or
    protobuf, named as perf-script names it."""
    if not text.startswith("py::"):
        return escape(urllib.parse.unquote(text, errors="surrogateescape"), False)
    fn, file, line = decode_text(text)
    return frame_text(lossy(fn), lossy(file), line)


# ---- FlameGraph's stackcollapse-perf.pl, its rules in Python ----


# ---- the Firefox Profiler's perf-script rules (import/linux-perf) ----


# ---- fixtures ----


def total_weight(samples):
    return sum(s["period"] for s in samples)


# ---- perf-script and collapsed ----

OPTION_SETS = [(), ("threads", "comm_root"), ("no_lines",)]


@pytest.mark.parametrize("opts", OPTION_SETS, ids=lambda o: "+".join(o) or "default")
def test_collapsed_is_stackcollapse_of_perf_script(produce, samples, opts):
    perf = read(produce("p.txt", None, opts))
    ours = read(produce("p.folded", None, opts))
    assert recollapse(stackcollapse_perf(perf)) == ours
    assert ours == model_collapsed(samples, opts)
    # Spaces, parentheses and quotes as written ("Thread-1 (worker)").
    if "threads" in opts:
        assert b";[Thread-1 (worker):1241];" in ours, ours[:500]
    # Every sample is there, an empty line after each, the last one too.
    assert perf.count(b"\n\n") == len(samples) and perf.endswith(b"\n\n")
    assert sum(int(l.rsplit(b" ", 1)[1]) for l in ours.splitlines()) == total_weight(samples)


@pytest.mark.slow
def test_collapsed_names_as_written(node_env, produce, samples, tmp_path):
    """Spaces, parentheses and quotes stay as written in collapsed stacks:
    speedscope's collapsed importer shows each frame as our line has it
    (names, stacks and weights), and the flame graph's labels show no %XX."""
    path = produce("t.folded", None, ("threads",))
    ours = collections.Counter()
    for line in read(path).decode("utf-8", "surrogateescape").splitlines():
        stack, _, w = line.rpartition(" ")
        ours[tuple(stack.split(";"))] += int(w)
    assert any("[Thread-1 (worker):1241]" in k for k in ours), list(ours)[:3]
    exp = speedscope_import(node_env, path, "t.collapsed.txt", tmp_path)
    got = exported_texts(exp, lambda f: f["name"])
    assert set(got) == {None}, list(got)
    # speedscope's importer reads the names as UTF-8 (a byte that is not
    # becomes U+FFFD): compare as it reads them.
    want = collections.Counter()
    for k, v in ours.items():
        want[tuple(lossy(t) for t in k)] += v
    assert got[None] == want
    html = produce("t.html", None, ("threads",))
    res = node(node_env, "flamegraph_check.cjs", html, "hot", "^warm ", tmp_path)
    roots = [f for f in res["frames"] if f["name"].startswith("[Thread-1 (worker)")]
    assert roots and all(f["text"].startswith("[Thread-1 (w") for f in roots), roots[:2]
    assert not any(re.search(r"%[0-9A-F]{2}", f["text"]) for f in res["frames"]
                   if "%" not in f["name"]), [f["text"] for f in res["frames"]][:20]


def test_perf_names_survive_flamegraph(produce, samples):
    folded = stackcollapse_perf(read(produce("p.txt")))
    seen = set()
    for line in folded.decode("utf-8").splitlines():
        stack = line.rsplit(" ", 1)[0].split(";")
        for text in stack[1:]:
            if text.startswith("py::"):
                seen.add(decode_text(text))
    want = {(fn, file, line) for s in samples for fn, file, line, _ in s["frames"]}
    assert seen == want  # function, file AND line, odd characters included


def test_perf_script_header_and_firefox_rules(produce, samples):
    text = read(produce("p.txt")).decode("utf-8")
    first = text.split("\n", 1)[0]
    assert re.fullmatch(r"python3 +1234/\d+ +\[\d{3}\] +\d+\.\d{6}: +%d cpu-clock: " % PERIOD,
                        first), first
    ff = firefox_perf(text)
    assert len(ff) == len(samples)
    for got, s in zip(ff, samples):
        assert (got["thread"], got["pid"], got["tid"]) == ("python3", 1234, s["tid"])
        assert abs(got["time"] - s["ts"] / 1e9) < 1e-6
        assert tuple(raw for raw, _ in got["stack"]) == model_stack(s)
        for raw, dso in got["stack"]:
            assert not re.search(r"\s", dso)


# ---- speedscope ----


def midpoint_weights(samples):
    """What speedscope's perf importer weighs each sample with, per thread (seconds)."""
    by_tid = collections.defaultdict(list)
    for s in samples:
        by_tid[s["tid"]].append(s)
    out = {}
    for tid, ss in by_tid.items():
        # The times as perf-script prints them, parsed as JavaScript's parseFloat does.
        ts = [float("%d.%06d" % divmod(s["ts"] // 1000, 1000000)) for s in ss]
        agg = collections.Counter()
        for i, s in enumerate(ss):
            start = ts[0] if i == 0 else (ts[i - 1] + ts[i]) / 2
            end = ts[-1] if i == len(ss) - 1 else (ts[i] + ts[i + 1]) / 2
            agg[model_stack(s)] += end - start
        out[tid] = agg
    return out


@pytest.mark.slow
def test_speedscope_reads_perf_script(node_env, produce, samples, tmp_path):
    exp = speedscope_import(node_env, produce("p.txt"), "profile.linux-perf.txt", tmp_path)
    want = midpoint_weights(samples)
    assert sorted(p["name"] for p in exp["profiles"]) == sorted(
        "python3 pid: 1234 tid: %d" % tid for tid, _ in THREADS)
    got = exported_texts(exp, lambda f: f["name"])
    assert set(got) == set(want)
    for tid, stacks in got.items():
        assert set(stacks) == {k for k, v in want[tid].items() if v > 0}
        for k, v in stacks.items():
            assert v == pytest.approx(want[tid][k], rel=1e-6, abs=1e-9), k
    # The dso carried the file: speedscope shows it as the frame's file.
    for f in exp["shared"]["frames"]:
        if f["name"].startswith("py::"):
            assert f["file"] == escape(decode_text(f["name"])[1], False)
        else:
            assert f["file"] == "[pyprof-bpf]"


@pytest.mark.slow
def test_speedscope_file_format(node_env, produce, samples, tmp_path):
    path = produce("p.speedscope.json")
    v = node(node_env, "validate_speedscope.cjs", path)
    assert v["valid"], v["errors"]
    with open(path, encoding="utf-8") as f:
        ours = json.load(f)
    # Our own file: one sampled profile per thread, weights = periods.
    want = collections.defaultdict(collections.Counter)
    for s in samples:
        want[s["tid"]][model_stack(s, json_=True)] += s["period"]
    assert len(ours["profiles"]) == len(THREADS)
    for prof in ours["profiles"]:
        tid = int(re.search(r" tid (\d+) ", prof["name"]).group(1))
        assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds"
        got = collections.Counter()
        for st, w in zip(prof["samples"], prof["weights"]):
            got[tuple(ss_text(ours["shared"]["frames"][i]) for i in st)] += w
        assert got == want[tid]
        assert prof["endValue"] == sum(want[tid].values())
    # Through the real importer and back out.
    exp = speedscope_import(node_env, path, "p.speedscope.json", tmp_path)
    assert exported_texts(exp, ss_text) == want


# ---- pprof ----


@pytest.mark.slow
def test_pprof_decoded_by_pprof_format(node_env, produce, samples, tmp_path):
    path = produce("p.pb.gz")
    dec = node(node_env, "pprof_decode.cjs", path)
    assert dec["gzipped"] and dec["stringTable0"] == ""
    assert dec["sampleType"] == [["samples", "count"], ["cpu", "nanoseconds"]]
    assert dec["periodType"] == ["cpu", "nanoseconds"] and dec["period"] == PERIOD
    assert dec["defaultSampleType"] == "cpu"
    assert dec["durationNanos"] == samples[-1]["ts"] - samples[0]["ts"]
    counts, cpu = pprof_stacks(dec)
    want_n, want_w = collections.Counter(), collections.Counter()
    for s in samples:
        want_n[model_stack(s, json_=True)] += 1
        want_w[model_stack(s, json_=True)] += s["period"]
    assert counts == want_n and cpu == want_w
    # The same stacks and totals as collapsed (without its comm root), names as
    # protobuf strings carry them.
    folded = collections.Counter()
    for line in read(produce("p.folded")).decode("utf-8", "surrogateescape").splitlines():
        stack, w = line.rsplit(" ", 1)
        folded[tuple(relossy(t) for t in stack.split(";")[1:])] += int(w)
    assert folded == cpu
    assert sum(counts.values()) == len(samples)
    # Function start lines and thread labels.
    starts = {(lossy(fn), lossy(file)): first
              for s in samples for fn, file, _, first in s["frames"]}
    for s in dec["samples"]:
        for (ln,) in s["stack"]:
            if ln["file"]:
                assert ln["startLine"] == starts[(ln["name"], ln["file"])]
        assert s["labels"]["pid"] == 1234
        assert (s["labels"]["thread_id"], s["labels"]["thread_name"]) in THREADS
    # speedscope reads it too (its pprof importer keys frames by function).
    exp = speedscope_import(node_env, path, "p.pb.gz", tmp_path)
    got = sum(exported_texts(exp, ss_text).values(), collections.Counter())
    assert sum(got.values()) == sum(want_w.values())

    def by_fn(c):
        out = collections.Counter()
        for k, v in c.items():
            out[tuple(t.rsplit(":", 1)[0] for t in k)] += v
        return out
    assert by_fn(got) == by_fn(want_w)


# ---- flame graph ----

def check_flamegraph(node_env, path, samples, tmp_path, html):
    res = node(node_env, "flamegraph_check.cjs", path, "hot", "^warm ", tmp_path)
    assert res["errors"] == [] and res["blocked"] == [], res
    frames = [f for f in res["frames"] if not f["dim"]]
    total_w = res["svgWidth"] if html else 1200
    work = sum(s["period"] for s in samples if s["frames"] and s["frames"][0] in
               (HOT, WARM) + tuple(COLD) and s["status"] == "complete")
    hot_w = sum(s["period"] for s in samples if s["frames"][:1] == [HOT]
                and s["status"] == "complete")
    # The hot frame is the widest leaf, drawn in its colour, proportional to its CPU.
    leaves = [f for f in frames if f["name"] in ("hot", "warm", "cold")]
    assert max(leaves, key=lambda f: f["width"])["name"] == "hot"
    assert res["hot"]["width"] == pytest.approx(total_w * hot_w / total_weight(samples), abs=1.5)
    assert 0.55 < hot_w / work < 0.65
    fill = [int(c) for c in re.findall(r"\d+", res["hot"]["fill"])]
    assert res["hotPixel"][:3] == fill and fill != [255, 255, 255]
    assert res["backgroundPixel"][:3] == [255, 255, 255]
    assert "hot" in res["tooltip"] and "/app/work.py:12" in res["tooltip"]
    assert re.search(r"\d+\.\d\d% of all", res["tooltip"])
    # Search paints exactly the warm frames magenta, and reports their share.
    for f, px in zip(res["searched"], res["searchPixels"]):
        assert f["match"] == (f["name"] == "warm"), f
        assert (px[:3] == [230, 0, 230]) == (f["name"] == "warm"), (f, px)
    warm_w = sum(s["period"] for s in samples if s["frames"][:1] == [WARM])
    assert res["matchedText"] == "Matched: %.2f%%" % (100 * warm_w / total_weight(samples))
    # A click zooms the frame to the full width; reset brings it back.
    assert res["zoomed"]["width"] == pytest.approx(total_w, abs=1.5)
    assert res["reset"]["width"] == pytest.approx(res["hot"]["width"], abs=0.01)
    assert res["title"].startswith("python3 (pid 1234)")
    return res


@pytest.mark.slow
def test_flamegraph_html(node_env, produce, samples, tmp_path):
    path = produce("p.html")
    html = read(path).decode("utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained
    res = check_flamegraph(node_env, path, samples, tmp_path, True)
    assert res["info"] == "%d samples, %.3f s CPU" % (len(samples), total_weight(samples) / 1e9)


@pytest.mark.slow
def test_flamegraph_svg(node_env, produce, samples, tmp_path):
    check_flamegraph(node_env, produce("p.svg"), samples, tmp_path, False)


def test_flamegraph_same_profile_as_collapsed(produce):
    """The tree the flame graph page draws folds back to our collapsed output."""
    path = produce("p.html")
    data = json.loads(re.search(r'id="fg-data">(.*?)</script>', read(path).decode("utf-8"),
                                re.S).group(1))
    fr, v = data["frames"], data["nodes"]
    n = len(v) // 4
    parent = [v[4 * i + 1] for i in range(n)]
    selfw = [v[4 * i + 2] for i in range(n)]
    for i in range(1, n):
        selfw[parent[i]] -= v[4 * i + 2]

    def text(k):
        name, file, line, kind = fr[v[4 * k]]
        return frame_text(name, file, line) if kind == 0 else frame_text(name, synthetic=True)

    folded = collections.Counter()
    for k in range(n):
        if selfw[k] and parent[k] != -1:
            names, j = [], k
            while parent[j] != -1:
                names.append(text(j))
                j = parent[j]
            folded[";".join(reversed(names))] += selfw[k]
    want = collections.Counter()
    for line in read(produce("p.folded")).decode("utf-8", "surrogateescape").splitlines():
        stack, w = line.rsplit(" ", 1)
        want[";".join(relossy(t) for t in stack.split(";"))] += int(w)
    assert folded == want  # the JSON data carries names as UTF-8: see lossy()
    assert parent.count(-1) == 1 and fr[v[0]][0] == "all"
    assert all(x >= 0 for x in selfw)


# ---- top ----

def test_top(produce, samples):
    out = read(produce("top.txt", "top")).decode("utf-8")
    lines = out.splitlines()
    assert lines[0].startswith("%d samples in 3 threads" % len(samples))
    rows = {}
    for l in lines[2:]:
        m = re.match(r"\s*(\d+)\s+([\d.]+)%\s+(\d+)\s+([\d.]+)%\s+(.*)$", l)
        if m:
            rows[m.group(5)] = (int(m.group(1)), float(m.group(2)), int(m.group(3)))
    n = len(samples)
    own = lambda leaf: sum(1 for s in samples if s["frames"][:1] == [leaf]
                           and s["status"] == "complete")
    assert list(rows)[:3] == ["hot (/app/work.py:10)", "warm (/app/work.py:18)",
                              "cold (/app/work.py:24)"]
    # Own counts the function, whatever line and status: truncated and faulted too.
    assert rows["hot (/app/work.py:10)"][0] == sum(1 for s in samples
                                                   if s["frames"][:1] == [HOT])
    assert rows["warm (/app/work.py:18)"][1] == pytest.approx(100 * own(WARM) / n, abs=0.006)
    assert rows["main (/app/main.py:60)"][2] == sum(1 for s in samples if any(
        f[0] == "main" for f in s["frames"]))
    # Own samples add up to every sample (status rows included) when all rows show.
    assert sum(r[0] for r in rows.values()) == n
