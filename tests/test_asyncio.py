"""End-to-end tests of `pyprof-bpf dump --async -p PID [--json]` (issue #12).

Targets (tests/targets/async_*.py) run on the Debian sid root's python3.14 and
python3.15, each in a private mount namespace with /proc mounted inside the
root, so that CPython's own tool can run in the root next to it (nsenter into
the target's mount namespace): `python3.X -m asyncio ps PID` and `pstree PID`
are run with the target's own interpreter, their output parsed, and compared
with ours: the same tasks (id = the task object's address), names, awaiters
and coroutine frames (function, file, line).

Known difference: 3.14's `ps`/`pstree` list the tasks of the main thread and of
finished threads only; 3.15's, like ours, those of every thread.

Also: 10,000 pending tasks, and 10,000 with their loop never idle (all
listed, named, under load; paused, as ps has them), a 2,000-deep chain of
tasks and a 2,000-deep coroutine chain, await cycles, tasks ending while the
dump reads them (bounded time, exact or marked [torn]), chains through async
generators (paused, on 3.15 against CPython's _remote_debugging), and the
refusal on 3.11 to 3.13.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v tests/test_asyncio.py </dev/null
"""
import collections
import json
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from lib import pyenvs
from lib.tool import run_tool
from lib.interps import by_label
from lib.procs import out_path, stage_unique, wait_file

pytestmark = [pytest.mark.root, pytest.mark.slow]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
ASYNC_LABELS = ["sid-3.14", "sid-3.15", "sid-3.14d"]
REFUSED_LABELS = ["pyenv-3.11.7", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.13", "system-3.11"]
# A hang or a walk that does not end is what these catch, not slowness.
BOUND = 30


# --------------------------------------------------------------------------
# starting targets and running the real tool


class AsyncTarget:
    def __init__(self, interp, popen, pid):
        self.interp, self.popen, self.pid = interp, popen, pid

    def real_tool(self, cmd, timeout=120):
        """`python3.X -m asyncio CMD PID` with the target's interpreter, in its
        mount namespace (where /proc is mounted inside the root)."""
        argv = ["nsenter", "--mount", f"--target={self.pid}"] + \
            self.interp.argv(["-m", "asyncio", cmd, str(self.pid)])
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, text=True)

    def dump(self, json_out=True, timeout=BOUND):
        args = ["dump", "--async", "-p", str(self.pid)] + (["--json"] if json_out else [])
        t0 = time.monotonic()
        proc = run_tool(args, timeout=timeout)
        took = time.monotonic() - t0
        assert proc.returncode == 0, (
            f"{self.interp.label}: dump --async exited {proc.returncode}: "
            f"{proc.stderr.decode('utf-8', 'replace')}")
        text = proc.stdout.decode("utf-8")
        if not json_out:
            return text, took
        doc = json.loads(text)
        check_shape(doc, self.pid, self.interp)
        return doc, took


def start(interp, procs, tmp_path, script, *args, pidns=False):
    """Starts tests/targets/SCRIPT on interp and waits for its ready file.
    pidns: in a PID namespace of its own (then no real tool beside it)."""
    seen_script = stage_unique(interp, os.path.join(TARGETS, script), procs)
    seen, host = out_path(interp, procs, tmp_path, "ready")
    cmd = interp.argv([seen_script, seen] + [str(a) for a in args], pidns=pidns)
    if pidns:
        p = procs.start(cmd, str(tmp_path / f"{script}.stderr"))
        wait_file(p, host, f"{script} on {interp.label}")
        return AsyncTarget(interp, p, pyenvs.leaf_pid(p.pid))
    if interp.root:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               f"mount -t proc proc {shlex.quote(os.path.join(interp.root, 'proc'))} && "
               f"exec {shlex.join(cmd)}"]
    p = procs.start(cmd, str(tmp_path / f"{script}.stderr"))
    wait_file(p, host, f"{script} on {interp.label}")
    return AsyncTarget(interp, p, p.pid)


def check_shape(doc, pid, interp):
    assert set(doc) == {"pid", "python", "torn", "finished_during_dump", "lists_truncated",
                        "lists_torn", "tasks"}, doc.keys()
    assert doc["pid"] == pid
    assert doc["python"] == interp.version_str
    for t in doc["tasks"]:
        assert {"id", "name", "tid", "running", "state", "frames", "awaited_by"} <= set(t), t
        assert isinstance(t["id"], int) and isinstance(t["name"], str)
        for f in t["frames"]:
            assert set(f) == {"function", "file", "line"}, f


# --------------------------------------------------------------------------
# the real tool's output, parsed


PsTask = collections.namedtuple("PsTask", "tid id name stack awaiters")


def parse_ps(text):
    """{task id: PsTask} from `python -m asyncio ps`: columns found from the
    header; one row per (task, awaiter)."""
    lines = text.splitlines()
    assert lines and lines[0].startswith("tid"), f"not ps output:\n{text[:2000]}"
    head = lines[0]
    cols = ["tid", "task id", "task name", "coroutine stack", "awaiter chain",
            "awaiter name", "awaiter id"]
    starts = [head.index(c) for c in cols] + [None]
    out = {}
    for line in lines[2:]:
        if not line.strip():
            continue
        f = [line[starts[i]:starts[i + 1]].strip() for i in range(len(cols))]
        assert re.fullmatch(r"0x[0-9a-f]+", f[1]) and re.fullmatch(r"0x[0-9a-f]+", f[6]), \
            f"ps row not parsed (a column overflowed?): {line!r}"
        tid, tid_ = int(f[0]), int(f[1], 16)
        stack = f[3].split(" -> ") if f[3] else []
        t = out.setdefault(tid_, PsTask(tid, tid_, f[2], stack, set()))
        assert t.name == f[2] and t.stack == stack, f"task {f[1]} listed twice differently"
        if f[6] != "0x0":
            t.awaiters.add(int(f[6], 16))
    return out


def pstree_lines(tasks):
    """Our tasks drawn the way `python -m asyncio pstree` draws them (acyclic
    graphs): a task, its coroutine frames outermost first, under the innermost
    the tasks it awaits; roots in list order."""
    ids = {t["id"]: t for t in tasks}
    kids = collections.defaultdict(list)
    has_parent = set()
    for t in tasks:
        for a in t["awaited_by"]:
            if a in ids and t["id"] not in kids[a]:
                kids[a].append(t["id"])
                has_parent.add(t["id"])

    def children(node):
        if node[0] == "T":
            t = ids[node[1]]
            if t["frames"]:
                return [("F", node[1], 0)]
            return [("T", c) for c in kids[node[1]]]
        t = ids[node[1]]
        if node[2] + 1 < len(t["frames"]):
            return [("F", node[1], node[2] + 1)]
        return [("T", c) for c in kids[node[1]]]

    def label(node):
        t = ids[node[1]]
        if node[0] == "T":
            return f"(T) {t['name']}"
        f = t["frames"][len(t["frames"]) - 1 - node[2]]
        if f["line"] is None:
            return f" {f['function']} {f['file']}"
        return f" {f['function']} {f['file']}:{f['line']}"

    lines = []
    for t in tasks:
        if t["id"] in has_parent:
            continue
        stack = [(("T", t["id"]), "", True)]
        while stack:
            node, prefix, last = stack.pop()
            lines.append(prefix + ("└── " if last else "├── ") + label(node))
            newp = prefix + ("    " if last else "│   ")
            ch = children(node)
            for i in range(len(ch) - 1, -1, -1):
                stack.append((ch[i], newp, i == len(ch) - 1))
    return lines


def compare_with_ps(target, doc, ps):
    """Every task ps lists is ours with the same name, coroutine stack and
    awaiters; on 3.15 nothing more, on 3.14 more only on other threads."""
    ours = {t["id"]: t for t in doc["tasks"]}
    problems = []
    for tid, p in ps.items():
        t = ours.get(tid)
        if t is None:
            problems.append(f"ps lists {p} and we do not")
            continue
        funcs = [f["function"] for f in t["frames"]]
        if t["running"] and p.stack:
            # ps stops at a running task's coroutine; we go on to the
            # thread's innermost frame
            funcs = funcs[-len(p.stack):]
        if t["name"] != p.name:
            problems.append(f"{hex(tid)}: name {t['name']!r}, ps {p.name!r}")
        if funcs != p.stack:
            problems.append(f"{hex(tid)} {p.name}: frames {funcs}, ps {p.stack}")
        if set(t["awaited_by"]) != p.awaiters:
            problems.append(f"{hex(tid)} {p.name}: awaited by {sorted(map(hex, t['awaited_by']))}"
                            f", ps {sorted(map(hex, p.awaiters))}")
        if (t["tid"] or 0) != p.tid:
            problems.append(f"{hex(tid)} {p.name}: tid {t['tid']}, ps {p.tid}")
    extra = [t for i, t in ours.items() if i not in ps]
    if target.interp.version >= (3, 15):
        problems += [f"we list {t['name']} ({hex(t['id'])}), ps does not" for t in extra]
    else:
        problems += [f"we list {t['name']} ({hex(t['id'])}) of the main thread, ps does not"
                     for t in extra if t["tid"] in (None, target.pid)]
    assert not problems, f"{target.interp.label}: dump --async --json differs from " \
        f"`python -m asyncio ps`:\n" + "\n".join("  - " + p for p in problems)


def strip_ids(text):
    """Our text tree without its header and task ids: pstree's shape."""
    body = text.split("\n\n", 1)[1]
    return [re.sub(r" \[0x[0-9a-f]+(, [a-z]+)*\]", "", line) for line in body.splitlines()]


# --------------------------------------------------------------------------
# tests


def interps(labels):
    return [pytest.param(label, id=label) for label in labels]


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_matches_ps_and_pstree(label, procs, tmp_path):
    """TaskGroup, gather, tasks awaiting tasks, wait_for, named and unnamed
    tasks, a method, another thread's loop, a finished thread's task."""
    target = start(by_label(label), procs, tmp_path, "async_mix.py")
    doc, _ = target.dump()
    text, _ = target.dump(json_out=False)
    ps = target.real_tool("ps")
    tree = target.real_tool("pstree")
    assert ps.returncode == 0 and tree.returncode == 0, (ps.stdout, ps.stderr, tree.stderr)
    parsed = parse_ps(ps.stdout)
    compare_with_ps(target, doc, parsed)
    names = {t["name"] for t in doc["tasks"]}
    for want in ("worker-1", "waiter", "method", "timed", "tg-child", "side-child", "orphan"):
        assert want in names, f"{label}: task {want} missing from {sorted(names)}"
    orphan = [t for t in doc["tasks"] if t["name"] == "orphan"][0]
    assert orphan["tid"] is None, "a finished thread's task has no thread"
    # pstree: the same lines, from the tasks it knows of
    shown = [t for t in doc["tasks"] if t["id"] in parsed]
    assert pstree_lines(shown) == tree.stdout.splitlines(), \
        f"{label}: our tasks drawn as pstree differ from pstree:\nours:\n" + \
        "\n".join(pstree_lines(shown)) + f"\npstree:\n{tree.stdout}"
    if target.interp.version >= (3, 15):
        assert strip_ids(text) == tree.stdout.splitlines(), \
            f"{label}: text tree differs from pstree:\n{text}\npstree:\n{tree.stdout}"
    else:
        assert len(strip_ids(text)) > len(tree.stdout.splitlines())


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_ten_thousand_tasks(label, procs, tmp_path):
    target = start(by_label(label), procs, tmp_path, "async_many.py", 10000)
    doc, took = target.dump()
    assert len(doc["tasks"]) == 10001
    compare_with_ps(target, doc, parse_ps(target.real_tool("ps").stdout))
    text, took_text = target.dump(json_out=False)
    assert text.count("(T) ") == 10001
    print(f"{label}: 10,001 tasks: --json {took:.2f} s, text {took_text:.2f} s")


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_deep_task_chain(label, procs, tmp_path):
    """2,000 tasks each awaiting the next: ps agrees; the text tree shows
    every task, the deep part going on at the margin."""
    target = start(by_label(label), procs, tmp_path, "async_chain.py", "tasks", 2000)
    doc, took = target.dump()
    assert len(doc["tasks"]) == 2002
    compare_with_ps(target, doc, parse_ps(target.real_tool("ps").stdout))
    text, _ = target.dump(json_out=False)
    shown = re.findall(r"\(T\) (\S+) \[0x[0-9a-f]+\]$", text, re.M)
    assert set(shown) == {t["name"] for t in doc["tasks"]}
    assert "(continued below)" in text
    print(f"{label}: 2,002 tasks in {took:.2f} s")


@pytest.mark.parametrize("label", interps(["sid-3.15"]))
def test_ten_thousand_deep_chain(label, procs, tmp_path):
    """10,001 tasks each awaiting the next: every link right, the text tree
    bounded (no recursion, indentation capped)."""
    target = start(by_label(label), procs, tmp_path, "async_chain.py", "tasks", 10000)
    doc, took = target.dump()
    byname = {t["name"]: t for t in doc["tasks"]}
    assert len(doc["tasks"]) == 10002
    for i in range(1, 10001):
        assert byname[f"link-{i}"]["awaited_by"] == [byname[f"link-{i - 1}"]["id"]], i
    text, took_text = target.dump(json_out=False)
    shown = set(re.findall(r"\(T\) (\S+) \[0x[0-9a-f]+\]$", text, re.M))
    assert shown == set(byname)
    assert max(len(line) for line in text.splitlines()) < 2000
    print(f"{label}: a 10,001-task chain: --json {took:.2f} s, text {took_text:.2f} s "
          f"({len(text) >> 20} MB)")


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_deep_coroutine_chain(label, procs, tmp_path):
    """A task awaiting a coroutine 2,000 deep: cut at 1,536 levels and
    marked (CPython's ps gives up on it: 'Too many coroutine frames')."""
    target = start(by_label(label), procs, tmp_path, "async_chain.py", "coro", 2000)
    doc, _ = target.dump()
    deep = [t for t in doc["tasks"] if t["name"] == "deep"]
    assert len(deep) == 1
    t = deep[0]
    assert t.get("frames_truncated") is True
    assert t["frames"][0]["function"] == "[truncated]"
    funcs = [f["function"] for f in t["frames"][1:]]
    assert funcs == ["deep"] * 1536, funcs[:5]
    lines = {f["line"] for f in t["frames"][1:]}
    assert len(lines) == 1, f"every deep() awaits on one line: {lines}"
    text, _ = target.dump(json_out=False)
    assert "frames ..." in text


def cycles_of(lines):
    """{rotation-normalised cycle} from 'cycle: a → b → a' lines."""
    out = set()
    for line in lines:
        if line.startswith("cycle: "):
            names = line[len("cycle: "):].split(" → ")[:-1]
            k = names.index(min(names))
            out.add(tuple(names[k:] + names[:k]))
    return out


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_await_cycles(label, procs, tmp_path):
    target = start(by_label(label), procs, tmp_path, "async_cycle.py")
    doc, _ = target.dump()
    compare_with_ps(target, doc, parse_ps(target.real_tool("ps").stdout))
    tree = target.real_tool("pstree")
    assert tree.returncode == 1 and "ERROR: await-graph contains cycles" in tree.stderr, \
        tree.stderr
    text, _ = target.dump(json_out=False)
    ours, theirs = cycles_of(text.splitlines()), cycles_of(tree.stderr.splitlines())
    assert ours == theirs == {("a", "b"), ("c", "d", "e")} or ours == theirs, (ours, theirs)
    # every task is drawn, each cycle cut where it comes back
    shown = re.findall(r"\(T\) (\S+) \[0x[0-9a-f]+\]", text)
    assert set(shown) == {t["name"] for t in doc["tasks"]}
    assert text.count("(cycle: awaits a task above, not followed)") == 2


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_tasks_ending_while_read(label, procs, tmp_path):
    """Children start and end under 40 long-lived tasks, short tasks come and
    go: every dump ends in time, the long-lived tasks are all there with
    their frame (or marked [torn]), and a child is never shown awaited by
    another task than its parent."""
    target = start(by_label(label), procs, tmp_path, "async_churn.py")
    finished = torn = 0
    for _ in range(15):
        doc, took = target.dump()
        assert took < BOUND
        finished += doc["finished_during_dump"]
        torn += doc["torn"]
        ids = {t["id"]: t for t in doc["tasks"]}
        keepers = [t for t in doc["tasks"] if t["name"].startswith("keep-")]
        assert len(keepers) == 40, [t["name"] for t in keepers]
        for t in doc["tasks"]:
            funcs = [f["function"] for f in t["frames"]]
            # a task freed while read is left out, never shown from garbage
            assert re.fullmatch(r"keep-\d+|c-keep-\d+-\d+|s-\d+|spawner|Task-\d+",
                                t["name"]), t
            if t.get("torn"):
                assert funcs[-1] == "[torn]"
                continue
            if t["name"].startswith("keep-") and not t["running"]:
                assert funcs == ["keeper"], (t["name"], funcs)
            for a in t["awaited_by"]:
                if a in ids:
                    assert t["name"].startswith(f"c-{ids[a]['name']}-"), \
                        f"{t['name']} shown awaited by {ids[a]['name']}"
        assert sum(bool(t.get("torn")) for t in doc["tasks"]) == doc["torn"]
        assert doc["lists_torn"] == 0 and doc["lists_truncated"] == 0
    print(f"{label}: 15 dumps: {finished} tasks ended while read, {torn} torn")


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_running_task(label, procs, tmp_path):
    """The task a thread runs now: running, its frames the thread's stack
    down to the task's coroutine."""
    target = start(by_label(label), procs, tmp_path, "async_busy.py")
    for _ in range(5):
        doc, _ = target.dump()
        tasks = {t["name"]: t for t in doc["tasks"]}
        spinner = tasks["spinner"]
        assert spinner["running"] is True and spinner["state"] == "running", spinner
        funcs = [f["function"] for f in spinner["frames"]]
        assert funcs[-2:] == ["outer", "spin"] and funcs[0] in ("inner", "outer"), funcs
        assert tasks["sleeper"]["running"] is False
        assert [f["function"] for f in tasks["sleeper"]["frames"]] == ["sleep"]
        assert tasks["Task-1"]["state"] == "pending"


def paused(pid):
    """SIGSTOP the target and wait until every thread of it is stopped (the
    signal is delivered asynchronously). SIGCONT it again with resume()."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + BOUND
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass
        if states and all(st in "tT" for st in states):
            return
        assert time.monotonic() < deadline, f"{pid} did not stop: {states}"
        time.sleep(0.01)


def resume(pid):
    os.kill(pid, signal.SIGCONT)


REMOTE_DEBUGGING = """
import _remote_debugging, json, sys
u = _remote_debugging.RemoteUnwinder(int(sys.argv[1]))
out = []
for th in u.get_all_awaited_by():
    for t in th.awaited_by:
        out.append(dict(tid=th.thread_id, id=t.task_id, name=t.task_name,
                        stacks=[[[f.funcname, f.filename, f.location.lineno]
                                 for f in c.call_stack] for c in t.coroutine_stack],
                        awaited_by=[c.task_name for c in t.awaited_by]))
print(json.dumps(out))
"""


def remote_debugging(target):
    """CPython's own reading of the target's tasks (3.15's _remote_debugging,
    run with the target's interpreter in its mount namespace): the process;
    its output parsed with parse_remote_debugging()."""
    argv = ["nsenter", "--mount", f"--target={target.pid}"] + \
        target.interp.argv(["-c", REMOTE_DEBUGGING, str(target.pid)])
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                          text=True)


def parse_remote_debugging(text):
    return {t["id"]: t for t in json.loads(text)}


def paused_read(target, theirs, tries=5):
    """Our dump and CPython's tool (theirs(): a finished process) on the
    target paused: (our doc, their process). A target stopped in the middle
    of pushing a frame of its running task gives a [torn] task (and maybe
    an error from their tool): then it runs on a little and is paused again."""
    for _ in range(tries):
        paused(target.pid)
        try:
            doc, _ = target.dump()
            proc = theirs() if doc["torn"] == 0 else None
        finally:
            resume(target.pid)
        if proc is not None and proc.returncode == 0:
            return doc, proc
        time.sleep(0.05)
    pytest.fail(f"{target.interp.label}: {tries} pauses, each with a torn task or their "
                f"tool failing: {doc['torn']} torn; {proc and proc.stderr}")


def source_line(path, func, text):
    """The first line after `def func(` in the file at path containing text."""
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s*(async )?def {func}\(", line))
    return next(i + 1 for i in range(start, len(lines)) if text in lines[i])


def async_gens_expected(target):
    """{task name: frames (function, line) innermost first} of the quiet
    tasks of targets/async_gens.py: each waits in asyncio.sleep."""
    src = os.path.join(TARGETS, "async_gens.py")
    tasks_py = target.interp.host_path(
        f"/usr/lib/python{target.interp.version[0]}.{target.interp.version[1]}/asyncio/tasks.py")
    sleep = ("sleep", source_line(tasks_py, "sleep", "await future"))

    def at(func, text):
        return (func, source_line(src, func, text))

    return {
        "consumer": [sleep, at("ticker", "sleep(3600)"), at("consumer", "async for")],
        "anext_user": [sleep, at("ticker", "sleep(3600)"), at("anext_user", "anext(")],
        # anext() with a default wraps the generator's asend awaitable once
        # more: the rule unwraps one awaitable only, as CPython's tools do
        "anext_default_user": [at("anext_default_user", "anext(")],
        "closer": [sleep, at("closing", "sleep(3600)"), at("closer", "aclose()")],
        "asender": [sleep, at("echo", "sleep(3600)"), at("asender", "asend(5)")],
        "thrower": [sleep, at("catcher", "sleep(3600)"), at("thrower", "athrow(")],
        "nested": [sleep, at("inner_gen", "sleep(3600)"), at("outer_gen", "async for"),
                   at("nested", "async for")],
        "anext-task": [sleep, at("ticker", "sleep(3600)")],
        "aclose-task": [sleep, at("closing", "sleep(3600)")],
        "Task-1": [at("main", "gather(")],
        "Task-2": [at("side", "await asyncio.create_task")],
    }


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_async_generators(label, procs, tmp_path):
    """Tasks awaiting async generators (async for, anext, asend, athrow,
    aclose, one generator iterating another), tasks made from anext() and
    aclose() awaitables, and tasks running inside a generator's step, read
    with the target paused: the frames through each generator; on 3.15 the
    same tasks, names, threads, frames and awaiters as _remote_debugging."""
    target = start(by_label(label), procs, tmp_path, "async_gens.py")
    if target.interp.version >= (3, 15):
        doc, proc = paused_read(target, lambda: remote_debugging(target))
        theirs = parse_remote_debugging(proc.stdout)
    else:
        doc, _ = paused_read(target, lambda: subprocess.CompletedProcess([], 0))
        theirs = None
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert len(tasks) == len(doc["tasks"]) == 13, sorted(tasks)
    assert doc["torn"] == 0 and doc["finished_during_dump"] == 0
    problems = []
    for name, want in async_gens_expected(target).items():
        t = tasks[name]
        got = [(f["function"], f["line"]) for f in t["frames"]]
        if got != want:
            problems.append(f"{name}: frames {got}, expected {want}")
        if t["state"] != "pending" or t["running"]:
            problems.append(f"{name}: state {t['state']}, expected pending")
    for name, outer in (("spinner", ["spin", "spinning_gen", "spinner"]),
                        ("anext-spinner", ["spin", "signalling_gen"])):
        t = tasks[name]
        funcs = [f["function"] for f in t["frames"]]
        if t["state"] != "running" or not t["running"]:
            problems.append(f"{name}: state {t['state']}, expected running")
        if funcs[-len(outer):] != outer or funcs[0] not in ("work", "spin") or \
                len(funcs) > len(outer) + 1:
            problems.append(f"{name}: frames {funcs}, expected [work] + {outer}")
    main, side = tasks["Task-1"]["id"], tasks["Task-2"]["id"]
    for t in doc["tasks"]:
        want = [] if t["name"] in ("Task-1", "Task-2") else \
            [side] if t["name"] == "anext-spinner" else [main]
        if t["awaited_by"] != want:
            problems.append(f"{t['name']}: awaited by {t['awaited_by']}, expected {want}")
    assert not problems, f"{label}:\n" + "\n".join("  - " + p for p in problems)
    if theirs is None:
        return
    # 3.15: field by field as CPython's own module reads the same paused target
    assert set(theirs) == {t["id"] for t in doc["tasks"]}
    for t in doc["tasks"]:
        r = theirs[t["id"]]
        ours = [[f["function"], f["file"], f["line"]] for f in t["frames"]]
        assert len(r["stacks"]) == 1, r
        # a running task: they stop at its coroutine, we go on to the
        # thread's innermost frame
        if t["running"]:
            ours = ours[-len(r["stacks"][0]):]
        assert (t["name"], t["tid"] or 0, ours, t["awaited_by"]) == \
            (r["name"], r["tid"], r["stacks"][0], r["awaited_by"]), (t, r)


def loaded_names(n):
    """{task name: its parent's name or None} of targets/async_loaded.py N."""
    out = {"Task-1": None}
    groups = n // 100
    for g in range(groups):
        out[f"g{g}"] = out[f"h{g}"] = None
        for j in range(9):
            out[f"g{g}-c{j}"], out[f"h{g}-c{j}"] = f"g{g}", f"h{g}"
    for i in range(n - 20 * groups):
        out[("b" if i % 2 == 0 else "i" if i % 4 == 1 else "f") + str(i)] = None
    return out


@pytest.mark.parametrize("label", interps(["sid-3.14", "sid-3.15"]))
def test_loaded_server(label, procs, tmp_path):
    """10,000 tasks while the loop never idles (half of them waking every
    0-3 ms): every task comes out, named, each child awaited by its parent
    (TaskGroup, gather); with the target paused, the same tasks, names,
    coroutine stacks and awaiters as `python -m asyncio ps`."""
    target = start(by_label(label), procs, tmp_path, "async_loaded.py", 10000)
    want = loaded_names(10000)
    took = []
    for _ in range(5):
        doc, t = target.dump()
        took.append(t)
        byid = {t["id"]: t for t in doc["tasks"]}
        names = [t["name"] for t in doc["tasks"]]
        assert len(names) == 10001 and set(names) == set(want), \
            f"{label}: {len(names)} tasks; missing {sorted(set(want) - set(names))[:20]}"
        assert doc["finished_during_dump"] == 0 and doc["lists_torn"] == 0
        for t in doc["tasks"]:
            if t.get("torn"):
                continue
            parents = [byid[a]["name"] for a in t["awaited_by"] if a in byid]
            assert parents == ([want[t["name"]]] if want[t["name"]] else []), \
                (t["name"], parents)
    doc, ps = paused_read(target, lambda: target.real_tool("ps"))
    compare_with_ps(target, doc, parse_ps(ps.stdout))
    print(f"{label}: 10,001 tasks under load: --json in "
          f"{', '.join(f'{x:.2f}' for x in took)} s")


@pytest.mark.parametrize("label", interps(["sid-3.15"]))
def test_hundred_thousand_tasks(label, procs, tmp_path):
    """More tasks in one list than ASYNCIO_MAX_LIST (65,536): the first
    65,536 are shown and the cut is said."""
    target = start(by_label(label), procs, tmp_path, "async_many.py", 100000)
    t0 = time.monotonic()
    proc = run_tool(["dump", "--async", "-p", str(target.pid), "--json"], timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["tasks"]) == 65536
    assert b"longer than 65536" in proc.stderr, proc.stderr
    assert doc["lists_truncated"] == 1
    print(f"{label}: 100,001 tasks, 65,536 shown in {took:.2f} s")


@pytest.mark.parametrize("label", interps(ASYNC_LABELS))
def test_pid_namespace(label, procs, tmp_path):
    """A target in its own PID namespace: the same tasks, each with its
    thread's id as we see it."""
    target = start(by_label(label), procs, tmp_path, "async_mix.py", pidns=True)
    assert target.pid != target.popen.pid
    doc, _ = target.dump()
    tids = {t["tid"] for t in doc["tasks"]}
    ours = {int(x) for x in os.listdir(f"/proc/{target.pid}/task")}
    assert None in tids and target.pid in tids and len(tids) == 3, tids
    assert tids - {None} <= ours, (tids, ours)
    assert len(doc["tasks"]) == 13


def find_table(target):
    """The address of the .AsyncioDebug table in the target, found by its
    bytes (taken from the file with objcopy) in the file's writable
    mappings."""
    maps = open(f"/proc/{target.pid}/maps").read().splitlines()
    paths = {line.split(None, 5)[5] for line in maps if len(line.split(None, 5)) == 6}
    cands = [p for p in paths if os.path.basename(p).startswith("_asyncio.")] or \
        [p for p in paths if os.path.basename(p) == os.path.basename(target.interp.exe)]
    assert len(cands) == 1, cands
    # maps shows the path from our root when the file is under it
    host = cands[0] if os.path.exists(cands[0]) else target.interp.host_path(cands[0])
    out = str(target.tmp / "table.bin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.AsyncioDebug", host, out],
                   check=True)
    want = open(out, "rb").read()
    assert len(want) == 104
    found = []
    with open(f"/proc/{target.pid}/mem", "rb") as mem:
        for line in maps:
            f = line.split(None, 5)
            if len(f) == 6 and f[5] == cands[0] and f[1].startswith("rw"):
                lo, hi = (int(x, 16) for x in f[0].split("-"))
                data = os.pread(mem.fileno(), hi - lo, lo)
                k = data.find(want)
                while k >= 0:
                    found.append(lo + k)
                    k = data.find(want, k + 1)
    assert len(found) == 1, found
    return found[0], want


def poke(pid, addr, value):
    fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    try:
        os.pwrite(fd, value.to_bytes(8, "little"), addr)
    finally:
        os.close(fd)


@pytest.mark.parametrize("label", interps(["sid-3.14", "sid-3.15"]))
def test_hostile_memory(label, procs, tmp_path):
    """The target's own table and task list corrupted in its memory: a clear
    error for the table, a bounded, marked walk for a list that loops (given
    up after 64 failed resumes at one place)."""
    target = start(by_label(label), procs, tmp_path, "async_mix.py")
    target.tmp = tmp_path
    addr, orig = find_table(target)
    cases = [(6, 7, "asyncio_task_object.task_node"), (0, 1 << 40, "asyncio_task_object.size"),
             (12, 1 << 30, "asyncio_thread_state.asyncio_tasks_head"),
             (1, 2, "asyncio_task_object.task_name"), (1, 128, "overlap")]
    for slot, value, what in cases:
        poke(target.pid, addr + 8 * slot, value)
        proc = run_tool(["dump", "--async", "-p", str(target.pid), "--json"])
        err = proc.stderr.decode()
        assert proc.returncode == 1 and proc.stdout == b"", (slot, value, err)
        assert ".AsyncioDebug" in err and what in err, err
        poke(target.pid, addr + 8 * slot, int.from_bytes(orig[8 * slot:8 * slot + 8], "little"))
    doc, _ = target.dump()
    # a task whose list node points back at itself: the walk must end
    byname = {t["name"]: t for t in doc["tasks"]}
    x = byname["waiter"]["id"]
    node = int.from_bytes(orig[48:56], "little")
    poke(target.pid, x + node, x + node)
    t0 = time.monotonic()
    proc = run_tool(["dump", "--async", "-p", str(target.pid), "--json"])
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert took < BOUND
    assert b"kept changing" in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["lists_torn"] == 1
    names = [t["name"] for t in doc["tasks"]]
    assert "waiter" in names and "orphan" in names
    print(f"{label}: a self-linked task list walked in {took:.2f} s")


@pytest.mark.parametrize("label", interps(REFUSED_LABELS))
def test_refused_before_314(label, procs, tmp_path):
    interp = by_label(label)
    target = start(interp, procs, tmp_path, "async_many.py", 3)
    proc = run_tool(["dump", "--async", "-p", str(target.pid), "--json"])
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err)
    assert proc.stdout == b""
    assert "3.14" in err and interp.version_str in err, err


@pytest.mark.parametrize("label", interps(["sid-3.14", "sid-3.15"]))
def test_asyncio_not_imported(label, procs, tmp_path):
    """3.14 maps its table with the _asyncio module: before asyncio is
    imported there is none (said, exit 1); 3.15 has it built in: no tasks."""
    target = start(by_label(label), procs, tmp_path, "sleeper.py")
    proc = run_tool(["dump", "--async", "-p", str(target.pid)])
    if target.interp.version < (3, 15):
        assert proc.returncode == 1
        assert "has not imported asyncio" in proc.stderr.decode(), proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode().startswith(f"Process {target.pid}: Python 3.15")
        doc, _ = target.dump()
        assert doc["tasks"] == []


def test_help_mentions_async():
    proc = run_tool(["dump", "--help"])
    out = proc.stdout.decode()
    assert proc.returncode == 0 and "--async" in out and "dump --async -p" in out, out
