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
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSUMERS = os.path.join(ROOT, "tests", "consumers")
NODE_CACHE = os.environ.get("PYPROF_NODE_CACHE", "/var/cache/pyprof-bpf/node")
PERIOD = 10101010  # ns: 99 Hz
STATUS = {"complete": 0, "truncated": 1, "no_pystate": 2, "read_fault": 3}


def run(cmd, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 300)
    p = subprocess.run(cmd, **kw)
    if p.returncode != 0:
        out = p.stdout.decode(errors="replace") if isinstance(p.stdout, bytes) else p.stdout
        err = p.stderr.decode(errors="replace") if isinstance(p.stderr, bytes) else p.stderr
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout: {out}\nstderr: {err}")
    return p


# ---- the naming rule of user/output/frame_name.c, written again from its comment ----

UNICODE_SPACES = set(range(0x80, 0xA1)) | {0x1680, 0x2028, 0x2029, 0x202F, 0x205F,
                                          0x3000, 0xFEFF} | set(range(0x2000, 0x200B))


def escape(s, colon):
    out, prev = [], ""
    for ch in s:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:  # a byte that was not valid UTF-8 (surrogateescape)
            out.append("%%%02X" % (cp - 0xDC00))
        elif cp < 0x80:
            if (cp <= 0x20 or cp == 0x7F or ch in "%();\"'" or (ch == ":" and colon)
                    or (ch == ">" and prev == "-")):
                out.append("%%%02X" % cp)
            else:
                out.append(ch)
        elif cp in UNICODE_SPACES:
            out.append("".join("%%%02X" % b for b in ch.encode()))
        else:
            out.append(ch)
        prev = ch
    return "".join(out)


# Collapsed stacks encode only what their readers split on (';', the line's
# end) and '%' itself; spaces, parentheses and quotes are kept.
COLLAPSED_ENCODED = set(range(0x20)) | set(range(0x7F, 0xA0)) | {0x2028, 0x2029, 0xFEFF} | \
    {ord("%"), ord(";")}


def escape_collapsed(s, colon):
    out = []
    for ch in s:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            out.append("%%%02X" % (cp - 0xDC00))
        elif cp in COLLAPSED_ENCODED or (ch == ":" and colon):
            out.append("".join("%%%02X" % b for b in ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def frame_text(name, file=None, line=None, synthetic=False, collapsed=False):
    """The perf-script symbol (or, with @collapsed, the collapsed frame) of a frame."""
    esc = escape_collapsed if collapsed else escape
    if synthetic:
        return esc(name, colon=False)
    return "py::%s:%s:%d" % (esc(name, True), esc(file or "", False), max(line or 0, 0))


def recollapse(data):
    """Collapsed text with perf-script's names (stackcollapse-perf.pl of our
    perf-script) as our collapsed output names the same frames: the %XX that
    only perf-script needs decoded."""
    unq = lambda s: urllib.parse.unquote(s, errors="surrogateescape")  # noqa: E731
    out = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        for i, t in enumerate(parts[1:], 1):
            if t.startswith("py::"):
                fn, file, ln = decode_text(t)
                parts[i] = frame_text(fn, file, ln, collapsed=True)
            else:
                parts[i] = escape_collapsed(unq(t), False)
        out.append(";".join(parts) + " " + count + "\n")
    return "".join(out).encode("utf-8", "surrogateescape")


def decode_text(text):
    """(function, file, line) back from a Python frame's text."""
    assert text.startswith("py::"), text
    body = text[4:]
    fn, rest = body.split(":", 1)
    file, line = rest.rsplit(":", 1)
    unq = lambda s: urllib.parse.unquote(s, errors="surrogateescape")
    return unq(fn), unq(file), int(line)


# ---- the synthetic workload ----

DEEP = [("level_%d" % i, "/app/levels.py", 100 + i, 100 + i) for i in range(26)]
BASE = [("<module>", "/app/main.py", 77, 1), ("main", "/app/main.py", 70, 60)] + DEEP + [
    ("Worker.run", "/app/work.py", 30, 28)]                                # 29 frames
HOT = ("hot", "/app/work.py", 12, 10)
WARM = ("warm", "/app/work.py", 20, 18)
COLD = [("cold", "/app/work.py", 25, 24), ("cold", "/app/work.py", 26, 24)]
WEIRD = [  # innermost first
    ("f(x);y \"q\" 'a'->b:c%", "/tmp/my dir/\u00e9 (1).py", 5, 3),
    ("<lambda>", "<frozen importlib._bootstrap>", 241, 233),
    ("\u51fd\u6570.\u03bb\u00a0tab\tnl\n", "/srv/\u2028x\udcff.py", 9, 9),
    ("<module>", "/tmp/my dir/\u00e9 (1).py", 1, 1),
]
THREADS = [(1240, "MainThread"), (1241, "Thread-1 (worker)"), (1242, "\u00e9l\u00e8ve;2")]


def workload():
    """Samples as dicts, in time order. 60/30/10 split of the 'work' samples."""
    samples, ts = [], 5_000_000_000_000
    plan = []
    for t, (tid, tname) in enumerate(THREADS):
        n = 100 * (t + 1)                   # 100, 200, 300 work samples
        for i in range(n):
            k = i % 10
            leaf = [HOT] if k < 6 else [WARM] if k < 9 else [COLD[i % 2]]
            plan.append((tid, tname, "complete", list(reversed(BASE + leaf))))
    # Samples that are not whole Python stacks, and the weird names.
    extra = [(1241, "Thread-1 (worker)", "complete", WEIRD)] * 7 + [
        (1242, "\u00e9l\u00e8ve;2", "no_pystate", [])] * 5 + [
        (1240, "MainThread", "truncated", list(reversed(DEEP[10:] + [HOT])))] * 4 + [
        (1241, "Thread-1 (worker)", "read_fault", [HOT, ("Worker.run", "/app/work.py", 31, 28)])] * 3 + [
        (1240, "MainThread", "complete", [])] * 2
    # Interleave deterministically: every 7th slot takes an extra sample.
    out, e = [], 0
    for i, p in enumerate(plan):
        if i % 7 == 3 and e < len(extra):
            out.append(extra[e])
            e += 1
        out.append(p)
    out.extend(extra[e:])
    for tid, tname, status, frames in out:
        ts += 3_333_333 + (tid % 7) * 1000  # distinct, increasing times
        samples.append(dict(comm="python3", pid=1234, tid=tid, thread=tname, cpu=tid % 2,
                            ts=ts, period=PERIOD, status=status, frames=frames))
    return samples


def field(s):
    b = s.encode("utf-8", "surrogateescape")
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif c == 9:
            out.append("\\t")
        elif c == 10:
            out.append("\\n")
        elif c >= 0x80:
            out.append("\\x%02x" % c)
        else:
            out.append(chr(c))
    return "".join(out)


def outdrv_input(samples):
    lines = []
    for s in samples:
        lines.append("\t".join(["S", field(s["comm"]), str(s["pid"]), str(s["tid"]),
                                field(s["thread"] or ""), str(s["cpu"]), str(s["ts"]),
                                str(s["period"]), str(STATUS[s["status"]])]))
        for fn, file, line, first in s["frames"]:
            lines.append("\t".join(["F", field(fn), field(file), str(line), str(first)]))
        lines.append("E")
    return "\n".join(lines) + "\n"


STATUS_FRAME = {"truncated": "[truncated]", "no_pystate": "[no-python-state]",
                "read_fault": "[read-fault]"}


def lossy(s):
    """A string as JSON and protobuf carry it: bytes that are not UTF-8 become U+FFFD."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def relossy(text):
    """A collapsed frame text as it reads once its names went through JSON or
    protobuf, named as perf-script names it."""
    if not text.startswith("py::"):
        return escape(urllib.parse.unquote(text, errors="surrogateescape"), False)
    fn, file, line = decode_text(text)
    return frame_text(lossy(fn), lossy(file), line)


def model_stack(s, opts=(), json_=False, collapsed=False):
    """The stack (root first) of frame texts every format must show for @s.

    With @json_, as the JSON and protobuf formats carry names (see lossy());
    with @collapsed, as collapsed stacks encode them.
    """
    ft = lambda *a, **k: frame_text(*a, collapsed=collapsed, **k)  # noqa: E731
    if json_:
        s = dict(s, frames=[(lossy(fn), lossy(file), line, first)
                            for fn, file, line, first in s["frames"]])
    st = []
    if "comm_root" in opts:
        st.append(ft("[%s:%d]" % (s["comm"], s["pid"]), synthetic=True))
    if "threads" in opts:
        st.append(ft("[%s:%d]" % (s["thread"], s["tid"]), synthetic=True))
    if s["status"] != "complete":
        st.append(STATUS_FRAME[s["status"]])
    elif not s["frames"]:
        st.append("[no-python-frames]")
    for fn, file, line, first in reversed(s["frames"]):
        st.append(ft(fn, file, first if "no_lines" in opts else line))
    return tuple(st)


def model_collapsed(samples, opts=()):
    agg = collections.Counter()
    for s in samples:
        agg[(s["comm"],) + model_stack(s, opts, collapsed=True)] += s["period"]
    lines = sorted((";".join(k).encode("utf-8", "surrogateescape"), v) for k, v in agg.items())
    return b"".join(k + b" %d\n" % v for k, v in lines)


# ---- FlameGraph's stackcollapse-perf.pl, its rules in Python ----

def stackcollapse_perf(data, include_pid=False, include_tid=False, kernel=False, exempt=()):
    """stackcollapse-perf.pl with default options, on bytes, as Perl sees them.
    kernel=True: its --kernel (a frame whose dso starts with '[' or ends in
    vmlinux, and does not contain "unknown", gets "_[k]"); dsos in exempt are
    left alone (pyprof-bpf's markers: its collapsed output gives them none)."""
    collapsed = collections.OrderedDict()
    stack, pname, m_period, event_filter = [], None, 1, ""
    unrecognized = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in lines:
        if line.startswith(b"#"):
            continue
        if line == b"":
            if not pname:
                continue
            stack.insert(0, pname)
            if stack:
                key = b";".join(stack)
                collapsed[key] = collapsed.get(key, 0) + m_period
            stack, pname = [], None
            continue
        m = re.match(rb"^(\S.+?)\s+(\d+)\/*(\d+)*\s+", line)
        if m:
            comm, pid, tid = m.group(1), m.group(2), m.group(3)
            if not tid:
                tid, pid = pid, b"?"
            period = None
            m2 = re.search(rb":\s*(\d+)*\s+(\S+):\s*$", line)
            if m2:
                period, event = m2.group(1), m2.group(2)
                if event_filter == "":
                    event_filter = event
                elif event != event_filter:
                    continue
            if not period or period == b"0":
                period = b"1"
            m_period = int(period)
            if include_tid:
                pname = comm + b"-" + pid + b"/" + tid
            elif include_pid:
                pname = comm + b"-" + pid
            else:
                pname = comm
            pname = pname.replace(b" ", b"_")
            continue
        m = re.match(rb"^\s*(\w+)\s*(.+) \((.*)\)", line)
        if m:
            if not pname:
                continue
            rawfunc, mod = m.group(2), m.group(3)
            rawfunc = re.sub(rb"\+0x[\da-f]+$", b"", rawfunc)
            if rawfunc.startswith(b"("):
                continue
            inline = []
            for func in rawfunc.split(b"->"):
                if func == b"[unknown]":
                    func = b"[" + (re.sub(rb".*/", b"", mod) if mod != b"[unknown]"
                                   else b"unknown") + b"]"
                func = func.replace(b";", b":")
                if not re.search(rb"\.\(.*\)\.", func):
                    func = re.sub(rb"\((?!anonymous namespace\)).*", b"", func)
                func = func.replace(b'"', b"").replace(b"'", b"")
                if pname.startswith(b"java") and b"/" in func:
                    func = re.sub(rb"^L", b"", func)
                if inline and b"_[i]" not in func:
                    func += b"_[i]"
                elif (kernel and not inline and re.search(rb"(^\[|vmlinux$)", mod)
                      and b"unknown" not in mod and mod not in exempt):
                    func += b"_[k]"
                inline.append(func)
            stack[0:0] = inline
            continue
        unrecognized.append(line)
    assert not unrecognized, unrecognized[:5]
    return b"".join(k + b" %d\n" % v for k, v in sorted(collapsed.items()))


# ---- the Firefox Profiler's perf-script rules (import/linux-perf) ----

def firefox_perf(text):
    assert re.match(r"^\S.*?\s+(?:\d+\/)?\d+\s+(?:\[\d+\]\s+)?[\d.]+:", text.split("\n", 1)[0])
    samples, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line == "" or line.startswith("#"):
            continue
        m = re.match(r"^(.*)\s+([\d.]+):", line)
        assert m, line
        m2 = re.match(r"^(.*)\s+(?:(\d+)\/)?(\d+)\b", m.group(1))
        assert m2, line
        stack = []
        while i < len(lines):
            fl = lines[i]
            i += 1
            if fl.strip() == "":
                break
            fm = re.match(r"^\s*(\w+)\s*(.+) \(([^)]*)\)", fl)
            assert fm, fl
            raw = re.sub(r"\+0x[\da-f]+$", "", fm.group(2))
            if raw.startswith("("):
                continue
            stack.append((raw, fm.group(3)))
        samples.append(dict(thread=m2.group(1).strip(), pid=int(m2.group(2) or 0),
                            tid=int(m2.group(3)), time=float(m.group(2)),
                            stack=list(reversed(stack))))
    return samples


# ---- fixtures ----

@pytest.fixture(scope="session")
def node_env():
    if not shutil.which("node"):
        pytest.fail("node is missing: run scripts/install-deps.sh")
    run([os.path.join(ROOT, "scripts", "install-consumers.sh")], timeout=600)
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_CACHE, "node_modules"))
    if not os.access(env.get("CHROMIUM", "/usr/bin/chromium"), os.X_OK):
        pytest.fail("chromium is missing: run scripts/install-deps.sh")
    return env


@pytest.fixture(scope="session")
def outdrv(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("gcc")
    if not cc:
        pytest.fail("gcc is missing: run scripts/install-deps.sh")
    exe = str(tmp_path_factory.mktemp("outdrv") / "outdrv")
    srcs = [os.path.join(ROOT, "tests", "tools", "outdrv.c")] + sorted(
        os.path.join(ROOT, "user", "output", f)
        for f in os.listdir(os.path.join(ROOT, "user", "output"))
        if re.match(r"(output.*|json_writer|frame_name|flamegraph_js)\.c$", f)) + sorted(
        os.path.join(ROOT, "user", "util", f)
        for f in os.listdir(os.path.join(ROOT, "user", "util")) if f.endswith(".c"))
    run([cc, "-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror",
         "-Wno-missing-field-initializers", "-D_GNU_SOURCE", "-Iuser", "-Ibpf",
         "-o", exe] + srcs + ["-lz"], cwd=ROOT)
    return exe


@pytest.fixture(scope="session")
def samples():
    return workload()


@pytest.fixture(scope="session")
def produce(outdrv, samples, tmp_path_factory):
    """produce(name, fmt=None, opts=()) -> path of the workload written as @name."""
    d = tmp_path_factory.mktemp("formats")
    data = outdrv_input(samples).encode()
    flags = {"threads": "-t", "no_lines": "-n", "comm_root": "-c"}

    def make(name, fmt=None, opts=()):
        path = str(d / name)
        cmd = [outdrv, "-o", path] + (["-f", fmt] if fmt else []) + [flags[o] for o in opts]
        run(cmd, input=data, stdin=None)
        return path
    return make


def node(env, script, *args, timeout=180):
    p = run(["node", os.path.join(CONSUMERS, script)] + [str(a) for a in args], env=env,
            timeout=timeout)
    return json.loads(p.stdout)


def read(path):
    with open(path, "rb") as f:
        return f.read()


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

def evented_stacks(profile):
    """{frame indices of a stack (root first): weight} from an exported evented profile."""
    agg, stack, last = collections.Counter(), [], profile["startValue"]
    for ev in profile["events"]:
        if stack and ev["at"] > last:
            agg[tuple(stack)] += ev["at"] - last
        last = ev["at"]
        if ev["type"] == "O":
            stack.append(ev["frame"])
        else:
            assert stack and stack[-1] == ev["frame"], "unbalanced events"
            stack.pop()
    assert not stack
    return agg


def exported_texts(exp, text_of):
    """{tid or None: {stack of frame texts: weight}} of a speedscope export."""
    out = collections.defaultdict(collections.Counter)
    frames = exp["shared"]["frames"]
    for prof in exp["profiles"]:
        m = re.search(r"tid:? (\d+)", prof["name"])
        for k, v in evented_stacks(prof).items():
            out[int(m.group(1)) if m else None][tuple(text_of(frames[i]) for i in k)] += v
    return out


def speedscope_import(env, path, name, tmp_path):
    res = node(env, "speedscope_import.cjs", path, name, tmp_path)
    assert res["errors"] == [] and res["blocked"] == [], res
    assert os.path.getsize(res["screenshot"]) > 5000
    with open(res["exported"], encoding="utf-8") as f:
        return json.load(f)


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


def ss_text(frame):
    if "file" not in frame and frame["name"].startswith("["):
        return frame_text(frame["name"], synthetic=True)
    return frame_text(frame["name"], frame.get("file", ""), frame.get("line", 0))


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

def pprof_stacks(dec):
    counts, cpu = collections.Counter(), collections.Counter()
    for s in dec["samples"]:
        st = []
        for loc in reversed(s["stack"]):
            (ln,) = loc
            st.append(frame_text(ln["name"], synthetic=True) if ln["file"] == ""
                      and ln["name"].startswith("[") else
                      frame_text(ln["name"], ln["file"], ln["line"]))
        counts[tuple(st)] += s["value"][0]
        cpu[tuple(st)] += s["value"][1]
    return counts, cpu


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


def test_flamegraph_html(node_env, produce, samples, tmp_path):
    path = produce("p.html")
    html = read(path).decode("utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained
    res = check_flamegraph(node_env, path, samples, tmp_path, True)
    assert res["info"] == "%d samples, %.3f s CPU" % (len(samples), total_weight(samples) / 1e9)


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
