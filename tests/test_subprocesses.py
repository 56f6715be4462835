"""End-to-end tests of `pyprof-bpf record --subprocesses` and `-p A,B` (issue 9).

Every process of a target tree writes ROLE.PID (its Python version inside)
into a directory all of them see (ROOT/tmp/pyprof-sp-XXXX on the host,
/tmp/pyprof-sp-XXXX in the Debian sid chroot), and burns its CPU in a
function named after its role (pool_worker_fn, parent_loop, child_315_spin,
grandchild_spin, short_child_spin, ...). So a sample's frames say which
process it came from, and the test checks that every role function is
sampled under the pid of a process of that role and of no other, with the
exact stack that process has (tests/targets/sp_pool.py, sp_tree.py):

1. test_pool: a multiprocessing Pool(2) with each start method (fork, spawn,
   forkserver) on 3.14, fork on 3.15 (its forked children must walk whole:
   no interpreter frames, nothing cut at the parent's frame-cache anchor)
   and forkserver on 3.13. Every worker that ran a task has its own
   samples of pool_worker_fn, called by mapstar and worker, from a <module>.
2. test_version_tree: a 3.14 parent runs a 3.15 child (subprocess, exec)
   that runs a 3.13 grandchild: each sampled with its own version, its
   parent in the summary, its exact stack (<module> > main > role > spin).
3. test_child_exits_mid_recording: a forked child that exits after 0.3 s:
   its samples, none after its exit, marked exited; the parent's samples
   go on after it, and the recording ends when the parent exits.
   test_short_lived_children: 20 forked children of 10 ms each, gone before
   the recorder reads their first sample: each has its samples and frames.
4. test_non_python_child: `sh -c` with a 0.5 s CPU loop, then 40 quick
   `sh -c :`, are listed as not sampled and none of their ticks are charged
   to a Python process (not even between vfork() and exec()).
5. test_several_pids: `-p A,B` with a 3.13 and a 3.15 target, independent:
   both sampled at the asked rate with their own frames and pids.
6. test_launched_command: `--subprocesses -- chroot ROOT python3.14 ...`:
   the command's children (3.15, 3.13) are sampled too; collapsed output,
   one process root per stack.
7. test_adopted_children: children already running at attach are sampled.
8. test_refused: --subprocesses with --events thread or --backend remote,
   several -p targets with --events thread, and PID lists with garbage in
   them are usage errors (64) with a clear message.

With several processes every stack has an outermost `python3.14 (pid N)`
frame; parse_perf_roots() checks it against the sample's header and
removes it before test_record.parse_perf() reads the rest.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_subprocesses.py </dev/null
"""
import ast
import collections
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from lib import formats as tf
from lib.tool import binary
from lib.interps import by_label
from lib.recorder import RECORD_SLACK, Recorder, launch
from lib.perf import check_summary, fnv1a, parse_folded, parse_perf, proc_cpu

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
POOL = os.path.join(TARGETS, "sp_pool.py")
TREE = os.path.join(TARGETS, "sp_tree.py")
HZ = 999
PERIOD = 1000000000 // HZ   # ns: the weight of a sample in collapsed output
LONG = 30                # -d of recordings meant to end with their processes
USAGE = 64
MIN_SHARE = 0.75         # of HZ x a role's CPU time, sampled in its function

# The functions each role burns its CPU in.
ROLE_FNS = {
    "parent": {"parent_loop", "parent_after_exit"},
    "pool_worker": {"pool_worker_fn"},
    "child_315": {"child_315_spin"},
    "grandchild": {"grandchild_spin"},
    "short_child": {"short_child_spin"},
    "tiny_child": {"tiny_child_spin"},
    "pair_a": {"pair_a_spin"},
    "pair_b": {"pair_b_spin"},
    "adopted_child": {"adopted_child_spin"},
}
OWNER = {fn: role for role, fns in ROLE_FNS.items() for fn in fns}
# sp_tree.py: the mode function that calls each (parent_loop: any of them).
TREE_CALLER = {"child_315_spin": "child_315", "grandchild_spin": "grandchild",
               "short_child_spin": "short", "parent_after_exit": "short",
               "tiny_child_spin": "tiny",
               "pair_a_spin": "pair", "pair_b_spin": "pair",
               "adopted_child_spin": "adopt"}


def sid(version):
    return by_label(f"sid-{version}")


# --------------------------------------------------------------------------
# the directory every process of a test shares

class Shared:
    """ROOT/tmp/pyprof-sp-XXXX: seen as /tmp/pyprof-sp-XXXX in the chroot."""

    def __init__(self):
        self.root = sid("3.14").root
        self.seen = f"/tmp/pyprof-sp-{uuid.uuid4().hex[:8]}"
        self.host = os.path.join(self.root, self.seen.lstrip("/"))
        os.makedirs(self.host)

    def script(self, path):
        """Copies a target in; the path the chroot sees."""
        shutil.copyfile(path, os.path.join(self.host, os.path.basename(path)))
        return f"{self.seen}/{os.path.basename(path)}"

    def touch(self, name):
        open(os.path.join(self.host, name), "w").close()

    def roles(self):
        """{pid: (role, python version, [further lines])} from the ROLE.PID files."""
        out = {}
        for name in os.listdir(self.host):
            m = re.fullmatch(r"(\w+)\.(\d+)", name)
            if m and (m[1] in ROLE_FNS or m[1] in ("sh", "sh_quick")):
                with open(os.path.join(self.host, name)) as f:
                    lines = f.read().split("\n")
                out[int(m[2])] = (m[1], lines[0], [ln for ln in lines[1:] if ln])
        return out

    def pids(self, role):
        return sorted(p for p, r in self.roles().items() if r[0] == role)

    def read(self, name):
        with open(os.path.join(self.host, name)) as f:
            return f.read()

    def wait_roles(self, p, want, timeout=60):
        """Waits for {role: count} ROLE.PID files while p runs."""
        deadline = time.monotonic() + timeout
        while True:
            have = collections.Counter(r[0] for r in self.roles().values())
            if all(have[k] >= n for k, n in want.items()):
                return
            if p.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the target (exit {p.returncode}) wrote {dict(have)}, "
                            f"expected {want}; stderr:\n{stderr_text(p)}")
            time.sleep(0.01)


@pytest.fixture
def shared():
    s = Shared()
    yield s
    shutil.rmtree(s.host, ignore_errors=True)


def stderr_text(p):
    try:
        with open(p.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except (OSError, AttributeError) as e:
        return f"(no stderr: {e})"


# --------------------------------------------------------------------------
# outputs and the summary

def root_text(comm, pid, collapsed=False):
    return (tf.escape_collapsed if collapsed else tf.escape)(f"{comm} (pid {pid})", False)


def parse_perf_roots(data):
    """parse_perf() of a recording with one root per process: every sample's
    outermost frame must be `COMM (pid PID)` (percent-encoded, dso
    [pyprof-bpf], the FNV-1a address) of its own header; it is removed."""
    text = data.decode("utf-8")
    blocks = text.split("\n\n")
    assert blocks[-1] == "", f"perf-script output does not end with an empty line: {text[-200:]!r}"
    kept = []
    for i, b in enumerate(blocks[:-1]):
        lines = b.split("\n")
        m = re.match(r"^(\S.*?) +(\d+)/(\d+) ", lines[0])
        assert m and len(lines) >= 3, f"sample {i}: a header and a root at least: {b!r}"
        sym = root_text(m[1], int(m[2]))
        want = "\t%16x %s ([pyprof-bpf])" % (fnv1a(sym), sym)
        assert lines[-1] == want, (f"sample {i} ({lines[0]!r}): outermost frame "
                                   f"{lines[-1]!r}, expected the process root {want!r}")
        kept.append("\n".join(lines[:-1]))
    return parse_perf(("\n\n".join(kept) + "\n\n").encode() if kept else b"")


PROC_LINE = re.compile(
    r" +(?P<pid>\d+) (?P<comm>.{16}) (?:Python (?P<version>\S+) +(?P<samples>\d+) samples"
    r"|not sampled: (?P<why>.*?))(?:, child of (?P<ppid>\d+))?(?P<exited>, exited)?")


def listed(stderr):
    """{pid: {comm, version, samples, why, ppid, exited}} of the summary's list."""
    lines = stderr.split("\n")
    heads = [i for i, ln in enumerate(lines)
             if re.fullmatch(r"pyprof-bpf: \d+ processes:", ln)]
    assert len(heads) == 1, f"one list of processes expected:\n{stderr}"
    n = int(lines[heads[0]].split()[1])
    out = {}
    for ln in lines[heads[0] + 1:heads[0] + 1 + n]:
        m = PROC_LINE.fullmatch(ln)
        assert m, f"not a process line: {ln!r}\n{stderr}"
        out[int(m["pid"])] = {
            "comm": m["comm"].rstrip(), "version": m["version"],
            "samples": int(m["samples"]) if m["samples"] else None, "why": m["why"],
            "ppid": int(m["ppid"]) if m["ppid"] else 0, "exited": bool(m["exited"])}
    assert len(out) == n, f"{n} processes announced, {len(out)} listed:\n{stderr}"
    return out


def by_pid(samples):
    out = collections.defaultdict(list)
    for s in samples:
        out[s.pid].append(s)
    return out


def check_listing(samples, procs_listed, stderr):
    """Every pid of the output is listed, with as many samples as it has."""
    counts = collections.Counter(s.pid for s in samples)
    for pid, n in counts.items():
        assert pid in procs_listed, f"pid {pid} has {n} samples but is not listed:\n{stderr}"
        assert procs_listed[pid]["samples"] == n, (
            f"pid {pid}: listed with {procs_listed[pid]['samples']} samples, the output "
            f"has {n}:\n{stderr}")
    for pid, e in procs_listed.items():
        if e["samples"]:
            assert counts[pid] == e["samples"], f"pid {pid}: listed {e}, output {counts[pid]}"
    assert "could not be read were dropped" not in stderr, stderr


# --------------------------------------------------------------------------
# the frames

def fn_lines(path):
    """{function name: set of its lines} of a target (from its source)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.name: set(range(n.lineno, n.end_lineno + 1))
            for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def role_samples(samples, roles, script_seen, source):
    """Checks that every role function is sampled under a pid of its role,
    in the script, on its own lines; returns {pid: Counter(function)}."""
    lines = fn_lines(source)
    got = collections.defaultdict(collections.Counter)
    bad = []
    for s in samples:
        fns = set()
        for f in s.frames:
            if f.python and f.func in OWNER:
                fns.add(f.func)
                if f.file != script_seen or f.line not in lines[f.func]:
                    bad.append(f"pid {s.pid}: {f.func} at {f.file}:{f.line}, expected "
                               f"{script_seen} lines {min(lines[f.func])}-"
                               f"{max(lines[f.func])}: {s.describe()}")
        role = roles.get(s.pid, ("(not ours)",))[0]
        for fn in fns:
            if OWNER[fn] != role:
                bad.append(f"{fn} (role {OWNER[fn]}) sampled under pid {s.pid}, a "
                           f"{role} process: {s.describe()}")
            got[s.pid][fn] += 1
    assert not bad, f"{len(bad)} frames in the wrong process:\n  " + "\n  ".join(bad[:10])
    return got


def check_tree_stacks(samples, script_seen, source):
    """sp_tree.py: a sample in a role function has exactly the stack
    <module> > main > MODE > ROLE_FN [> what it calls], every frame on its
    function's lines; MODE is the function of the mode that calls it."""
    lines = fn_lines(source)
    bad = []
    for s in samples:
        fr = [f for f in s.root_first if f.python]
        idx = [i for i, f in enumerate(fr) if f.func in OWNER]
        if not idx:
            continue
        i = idx[0]
        fn = fr[i].func
        callers = [f.func for f in fr[:i]]
        mode = TREE_CALLER.get(fn)
        ok_modes = {mode} if mode else {"tree", "short", "shell", "adopt", "tiny"}
        if (s.status != "complete" or len(callers) != 3 or callers[:2] != ["<module>", "main"]
                or callers[2] not in ok_modes
                or any(f.file != script_seen or f.line not in lines.get(f.func, ())
                       for f in fr[1:i + 1])):
            bad.append(s.describe(12))
    assert not bad, (f"{len(bad)} samples of a role function without the stack "
                     f"<module> > main > mode > role function:\n  " + "\n  ".join(bad[:8]))


def need(got, pid, fn, cpu, what):
    n = got.get(pid, {}).get(fn, 0)
    want = MIN_SHARE * HZ * cpu
    assert n >= want, (f"{what} (pid {pid}): {n} samples in {fn}, expected at least "
                       f"{want:.0f} ({MIN_SHARE:.0%} of {HZ} Hz x {cpu} s of CPU); "
                       f"per pid: { {p: dict(c) for p, c in got.items()} }")


def record_tree(procs, tmp_path, pid, extra=(), duration=LONG, name="rec"):
    out = str(tmp_path / f"{name}.perf")
    rec = Recorder(procs, tmp_path, pid, ["-F", HZ, "-d", duration, "-o", out]
                   + list(extra), name=name).wait_started()
    return rec, out


def is_body_call(fr, i):
    """Is the i-th frame (root first) run as a module or class body: by
    importlib, or by a class statement (the caller is a <module>)?"""
    j = i - 1
    while j >= 0 and fr[j].func == "<unknown>":
        j -= 1
    return j >= 0 and fr[j].func in ("_call_with_frames_removed", "<module>")


class Unresolved:
    """check_summary() against a recording whose only unresolved frames
    are module and class bodies run during an import: short-lived code
    objects (freed when the body ends) that the symbolizer may fail to name
    in any recording, one process or several; not what these tests are
    about. Anything else unnamed is a failure."""

    def __init__(self, rec, samples):
        self.rec, self.stderr = rec, rec.stderr
        n, bad = 0, []
        for s in samples:
            fr = s.root_first
            for i, f in enumerate(fr):
                if f.python and f.func == "<unknown>":
                    n += 1
                    if not is_body_call(fr, i) or any(g.func in OWNER for g in fr):
                        bad.append(s.describe(40))
        assert not bad, (f"{len(bad)} samples with an unnamed frame that is not a module "
                         f"or class body being imported:\n  " + "\n  ".join(bad[:6]))
        got = rec.summary()["unresolved"]
        assert got == n, f"the summary says {got} unresolved frames, the output has {n}"

    def summary(self):
        return dict(self.rec.summary(), unresolved=0)


def finish(rec, out, duration=LONG, ended="every process exited"):
    rec.wait(duration + RECORD_SLACK).check_ok()
    if ended:
        assert f"pyprof-bpf: {ended}" in rec.stderr, rec.stderr
    samples = parse_perf_roots(open(out, "rb").read())
    check_summary(Unresolved(rec, samples), samples, lost=None)
    procs_listed = listed(rec.stderr)
    check_listing(samples, procs_listed, rec.stderr)
    return samples, procs_listed


def start(procs, tmp_path, argv, name="target"):
    return procs.start(argv, str(tmp_path / f"{name}.stderr"))


# --------------------------------------------------------------------------
# 1. multiprocessing pools

@pytest.mark.parametrize("version,method", [
    ("3.14", "fork"), ("3.14", "spawn"), ("3.14", "forkserver"),
    ("3.15", "fork"), ("3.13", "forkserver"),
])
def test_pool(version, method, shared, procs, tmp_path):
    interp = sid(version)
    script = shared.script(POOL)
    p = start(procs, tmp_path, interp.argv([script, shared.seen, method]))
    shared.wait_roles(p, {"parent": 1})
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"])
    shared.touch("go")
    samples, pl = finish(rec, out)
    assert p.wait(timeout=30) == 0, stderr_text(p)
    roles = shared.roles()
    workers = shared.pids("pool_worker")
    ran = [int(x) for x in shared.read("tasks").split()]
    assert len(workers) == 2 and set(ran) <= set(workers), (workers, ran)

    got = role_samples(samples, roles, script, POOL)
    need(got, p.pid, "parent_loop", 0.3, "the parent")
    for w in ran:
        # Each task is 0.25 s of CPU; a worker ran at least one.
        need(got, w, "pool_worker_fn", 0.25, "a pool worker")
    for pid in workers + [p.pid]:
        e = pl.get(pid)
        assert e and e["version"] == interp.version_str and e["exited"], (pid, e, rec.stderr)
    # The workers descend from the parent: directly (fork, spawn), or
    # through the forkserver.
    for w in workers:
        chain, cur = [], w
        while cur in pl and cur != p.pid and len(chain) < 5:
            chain.append(cur)
            cur = pl[cur]["ppid"]
        assert cur == p.pid, f"worker {w}: parents {chain} -> {cur}, not {p.pid}:\n{rec.stderr}"
        if method != "forkserver":
            assert pl[w]["ppid"] == p.pid, (w, pl[w])

    # Exact frames: pool_worker_fn is called by mapstar, called by worker,
    # and the stack goes up to a <module> (fork: the parent's script;
    # spawn, forkserver: the -c string that started the process).
    bad = []
    for s in samples:
        fr = [f for f in s.root_first if f.python]
        names = [f.func for f in fr]
        if "pool_worker_fn" in names:
            i = names.index("pool_worker_fn")
            if (s.status != "complete" or i < 3 or names[i - 2:i] != ["worker", "mapstar"]
                    or not fr[i - 1].file.endswith("/multiprocessing/pool.py")
                    or names[0] != "<module>"
                    or (method == "fork" and fr[0].file != script)):
                bad.append(s.describe(12))
        elif "parent_loop" in names:
            if s.status != "complete" or names != ["<module>", "main", "parent_loop"]:
                bad.append(s.describe(12))
    assert not bad, f"{len(bad)} samples with a wrong stack:\n  " + "\n  ".join(bad[:8])


# --------------------------------------------------------------------------
# 2. 3.14 -> 3.15 -> 3.13

def test_version_tree(shared, procs, tmp_path):
    script = shared.script(TREE)
    p = start(procs, tmp_path, sid("3.14").argv(
        [script, "tree", shared.seen, "wait", "/usr/bin/python3.15", "/usr/bin/python3.13"]))
    shared.wait_roles(p, {"parent": 1})
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"])
    shared.touch("go")
    samples, pl = finish(rec, out)
    assert p.wait(timeout=30) == 0, stderr_text(p)
    roles = shared.roles()
    (child,), (grand,) = shared.pids("child_315"), shared.pids("grandchild")
    got = role_samples(samples, roles, script, TREE)
    check_tree_stacks(samples, script, TREE)
    need(got, p.pid, "parent_loop", 0.4, "the 3.14 parent")
    need(got, child, "child_315_spin", 0.4, "the 3.15 child")
    need(got, grand, "grandchild_spin", 0.4, "the 3.13 grandchild")
    for pid, ver, ppid, comm in ((p.pid, "3.14", 0, "python3.14"),
                                 (child, "3.15", p.pid, "python3.15"),
                                 (grand, "3.13", child, "python3.13")):
        e = pl[pid]
        assert (e["version"].rsplit(".", 1)[0], e["ppid"], e["comm"], e["exited"]) == \
            (ver, ppid, comm, True), (pid, e, rec.stderr)
        assert e["version"] == roles[pid][1], (pid, e, roles[pid])
        assert {s.comm for s in samples if s.pid == pid} == {comm}


# --------------------------------------------------------------------------
# 3. a child that exits mid-recording

def test_child_exits_mid_recording(shared, procs, tmp_path):
    script = shared.script(TREE)
    p = start(procs, tmp_path, sid("3.14").argv([script, "short", shared.seen]))
    shared.wait_roles(p, {"parent": 1})
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"])
    shared.touch("go")
    samples, pl = finish(rec, out)
    assert p.wait(timeout=30) == 0, stderr_text(p)
    roles = shared.roles()
    (child,) = shared.pids("short_child")
    exit_line = [ln for ln in roles[child][2] if ln.startswith("exit ")]
    assert exit_line, roles[child]
    exit_us = int(exit_line[0].split()[1]) // 1000
    got = role_samples(samples, roles, script, TREE)
    check_tree_stacks(samples, script, TREE)
    need(got, child, "short_child_spin", 0.3, "the short-lived child")
    assert pl[child]["ppid"] == p.pid and pl[child]["exited"], (pl[child], rec.stderr)
    mine = by_pid(samples)
    late = [s for s in mine[child] if s.ts > exit_us + 50000]
    assert not late, f"samples of the child after its exit: {late[0].describe()}"
    # The recording went on: the parent's 0.4 s after the child's exit.
    after = [s for s in mine[p.pid] if s.ts > exit_us
             and s.frames[0].func == "parent_after_exit"]
    assert len(after) >= MIN_SHARE * HZ * 0.4, (
        f"{len(after)} samples of the parent in parent_after_exit after the child "
        f"exited; per pid: { {k: len(v) for k, v in mine.items()} }\n{rec.stderr}")


def test_short_lived_children(shared, procs, tmp_path):
    """20 forked children of 10 ms each, every one gone (reaped) before the
    recorder's next poll reads its first sample: each still has its
    samples, under its pid, named from the image it shared with its parent."""
    script = shared.script(TREE)
    p = start(procs, tmp_path, sid("3.14").argv([script, "tiny", shared.seen]))
    shared.wait_roles(p, {"parent": 1})
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"])
    shared.touch("go")
    samples, pl = finish(rec, out)
    assert p.wait(timeout=30) == 0, stderr_text(p)
    roles = shared.roles()
    kids = shared.pids("tiny_child")
    assert len(kids) == 20, kids
    got = role_samples(samples, roles, script, TREE)
    check_tree_stacks(samples, script, TREE)
    counts = {k: got[k]["tiny_child_spin"] for k in kids}
    # 10 ms of CPU each: 10 ticks at 999 Hz.
    assert sum(counts.values()) >= MIN_SHARE * HZ * 0.01 * len(kids) and \
        min(counts.values()) >= 3, (counts, rec.stderr)
    for k in kids:
        assert pl[k]["ppid"] == p.pid and pl[k]["exited"] and pl[k]["comm"] == "python3.14", \
            (k, pl[k])


# --------------------------------------------------------------------------
# 4. a child that is not Python

def test_non_python_child(shared, procs, tmp_path):
    script = shared.script(TREE)
    p = start(procs, tmp_path, sid("3.14").argv([script, "shell", shared.seen]))
    shared.wait_roles(p, {"parent": 1})
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"])
    shared.touch("go")
    samples, pl = finish(rec, out)
    assert p.wait(timeout=30) == 0, stderr_text(p)
    roles = shared.roles()
    (sh,) = shared.pids("sh")
    t0, t1, cpu = roles[sh][2][0].split()
    t0, t1, cpu = int(t0) // 1000, int(t1) // 1000, float(cpu)
    assert pl.get(sh) and pl[sh]["samples"] is None and pl[sh]["exited"], (
        f"sh (pid {sh}) is not listed as not sampled:\n{rec.stderr}")
    assert pl[sh]["ppid"] == p.pid and pl[sh]["comm"] == "sh", pl[sh]
    got = role_samples(samples, roles, script, TREE)
    need(got, p.pid, "parent_loop", 0.3, "the parent")
    mine = by_pid(samples)
    # Not even between its vfork() and its exec(): it runs no Python of its
    # own there (the stack the program would see is the parent's, in
    # subprocess), and the image is sh's by the time it could be read.
    quick = shared.pids("sh_quick")
    assert len(quick) == 40, quick
    for pid in [sh] + quick:
        assert pid not in mine, [s.describe(12) for s in mine[pid]]
        e = pl.get(pid)
        assert e and e["samples"] is None and e["ppid"] == p.pid and e["exited"], (
            pid, e, rec.stderr)
    assert set(mine) == {p.pid}, {k: len(v) for k, v in mine.items()}
    # The parent waited: its own CPU while sh ran (0.5 s of CPU) is a few ms.
    during = [s for s in mine[p.pid] if t0 <= s.ts <= t1]
    assert len(during) <= 1.3 * HZ * cpu + 15, (
        f"{len(during)} samples of the parent while sh ran, for {cpu:.3f} s of its own "
        f"CPU: sh's ticks charged to it? {collections.Counter(s.frames[0].func for s in during)}")


# --------------------------------------------------------------------------
# 5. -p A,B

def test_several_pids(shared, procs, tmp_path):
    script = shared.script(TREE)
    a = start(procs, tmp_path, sid("3.13").argv([script, "pair_a", shared.seen]), "a")
    b = start(procs, tmp_path, sid("3.15").argv([script, "pair_b", shared.seen]), "b")
    shared.wait_roles(a, {"pair_a": 1})
    shared.wait_roles(b, {"pair_b": 1})
    secs = 1.5
    rec, out = record_tree(procs, tmp_path, f"{a.pid},{b.pid}", duration=secs)
    cpu0 = {a.pid: proc_cpu(a.pid), b.pid: proc_cpu(b.pid)}
    rec.wait(secs + RECORD_SLACK).check_ok()
    cpu = {pid: proc_cpu(pid) - c for pid, c in cpu0.items()}
    shared.touch("stop")
    assert "(per-CPU events)" in rec.stderr, rec.stderr
    samples = parse_perf_roots(open(out, "rb").read())
    check_summary(Unresolved(rec, samples), samples, duration=secs, lost=None)
    pl = listed(rec.stderr)
    check_listing(samples, pl, rec.stderr)
    assert set(pl) == {a.pid, b.pid}, rec.stderr
    roles = shared.roles()
    got = role_samples(samples, roles, script, TREE)
    check_tree_stacks(samples, script, TREE)
    mine = by_pid(samples)
    for proc, ver, fn in ((a, "3.13", "pair_a_spin"), (b, "3.15", "pair_b_spin")):
        e = pl[proc.pid]
        assert e["version"] == roles[proc.pid][1] and e["version"].startswith(ver + "."), e
        assert e["ppid"] == 0 and not e["exited"], e
        n, want = len(mine[proc.pid]), HZ * cpu[proc.pid]
        assert 0.8 * want - 20 <= n <= 1.1 * want + 5, (
            f"pid {proc.pid} ({ver}): {n} samples for {cpu[proc.pid]:.2f} s of CPU at "
            f"{HZ} Hz\n{rec.stderr}")
        assert got[proc.pid][fn] >= 0.9 * n, (proc.pid, dict(got[proc.pid]), n)
        assert {s.status for s in mine[proc.pid]} == {"complete"}


# --------------------------------------------------------------------------
# 6. a launched command and its children

def test_launched_command(shared, procs, tmp_path):
    script = shared.script(TREE)
    out = tmp_path / "out.folded"
    r = launch(procs, tmp_path, ["-F", HZ, "-o", out, "--subprocesses"],
            sid("3.14").argv([script, "tree", shared.seen, "nowait",
                              "/usr/bin/python3.15", "/usr/bin/python3.13"])).expect(0)
    roles = shared.roles()
    (parent,), (child,), (grand,) = (shared.pids(k) for k in
                                     ("parent", "child_315", "grandchild"))
    folded = parse_folded(open(out, "rb").read())
    pl = listed(r.stderr)
    assert r.summary()["samples"] * PERIOD == sum(folded.values()), r.stderr
    want_root = {parent: root_text("python3.14", parent, True),
                 child: root_text("python3.15", child, True),
                 grand: root_text("python3.13", grand, True)}
    got = collections.defaultdict(collections.Counter)
    per_root = collections.Counter()
    bad = []
    unresolved = 0
    for stack, w in folded.items():
        # comm;COMM (pid N);Python frames, root first
        m = re.fullmatch(r"(.+) \(pid (\d+)\)", stack[1]) if len(stack) > 2 else None
        if not m or m[1] != stack[0]:
            bad.append(f"stack without its comm and process root: {stack[:3]}")
            continue
        assert w % PERIOD == 0, (stack, w)
        pid, n = int(m[2]), w // PERIOD
        per_root[pid] += n
        if pid in want_root and stack[1] != want_root[pid]:
            bad.append(f"root {stack[1]}, expected {want_root[pid]}")
        fns = [tf.decode_text(f) for f in stack[2:] if f.startswith("py::")]
        for i, (func, file, line) in enumerate(fns):
            if func in OWNER:
                if OWNER[func] != roles.get(pid, ("?",))[0] or file != script:
                    bad.append(f"{func} at {file}:{line} under pid {pid}")
                got[pid][func] += n
            if func == "<unknown>":
                unresolved += n
                j = i - 1
                while j >= 0 and fns[j][0] == "<unknown>":
                    j -= 1
                if j < 0 or fns[j][0] not in ("_call_with_frames_removed", "<module>"):
                    bad.append(f"an unnamed frame that is not a module or class body: {stack}")
    assert not bad, "\n".join(bad[:10])
    assert r.summary()["unresolved"] == unresolved, r.stderr
    for pid, n in per_root.items():
        assert pl[pid]["samples"] == n, (pid, pl[pid], n)
    need(got, parent, "parent_loop", 0.4, "the launched 3.14 parent")
    need(got, child, "child_315_spin", 0.4, "its 3.15 child")
    need(got, grand, "grandchild_spin", 0.4, "its 3.13 grandchild")
    assert pl[child]["ppid"] == parent and pl[grand]["ppid"] == child, r.stderr


# --------------------------------------------------------------------------
# 7. children running before the recorder attached

def test_adopted_children(shared, procs, tmp_path):
    script = shared.script(TREE)
    p = start(procs, tmp_path, sid("3.15").argv([script, "adopt", shared.seen]))
    shared.wait_roles(p, {"parent": 1, "adopted_child": 2})
    kids = shared.pids("adopted_child")
    secs = 1.5
    rec, out = record_tree(procs, tmp_path, p.pid, ["--subprocesses"], duration=secs)
    try:
        cpu0 = {pid: proc_cpu(pid) for pid in kids + [p.pid]}
        samples, pl = finish(rec, out, duration=secs, ended=None)
        cpu = {pid: proc_cpu(pid) - c for pid, c in cpu0.items()}
    finally:
        shared.touch("stop")
    roles = shared.roles()
    got = role_samples(samples, roles, script, TREE)
    check_tree_stacks(samples, script, TREE)
    for pid, fn in [(k, "adopted_child_spin") for k in kids] + [(p.pid, "parent_loop")]:
        if pid != p.pid:
            assert pl[pid]["ppid"] == p.pid and pl[pid]["version"] == roles[pid][1], pl[pid]
        # The rate x the CPU time each had during the recording (three
        # processes spinning on a shared machine: whatever share they got).
        want = HZ * cpu[pid]
        assert got[pid][fn] >= 0.8 * want - 20, (
            f"pid {pid}: {dict(got[pid])} for {cpu[pid]:.2f} s of CPU at {HZ} Hz\n"
            f"{rec.stderr}")
    assert p.wait(timeout=30) == 0, stderr_text(p)


# --------------------------------------------------------------------------
# 8. refused

@pytest.mark.parametrize("args,says", [
    (["--subprocesses", "--events", "thread"], "--subprocesses needs per-CPU events"),
    (["--subprocesses", "--backend", "remote"],
     "--subprocesses and several -p targets are for the BPF backend"),
    (["--events", "thread", "-p", "2"], "several -p targets need per-CPU events"),
    (["--backend", "remote", "-p", "2"],
     "--subprocesses and several -p targets are for the BPF backend"),
    (["-p", "12,x"], "invalid PID: x"),
    (["-p", "x,12"], "invalid PID: x"),
    (["-p", "12,-3"], "invalid PID: -3"),
    (["-p", "12,"], "invalid PID list: an empty element"),
    (["-p", "12,,34"], "invalid PID list: an empty element"),
    (["-p", "12,12"], "PID 12 given twice"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_refused(args, says, tmp_path):
    # A live Python target (this test), so that only the options are wrong.
    argv = [binary(), "record", "-p", str(os.getpid()), "-d", "1",
            "-o", str(tmp_path / "x.perf")] + args
    p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=60)
    assert p.returncode == USAGE and says in p.stderr, (argv, p.returncode, p.stderr)
    assert p.stdout == "" and not (tmp_path / "x.perf").exists()
    assert "sampling process" not in p.stderr
