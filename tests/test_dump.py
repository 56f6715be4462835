"""End-to-end tests of `pyprof-bpf dump -p PID [--json]`.

Each test starts tests/targets/parked.py on a real interpreter (every one that
pyenvs.supported() lists: static builds in the Debian sid chroot, the debug
build, pyenv shared builds, /usr/bin/python3.11), in a PID namespace, and from
an executable that was deleted or replaced after start. The target records its
own stacks with sys._current_frames(); `dump --json` must match them exactly,
thread by thread (host tid), frame by frame (function, file, line).

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v tests/test_dump.py </dev/null
Nothing is skipped: a missing binary or interpreter is a failure.
"""
import json
import os
import re
import shutil
import time
import uuid

import pytest

from lib.tool import run_tool
from lib.interps import SUPPORTED, by_label
from lib.procs import (
    TARGETS, Procs, comm, host_pid_of, ns_to_host_tids, out_path, stage_unique, stderr_of,
    wait_file)

pytestmark = pytest.mark.root

PARKED = os.path.join(TARGETS, "parked.py")

# The documented --json shape (docs/usage.md): a thread's and a frame's keys.
THREAD_KEYS = {"tid", "name", "comm", "interpreter", "state", "syscall", "status", "in_gc",
               "frames"}
FRAME_KEYS = {"function", "file", "line", "end_line", "column", "end_column", "source",
              "source_changed"}


# --------------------------------------------------------------------------
# helpers shared with test_errors.py


class Target:
    def __init__(self, interp, popen, pid, expected, pidns):
        self.interp, self.popen, self.pid = interp, popen, pid
        self.expected, self.pidns = expected, pidns

    def describe(self):
        return (f"{self.interp.label}{' in a PID namespace' if self.pidns else ''} "
                f"(pid {self.pid})")


def start_parked(interp, procs, tmp_path, pidns=False, exe=None):
    """Starts parked.py and returns a Target whose .expected is the target's
    own record of its stacks, with host tids and pid, once the recorder
    thread is gone. exe: another executable path for interp (as it sees it)."""
    script = stage_unique(interp, PARKED, procs)
    seen, host = out_path(interp, procs, tmp_path, "expected.json")
    argv = interp.argv([script, seen], pidns=pidns)
    if exe is not None:
        argv[argv.index(interp.exe)] = exe
    p = procs.start(argv, str(tmp_path / "target.stderr"))
    what = f"parked.py on {interp.label}"
    wait_file(p, host, what)
    with open(host, encoding="utf-8") as f:
        exp = json.load(f)
    pid = host_pid_of(p, pidns)
    # Wait for the recorder thread to be gone: the tasks must be exactly the
    # recorded threads.
    want = {t["tid"] for t in exp["threads"]}
    deadline = time.monotonic() + 30
    while True:
        if p.poll() is not None:
            pytest.fail(f"{what} died: stderr:\n{stderr_of(p)}")
        m = ns_to_host_tids(pid)
        if set(m) == want:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: tasks {sorted(m)} never became the recorded "
                        f"threads {sorted(want)}")
        time.sleep(0.02)
    for t in exp["threads"]:
        t["ns_tid"] = t["tid"]
        t["tid"] = m[t["tid"]]
        t["threading_name"] = t.pop("name")
        t["comm"] = comm(pid, t["tid"])
    exp["ns_pid"] = exp["pid"]
    exp["pid"] = pid
    return Target(interp, p, pid, exp, pidns)


# --------------------------------------------------------------------------
# comparing


def fmt_frames(frames):
    return "\n".join(f"      {f.get('function')!s:45} {f.get('file')}:{f.get('line')}"
                     for f in frames) or "      (no frames)"


def frames_diff(exp, got):
    """A readable account of where two frame lists (innermost first) differ."""
    lines = []
    n = max(len(exp), len(got))
    for i in range(n):
        e = exp[i] if i < len(exp) else None
        g = got[i] if i < len(got) else None
        if e != g:
            lines.append(f"      #{i}: expected {e}\n      #{i}:      got {g}")
            if len(lines) >= 6:
                lines.append("      ...")
                break
    return "\n".join(lines)


def valid_utf8_prefix(b):
    for cut in range(len(b), -1, -1):
        try:
            return b[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


def name_problem(target, t, got):
    """None if the dump's thread entry got names thread t right (its whole
    threading name, and the kernel's comm beside it), else a description."""
    if not isinstance(got.get("name"), str) or not isinstance(got.get("comm"), str):
        return f"name {got.get('name')!r} or comm {got.get('comm')!r} is not a string"
    if got["name"] != t["threading_name"]:
        return f"name {got['name']!r}, expected {t['threading_name']!r} (threading's)"
    raw = t["comm"]
    try:
        want = raw.decode("utf-8")
    except UnicodeDecodeError:
        # The kernel's 15-byte cut fell inside a UTF-8 character: accept any
        # faithful rendering of the valid prefix plus a marker for the rest.
        prefix = valid_utf8_prefix(raw)
        if got["comm"].startswith(prefix) and len(got["comm"]) <= len(prefix) + 8:
            return None
        return f"comm {got['comm']!r} does not render comm {raw!r}"
    if got["comm"] != want:
        return f"comm {got['comm']!r}, expected {want!r} (/proc/.../comm)"
    return None


def check_json(target, proc):
    """Compares `dump --json` output with the target's own record."""
    exp = target.expected
    where = target.describe()
    assert proc.returncode == 0, (
        f"{where}: dump --json exited {proc.returncode}; stderr:\n"
        f"{proc.stderr.decode('utf-8', 'replace')}")
    try:
        text = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        pytest.fail(f"{where}: dump --json output is not UTF-8: {e}")
    try:
        got = json.loads(text)
    except ValueError as e:
        pytest.fail(f"{where}: dump --json output is not one JSON document: {e}\n"
                    f"{text[:2000]}")
    problems = []
    if not isinstance(got, dict) or set(got) != {"pid", "python", "threads"}:
        pytest.fail(f"{where}: top level must be exactly "
                    f"{{pid, python, threads}}, got {str(got)[:500]}")
    if got["pid"] != exp["pid"]:
        problems.append(f"pid {got['pid']!r}, expected {exp['pid']}")
    if got["python"] != exp["python"]:
        problems.append(f"python {got['python']!r}, expected {exp['python']!r}")
    if exp["python"] != target.interp.version_str:
        problems.append(f"(target says {exp['python']}, interpreter "
                        f"{target.interp.version_str})")
    if not isinstance(got["threads"], list):
        pytest.fail(f"{where}: threads is not a list: {got['threads']!r}")
    got_by_tid = {}
    for t in got["threads"]:
        if not isinstance(t, dict) or set(t) != THREAD_KEYS:
            problems.append(f"thread entry must have exactly {sorted(THREAD_KEYS)}: "
                            f"{str(t)[:300]}")
            continue
        if t["tid"] in got_by_tid:
            problems.append(f"thread {t['tid']} listed twice")
        got_by_tid[t["tid"]] = t
        for f in t["frames"]:
            if (not isinstance(f, dict) or set(f) != FRAME_KEYS
                    or not isinstance(f["line"], int)):
                problems.append(f"thread {t['tid']}: malformed frame {f!r}")
                break
    exp_by_tid = {t["tid"]: t for t in exp["threads"]}
    for tid in sorted(set(got_by_tid) - set(exp_by_tid)):
        problems.append(f"unexpected thread {tid} (not a thread of the target): "
                        f"name {got_by_tid[tid].get('name')!r}\n"
                        f"{fmt_frames(got_by_tid[tid]['frames'])}")
    for tid, et in sorted(exp_by_tid.items()):
        label = f"thread {tid} ({et['threading_name']}"
        label += f", {et['ns_tid']} in its namespace)" if target.pidns else ")"
        gt = got_by_tid.get(tid)
        if gt is None:
            problems.append(f"{label}: missing from the dump; expected\n"
                            f"{fmt_frames(et['frames'])}")
            continue
        np = name_problem(target, et, gt)
        if np:
            problems.append(f"{label}: {np}")
        # the target records function, file and line; dump adds more
        gt = dict(gt, frames=[{k: f[k] for k in ("function", "file", "line")}
                              for f in gt["frames"]])
        if gt["frames"] != et["frames"]:
            problems.append(
                f"{label}: frames differ ({len(et['frames'])} expected, "
                f"{len(gt['frames'])} got), innermost first:\n"
                f"{frames_diff(et['frames'], gt['frames'])}\n"
                f"    expected:\n{fmt_frames(et['frames'])}\n"
                f"    got:\n{fmt_frames(gt['frames'])}")
    if problems:
        pytest.fail(f"{where}: dump --json differs from sys._current_frames():\n"
                    + "\n".join("  - " + p for p in problems), pytrace=False)


FRAME_RES = [
    re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>-?\d+), in (?P<func>.+?)\s*$'),
    re.compile(r'^\s*(?:at\s+)?(?P<func>\S.*?) \((?P<file>.*):(?P<line>-?\d+)\)\s*$'),
]


def parse_frame(line):
    for r in FRAME_RES:
        m = r.match(line)
        if m:
            return (m["func"], m["file"], int(m["line"]))
    return None


def check_text(target, proc):
    """The text form: a header per thread naming its tid, then its frames
    outermost first (most recent call last), each either
    `File "F", line N, in FUNC` or `FUNC (F:N)`."""
    exp = target.expected
    where = target.describe()
    assert proc.returncode == 0, (
        f"{where}: dump exited {proc.returncode}; stderr:\n"
        f"{proc.stderr.decode('utf-8', 'replace')}")
    text = proc.stdout.decode("utf-8")   # must be UTF-8
    lines = text.splitlines()
    tids = [t["tid"] for t in exp["threads"]]
    blocks = []        # (gap lines, frames)
    gap, frames = [], []
    for line in lines:
        fr = parse_frame(line)
        if fr:
            frames.append(fr)
            continue
        if frames:
            blocks.append((gap, frames))
            gap, frames = [], []
        gap.append(line)
    if frames:
        blocks.append((gap, frames))
    problems = []
    seen = {}
    for gap, frames in blocks:
        g = "\n".join(gap)
        found = [t for t in tids if re.search(rf"(?<!\d){t}(?!\d)", g)]
        if len(found) > 1 and exp["pid"] in found:
            found.remove(exp["pid"])     # a process header above a thread's
        if len(found) != 1:
            problems.append(f"cannot tell which thread these frames belong to "
                            f"(tids named above them: {found}):\n  " + "\n  ".join(gap[-3:]))
            continue
        seen[found[0]] = (g, frames)
    for t in exp["threads"]:
        want = [(f["function"], f["file"], f["line"]) for f in reversed(t["frames"])]
        if t["tid"] not in seen:
            problems.append(f"thread {t['tid']} ({t['threading_name']}): no header "
                            f"naming its tid followed by frame lines")
            continue
        header, frames = seen[t["tid"]]
        if frames == list(reversed(want)) and len(want) > 1:
            problems.append(f"thread {t['tid']} ({t['threading_name']}): frames are "
                            f"innermost first; a traceback is most recent call last")
        elif frames != want:
            i = next((i for i, (a, b) in enumerate(zip(want, frames)) if a != b),
                     min(len(want), len(frames)))
            problems.append(
                f"thread {t['tid']} ({t['threading_name']}): text frames differ "
                f"({len(want)} expected, {len(frames)} got); first difference at "
                f"#{i} counting from the outermost:\n"
                f"    expected: {want[i] if i < len(want) else None}\n"
                f"    got:      {frames[i] if i < len(frames) else None}")
        try:
            comm_text = t["comm"].decode("utf-8")
        except UnicodeDecodeError:
            comm_text = valid_utf8_prefix(t["comm"])
        for name in (t["threading_name"], comm_text):
            if f'"{name}"' not in header:
                problems.append(f"thread {t['tid']}: name {name!r} not in its "
                                f"header {header!r}")
    if problems:
        pytest.fail(f"{where}: text dump is wrong:\n"
                    + "\n".join("  - " + p for p in problems)
                    + "\n--- output ---\n" + text[:4000], pytrace=False)


def dump_and_check(target):
    proc = run_tool(["dump", "-p", str(target.pid), "--json"])
    check_json(target, proc)
    proc = run_tool(["dump", "-p", str(target.pid), "--no-source"])
    check_text(target, proc)


# --------------------------------------------------------------------------
# the target itself: these run without the binary and guard the expectations


def check_expectations(target):
    """What parked.py recorded has the shapes the target is meant to create;
    if this fails the target is broken on this interpreter, not the dump."""
    exp = target.expected
    by_name = {t["threading_name"]: t for t in exp["threads"]}
    assert exp["python"] == target.interp.version_str
    assert exp["ns_pid"] == (1 if target.pidns else target.pid)
    assert len(exp["threads"]) == 17, sorted(by_name)
    funcs = {n: [f["function"] for f in t["frames"]] for n, t in by_name.items()}
    script = by_name["MainThread"]["frames"][-1]["file"]
    assert funcs["MainThread"] == ["sleep_forever", "main", "<module>"]
    assert funcs["method"][:4] == ["Condition.wait", "Event.wait", "wait_forever",
                                   "Parker.wait_here"]
    assert "Outer.Inner.meth" in funcs["nested-class"]
    assert "make_closure.<locals>.closure" in funcs["closure"]
    assert funcs["lambda"][1:3] == ["<lambda>", "t_lambda.<locals>.<lambda>"]
    assert funcs["generator"][1:4] == ["inner_gen", "outer_gen", "t_generator"]
    assert funcs["coroutine"][1:4] == ["coro_inner", "coro_outer", "t_coroutine"]
    assert funcs["recursion-30"].count("recurse") == 30
    assert funcs["deep-recursion-200"].count("recurse") == 200
    assert funcs["c-callback"][1:4] == ["t_c_callback.<locals>.<lambda>.<locals>.<lambda>",
                                        "t_c_callback.<locals>.<lambda>", "t_c_callback"]
    assert funcs["init-shim"][1:3] == ["Widget.__init__", "t_init"]
    assert funcs["property"][1:3] == ["Holder.value", "t_property"]
    assert funcs["größe-ünï"][1:4] == ["Ünïcødé.方法.<locals>.ß_inner", "Ünïcødé.方法",
                                       "größe"]
    gen = by_name["exec-generated"]["frames"]
    assert [(f["function"], f["file"]) for f in gen[1:4]] == [
        ("generated_leaf", "<generated>"), ("generated_mid", "<generated>"),
        ("<module>", "<generated>")]
    assert all(f["line"] > 3000 for f in gen[1:4])
    mod = by_name["処理スレッド"]["frames"]
    assert [f["function"] for f in mod[1:4]] == ["𠀀𠀁", "処理.実行", "run"]
    assert all(f["file"] == "/opt/app/модуль_𝄞.py" and f["line"] > 2000
               for f in mod[1:4])
    for t in exp["threads"]:
        if t["threading_name"] != "MainThread":
            assert t["frames"][-1]["function"] in ("Thread._bootstrap", "_bootstrap")
        assert all(isinstance(f["line"], int) for f in t["frames"]), t
        assert any(f["file"] == script for f in t["frames"])
    if target.interp.version >= (3, 14):
        # the names the dump will be checked against are the threading names
        for n, t in by_name.items():
            if n != "MainThread":
                assert t["comm"] == n.encode()[:15], (n, t["comm"])


def check_stable(target):
    """The stacks do not move: the target is still alive and its tasks are
    exactly the recorded threads."""
    assert target.popen.poll() is None, stderr_of(target.popen)
    m = ns_to_host_tids(target.pid)
    assert sorted(m.values()) == sorted(t["tid"] for t in target.expected["threads"])


@pytest.fixture(scope="module")
def parked(tmp_path_factory):
    """parked(interp, pidns=False): start_parked() once per interpreter and namespace
    for the tests that only look at the target (its own record, then a dump: the
    same target the two used to start each), kept until the module ends (parked.py's
    threads sleep)."""
    ps, started = Procs(), {}

    def get(interp, pidns=False):
        key = (interp.label, pidns)
        if key not in started:
            started[key] = start_parked(interp, ps, tmp_path_factory.mktemp("parked"),
                                        pidns=pidns)
        return started[key]
    yield get
    ps.close()


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
@pytest.mark.parametrize("pidns", [False, True], ids=["host", "pidns"])
def test_target_records_its_stacks(interp, pidns, parked):
    target = parked(interp, pidns)
    check_expectations(target)
    time.sleep(0.5)
    check_stable(target)


# --------------------------------------------------------------------------
# the dump


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_dump_matches_current_frames(interp, parked):
    target = parked(interp)
    dump_and_check(target)
    check_stable(target)


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_dump_in_pid_namespace(interp, parked):
    target = parked(interp, pidns=True)
    assert target.expected["ns_pid"] == 1
    dump_and_check(target)
    check_stable(target)


def test_pid_namespace_cases_cover_required_interpreters():
    """The PID-namespace cases must include 3.14, 3.15 and a pyenv build."""
    labels = [i.label for i in SUPPORTED]
    assert any(i.version[:2] == (3, 14) for i in SUPPORTED), labels
    assert any(i.version[:2] == (3, 15) for i in SUPPORTED), labels
    assert any(i.label.startswith("pyenv-") for i in SUPPORTED), labels
    assert any(i.label.startswith("sid-") and i.version[:2] == (3, 14)
               and i.exe.endswith("d") for i in SUPPORTED), f"no debug build: {labels}"


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_dump_deleted_executable(how, procs, tmp_path):
    """The target's executable is a copy of sid's python3.14 that is deleted
    (or deleted and replaced by python3.13 under the same name) after start:
    the dump must read the running image (/proc/PID/map_files), not the path."""
    interp = by_label("sid-3.14")
    other = by_label("sid-3.13")
    assert interp.root, "sid-3.14 must be a chroot interpreter"
    name = f"/tmp/pyprof-tests/python3.14-{how}-{uuid.uuid4().hex[:8]}"
    host = interp.host_path(name)
    os.makedirs(os.path.dirname(host), exist_ok=True)
    procs.cleanup_file(host)
    shutil.copy2(interp.host_path(interp.exe), host)
    target = start_parked(interp, procs, tmp_path, exe=name)
    os.unlink(host)
    if how == "replaced":
        shutil.copy2(other.host_path(other.exe), host)
    with open(f"/proc/{target.pid}/maps") as f:
        maps = f.read()
    assert "(deleted)" in maps, "the executable should show as deleted"
    dump_and_check(target)
    check_stable(target)


# --------------------------------------------------------------------------
# a target whose stacks change while it is dumped

CHURN = os.path.join(TARGETS, "churn.py")
STDLIB = re.compile(r"/lib/python3\.\d+d?/[\w/]+\.py$")


def code_qualnames(path):
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    out, todo = set(), [code]
    while todo:
        c = todo.pop()
        out.add(getattr(c, "co_qualname", c.co_name))
        todo.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    return out


def check_shape(doc, pid, what):
    """The documented --json shape, exactly."""
    assert isinstance(doc, dict) and set(doc) == {"pid", "python", "threads"}, \
        f"{what}: top level keys {sorted(doc) if isinstance(doc, dict) else doc!r}"
    assert doc["pid"] == pid and isinstance(doc["python"], str), what
    for t in doc["threads"]:
        assert THREAD_KEYS <= set(t) <= THREAD_KEYS | {"truncated"}, (
            f"{what}: thread keys {sorted(t)}, expected exactly {sorted(THREAD_KEYS)} "
            f"(and \"truncated\" when cut)")
        assert isinstance(t["tid"], int) and isinstance(t["name"], str), f"{what}: {t}"
        for f in t["frames"]:
            ok = (set(f) == FRAME_KEYS and isinstance(f["function"], str)
                  and isinstance(f["file"], str) and isinstance(f["line"], int))
            assert ok, f"{what}: thread {t['tid']}: frame {f} is not of the documented shape"


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_dump_of_changing_target(interp, procs, tmp_path):
    """churn.py never stops changing its stacks and threads. Every dump must
    succeed or fail with one error line; successful ones (most of them) must
    have the documented shape and only possible stacks: functions that exist
    in the target (or threading.py/random.py) and no deeper than it goes."""
    script = stage_unique(interp, CHURN, procs)
    seen, host = out_path(interp, procs, tmp_path, "churn.ready")
    p = procs.start(interp.argv([script, seen, "0"]), str(tmp_path / "churn.stderr"))
    wait_file(p, host, f"churn.py on {interp.label}")
    known = code_qualnames(CHURN)
    DUMPS = 40
    ok, errors, problems = 0, [], []
    for n in range(DUMPS):
        proc = run_tool(["dump", "-p", str(p.pid), "--json"])
        what = f"{interp.label} dump {n}"
        assert proc.returncode >= 0, f"{what}: killed by signal {-proc.returncode}"
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").rstrip("\n")
            assert err and "\n" not in err, f"{what}: not one error line: {err!r}"
            errors.append(err)
            continue
        ok += 1
        doc = json.loads(proc.stdout.decode("utf-8"))
        try:
            check_shape(doc, p.pid, what)
        except AssertionError as e:
            problems.append(str(e).split("\n")[0][:300])
        for t in doc["threads"]:
            if not isinstance(t, dict) or not isinstance(t.get("frames"), list):
                continue
            bad = [i for i, f in enumerate(t["frames"])
                   if not (isinstance(f, dict) and (
                       (f.get("file") == script and f.get("function") in known)
                       or STDLIB.search(str(f.get("file")))))]
            if bad:
                problems.append(
                    f"{what}: thread {t['tid']} ({t.get('name')}): frames {bad[:5]} of "
                    f"{len(t['frames'])} (innermost first) are impossible, e.g. "
                    f"{t['frames'][bad[0]]}; the stack: "
                    + " < ".join(str(f.get("function")) for f in t["frames"][:12]))
            if len(t["frames"]) > 200:
                problems.append(f"{what}: thread {t['tid']}: {len(t['frames'])} "
                                f"frames; churn.py never goes deeper than ~160")
    assert p.poll() is None, stderr_of(p)
    if problems:
        pytest.fail(f"{interp.label}: {len(problems)} problems in {ok} successful "
                    f"dumps:\n  " + "\n  ".join(problems[:12]), pytrace=False)
    assert ok >= DUMPS * 3 // 4, (f"{interp.label}: only {ok} of {DUMPS} dumps "
                                  f"worked: {errors[:5]}")
