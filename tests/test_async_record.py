"""Issue #12: `record --async`, task-aware stacks, on real 3.14 and 3.15
interpreters with real BPF.

A sample of a thread running an asyncio task reads, innermost first: the
task's frames, `<task NAME>`, the frames of the task awaiting it, its
marker, ... up to the root task (`<task NAME (N awaiters)>` where several
await one). The running task and its awaiters are read in the BPF program
with the stack; the awaiters' names and suspended frames from the target.

a. test_task_tree (3.14, 3.15): tests/targets/async_rec_tree.py's fixed tree
   (a TaskGroup under a named task, gather of unnamed tasks, wait_for inside
   a named task, a task awaited by two (followed through the one of lower
   id, marked "(2 awaiters)"), all under the renamed main task): of the
   samples in burn(),
   >= 97% carry exactly the chain of markers and frames of their task (known
   by construction), each worker kind present; no sample names a task the
   program does not have (names checked against the target's own list).
b. test_echo_server (3.14, 3.15): asyncio.start_server echo service driven by
   a client process over 4 connections: of the samples in the handler's
   work(), >= 97% have a per-connection handler task as their root
   (`<task Task-N>` outermost, handle() right under it), and at least 4
   distinct handler tasks show.
b2. test_aiohttp (3.14, 3.15): a real program, an aiohttp web application
   (Debian's python3-aiohttp) under 4 client threads making a new
   connection per request: of the samples in the handler, >= 97% are rooted
   at their request's task, named (`<task Task-N>`: the name copied with
   the sample, as the task is gone before any snapshot could see it), with
   aiohttp's own frames (RequestHandler._handle_request) between it and
   the handler; at most 0.5% of all task markers unread.
c2. test_pending_tasks (3.14, 3.15; cpu and wall modes): --async=all -F 99 on
   three tasks that
   sleep in a loop and one that burns CPU: each sleeper's weight (its own
   stack: <task main>, main, <task sleeper-K>, nap, sleep) within 10% of the
   recording's length, in that exact stack for >= 95% of it; the main task,
   pending in gather, the same; the burner's CPU samples still there.
c. test_asyncio_imported_late (3.14): the target imports asyncio only after
   recording started: pyprof-bpf says it waits for it, then its task shows.
d. test_refused_before_3_14 (3.11, 3.12, 3.13): a clear error, exit 1.
"""
import collections
import re
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from lib import pyenvs
from lib.interps import ASYNC, SUPPORTED
from lib.procs import out_path, start, wait_file
from lib.recorder import Recorder

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

OLD = {}
for _i in SUPPORTED:
    if _i.version[:2] < (3, 14) and not _i.label.endswith("d"):
        OLD.setdefault(_i.version[:2], _i)


def test_interpreters_are_there():
    got = {i.values[0].version[:2] for i in ASYNC}
    assert {(3, 14), (3, 15)} <= got, f"3.14 and 3.15 needed, found {sorted(got)}"
    assert {(3, 11), (3, 12), (3, 13)} <= set(OLD), f"found {sorted(OLD)}"


def parse(path):
    """[(frames outermost first, weight)]: a Python frame is (func, file,
    line), a marker its text (<task ...>, [...])."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.fullmatch(r"(.+) (\d+)\n", line)
            assert m, f"{path}:{n}: not `stack weight`: {line!r}"
            frames = []
            for text in m.group(1).split(";")[1:]:
                if text.startswith("py::"):
                    func, file, ln = urllib.parse.unquote(text[4:]).rsplit(":", 2)
                    frames.append((func, file, int(ln)))
                else:
                    t = urllib.parse.unquote(text)
                    assert t.startswith(("<task ", "[")) or t == "<GC>", f"{path}:{n}: frame {t!r}"
                    frames.append(t)
            out.append((frames, int(m.group(2))))
    return out


def record(procs, tmp_path, pid, secs=3, extra=()):
    out = str(tmp_path / "async.folded")
    rec = Recorder(procs, tmp_path, pid, ["-F", 999, "-d", secs, "--async", "--format",
                                     "collapsed", "-o", out] + list(extra), retry_torn=True).wait_started()
    rec.finish(secs)
    return rec, parse(out)


# collapsed weights are nanoseconds: one sample at 999 Hz weighs this
PERIOD = 1000000000 // 999


def funcs(frames):
    return [f[0] if isinstance(f, tuple) else f for f in frames]


def tasks_of(frames):
    return [f for f in frames if isinstance(f, str) and f.startswith("<task ")]


# --------------------------------------------------------------------------
# a. a fixed tree

def expected_tail(kind, k, low=None):
    """The stack (outermost first, function names and markers) from the
    root task down to burn, for a leaf task of kind."""
    if kind == "tg":
        return ["<task main>", "main", "<task parent>", "parent", "TaskGroup.__aexit__",
                "TaskGroup._aexit", f"<task tg-{k}>", "tg_worker", "leaf", "burn"]
    if kind == "shared":
        return ["<task main>", "main", f"<task {low}>", "awaiting",
                "<task shared (2 awaiters)>", "shared_fn", "leaf", "burn"]
    if kind == "gather":
        return ["<task main>", "main", None, "gather_child", "leaf", "burn"]
    return ["<task main>", "main", "<task waiter>", "waiter", "wait_for", "spin_for",
            "leaf", "burn"]


@pytest.mark.parametrize("interp", ASYNC)
def test_task_tree(interp, procs, tmp_path):
    seen, host = out_path(interp, procs, tmp_path, "tree.ready")
    p, script = start(interp, procs, tmp_path, "async_rec_tree.py", [seen], "tree")
    wait_file(p, host, f"async_rec_tree.py on {interp.label}")
    lines = open(host).read().split("\n")
    names, low = set(lines[0].split()), lines[1]
    assert {"main", "parent", "tg-0", "tg-1", "waiter", "sa", "sb", "shared"} <= names, names
    rec, stacks = record(procs, tmp_path, pyenvs.leaf_pid(p.pid))
    assert "--async:" in rec.stderr, rec.stderr

    total, good, kinds, bad = 0, 0, collections.Counter(), []
    for frames, w in stacks:
        fs = funcs(frames)
        if not fs or fs[-1] != "burn":
            continue
        total += w
        for t in tasks_of(frames):
            name = t[len("<task "):-1].split(" (")[0]
            assert name in names, f"a task the program does not have: {t} in {fs}"
        if "tg_worker" in fs:
            kind, k = "tg", fs[fs.index("tg_worker") - 1][len("<task tg-"):-1]
        elif "gather_child" in fs:
            kind, k = "gather", None
        elif "spin_for" in fs:
            kind, k = "waiter", None
        elif "shared_fn" in fs:
            kind, k = "shared", None
        else:
            bad.append(fs)
            continue
        want = expected_tail(kind, k, low)
        ok = len(fs) == len(want) and all(
            (x is None and y.startswith("<task Task-")) or x == y for x, y in zip(want, fs))
        if ok:
            good += w
            kinds[kind] += w // PERIOD
        else:
            bad.append(fs)
    print(f"\nASYNC tree {interp.label} burn samples={total // PERIOD} "
          f"exact={good // PERIOD} {dict(kinds)}")
    assert total >= 300 * PERIOD, f"only {total} samples in burn\n{rec.stderr}"
    assert good >= 0.97 * total, (f"{total - good} of {total} samples in burn without their "
                                  f"task's exact chain; e.g. {bad[:3]}\n{rec.stderr}")
    assert set(kinds) == {"tg", "gather", "waiter", "shared"}, kinds


# --------------------------------------------------------------------------
# b. a real server

def echo_client(port, stop, counts, i):
    """One connection, a request after the other."""
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rwb")
    while not stop.is_set():
        f.write(b"20000\n")
        f.flush()
        if not f.readline():
            break
        counts[i] += 1
    s.close()


def http_client(port, stop, counts, i):
    """A new connection per request."""
    import urllib.request

    while not stop.is_set():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/2000", timeout=10).read()
            counts[i] += 1
        except OSError:
            if not stop.is_set():
                raise


def record_server(interp, procs, tmp_path, target, client, conns=4):
    """Starts the server target (it writes its port), drives it with conns
    client threads, records 3 s with --async: (rec, stacks, requests)."""
    name = target.split(".")[0]
    seen, host = out_path(interp, procs, tmp_path, f"{name}.port")
    p, script = start(interp, procs, tmp_path, target, [seen], name)
    wait_file(p, host, f"{target} on {interp.label}")
    port = int(open(host).read())
    stop, counts = threading.Event(), [0] * conns
    clients = [threading.Thread(target=client, args=(port, stop, counts, i), daemon=True)
               for i in range(conns)]
    for t in clients:
        t.start()
    try:
        time.sleep(0.5)
        rec, stacks = record(procs, tmp_path, pyenvs.leaf_pid(p.pid))
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=15)
    return rec, stacks, sum(counts)


def rooted_at_task(stacks, func, below):
    """Of the stacks through func: (their weight, the weight of those whose
    root is one unnamed task (Task-N) whose frames below it satisfy
    below(names between the marker and func), those roots, the others)."""
    total, good, roots, bad = 0, 0, set(), []
    for frames, w in stacks:
        fs = funcs(frames)
        if func not in fs:
            continue
        total += w
        if (re.fullmatch(r"<task Task-\d+>", fs[0]) and len(tasks_of(frames)) == 1
                and below(fs[1:fs.index(func)])):
            good += w
            roots.add(fs[0])
        else:
            bad.append(fs)
    return total, good, roots, bad


@pytest.mark.parametrize("interp", ASYNC)
def test_echo_server(interp, procs, tmp_path):
    rec, stacks, requests = record_server(interp, procs, tmp_path, "async_rec_echo.py",
                                          echo_client)
    total, rooted, roots, bad = rooted_at_task(stacks, "work", lambda fs: fs == ["handle"])
    print(f"\nASYNC echo {interp.label} work samples={total // PERIOD} "
          f"rooted={rooted // PERIOD} "
          f"handler tasks={len(roots)} requests={requests}")
    assert total >= 200 * PERIOD, f"only {total // PERIOD} samples in work()\n{rec.stderr}"
    assert rooted >= 0.97 * total, f"not rooted at their handler task: {bad[:3]}"
    assert len(roots) >= 4, f"handler tasks seen: {sorted(roots)}"


# --------------------------------------------------------------------------
# b2. a real program: aiohttp

@pytest.mark.parametrize("interp", ASYNC)
def test_aiohttp(interp, procs, tmp_path):
    probe = subprocess.run(interp.argv(["-c", "import aiohttp"]), capture_output=True, text=True)
    assert probe.returncode == 0, (f"aiohttp missing for {interp.label} (make test-deps installs "
                                   f"python3-aiohttp in the sid root): {probe.stderr}")
    rec, stacks, requests = record_server(interp, procs, tmp_path, "async_rec_aiohttp.py",
                                          http_client)
    markers = sum(w for frames, w in stacks for _ in tasks_of(frames))
    unread = sum(w for frames, w in stacks for t in tasks_of(frames) if "[unread]" in t)
    total, rooted, roots, bad = rooted_at_task(stacks, "handle",
                                         lambda fs: "RequestHandler._handle_request" in fs)
    print(f"\nASYNC aiohttp {interp.label} handler samples={total // PERIOD} "
          f"rooted={rooted // PERIOD} request tasks={len(roots)} requests={requests} "
          f"unread markers={unread // PERIOD} of {markers // PERIOD}")
    assert total >= 50 * PERIOD, f"only {total // PERIOD} samples in the handler\n{rec.stderr}"
    assert rooted >= 0.97 * total, f"not rooted at a named request task: {bad[:3]}"
    assert len(roots) >= 20, f"request tasks seen: {len(roots)}"
    assert unread <= 0.005 * markers, f"{unread // PERIOD} unread of {markers // PERIOD}"


# --------------------------------------------------------------------------
# c2. every pending task (--async=all)

@pytest.mark.parametrize("mode", ["cpu", "wall"])
@pytest.mark.parametrize("interp", ASYNC)
def test_pending_tasks(interp, mode, procs, tmp_path):
    seen, host = out_path(interp, procs, tmp_path, "sleepers.ready")
    p, script = start(interp, procs, tmp_path, "async_rec_sleepers.py", [seen], "sleepers")
    wait_file(p, host, f"async_rec_sleepers.py on {interp.label}")
    out = str(tmp_path / "all.folded")
    rec = Recorder(procs, tmp_path, pyenvs.leaf_pid(p.pid),
              ["-F", 99, "-d", 3, "--async=all", "--mode", mode, "--format", "collapsed",
               "-o", out]
              , retry_torn=True).wait_started()
    rec.finish(3)
    secs = rec.summary(exact=False)["secs"]
    assert "stacks of pending tasks" in rec.stderr, rec.stderr
    stacks = parse(out)
    total, exact = collections.Counter(), collections.Counter()
    burner = 0
    for frames, w in stacks:
        fs = funcs(frames)
        ts = tasks_of(frames)
        if not ts:
            continue
        owner = ts[-1][len("<task "):-1]
        total[owner] += w
        if owner.startswith("sleeper-"):
            want = ["<task main>", "main", f"<task {owner}>", "nap", "sleep"]
            if fs == want and frames[-1][1].endswith("asyncio/tasks.py"):
                exact[owner] += w
        elif owner == "main" and fs == ["<task main>", "main"]:
            exact[owner] += w
        elif owner == "burner" and fs[-1] == "burn":
            burner += w
    print(f"\nASYNC pending {interp.label} {mode} " + " ".join(
        f"{k}={v / 1e9:.3f}s({exact[k] / max(v, 1):.0%})" for k, v in sorted(total.items()))
        + f" burner-cpu={burner / 1e9:.3f}s over {secs}s")
    for k in ["main", "sleeper-0", "sleeper-1", "sleeper-2"]:
        assert abs(total[k] / 1e9 - secs) <= 0.1 * secs, (
            f"{k}: {total[k] / 1e9:.3f} s of pending stacks in a {secs} s recording")
        assert exact[k] >= 0.95 * total[k], f"{k}: {exact[k]} of {total[k]} in its exact stack"
    assert burner > 0, "no CPU sample of the burner"


# --------------------------------------------------------------------------
# c. asyncio imported after the recording started

def test_asyncio_imported_late(procs, tmp_path):
    interp = next(i.values[0] for i in ASYNC if i.values[0].version[:2] == (3, 14))
    seen, host = out_path(interp, procs, tmp_path, "late.ready")
    go_seen, go_host = out_path(interp, procs, tmp_path, "late.go")
    p, script = start(interp, procs, tmp_path, "async_rec_late.py", [seen, go_seen], "late")
    wait_file(p, host, "async_rec_late.py")
    out = str(tmp_path / "late.folded")
    rec = Recorder(procs, tmp_path, pyenvs.leaf_pid(p.pid),
              ["-F", 999, "-d", 3, "--async", "--format", "collapsed", "-o", out], retry_torn=True).wait_started()
    deadline = time.monotonic() + 10
    while "asyncio is not imported yet" not in rec.stderr:
        assert time.monotonic() < deadline, rec.stderr
        time.sleep(0.01)
    open(go_host, "w").close()
    rec.finish(3)
    assert "asyncio imported; sampling its tasks" in rec.stderr, rec.stderr
    stacks = parse(out)
    late = sum(w // PERIOD for frames, w in stacks
               if funcs(frames)[-3:] == ["<task late>", "late_work", "burn"])
    print(f"\nASYNC late samples in <task late>: {late}")
    assert late >= 100, f"{late} samples of the late task\n{rec.stderr}"


# --------------------------------------------------------------------------
# d. refused before 3.14

@pytest.mark.parametrize("interp", [pytest.param(OLD[v], id=OLD[v].label) for v in sorted(OLD)])
def test_refused_before_3_14(interp, procs, tmp_path):
    p = procs.start(interp.argv(["-c", "import time\nwhile True: time.sleep(0.1)"]),
                    str(tmp_path / "old.stderr"))
    time.sleep(0.5)
    r = subprocess.run([pyenvs.BINARY, "record", "-p", str(pyenvs.leaf_pid(p.pid)), "-d", "1",
                        "--async", "-o", str(tmp_path / "x.folded")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "--async" in r.stderr and "3.14" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "sanitizer" not in r.stderr.lower(), r.stderr
