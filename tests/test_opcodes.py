"""Issue #24 item 2: --opcodes, on real interpreters with real BPF.

a. test_tables_match_dis (every interpreter tests/pyenvs.py lists, 3.11+):
   the committed table of its minor version
   (user/target/opcodes/opnames_3XX.c, written by scripts/gen-opcodes.py)
   holds, for every byte 0-255, the name that interpreter's own dis gives
   it in adaptive bytecode (dis._all_opname: base, specialised,
   instrumented, ENTER_EXECUTOR, CACHE), and nothing where dis has none;
   every name of opcode.opmap (and 3.13+'s opcode._specialized_opmap) sits at
   its number. test_families_match_generator (every 3.11 and 3.12
   interpreter): the committed user/target/opcodes/opfamily_3XX.c (cache
   units per family, and which families may push a frame inline: what the
   remote walk's call-site check decodes with, user/target/call_sites.h) is
   what scripts/gen-opcodes.py --families writes from that interpreter.
b. test_hot_opcode (one interpreter per minor version, 3.11-3.15; both
   backends; two loops, tests/targets/opcodes_loop.py): the target warms
   its loop up and prints, from itself, what dis.get_instructions(f,
   adaptive=True) says of the hot function; `record --opcodes -F 499 -d 3
   --format collapsed --raw R.pyprof`: the most frequent `[op] NAME` leaf of
   the samples whose innermost Python frame is the hot function is the name
   dis printed for its hot instruction (the BINARY_OP / LOAD_ATTR
   instructions: all four of them specialise alike), and on 3.13-3.15 that
   name is BINARY_OP_ADD_INT / LOAD_ATTR_INSTANCE_VALUE. BPF reads the byte
   while the thread is stopped: >= 99% of those samples carry a name dis
   listed for the function (the rest: an instruction re-specialised after
   the listing). The raw recording, through `report`, gives the same
   collapsed stacks.
c. test_top: `top --opcodes` (plain snapshots) ranks the hot instruction's
   leaf first by own time.

The remote backend's cases run the target and pyprof-bpf on one CPU
(ONE_CPU). Read from another CPU while the thread runs, the frame's
instruction pointer is seen late: the store that names a slow instruction
is still on its way when the cache line is read, so samples shift to the
instruction before it. Measured on this 2-CPU VM, add loop, 3.15, six runs
each: BINARY_OP_ADD_INT 0.20-0.55 of the samples from the other CPU (one
CI run: under the top three), 0.56-0.59 from the same CPU and with
--blocking, 0.58 under BPF. That is the hardware, said in docs/usage.md;
what these tests check is that we read and name the instruction right,
which on one CPU (the target preempted while we read) they can.

The opcode leaf's parent is the hot function in every sample counted. How
sure "most frequent" is: the hot instruction takes 0.5-0.7 of the hot
function's samples here, the next 0.1-0.28 (printed, lines "OPCODES"); with
n >= 200 samples the gap is more than 6 standard deviations of the
difference of two multinomial shares (sqrt((p1 + p2 - (p1 - p2)^2) / n)),
a failure well under once in 10^6 runs.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -q -s -p no:cacheprovider tests/test_opcodes.py
"""
import collections
import json
import os
import re
import subprocess
import urllib.parse

import pytest

from lib import pyenvs
from lib.interps import PARAMS, VERSIONS

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

REPO = pyenvs.REPO
BINARY = pyenvs.BINARY
TARGET = os.path.join(REPO, "tests", "targets", "opcodes_loop.py")
TABLES = os.path.join(REPO, "user", "target", "opcodes")
SUPPORTED = pyenvs.supported()
HZ, SECS = 499, 2
MIN_SAMPLES = 200
HOT = {"add": ("add_loop", "BINARY_OP", "BINARY_OP_ADD_INT"),
       "attr": ("attr_loop", "LOAD_ATTR", "LOAD_ATTR_INSTANCE_VALUE")}

DIS_TABLE = r"""
import dis, json, opcode
names = [n if not n.startswith("<") else None for n in dis._all_opname[:256]]
maps = dict(opcode.opmap)
maps.update(getattr(opcode, "_specialized_opmap", {}))
print(json.dumps({"names": names, "maps": maps}))
"""


def table_of(version):
    path = os.path.join(TABLES, f"opnames_{version[0]}{version[1]}.c")
    with open(path) as f:
        text = f.read()
    names = [None] * 256
    for op, name in re.findall(r'^\t\[(\d+)\] = "(\w+)",$', text, re.M):
        assert names[int(op)] is None, f"{path}: {op} twice"
        names[int(op)] = name
    return names


@pytest.mark.parametrize("interp", SUPPORTED, ids=lambda i: i.label)
def test_tables_match_dis(interp):
    out = subprocess.run(interp.argv(["-c", DIS_TABLE]), capture_output=True, text=True,
                         check=True, timeout=60)
    facts = json.loads(out.stdout)
    ours = table_of(interp.version)
    assert len(facts["names"]) == 256
    diff = [(op, ours[op], facts["names"][op]) for op in range(256)
            if ours[op] != facts["names"][op]]
    assert not diff, f"(byte, ours, dis) that differ: {diff}"
    for name, op in facts["maps"].items():
        if op < 256:
            assert ours[op] == name, (name, op, ours[op])
    named = sum(1 for n in ours if n)
    print(f"\nOPCODES table {interp.label}: {named} named bytes")
    assert named > 150


def family_rows(text):
    """The table lines of an opfamily_3XX.c (its header names the micro
    version it was made from, which may differ)."""
    return [line for line in text.splitlines() if line.startswith("\t[")]


@pytest.mark.parametrize("interp", [i for i in SUPPORTED if i.version[:2] in ((3, 11), (3, 12))],
                         ids=lambda i: i.label)
def test_families_match_generator(interp):
    script = interp.stage(os.path.join(REPO, "scripts", "gen-opcodes.py"))
    out = subprocess.run(interp.argv([script, "--families"]), capture_output=True, text=True,
                         check=True, timeout=60)
    v = interp.version
    with open(os.path.join(TABLES, f"opfamily_{v[0]}{v[1]}.c")) as f:
        ours = family_rows(f.read())
    assert len(ours) > 150
    assert family_rows(out.stdout) == ours


# One interpreter per minor version (lib.interps.VERSIONS, as test_modes uses); a
# missing version fails there (test_every_version_is_there) and here.
def test_versions():
    assert {(3, 11), (3, 12), (3, 13), (3, 14), (3, 15)} <= set(VERSIONS)


ONE_CPU = 0


class Target:
    """opcodes_loop.py running: its pid and dis's listing of the hot function.
    pinned: its threads held to ONE_CPU (the remote backend's cases)."""

    def __init__(self, interp, which, secs, pinned=False):
        seen = interp.stage(TARGET)
        self.proc = subprocess.Popen(interp.argv([seen, which, str(secs)]),
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line, "the target printed nothing"
        self.listing = json.loads(line)
        self.pid = pyenvs.leaf_pid(self.proc.pid)
        if pinned:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                os.sched_setaffinity(int(tid), {ONE_CPU})

    def close(self):
        self.proc.kill()
        self.proc.wait()


def hot_name(listing, base):
    names = {name for _, name, b in listing if b == base}
    assert len(names) == 1, f"the {base} instructions differ: {listing}"
    return names.pop()


def op_counts(folded, func):
    """[op] leaves (decoded) of the collapsed stacks whose innermost Python
    frame is func, with their counts; and all the other op leaves."""
    hot, other = collections.Counter(), collections.Counter()
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [urllib.parse.unquote(f) for f in stack.split(";")]
        ops = [f for f in frames if f.startswith("[op] ")]
        assert len(ops) <= 1 and (not ops or ops[0] == frames[-1]), line
        if not ops:
            continue
        # Weights are the sampling period in ns: counted back to samples.
        n = round(int(count) * HZ / 1e9)
        (hot if frames[-2].startswith(f"py::{func}:") else other)[ops[0][5:]] += n
    return hot, other


def run(cmd, timeout=60, pinned=False):
    pin = (lambda: os.sched_setaffinity(0, {ONE_CPU})) if pinned else None
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         preexec_fn=pin)
    assert out.returncode == 0, f"{cmd}: {out.returncode}\n{out.stderr}"
    return out


@pytest.mark.parametrize("backend", ["bpf", "remote"])
@pytest.mark.parametrize("which", ["add", "attr"])
@pytest.mark.parametrize("interp", PARAMS)
def test_hot_opcode(interp, which, backend, tmp_path):
    func, base, special = HOT[which]
    t = Target(interp, which, SECS + 30, pinned=backend == "remote")
    try:
        folded, raw = tmp_path / "o.folded", tmp_path / "o.pyprof"
        run([BINARY, "-p", str(t.pid), "-F", str(HZ), "-d", str(SECS), "--opcodes",
             "--backend", backend, "--format", "collapsed", "-o", str(folded),
             "--raw", str(raw)], pinned=backend == "remote")
    finally:
        t.close()
    text = folded.read_text()
    expect = hot_name(t.listing, base)
    listed = {name for _, name, _ in t.listing}
    hot, other = op_counts(text, func)
    n = sum(hot.values())
    top = hot.most_common(3)
    print(f"\nOPCODES {interp.label} {which} {backend}: n={n} dis={expect} "
          + " ".join(f"{k}={v / max(n, 1):.3f}" for k, v in top))
    assert n >= MIN_SAMPLES, f"{n} samples in {func} with an opcode"
    assert top[0][0] == expect, top
    if interp.version[:2] >= (3, 13):
        assert expect == special
    if backend == "bpf":
        unlisted = sum(v for k, v in hot.items() if k not in listed)
        assert unlisted <= 0.01 * n, (hot, listed)
    # The raw recording carries the leaves: report gives the same stacks.
    again = run([BINARY, "report", str(raw), "--format", "collapsed"]).stdout
    assert sorted(again.splitlines()) == sorted(text.splitlines())
    # The heatmap names each line's commonest instruction, as the stacks
    # count them per line of the innermost frame; the hot one is on a line
    # of the hot function.
    page = run([BINARY, "report", str(raw), "--format", "heatmap"]).stdout
    script = os.path.basename(TARGET)
    section = [c for c in page.split("<section ")[1:]
               if re.match(r'[^>]*data-path="[^"]*/' + re.escape(script) + '"', c)]
    assert len(section) == 1, page[:2000]
    rows = {int(m[1]): m[2] for m in re.finditer(
        r'<tr class="l hot"[^>]*data-line="(\d+)"[^>]*>.*?<td class="op"(?: title="[^"]*" '
        r'data-op="([^"]*)")?>', section[0]) if m[2]}
    per_line = collections.defaultdict(collections.Counter)
    hot_lines = set()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [urllib.parse.unquote(f) for f in stack.split(";")]
        if frames[-1].startswith("[op] ") and frames[-2].startswith("py::") and \
                frames[-2].rsplit(":", 1)[0].endswith("/" + script):
            ln = int(frames[-2].rsplit(":", 1)[1])
            per_line[ln][frames[-1][5:]] += int(count)
            if frames[-2].startswith(f"py::{func}:"):
                hot_lines.add(ln)
    clear = {ln: c.most_common(1)[0][0] for ln, c in per_line.items()
             if len(c) == 1 or c.most_common(2)[0][1] > c.most_common(2)[1][1]}
    assert clear and all(rows.get(ln) == op for ln, op in clear.items()), (clear, rows)
    assert expect in {rows.get(ln) for ln in hot_lines}, (expect, hot_lines, rows)


@pytest.mark.parametrize("backend", ["bpf", "remote"])
def test_top(backend):
    interp = VERSIONS[max(VERSIONS)]
    t = Target(interp, "attr", SECS + 30, pinned=backend == "remote")
    try:
        out = run([BINARY, "top", "-p", str(t.pid), "-F", str(HZ), "-d", str(SECS),
                   "--opcodes", "--backend", backend], pinned=backend == "remote").stdout
    finally:
        t.close()
    last = out.strip().split("\n\n")[-1]
    rows = [line for line in last.splitlines() if re.match(r"\s+\d+\.\d+\s+\d+\.\d+", line)]
    print(f"\nOPCODES top {backend}:\n" + "\n".join(rows[:4]))
    assert rows and rows[0].endswith("[op] LOAD_ATTR_INSTANCE_VALUE"), last


DUMPS = 60


@pytest.mark.parametrize("interp", PARAMS)
def test_dump(interp):
    """`dump --opcodes`: 60 dumps of the attribute loop (--json, read with
    json.loads): each thread at attr_loop carries "opcode", a name of its
    version's table that dis listed for the function; the most frequent is
    the hot instruction dis named (its share 0.55-0.75 against the next's
    0.1-0.2 in the recordings above: with 60 draws the gap is over 4.5
    standard deviations); the text form shows [op] NAME on the innermost
    frame's line, and JSON without --opcodes has no "opcode"."""
    t = Target(interp, "attr", 60, pinned=True)
    names = collections.Counter()
    try:
        for _ in range(DUMPS):
            doc = json.loads(run([BINARY, "dump", "-p", str(t.pid), "--json",
                                  "--opcodes"], pinned=True).stdout)
            for th in doc["threads"]:
                if th["frames"] and th["frames"][0]["function"] == "attr_loop":
                    names[th["opcode"]] += 1
        text = run([BINARY, "dump", "-p", str(t.pid), "--opcodes"]).stdout
        plain = json.loads(run([BINARY, "dump", "-p", str(t.pid), "--json"]).stdout)
    finally:
        t.close()
    table = set(filter(None, table_of(interp.version)))
    listed = {name for _, name, _ in t.listing}
    print(f"\nOPCODES dump {interp.label}: {names.most_common(4)}")
    assert sum(names.values()) >= DUMPS * 0.9, names
    assert set(names) <= table & listed, (names, listed)
    assert names.most_common(1)[0][0] == hot_name(t.listing, "LOAD_ATTR"), names
    inner = [line for line in text.splitlines() if " [op] " in line]
    assert len(inner) == 1 and inner[0].lstrip().startswith("attr_loop ("), text
    assert all("opcode" not in th for th in plain["threads"]), plain
