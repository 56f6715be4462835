"""Parsers of what `record` writes (perf-script, collapsed), the summary check, and
/proc numbers the statistical tests compare with."""
import collections
import os
import re
import urllib.parse

import pytest

from lib import formats as tf


CLK_TCK = os.sysconf("SC_CLK_TCK")


def markers(path, tag):
    """{name: [line numbers]} of the `# TAG:name` comments in path."""
    out = collections.defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            for m in re.finditer(r"# %s:(\S+)" % tag, line):
                out[m.group(1)].append(i)
    return out


def line_of(path, name):
    lines = markers(path, "LINE")[name]
    assert len(lines) == 1, f"{path}: marker LINE:{name} on lines {lines}"
    return lines[0]


HEADER = re.compile(r"^(?P<comm>\S.*?) +(?P<pid>\d+)/(?P<tid>\d+) +\[(?P<cpu>\d{3,})\] +"
                    r"(?P<secs>\d+)\.(?P<usecs>\d{6}): +(?P<period>\d+) (?P<event>\S+): $")


FRAME = re.compile(r"^\t(?P<addr>[ 0-9a-f]{16}) (?P<sym>\S+) \((?P<dso>[^\s()]+)\)$")


SYNTHETIC = {"[truncated]", "[read-fault]", "[no-python-state]", "[no-python-frames]", "[eval-entry]",
             "[thread-start/exit]", "[thread-exit]"}


def fnv1a(s):
    h = 1469598103934665603
    for b in s.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


class Frame:
    __slots__ = ("sym", "dso", "func", "file", "line")

    def __init__(self, sym, dso):
        self.sym, self.dso = sym, dso
        if sym.startswith("py::"):
            self.func, self.file, self.line = tf.decode_text(sym)
        else:
            self.func, self.file, self.line = sym, None, None

    @property
    def python(self):
        return self.file is not None

    def __repr__(self):
        return self.sym if not self.python else f"{self.func}@{self.line}"


# Frames on the leaf side of the Python frames that say what the thread did
# beyond its Python code (user/offcpu/leaf.h): the parser keeps them apart,
# in Sample.leaf, so that the stack is the Python frames (and markers).
LEAF_MARKS = {"<GC>", "[GIL released]", "[GIL wait]", "[runnable]", "[blocked]"}


def leaf_frame(fr):
    """A frame of the leaf side: <GC>, [GIL ...], [syscall] NAME, a kernel function."""
    return (fr.dso == "[kernel.kallsyms]" or
            (fr.dso == "[pyprof-bpf]" and (urllib.parse.unquote(fr.sym) in LEAF_MARKS or
                                            urllib.parse.unquote(fr.sym).startswith("[syscall] "))))


class Sample:
    __slots__ = ("comm", "pid", "tid", "cpu", "ts", "period", "event", "frames", "lineno",
                 "leaf")

    @property
    def root_first(self):
        return list(reversed(self.frames))

    @property
    def status(self):
        """'complete', or the synthetic frame naming what went wrong."""
        outer = self.frames[-1].sym if self.frames else None
        if outer in SYNTHETIC - {"[no-python-frames]"}:
            return outer
        return "complete"

    def describe(self, n=8):
        fr = self.root_first
        txt = " > ".join(map(repr, fr[:3] + (["..."] if len(fr) > n else []) + fr[3:][-(n - 3):]))
        return f"tid {self.tid} at {self.ts / 1e6:.6f} (line {self.lineno}): {txt}"


def only_event(data, event):
    """The samples of one event, as `stackcollapse-perf.pl --event-filter`
    would keep them (its default keeps the first event type it sees)."""
    blocks = data.split(b"\n\n")
    keep = [b for b in blocks[:-1] if re.search(rb" %s: $" % event.encode(), b.split(b"\n")[0])]
    return b"".join(b + b"\n\n" for b in keep)


def parse_perf(data):
    """Every sample of a perf-script text, strictly: a header, frames leaf
    first, an empty line after every sample (the last one too). Any other
    line is a failure, as is an address that is not the FNV-1a of its symbol."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        pytest.fail(f"perf-script output is not UTF-8: {e}")
    if text and not text.endswith("\n\n"):
        pytest.fail(f"perf-script output does not end with an empty line (a sample is "
                    f"cut or unterminated): ...{text[-300:]!r}")
    lines = text.split("\n")[:-1]
    samples, cur = [], None
    known = {}        # frame line -> Frame: stacks repeat the same few lines
    for i, line in enumerate(lines, 1):
        if cur is None:
            m = HEADER.match(line)
            if not m:
                pytest.fail(f"perf-script line {i}: expected a sample header, got {line!r}")
            cur = Sample()
            cur.comm, cur.event = m["comm"], m["event"]
            cur.pid, cur.tid, cur.cpu = int(m["pid"]), int(m["tid"]), int(m["cpu"])
            cur.ts = int(m["secs"]) * 1000000 + int(m["usecs"])
            cur.period, cur.frames, cur.lineno = int(m["period"]), [], i
        elif line == "":
            if not cur.frames:
                pytest.fail(f"perf-script line {cur.lineno}: a sample without frames")
            # Leaf-side frames come first (leaf first), all together.
            k = 0
            while k < len(cur.frames) and leaf_frame(cur.frames[k]):
                k += 1
            if any(leaf_frame(f) for f in cur.frames[k:]):
                pytest.fail(f"perf-script line {cur.lineno}: a leaf-side frame (<GC>, "
                            f"[syscall] ..., kernel) among the Python frames")
            cur.leaf, cur.frames = cur.frames[:k], cur.frames[k:] or cur.frames[:0]
            if not cur.frames:
                pytest.fail(f"perf-script line {cur.lineno}: only leaf-side frames")
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
            if fr.python and fr.dso != tf.escape(fr.file, False):
                pytest.fail(f"perf-script line {i}: dso {fr.dso!r} is not the file")
            if not fr.python and not (fr.sym.startswith("[") and fr.dso == "[pyprof-bpf]") \
                    and not leaf_frame(fr):
                pytest.fail(f"perf-script line {i}: a frame that is neither Python nor "
                            f"[synthetic]: {line!r}")
            cur.frames.append(fr)
            known[line] = fr
    assert cur is None
    return samples


def parse_folded(data):
    """{stack (tuple, root first, comm included): weight} of collapsed text."""
    out = collections.Counter()
    for i, line in enumerate(data.decode("utf-8").split("\n")[:-1], 1):
        m = re.fullmatch(r"(.+) (\d+)", line)
        assert m, f"collapsed line {i} is not `stack weight`: {line!r}"
        out[tuple(m.group(1).split(";"))] += int(m.group(2))
    assert data.endswith(b"\n") or not data
    return out


def proc_cpu(pid):
    """utime + stime of pid in seconds (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def machine_steal():
    """The machine's steal time so far (/proc/stat, all CPUs), in seconds."""
    with open("/proc/stat") as f:
        fields = f.readline().split()      # "cpu user nice system idle iowait irq softirq steal"
    return int(fields[8]) / CLK_TCK


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def check_summary(rec, samples, duration=None, lost=0):
    """The summary agrees with the output: sample count, truncated and error
    counts, rate = samples / seconds, seconds close to -d."""
    s = rec.summary()
    n = len(samples)
    trunc = sum(1 for x in samples if x.status == "[truncated]")
    errs = sum(1 for x in samples if x.status in ("[no-python-state]", "[read-fault]"))
    problems = []
    if s["samples"] != n:
        problems.append(f"says {s['samples']} samples, the output has {n}")
    if s["truncated"] != trunc:
        problems.append(f"says {s['truncated']} truncated, the output has {trunc}")
    if s["errors"] != errs:
        problems.append(f"says {s['errors']} errors, the output has {errs} samples "
                        f"marked [no-python-state]/[read-fault]")
    if lost is not None and s["lost"] != lost:
        problems.append(f"{s['lost']} lost, expected {lost}")
    if s["unresolved"]:
        problems.append(f"{s['unresolved']} unresolved frames")
    # truncated samples: a line says how many, and how to keep more
    hint = re.search(r"pyprof-bpf: (\d+) samples had more than (\d+) Python frames: .*"
                     r"--max-depth N keeps more", rec.stderr)
    if s["truncated"] and (not hint or int(hint.group(1)) != s["truncated"]):
        problems.append(f"{s['truncated']} truncated, but no line says how to keep more")
    if not s["truncated"] and hint:
        problems.append("no sample truncated, but a line says some were")
    # Seconds are printed to 0.01 s, the rate to 0.1/s.
    lo_rate = s["samples"] / (s["secs"] + 0.005) - 0.05
    hi_rate = s["samples"] / max(s["secs"] - 0.005, 1e-3) + 0.05
    if not lo_rate <= s["rate"] <= hi_rate:
        problems.append(f"rate {s['rate']}/s is not {s['samples']} / {s['secs']} s")
    if duration is not None and not (duration - 0.05 <= s["secs"] <= duration + 1.0):
        problems.append(f"{s['secs']} s for -d {duration}")
    assert not problems, "summary line wrong: " + "; ".join(problems) + f"\n{rec.stderr}"
    return s
