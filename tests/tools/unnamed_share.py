#!/usr/bin/env python3
"""How much of a profile has frames without a name.

    unnamed_share.py FILE.folded [--json]
    pyprof-bpf record ... --format collapsed -o - | unnamed_share.py -

Reads collapsed ("folded") stacks as `pyprof-bpf --format collapsed` writes
them (user/output_collapsed.c): one line per stack, "comm;frame;...;leaf
WEIGHT", root first, the weight in nanoseconds of CPU. Frames are the texts of
user/output_perf.c: Python frames are "py::<qualname>:<filename>:<line>" with
qualname and filename percent-encoded; everything else is in brackets.

A sample has an unnamed frame when one of its frames is
  - a bracketed status marker: [no-python-state] (the thread's Python state
    was not known), [read-fault] (the rest of the stack could not be read),
    [truncated] (deeper than the depth limit), [status-N], or any other
    bracketed frame that is not a root ("[comm:pid]", "[thread:tid]") or one
    of the claims below;
  - a Python frame whose code could not be read: "py::<unknown>:<unknown>:-1"
    (user/symbolizer.c), or any Python frame with an empty or "<unknown>"
    qualname or filename, or a negative line.
Three markers are not a missing name but a claim that the thread had no
Python frame at that moment, so they are reported apart and not counted:
[no-python-frames] (a Python state without frames), [thread-start/exit] (no
state, a thread younger than 20 ms: starting, or a short thread already
ending) and [thread-exit] (no state any more: a thread ending). Whether a claim is true is for the tests to check against the
target's own clock (tests/test_real_programs.py does).

Prints the total weight, the weight of samples with at least one unnamed
frame and its share, the same per marker (a sample with two kinds of
unnamed frames counts under both), and the claims' shares. As a module:
parse(text) and measure(stacks) -> Share.
"""
import collections
import json
import re
import sys
import urllib.parse

NO_FRAMES = "[no-python-frames]"
# Statuses that say the thread had no Python frame (not counted as unnamed).
CLAIMS = (NO_FRAMES, "[thread-start/exit]", "[thread-exit]")
# [comm:pid] / [thread:tid] roots, and the process roots of several processes
# ("comm (pid N)", percent-encoded in collapsed output)
ROOT = re.compile(r"^(\[.*:\d+\]|\S+%20%28pid%20\d+%29|\S+ \(pid \d+\))$")
UNKNOWN = "<unknown>"                     # the marker for a Python frame
LEAF_MARKS = ("<GC>", "[GIL released]", "[GIL wait]", "[runnable]", "[blocked]")


class Frame(collections.namedtuple("Frame", "text qualname file line")):
    """One frame text; qualname/file/line are None for bracketed frames."""

    @property
    def python(self):
        return self.file is not None


def unquote(s):
    return urllib.parse.unquote(s, errors="surrogateescape")


def decode(text):
    """A Frame from a frame text (user/output_perf.c's rule: the qualname up
    to the first ':' after "py::", the line after the last ':', the file
    between)."""
    if text.startswith("py::"):
        body = text[4:]
        fn, sep, rest = body.partition(":")
        file, sep2, line = rest.rpartition(":")
        if not sep or not sep2:
            raise ValueError(f"not a Python frame text: {text!r}")
        return Frame(text, unquote(fn), unquote(file), int(line))
    return Frame(text, None, None, None)


def marker_of(frame):
    """The unnamed marker a frame is, or None when it is named (or a root,
    or one of the CLAIMS)."""
    if frame.python:
        if (frame.qualname in ("", UNKNOWN) or frame.file in ("", UNKNOWN)
                or frame.line < 0):
            return UNKNOWN
        return None
    t = frame.text
    if t in CLAIMS or ROOT.match(t):
        return None
    # What the thread did beyond its Python code (user/offcpu/leaf.h): named.
    if unquote(t) in LEAF_MARKS or unquote(t).startswith("[syscall] "):
        return None
    if t.startswith("[") and t.endswith("]"):
        return t                  # [no-python-state], [read-fault], [truncated], ...
    return "[unparsed:" + t + "]"  # neither Python nor bracketed: unnamed too


def parse(text):
    """Counter {stack (tuple of frame texts, root first, comm first): weight}."""
    out = collections.Counter()
    for i, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        stack, sep, weight = line.rpartition(" ")
        if not sep or not weight.isdigit() or not stack:
            raise ValueError(f"collapsed line {i} is not `stack weight`: {line!r}")
        out[tuple(stack.split(";"))] += int(weight)
    return out


class Share:
    """What measure() found. Weights are the collapsed counts (ns of CPU)."""

    def __init__(self):
        self.total = 0
        self.unnamed = 0
        self.by_claim = collections.Counter()
        self.by_marker = collections.Counter()
        self.examples = {}            # marker -> the heaviest stack that has it
        self.frames = {}              # text -> Frame, every distinct frame below comm
        self.comms = collections.Counter()

    @property
    def share(self):
        return self.unnamed / self.total if self.total else 0.0

    def marker_share(self, marker):
        return self.by_marker[marker] / self.total if self.total else 0.0

    def claim_share(self, claim):
        return self.by_claim[claim] / self.total if self.total else 0.0

    def named_frames(self):
        """The distinct named Python frames."""
        return [f for f in self.frames.values() if f.python and marker_of(f) is None]

    def as_dict(self):
        return {"total": self.total, "unnamed": self.unnamed, "share": self.share,
                "by_marker": {m: {"weight": w, "share": w / self.total}
                              for m, w in sorted(self.by_marker.items())},
                "claims": {m: {"weight": w, "share": w / self.total}
                           for m, w in sorted(self.by_claim.items())}}

    def describe(self):
        """One line: '12.34% unnamed of 2.95 s ([no-python-state] 10.1%, ...)'."""
        parts = [f"{m} {self.marker_share(m):.2%}" for m, _ in self.by_marker.most_common()]
        parts += [f"{c} {self.claim_share(c):.2%} (a claim, not counted)"
                  for c, _ in self.by_claim.most_common()]
        return (f"{self.share:.2%} unnamed of {self.total / 1e9:.3f} s sampled ("
                + ", ".join(parts) + ")")

    def report(self):
        lines = [f"total weight      {self.total}",
                 f"unnamed weight    {self.unnamed}",
                 f"unnamed share     {self.share:.4%}"]
        for m, w in self.by_marker.most_common():
            lines.append(f"  {m:<24} {w:>14} {w / self.total:.4%}")
        for c, w in self.by_claim.most_common():
            lines.append(f"  {c:<24} {w:>14} {w / self.total:.4%} (a claim, not counted)")
        return "\n".join(lines)


def measure(stacks):
    """A Share of a parse() result (or any {stack: weight})."""
    s = Share()
    best = {}
    for stack, w in stacks.items():
        s.total += w
        s.comms[stack[0]] += w
        marks = set()
        for text in stack[1:]:
            f = s.frames.get(text)
            if f is None:
                f = s.frames[text] = decode(text)
            m = marker_of(f)
            if m is not None:
                marks.add(m)
            elif text in CLAIMS:
                s.by_claim[text] += w
        if marks:
            s.unnamed += w
            for m in marks:
                s.by_marker[m] += w
                if w > best.get(m, -1):
                    best[m], s.examples[m] = w, stack
    return s


def main(argv):
    args = [a for a in argv if a != "--json"]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if args[0] == "-":
        text = sys.stdin.read()
    else:
        with open(args[0], encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    s = measure(parse(text))
    if "--json" in argv:
        print(json.dumps(s.as_dict(), indent=1))
    else:
        print(s.report())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
