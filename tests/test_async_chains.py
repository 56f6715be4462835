"""Issue #22: `record --async` shows every task chain whole, with the
awaiting tasks' frames read at the instant of the sample (in the BPF
program), on real 3.14 and 3.15 interpreters with real BPF at 999 Hz.

A sample of a running task reads, outermost first: the root task's marker
`<task NAME>`, its frames (where it is suspended), the marker of the task
it awaits, ..., the running task's marker and its frames. A chain cut at
256 tasks starts with `[tasks-truncated]`, one that comes back on itself
with `[task-cycle]`, one whose read failed with `[torn]`; an awaiter whose
frames could not be read shows `[task-frames-unread]` in their place.

a. test_aiohttp_subtask (3.14, 3.15; kinds task, gather, taskgroup):
   tests/targets/async_chain_aiohttp.py, an aiohttp application whose
   handler runs its request's work in named sub-tasks (create_task + await;
   gather of two; a TaskGroup per request), driven by four client threads
   of another process (tests/targets/async_chain_clients.py: two kept-alive
   connections, two making a new connection per request) and three client
   tasks of the server's own loop; `record --async -F 999 -d 4`:
   - at most 1% of all samples (by weight) carry [task-frames-unread],
     [tasks-truncated], [task-cycle] or [torn];
   - of the samples whose innermost Python frame is cpu_work() (>= 400),
     >= 95% show the whole chain (whole_chain()), three tasks: the root,
     the connection's task, its marker outermost, its frames ending in
     RequestHandler.start (aiohttp 3.14 awaits each request's task there);
     the request's task, its frames from aiohttp's
     RequestHandler._handle_request to handle() (then TaskGroup.__aexit__,
     TaskGroup._aexit for a TaskGroup); `<task work-N>` and cpu_work()
     under it; nothing else, no marker of another kind;
   - at least 50 distinct work-N tasks show (short-lived ones, not a few),
     with gather both work-Na and work-Nb.
   A build that reads the awaiters from a userspace snapshot taken every
   100 ms (f0e82cc) fails it: ~70% of all samples carry
   [task-frames-unread], 83-90% of the sub-tasks' samples lack their
   whole chain (unread, or a stale snapshot's frames for the handler's
   task: another task's at a reused address, cpu_work or
   RequestHandler.start in place of handle).
a2. test_aiohttp_subtask_as (3.14, 3.15; kind task): the same assertions
   with --native (Python frames and markers checked with the native frames
   left out, none of which among the awaiters' frames; >= 20% of cpu_work's
   samples with native frames under the running task's marker: those in a
   C function its bytecode calls), with --mode wall (cpu_work() also blocking
   1 ms in time.sleep: by weight, its off-CPU intervals (>= 10% of it)
   held to the same chain as its CPU samples), with --mode off-cpu (the
   same target: its intervals in cpu_work, by weight), and into a raw
   recording (-o X.pyprof) turned into collapsed stacks by `pyprof-bpf
   report`.
   Before 6725ec7 raw was refused ("--async: a raw recording does not keep
   tasks yet"); before 0c54b9f wall's off-CPU intervals showed no task
   (~35-50% of cpu_work's weight).
b. test_deep_chain (3.14, 3.15): tests/targets/async_deep_chain.py, 300
   tasks lvl-1 ... lvl-300 each awaiting the next, lvl-300 burning CPU in
   burn(): >= 97% of burn()'s samples (>= 300) are exactly [tasks-truncated],
   then lvl-45 ... lvl-300 (256 tasks in all, consecutive, in order), each
   marker followed by level() (suspended on its `await` line; the running
   one on its burn() call) and burn() innermost.
c. test_cycle (3.14, 3.15): tests/targets/async_cycle_running.py, a running
   task "burner" awaited by a, a by b, b by a again: >= 97% of burn()'s
   samples are exactly [task-cycle], <task b>, wait_on, <task a>, wait_on,
   <task burner>, burner, burn.
c2. test_async_generators (3.14, 3.15): tests/targets/async_gen_chain.py, a
   task in `async for` over a generator awaiting a burning task, one in
   `await g.aclose()` whose finally awaits another: >= 97% of burn()'s
   samples exactly one of the two chains, the generator's frame (feed,
   closing) between its consumer's and the burner's marker.
e. test_all_processes (3.14, 3.15): -a --async -d 3 beside a 6-task chain:
   >= 85% of its burn() samples exactly its chain (tables from the first
   refresh after the process is found).
f. test_top_async (3.14, 3.15): `top --async` plain snapshots of a 6-task
   chain: each task's marker and the awaiters' frames at >= 95% total.
d. test_several_processes: a chain of 6 tasks on 3.14 and one on 3.15,
   recorded together (-p A,B --async): >= 97% of each process's burn()
   samples are exactly its own chain under its own root (each process its
   own tables; before 1c2363b --async was refused with several processes).

Each test prints a line starting "CHAINS " with its numbers (pytest -s).

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_async_chains.py </dev/null
"""
import collections
import functools
import os
import re
import subprocess
import time
import urllib.parse

import pytest

from lib import pyenvs
from lib.tool import binary
from lib.interps import ASYNC
from lib.procs import TARGETS, out_path, start, wait_file
from lib.recorder import Recorder

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

HZ = 999
PERIOD = 1000000000 // HZ       # ns: a CPU sample's weight in collapsed stacks
SECS = 4
# markers of a chain not read whole
BAD = ("[task-frames-unread]", "[tasks-truncated]", "[task-cycle]", "[torn]")


def test_interpreters_are_there():
    got = {i.values[0].version[:2] for i in ASYNC}
    assert {(3, 14), (3, 15)} <= got, f"3.14 and 3.15 needed, found {sorted(got)}"


# --------------------------------------------------------------------------
# collapsed stacks

class Py(tuple):
    """A Python frame: (func, file, line)."""

    func = property(lambda self: self[0])
    line = property(lambda self: self[2])


def parse(path):
    """[(frames outermost first, weight)] of a collapsed file, the comm left
    out: a Python frame is a Py, anything else its text (task markers
    `<task NAME>`, status markers `[...]`, native frames)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.fullmatch(r"(.+) (\d+)\n", line)
            assert m, f"{path}:{n}: not `stack weight`: {line!r}"
            frames = []
            for text in m.group(1).split(";")[1:]:
                if text.startswith("py::"):
                    func, file, ln = urllib.parse.unquote(text[4:]).rsplit(":", 2)
                    frames.append(Py((func, file, int(ln))))
                else:
                    frames.append(urllib.parse.unquote(text))
            out.append((frames, int(m.group(2))))
    return out


def is_task(f):
    return isinstance(f, str) and f.startswith("<task ")


# pyprof-bpf's own frames (dso [pyprof-bpf]); a native frame of no symbol is
# "[<dso basename>]" ([python3.15], [libc.so.6]): native, not one of these
MARKERS = set(BAD) | {"[truncated]", "[read-fault]", "[no-python-state]", "[no-python-frames]",
                      "[thread-start/exit]", "[thread-start]", "[thread-exit]", "[eval-entry]",
                      "[unwind-failed]", "[unread]", "<GC>"}


# why a wall-mode interval was off the CPU: its leaf
WHY = {"[runnable]", "[blocked]", "[GIL wait]", "[GIL released]"}


def is_why(f):
    return isinstance(f, str) and (f in WHY or f.startswith("[syscall]"))


def is_marker(f):
    return isinstance(f, str) and (f in MARKERS or is_why(f) or f.startswith("[status-"))


def is_native(f):
    """A frame that is neither Python code nor a task marker nor one of
    pyprof-bpf's markers."""
    return isinstance(f, str) and not f.startswith("<task ") and not is_marker(f)


def names(frames):
    """Function names and markers (native frames left out)."""
    return [f.func if isinstance(f, Py) else f for f in frames if not is_native(f)]


def off_cpu(frames):
    """A wall-mode interval off the CPU (or without the GIL)."""
    return any(is_why(f) for f in frames)


def innermost_py(frames):
    return next((f for f in reversed(frames) if isinstance(f, Py)), None)


def task_name(marker):
    return marker[len("<task "):-1]


def bad_share(stacks):
    """(weight of the stacks with a BAD marker, total weight, Counter of them)."""
    bad, total, which = 0, 0, collections.Counter()
    for frames, w in stacks:
        total += w
        hit = [f for f in frames if f in BAD]
        if hit:
            bad += w
            which.update({h: w // PERIOD for h in set(hit)})
    return bad, total, which


# --------------------------------------------------------------------------
# a. aiohttp, the handler's work in named sub-tasks

# the frames of the handler's task, innermost last, as the handler awaits its
# sub-tasks: after RequestHandler._handle_request and what aiohttp calls
HANDLER_TAIL = {"task": ["handle"], "gather": ["handle"],
                "taskgroup": ["handle", "TaskGroup.__aexit__", "TaskGroup._aexit"]}
WORK = {"task": r"work-\d+", "gather": r"work-\d+[ab]", "taskgroup": r"work-\d+"}


def whole_chain(fs, kind):
    """None when fs (names(), outermost first) is a sub-task's whole chain,
    else why not. A wall-mode interval's why may end it."""
    while fs and is_why(fs[-1]):
        fs = fs[:-1]
    if not fs or not is_task(fs[0]):
        return "no root task marker outermost"
    marks = [i for i, f in enumerate(fs) if is_task(f)]
    if any(is_marker(f) for f in fs):
        return "a marker: " + " ".join(f for f in fs if is_marker(f))
    if not re.fullmatch(WORK[kind], task_name(fs[marks[-1]])):
        return f"innermost task {fs[marks[-1]]}"
    if fs[marks[-1] + 1:] != ["cpu_work"]:
        return f"the sub-task's frames: {fs[marks[-1] + 1:]}"
    if len(marks) != 3:
        return f"{len(marks)} tasks, not the connection's, the request's and the sub-task"
    for a, b in zip(marks, marks[1:]):
        if b == a + 1:
            return f"{fs[a]} without frames"
        if not re.fullmatch(r"Task-\d+", task_name(fs[a])):
            return f"awaiter {fs[a]}"
    # aiohttp 3.14: the connection's task (RequestHandler.start) awaits the
    # request's, which it started eagerly
    if fs[marks[1] - 1] != "RequestHandler.start":
        return f"the root task's frames end in {fs[marks[1] - 1]}"
    handler = fs[marks[-2] + 1:marks[-1]]
    tail = HANDLER_TAIL[kind]
    if handler[-len(tail):] != tail:
        return f"the handler's task ends in {handler[-4:]}"
    if handler[0] != "RequestHandler._handle_request":
        return f"the handler's task starts with {handler[0]}"
    return None


@functools.cache
def aiohttp_probe(interp):
    """Whether interp imports aiohttp (asked once per interpreter, not per test)."""
    return subprocess.run(interp.argv(["-c", "import aiohttp"]), capture_output=True,
                          text=True, timeout=60)


def serve(interp, procs, tmp_path, kind, block_ms=0):
    """The application of kind with its clients: (server, count file)."""
    probe = aiohttp_probe(interp)
    assert probe.returncode == 0, (f"aiohttp missing for {interp.label} (make test-deps installs "
                                   f"python3-aiohttp in the sid root): {probe.stderr}")
    seen, host = out_path(interp, procs, tmp_path, "chains.port")
    p, _ = start(interp, procs, tmp_path, "async_chain_aiohttp.py", [seen, kind, block_ms],
                 "server")
    wait_file(p, host, f"async_chain_aiohttp.py on {interp.label}")
    port = int(open(host).read())
    cseen, chost = out_path(interp, procs, tmp_path, "chains.count")
    c, _ = start(interp, procs, tmp_path, "async_chain_clients.py", [port, cseen, 4], "clients")
    wait_file(c, chost, f"async_chain_clients.py on {interp.label}")
    return p, chost


def answered(path):
    with open(path) as f:
        return int(f.read())


def record_app(interp, procs, tmp_path, kind, how):
    """Records the application of kind 4 s with --async, how: cpu, native,
    wall, off-cpu or raw. (rec, stacks, requests answered meanwhile)."""
    # in wall and off-cpu modes the sub-task also waits off the CPU, 1 ms a
    # request
    p, count = serve(interp, procs, tmp_path, kind, 1 if how in ("wall", "off-cpu") else 0)
    deadline = time.monotonic() + 30
    while answered(count) < 20:
        assert time.monotonic() < deadline, "the clients got no answers"
        time.sleep(0.05)
    folded = str(tmp_path / "chains.folded")
    if how == "raw":
        raw = str(tmp_path / "chains.pyprof")
        args = ["-o", raw]
    else:
        args = ["--format", "collapsed", "-o", folded]
        args += {"cpu": [], "native": ["--native"], "wall": ["--mode", "wall"],
                 "off-cpu": ["--mode", "off-cpu"]}[how]
    n0 = answered(count)
    rec = Recorder(procs, tmp_path, pyenvs.leaf_pid(p.pid),
              ["-F", HZ, "-d", SECS, "--async"] + args, retry_torn=True).wait_started()
    rec.finish(SECS)
    n1 = answered(count)
    assert p.poll() is None, "the server exited"
    if how == "raw":
        r = subprocess.run([binary(), "report", "-i", raw, "--format", "collapsed", "-o", folded],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"report exited {r.returncode}: {r.stderr}"
    return rec, parse(folded), n1 - n0


def check_app(interp, kind, how, rec, stacks, requests):
    bad, total, which = bad_share(stacks)
    work, whole, reasons, examples, tasks = 0, 0, collections.Counter(), {}, set()
    native_under, off, off_whole = 0, 0, 0
    for frames, w in stacks:
        inner = innermost_py(frames)
        if not inner or inner.func != "cpu_work":
            continue
        work += w
        fs = names(frames)
        why = whole_chain(fs, kind)
        marks = [i for i, f in enumerate(frames) if is_task(f)]
        if why is None and any(is_native(f) for f in frames[marks[0]:marks[-1]]):
            why = "native frames among the awaiters' frames: " + ";".join(
                f if isinstance(f, str) else f.func for f in frames)
        if off_cpu(frames):
            off += w
            off_whole += w if why is None else 0
        if why is None:
            whole += w
            tasks.add(fs[[i for i, f in enumerate(fs) if is_task(f)][-1]])
        else:
            key = why.split(":")[0]
            reasons[key] += w // PERIOD
            examples.setdefault(key, ";".join(fs))
        last = max((i for i, f in enumerate(frames) if is_task(f)), default=None)
        if last is not None and any(is_native(f) for f in frames[last + 1:]):
            native_under += w
    print(f"\nCHAINS aiohttp {kind}/{how} {interp.label} samples={total // PERIOD} "
          f"bad={bad // PERIOD} {dict(which)} cpu_work={work // PERIOD} "
          f"whole={whole // PERIOD} ({whole / max(work, 1):.1%}) work-tasks={len(tasks)} "
          f"requests={requests} native-under-task={native_under // PERIOD} "
          f"off-cpu={off // PERIOD} whole={off_whole // PERIOD} not-whole={dict(reasons)}")
    why = "".join(f"\n  {k} ({reasons[k]}): {examples[k][:1500]}" for k in reasons)
    assert requests >= 20, f"{requests} requests answered while recording\n{rec.stderr}"
    assert work >= 400 * PERIOD, f"{work // PERIOD} samples in cpu_work\n{rec.stderr}"
    assert bad <= 0.01 * total, (f"{bad // PERIOD} of {total // PERIOD} samples with a chain "
                                 f"not read whole: {dict(which)}{why}\n{rec.stderr}")
    assert whole >= 0.95 * work, (f"{whole // PERIOD} of {work // PERIOD} samples of cpu_work "
                                  f"show their whole chain; the others:{why}\n{rec.stderr}")
    assert len(tasks) >= 50, f"sub-tasks seen: {sorted(tasks)}"
    if kind == "gather":
        ab = {t[-2] for t in tasks}
        assert ab == {"a", "b"}, f"gather's sub-tasks seen: {sorted(tasks)[:20]}"
    if how in ("wall", "off-cpu"):
        assert off >= 0.1 * work, (f"{off // PERIOD} of {work // PERIOD} of cpu_work's "
                                   f"weight off the CPU")
    if how == "native":
        # ~45%: the sample is in a C function cpu_work's bytecode calls
        # (int arithmetic, deallocation, perf_counter), not the eval loop
        assert native_under >= 0.2 * work, (f"{native_under // PERIOD} of {work // PERIOD} "
                                            f"samples of cpu_work with native frames")


@pytest.mark.parametrize("kind", ["task", "gather", "taskgroup"])
@pytest.mark.parametrize("interp", ASYNC)
def test_aiohttp_subtask(interp, kind, procs, tmp_path):
    check_app(interp, kind, "cpu", *record_app(interp, procs, tmp_path, kind, "cpu"))


@pytest.mark.parametrize("how", ["native", "wall", "off-cpu", "raw"])
@pytest.mark.parametrize("interp", ASYNC)
def test_aiohttp_subtask_as(interp, how, procs, tmp_path):
    check_app(interp, "task", how, *record_app(interp, procs, tmp_path, "task", how))


# --------------------------------------------------------------------------
# b, c. a static chain, its innermost task burning

def line_of(target, text):
    """The 1-based line of target that holds text (once)."""
    with open(os.path.join(TARGETS, target), encoding="utf-8") as f:
        hits = [n for n, line in enumerate(f, 1) if text in line]
    assert len(hits) == 1, (target, text, hits)
    return hits[0]


def record_static(interp, procs, tmp_path, target, secs=2):
    """Starts target (it writes READY_FILE once its chain stands), records
    it secs with --async: (rec, stacks)."""
    seen, host = out_path(interp, procs, tmp_path, "static.ready")
    p, _ = start(interp, procs, tmp_path, target, [seen], "static")
    wait_file(p, host, f"{target} on {interp.label}")
    folded = str(tmp_path / "static.folded")
    rec = Recorder(procs, tmp_path, pyenvs.leaf_pid(p.pid),
              ["-F", HZ, "-d", secs, "--async", "--format", "collapsed", "-o", folded]
              , retry_torn=True).wait_started()
    rec.finish(secs)
    return rec, parse(folded)


def matches(frames, want):
    """frames (native ones left out) are want: names and markers, or
    (func, line) for a Python frame whose line matters."""
    fs = [f for f in frames if not is_native(f)]
    if len(fs) != len(want):
        return False
    for f, x in zip(fs, want):
        if isinstance(x, tuple):
            if not isinstance(f, Py) or (f.func, f.line) != x:
                return False
        elif (f.func if isinstance(f, Py) else f) != x:
            return False
    return True


def exact_share(stacks, want):
    """(weight of burn()'s stacks, of those that match want, the others)."""
    total, good, others = 0, 0, collections.Counter()
    for frames, w in stacks:
        inner = innermost_py(frames)
        if not inner or inner.func != "burn":
            continue
        total += w
        if matches(frames, want):
            good += w
        else:
            others[";".join(f"{f.func}:{f.line}" if isinstance(f, Py) else f
                            for f in frames)] += w
    return total, good, others


def describe(others, n=2):
    return "".join(f"\n  ({w // PERIOD} samples) {s[:800]} ... {s[-400:]}"
                   for s, w in others.most_common(n))


@pytest.mark.parametrize("interp", ASYNC)
def test_deep_chain(interp, procs, tmp_path):
    target = "async_deep_chain.py"
    suspended = line_of(target, "await asyncio.create_task(level(k + 1)")
    running = line_of(target, "    burn()")
    want = ["[tasks-truncated]"]
    for k in range(45, 300):
        want += [f"<task lvl-{k}>", ("level", suspended)]
    want += ["<task lvl-300>", ("level", running), "burn"]
    rec, stacks = record_static(interp, procs, tmp_path, target)
    total, good, others = exact_share(stacks, want)
    seen = collections.Counter()
    for frames, w in stacks:
        if innermost_py(frames) and innermost_py(frames).func == "burn":
            seen[sum(1 for f in frames if is_task(f))] += w // PERIOD
    print(f"\nCHAINS deep {interp.label} burn={total // PERIOD} exact={good // PERIOD} "
          f"task markers per sample: {dict(seen)}")
    assert total >= 300 * PERIOD, f"{total // PERIOD} samples in burn\n{rec.stderr}"
    assert good >= 0.97 * total, (f"{good // PERIOD} of {total // PERIOD} samples of burn are "
                                  f"[tasks-truncated], lvl-45 ... lvl-300 with level() "
                                  f"between; task markers per sample: {dict(seen)}; others:"
                                  f"{describe(others)}\n{rec.stderr}")


@pytest.mark.parametrize("interp", ASYNC)
def test_cycle(interp, procs, tmp_path):
    want = ["[task-cycle]", "<task b>", "wait_on", "<task a>", "wait_on", "<task burner>",
            "burner", "burn"]
    rec, stacks = record_static(interp, procs, tmp_path, "async_cycle_running.py")
    total, good, others = exact_share(stacks, want)
    print(f"\nCHAINS cycle {interp.label} burn={total // PERIOD} exact={good // PERIOD}")
    assert total >= 300 * PERIOD, f"{total // PERIOD} samples in burn\n{rec.stderr}"
    assert good >= 0.97 * total, (f"{good // PERIOD} of {total // PERIOD} samples of burn "
                                  f"are {';'.join(want)}; others:{describe(others)}")


def test_several_processes(procs, tmp_path):
    """--async with -p A,B (issue #22 item 2: each process its own tables): a
    chain of 6 tasks on 3.14 and one on 3.15 recorded together; >= 97% of each
    process's burn() samples are exactly its own chain under its own root."""
    target = "async_deep_chain.py"
    suspended = line_of(target, "await asyncio.create_task(level(k + 1)")
    running = line_of(target, "    burn()")
    top = line_of(target, 'await asyncio.create_task(level(1), name="lvl-1")')
    want = ["<task main>", ("main", top)]
    for k in range(1, 6):
        want += [f"<task lvl-{k}>", ("level", suspended)]
    want += ["<task lvl-6>", ("level", running), "burn"]
    pids = {}
    for param in ASYNC:
        interp = param.values[0]
        if interp.version[:2] in {i.version[:2] for i in pids.values()}:
            continue
        seen, host = out_path(interp, procs, tmp_path, f"several-{interp.label}.ready")
        p, _ = start(interp, procs, tmp_path, target, [seen, 6], f"several-{interp.label}")
        wait_file(p, host, f"{target} on {interp.label}")
        pids[pyenvs.leaf_pid(p.pid)] = interp
    assert len(pids) >= 2, f"3.14 and 3.15 needed: {pids}"
    folded = str(tmp_path / "several.folded")
    rec = Recorder(procs, tmp_path, ",".join(str(p) for p in pids),
              ["-F", HZ, "-d", 2, "--async", "--format", "collapsed", "-o", folded]
              , retry_torn=True).wait_started()
    rec.finish(2)
    by_pid = collections.defaultdict(list)
    for frames, w in parse(folded):
        m = re.fullmatch(r".* \(pid (\d+)\)", frames[0]) if frames else None
        assert m, f"a stack without its process's root: {frames[:3]}"
        by_pid[int(m.group(1))].append((frames[1:], w))
    for pid, interp in pids.items():
        total, good, others = exact_share(by_pid[pid], want)
        print(f"\nCHAINS several {interp.label} burn={total // PERIOD} exact={good // PERIOD}")
        assert total >= 300 * PERIOD, f"{interp.label}: {total // PERIOD} samples\n{rec.stderr}"
        assert good >= 0.97 * total, (f"{interp.label}: {good // PERIOD} of {total // PERIOD} "
                                      f"samples of burn are {want}; others:{describe(others)}"
                                      f"\n{rec.stderr}")


@pytest.mark.parametrize("interp", ASYNC)
def test_async_generators(interp, procs, tmp_path):
    """Chains through async generators (issue #22 item 3), read in the BPF
    program: a task in `async for` over a generator whose step awaits a
    burning task, one in `await g.aclose()` whose finally awaits another:
    >= 97% of burn()'s samples are exactly one of the two chains, the
    generator's frame between its consumer's and the burner's marker; each
    chain >= 300 samples."""
    want = {"a": ["<task main>", "main", "<task consumer>", "consumer", "feed",
                  "<task burner-a>", "burner", "burn"],
            "b": ["<task main>", "main", "<task closer>", "closer", "closing",
                  "<task burner-b>", "burner", "burn"]}
    rec, stacks = record_static(interp, procs, tmp_path, "async_gen_chain.py")
    total, good, others = 0, collections.Counter(), collections.Counter()
    for frames, w in stacks:
        inner = innermost_py(frames)
        if not inner or inner.func != "burn":
            continue
        total += w
        hit = [k for k, x in want.items() if matches(frames, x)]
        if hit:
            good[hit[0]] += w
        else:
            others[";".join(f.func if isinstance(f, Py) else f for f in frames)] += w
    print(f"\nCHAINS async-generators {interp.label} burn={total // PERIOD} "
          f"a={good['a'] // PERIOD} b={good['b'] // PERIOD}")
    assert sum(good.values()) >= 0.97 * total, (
        f"{sum(good.values()) // PERIOD} of {total // PERIOD} samples of burn are one of "
        f"{want}; others:{describe(others)}\n{rec.stderr}")
    for k in want:
        assert good[k] >= 300 * PERIOD, f"chain {k}: {good[k] // PERIOD} samples\n{rec.stderr}"


def start_chain(interp, procs, tmp_path, n=6):
    """async_deep_chain.py with n tasks on interp, once it burns: its host pid."""
    seen, host = out_path(interp, procs, tmp_path, f"chain-{interp.label}.ready")
    p, _ = start(interp, procs, tmp_path, "async_deep_chain.py", [seen, n],
                 f"chain-{interp.label}")
    wait_file(p, host, f"async_deep_chain.py on {interp.label}")
    return pyenvs.leaf_pid(p.pid)


@pytest.mark.parametrize("interp", ASYNC)
def test_all_processes(interp, procs, tmp_path):
    """--async with -a: the chain of a process found on the host. Its tables
    are made at the first refresh after it is found (0.1 s; measured 95% of
    2 s exact), so >= 85% of its burn() samples over 3 s are exactly its
    6-task chain (a loaded host may take 0.45 s)."""
    target = "async_deep_chain.py"
    want = ["<task main>", ("main", line_of(target, 'await asyncio.create_task(level(1)'))]
    for k in range(1, 6):
        want += [f"<task lvl-{k}>", ("level", line_of(target, "await asyncio.create_task(level(k + 1)"))]
    want += ["<task lvl-6>", ("level", line_of(target, "    burn()")), "burn"]
    pid = start_chain(interp, procs, tmp_path)
    folded = str(tmp_path / "all.folded")
    r = subprocess.run([binary(), "record", "-a", "--async", "-F", str(HZ), "-d", "3",
                        "--format", "collapsed", "-o", folded], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"record -a --async exited {r.returncode}: {r.stderr}"
    mine = [(frames[1:], w) for frames, w in parse(folded)
            if frames and frames[0].endswith(f"(pid {pid})")]
    total, good, others = exact_share(mine, want)
    print(f"\nCHAINS all {interp.label} burn={total // PERIOD} exact={good // PERIOD}")
    assert total >= 300 * PERIOD, f"{total // PERIOD} samples of pid {pid}\n{r.stderr}"
    assert good >= 0.85 * total, (f"{good // PERIOD} of {total // PERIOD} samples of burn are "
                                 f"{want}; others:{describe(others)}\n{r.stderr}")


@pytest.mark.parametrize("interp", ASYNC)
def test_top_async(interp, procs, tmp_path):
    """`top --async` (plain snapshots): every task of the chain and the
    awaiters' own frames (level, main) weigh the whole of the samples."""
    pid = start_chain(interp, procs, tmp_path)
    r = subprocess.run([binary(), "top", "--async", "-p", str(pid), "-d", "3"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"top --async exited {r.returncode}: {r.stderr}"
    last = r.stdout.rsplit("%Own", 1)[-1]
    total = {}
    for line in last.splitlines():
        m = re.match(r"\s*[\d.]+\s+([\d.]+)\s+[\d.]+s\s+[\d.]+s\s+(\S+)", line)
        if m:
            total[m.group(2)] = float(m.group(1))
    for name in ["<task", "main", "level", "burn"]:
        got = max((v for k, v in total.items() if k == name or
                   (name == "<task" and k.startswith(name))), default=0)
        assert got >= 95, f"{name}: {got}% total in top's last snapshot:\n{last}\n{r.stderr}"
    for k in range(1, 7):
        assert f"<task lvl-{k}>" in last, f"<task lvl-{k}> not in:\n{last}"
