"""What the writers and their consumers share: the synthetic workload, the documented
naming and escaping rules written again, stackcollapse-perf.pl's and the Firefox
Profiler's rules, the npm consumers under tests/consumers/."""
import collections
import json
import os
import re
import subprocess
import urllib.parse



ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def node(env, script, *args, timeout=180):
    p = run(["node", os.path.join(CONSUMERS, script)] + [str(a) for a in args], env=env,
            timeout=timeout)
    return json.loads(p.stdout)


def read(path):
    with open(path, "rb") as f:
        return f.read()


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


def ss_text(frame):
    if "file" not in frame and frame["name"].startswith("["):
        return frame_text(frame["name"], synthetic=True)
    return frame_text(frame["name"], frame.get("file", ""), frame.get("line", 0))


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
