"""`pyprof-bpf dump` for the 3 a.m. incident (issue #25): whole Python thread
names, each thread's state, source lines, locals.

Each test starts tests/targets/incident.py on every supported interpreter:
threads with names longer than 15 bytes in known states (spinning, waiting
for the GIL, collecting garbage, sleeping, blocked on a lock, sleeping in an
`except` block, the main thread in Event.wait). The target records its own
view (names, idents, native ids; for the parked threads their stacks as
traceback prints them and their locals as repr() prints them) and the dump
must agree with it.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v tests/test_dump_incident.py </dev/null
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from lib.tool import run_tool
from lib.interps import SUPPORTED
from lib.procs import TARGETS, Procs, out_path, stage_unique, wait_file
from lib.incident import dump_json, role_of, start_incident, with_own_proc

pytestmark = [pytest.mark.root, pytest.mark.slow]

UNWINDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools",
                        "remote_unwinder.py")


def dump_text(target, *extra):
    proc = run_tool(["dump", "-p", str(target.pid), *extra])
    assert proc.returncode == 0, (
        f"{target.describe()}: dump exited {proc.returncode}: "
        f"{proc.stderr.decode('utf-8', 'replace')}")
    return proc.stdout.decode("utf-8")


HEADER = re.compile(r'^Thread (?P<tid>\d+) "(?P<name>[^"]*)"(?: \(comm "(?P<comm>[^"]*)"\))?'
                    r'(?P<rest>.*)$')


def text_headers(text):
    """{tid: match} of each thread header of a text dump."""
    out = {}
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            out[int(m["tid"])] = m
    return out


# --------------------------------------------------------------------------
# 1. whole names


@pytest.fixture(scope="module", params=SUPPORTED, ids=str)
def incident(request, tmp_path_factory):
    """One incident.py per interpreter, shared by the tests that only dump it (they
    write nothing into it): pytest groups them by interpreter, so one target runs
    at a time, and each test no longer waits for a target of its own to start."""
    ps = Procs()
    try:
        yield start_incident(request.param, ps, tmp_path_factory.mktemp("incident"))
    finally:
        ps.close()


def test_whole_thread_names(incident, procs, tmp_path):
    """Every thread's threading name, whole (> 15 bytes), and its comm beside
    it, in --json and in text."""
    target, interp = incident, incident.interp
    where = target.describe()
    doc = dump_json(target)
    got = {t["tid"]: t for t in doc["threads"]}
    assert set(got) == set(target.by_tid), f"{where}: threads {sorted(got)}"
    for tid, t in target.by_tid.items():
        if t["role"] != "main":
            assert len(t["name"].encode()) > 15, t["name"]
        assert got[tid]["name"] == t["name"], f"{where}: thread {tid}: {got[tid]}"
        assert got[tid]["comm"] == t["comm"], f"{where}: thread {tid}: {got[tid]}"
    heads = text_headers(dump_text(target))
    assert set(heads) == set(target.by_tid), f"{where}: text headers {sorted(heads)}"
    for tid, t in target.by_tid.items():
        assert heads[tid]["name"] == t["name"], f"{where}: {heads[tid].group(0)}"
        assert heads[tid]["comm"] == t["comm"], f"{where}: {heads[tid].group(0)}"


# --------------------------------------------------------------------------
# 2. each thread's state


def check_parked_states(target, doc):
    """What holds at every instant: the parked threads' states exactly, the
    GIL with at most one holder, <GC> only where it can be."""
    where = target.describe()
    problems = []
    holders = []
    for t in doc["threads"]:
        role, st = role_of(target, t), t["status"]
        label = f"thread {t['tid']} ({t['name']}, {role})"
        if st["has_gil"]:
            holders.append(t["tid"])
        if st["main_thread"] != (role == "main"):
            problems.append(f"{label}: main_thread {st['main_thread']}")
        if st["on_cpu"] != (t["state"] == "running"):
            problems.append(f"{label}: on_cpu {st['on_cpu']} with state {t['state']}")
        if st["has_exception"] != (role == "except"):
            problems.append(f"{label}: has_exception {st['has_exception']}")
        if t["in_gc"] and (role != "gc" or not st["has_gil"]):
            problems.append(f"{label}: in <GC> {t['in_gc']}, has_gil {st['has_gil']}")
        if st["has_gil"] and st["gil_requested"]:
            problems.append(f"{label}: holds the GIL and waits for it")
        want = {"sleeper": ("asleep", "clock_nanosleep"), "except": ("asleep", "clock_nanosleep"),
                "lock": ("asleep", "futex"), "main": ("asleep", "futex")}.get(role)
        if want:
            if (t["state"], t["syscall"]) != want:
                problems.append(f"{label}: {t['state']} in {t['syscall']}, expected "
                                f"{want[0]} in {want[1]}")
            if st["has_gil"] or st["gil_requested"] or t["in_gc"]:
                problems.append(f"{label}: parked, yet {st} in_gc {t['in_gc']}")
    if len(holders) > 1:
        problems.append(f"{len(holders)} threads hold the GIL: {holders}")
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def collecting_look(target, doc):
    """True when this dump caught the collector in <GC> holding the GIL and
    both spinners waiting for it."""
    by_role = {}
    for t in doc["threads"]:
        by_role.setdefault(role_of(target, t), []).append(t)
    gc_t = by_role["gc"][0]
    return (gc_t["in_gc"] and gc_t["status"]["has_gil"]
            and all(t["status"]["gil_requested"] for t in by_role["spinner"]))


# The collector holds the GIL through each gc.collect() of the 400,000-node
# graph (tens of ms) and the spinners take it only between two collections
# (one switch interval each, 5 ms): a dump catches the collecting look with
# p well above 1/4 (measured: most dumps). 80 dumps all missing it:
# (3/4)**80 < 1e-9.
LOOK_DUMPS = 80


def test_thread_states(incident, procs, tmp_path):
    """Each state named: asleep in [syscall] clock_nanosleep (time.sleep),
    in futex (a Lock, Event.wait: the main thread marked), an exception being
    handled, and, in one look, the collector in <GC> holding the GIL while
    both spinners wait for it."""
    target, interp = incident, incident.interp
    seen = False
    for _ in range(LOOK_DUMPS):
        doc = dump_json(target)
        check_parked_states(target, doc)
        if collecting_look(target, doc):
            seen = True
            break
    assert seen, (f"{target.describe()}: no dump of {LOOK_DUMPS} saw the collector in "
                  f"<GC> with the GIL and both spinners waiting; the last:\n"
                  + json.dumps([{k: t[k] for k in ("name", "state", "syscall", "status",
                                                   "in_gc")} for t in doc["threads"]]))
    text = dump_text(target)
    blocks = {}
    for block in text.split("\nThread ")[1:]:
        lines = block.splitlines()
        blocks[int(lines[0].split()[0])] = lines
    want = {"sleeper": "    state: asleep in [syscall] clock_nanosleep",
            "except": "    state: asleep in [syscall] clock_nanosleep, has an exception",
            "lock": "    state: asleep in [syscall] futex",
            "main": "    state: asleep in [syscall] futex"}
    for tid, t in target.by_tid.items():
        lines = blocks.get(tid)
        assert lines, f"{target.describe()}: no text block for thread {tid}:\n{text}"
        assert ("[main thread]" in lines[0]) == (t["role"] == "main"), lines[0]
        if t["role"] in want:
            assert lines[1] == want[t["role"]], f"{t['name']}: {lines[1]!r}"
        else:
            assert lines[1].startswith("    state: "), lines[1]


KERNEL_SLEEP = {"sleeper": "nanosleep", "except": "nanosleep", "lock": "futex", "main": "futex"}


def test_kernel_stacks_and_blocking(incident, procs, tmp_path):
    """dump --kernel: each parked thread's kernel stack (JSON kernel_stack,
    innermost first; text [kernel] lines after its frames, outermost first)
    goes through its system call's entry to a function of its wait
    (nanosleep, futex); a running one has none. With --blocking too, the
    same states and kernel stacks (read before the threads are stopped), and
    the parked threads' stacks equal a dump's without it; the target is not
    traced afterwards. Without --kernel, no kernel_stack key."""
    target, interp = incident, incident.interp
    target.wait_parked()
    assert all("kernel_stack" not in t for t in dump_json(target)["threads"])
    plain = dump_json(target)
    for extra in ((), ("--blocking",)):
        doc = dump_json(target, "--kernel", *extra)
        check_parked_states(target, doc)
        for t in doc["threads"]:
            role, ks = role_of(target, t), t["kernel_stack"]
            assert isinstance(ks, list) and all(isinstance(k, str) and k for k in ks), ks
            if t["state"] == "running":
                assert ks == [], (role, ks)
            if role in KERNEL_SLEEP:
                assert any("syscall" in k.lower() for k in ks), (extra, role, ks)
                assert any(KERNEL_SLEEP[role] in k for k in ks[:8]), (extra, role, ks)
        parked = {t["tid"]: t["frames"] for t in plain["threads"]
                  if role_of(target, t) in KERNEL_SLEEP}
        for t in doc["threads"]:
            if t["tid"] in parked:
                assert t["frames"] == parked[t["tid"]], (extra, t["name"])
        with open(f"/proc/{target.pid}/status") as f:
            assert "TracerPid:\t0\n" in f.read()
        target.wait_parked()
    text = dump_text(target, "--kernel", "--no-source")
    for block in text.split("\nThread ")[1:]:
        lines = block.splitlines()
        tid = int(lines[0].split()[0])
        kernel = [ln for ln in lines if ln.startswith("    [kernel] ")]
        if target.by_tid[tid]["role"] in KERNEL_SLEEP:
            assert kernel and lines[-len(kernel):] == kernel, lines      # after the frames
            assert "syscall" in kernel[0].lower() or "entry" in kernel[0].lower(), kernel


def test_only_active(incident, procs, tmp_path):
    """--only-active: the one thread holding the GIL, or none."""
    target, interp = incident, incident.interp
    held = 0
    for _ in range(LOOK_DUMPS):
        doc = dump_json(target, "--only-active")
        assert len(doc["threads"]) <= 1, doc["threads"]
        for t in doc["threads"]:
            assert t["status"]["has_gil"], t
            assert role_of(target, t) in ("gc", "spinner"), t
            held += 1
        if held:
            break
    assert held, f"{target.describe()}: no dump of {LOOK_DUMPS} showed a GIL holder"


# --------------------------------------------------------------------------
# 3. source lines


def traceback_entries(lines):
    """[(file, line, function, source, marked columns)] of traceback text,
    outermost first; the columns are those under '^' or '~', counted from
    the stripped source's first character."""
    out = []
    text = "".join(lines).splitlines()
    i = 0
    head = re.compile(r'^  File "(.*)", line (\d+), in (.*)$')
    while i < len(text):
        m = head.match(text[i])
        assert m, f"not a traceback line: {text[i]!r}"
        src, marks = None, set()
        i += 1
        if i < len(text) and not head.match(text[i]):
            src = text[i].strip()
            indent = len(text[i]) - len(text[i].lstrip())
            i += 1
            if i < len(text) and not head.match(text[i]) and set(text[i].strip()) <= set("^~"):
                marks = {c - indent for c, ch in enumerate(text[i]) if ch in "^~"}
                i += 1
        out.append((m[1], int(m[2]), m[3], src, marks))
    return out


def dump_entries(block):
    """The same from one thread's block of a text dump (its lines after the
    header and the state)."""
    out = []
    frame = re.compile(r'^    (\S.*?) \((.*):(-?\d+)\)$')
    i = 0
    while i < len(block):
        m = frame.match(block[i])
        i += 1
        if not m:
            continue
        src, marks = None, set()
        if i < len(block) and block[i].startswith("        ") and not frame.match(block[i]):
            src = block[i][8:]
            i += 1
            if i < len(block) and block[i].startswith("        ") and \
                    set(block[i].strip()) == {"^"}:
                marks = {c - 8 for c, ch in enumerate(block[i]) if ch == "^"}
                i += 1
        out.append((m[2], int(m[3]), m[1], src, marks))
    return out


def text_blocks(text):
    blocks = {}
    for block in text.split("\nThread ")[1:]:
        lines = block.splitlines()
        blocks[int(lines[0].split()[0])] = lines
    return blocks


def test_source_lines(incident, procs, tmp_path):
    """Each parked frame's line of source and its marker equal the target's
    own traceback of that frame; --json's line, end_line, column, end_column
    its code's positions. A traceback also draws a marker over a whole line
    where its parser finds anchors (3.13+): we draw none there, which is the
    one difference allowed."""
    target, interp = incident, incident.interp
    where = target.describe()
    blocks = text_blocks(dump_text(target))
    doc = dump_json(target)
    got_json = {t["tid"]: t for t in doc["threads"]}
    checked = 0
    for tid, t in target.by_tid.items():
        if "traceback" not in t:
            continue
        theirs = traceback_entries(t["traceback"])
        ours = dump_entries(blocks[tid])
        assert len(ours) == len(theirs), f"{where}: {t['name']}:\n{ours}\n{theirs}"
        for o, e in zip(ours, theirs):
            assert (o[0], o[1], o[3]) == (e[0], e[1], e[3]), f"{where}: {o} vs {e}"
            whole = e[4] == set(range(len(e[3])))
            if whole:
                assert not o[4], f"{where}: marker over a whole line: {o}"
            else:
                assert o[4] == e[4], f"{where}: markers {sorted(o[4])} vs {sorted(e[4])} in {o}"
            checked += bool(o[4])
        frames = got_json[tid]["frames"]
        assert [[f["line"], f["end_line"], f["column"], f["end_column"]] for f in frames] \
            == t["positions"], f"{where}: {t['name']}: {frames}"
        assert [f["source"].strip() for f in frames] == [e[3] for e in reversed(theirs)]
        assert not any(f["source_changed"] for f in frames)
    assert checked >= 3, f"{where}: only {checked} frames with markers compared"


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_changed_source_not_trusted(interp, procs, tmp_path):
    """A file written after the process started is flagged, its lines not
    shown; --no-source shows none at all."""
    target = start_incident(interp, procs, tmp_path, private=True)
    script = target.by_tid[target.pid]
    doc = dump_json(target)
    main = next(t for t in doc["threads"] if t["tid"] == target.pid)
    mine = main["frames"][-1]["file"]       # <module> of incident.py
    host = interp.host_path(mine)
    assert main["frames"][-1]["source"] is not None and os.path.exists(host), script
    with open(host, "a", encoding="utf-8") as f:
        f.write("\n# changed\n")
    doc = dump_json(target)
    main = next(t for t in doc["threads"] if t["tid"] == target.pid)
    for f in main["frames"]:
        changed = f["file"] == mine
        assert f["source_changed"] == changed, f
        assert (f["source"] is None) == changed, f
    text = dump_text(target)
    assert "[source changed since the process started: not shown]" in text
    doc = dump_json(target, "--no-source")
    assert all(f["source"] is None for t in doc["threads"] for f in t["frames"])
    assert "^" not in dump_text(target, "--no-source")


# --------------------------------------------------------------------------
# 4. locals


def local_problem(name, ours, theirs):
    """None when our repr of a local agrees with the target's own repr()."""
    if theirs.startswith(("None", "True", "False", "'", '"', "b'", 'b"')) or \
            re.fullmatch(r"-?\d+(\.\d*)?(e[-+]\d+)?", theirs):
        if ours == theirs:
            return None
        if ours.endswith("...") and theirs.startswith(ours[:-3]) and len(theirs) > len(ours):
            return None      # cut
        return f"{name} = {ours!r}, the target says {theirs!r}"
    m = re.fullmatch(r"<([\w.]+) at 0x([0-9a-f]+)>", ours)
    if not m:
        return f"{name} = {ours!r} is not <TYPE at 0xADDR> (the target says {theirs!r})"
    addr = re.search(r" at 0x([0-9a-f]+)>$", theirs)
    if addr and int(addr[1], 16) != int(m[2], 16):
        return f"{name} = {ours!r}, the target says {theirs!r}"
    return None


def test_locals(incident, procs, tmp_path):
    """--locals: the sleeper's arguments and locals (a cell among them) equal
    what the target prints of its own frame: None, bool, small and big ints,
    float, str (one cut), bytes exactly, the others <TYPE at 0xADDR>; --json
    and text the same."""
    target, interp = incident, incident.interp
    where = target.describe()
    t = target.by_role["sleeper"][0]
    doc = dump_json(target, "--locals")
    th = next(x for x in doc["threads"] if x["tid"] == t["native_id"])
    ours = {v["name"]: v["repr"] for v in th["frames"][0]["locals"]}
    assert set(ours) == set(t["locals"]), f"{where}: {sorted(ours)} vs {sorted(t['locals'])}"
    assert "cellvar" in ours and ours["cellvar"] == "77"
    problems = [p for p in (local_problem(k, ours[k], t["locals"][k]) for k in ours) if p]
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)
    block = text_blocks(dump_text(target, "--locals"))[t["native_id"]]
    shown = [line.strip() for line in block if line.startswith("            ")]
    for k, v in ours.items():
        assert f"{k} = {v}" in shown, f"{where}: {k} = {v} not in the text:\n" + "\n".join(block)
    total = sum(len(f.get("locals", [])) for x in doc["threads"] for f in x["frames"])
    assert 0 < total <= 4096


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_locals_free_variables(interp, procs, tmp_path):
    """--locals in a closure: inner's free variables (cells shared with
    outer) show their values beside its own local, and outer's cell
    variables theirs, equal to the target's own reprs."""
    script = stage_unique(interp, os.path.join(TARGETS, "closure_locals.py"), procs)
    seen, host = out_path(interp, procs, tmp_path, "closure.json")
    p = procs.start(interp.argv([script, seen]), str(tmp_path / "closure.stderr"))
    wait_file(p, host, f"closure_locals.py on {interp.label}")
    with open(host, encoding="utf-8") as f:
        rec = json.load(f)
    proc = run_tool(["dump", "-p", str(p.pid), "--json", "--locals"])
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    doc = json.loads(proc.stdout.decode("utf-8"))
    frames = {f["function"]: f for t in doc["threads"] for f in t["frames"]}
    where = f"closure_locals.py on {interp.label}"
    for fn, want in rec["locals"].items():
        qual = "outer.<locals>.inner" if fn == "inner" else fn
        assert qual in frames, f"{where}: no frame {qual} in {sorted(frames)}"
        got = {v["name"]: v["repr"] for v in frames[qual].get("locals", [])}
        assert {k: got.get(k) for k in want} == want, f"{where}: {qual}: {got} vs {want}"


def sid_315():
    for i in SUPPORTED:
        if i.root and i.version[:2] == (3, 15):
            return i
    pytest.fail("no sid python3.15 in the test interpreters: run "
                "scripts/provision-pythons.sh")


def remote_unwinder(target):
    """CPython 3.15's _remote_debugging.RemoteUnwinder of the target, run
    in the target's mount namespace (its /proc inside the root)."""
    interp = sid_315()
    script = interp.stage(UNWINDER)
    argv = ["nsenter", "--mount", f"--target={target.pid}"] + interp.argv(
        [script, str(target.pid)])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"RemoteUnwinder failed: {proc.stderr}"
    return json.loads(proc.stdout)


def status_bits(bits, st):
    names = {"THREAD_STATUS_ON_CPU": "on_cpu", "THREAD_STATUS_HAS_GIL": "has_gil",
             "THREAD_STATUS_GIL_REQUESTED": "gil_requested",
             "THREAD_STATUS_HAS_EXCEPTION": "has_exception",
             "THREAD_STATUS_MAIN_THREAD": "main_thread"}
    return sum(bits[b] for b, k in names.items() if st[k])


def compare_with_unwinder(target, ours, theirs, frame_keys, by_interp=False):
    """@by_interp: threads told apart by (tid, interpreter id), not tid.
    Returns ours by that key."""
    where = target.describe()
    bits = theirs["bits"]
    known = sum(bits[b] for b in ("THREAD_STATUS_ON_CPU", "THREAD_STATUS_HAS_GIL",
                                  "THREAD_STATUS_GIL_REQUESTED",
                                  "THREAD_STATUS_HAS_EXCEPTION",
                                  "THREAD_STATUS_MAIN_THREAD"))
    their_threads = {(t["tid"], i["id"]) if by_interp else t["tid"]: t
                     for i in theirs["interpreters"] for t in i["threads"]}
    got = {(t["tid"], t["interpreter"]) if by_interp else t["tid"]: t
           for t in ours["threads"]}
    assert len(got) == len(ours["threads"]), f"{where}: a thread listed twice"
    assert set(got) == set(their_threads), (f"{where}: threads {sorted(got)} vs "
                                            f"RemoteUnwinder's {sorted(their_threads)}")
    problems = []
    for tid, t in got.items():
        th = their_threads[tid]
        label = f"thread {tid} ({t['name']})"
        if status_bits(bits, t["status"]) != th["status"] & known:
            problems.append(f"{label}: status {t['status']} vs RemoteUnwinder's "
                            f"{th['status']} ({bits})")
        mine = [{k: f.get(k) for k in frame_keys} for f in t["frames"]]
        theirs_f = [{k: f[k] for k in frame_keys} for f in th["frames"]]
        if mine != theirs_f:
            problems.append(f"{label}: frames differ:\n    ours:   {mine}\n"
                            f"    theirs: {theirs_f}")
    assert not problems, f"{where} against RemoteUnwinder:\n  " + "\n  ".join(problems)
    return got


def stop(target):
    """SIGSTOP the target and wait until every task has stopped (a task
    takes the stop on its way back from the kernel: R for a moment)."""
    os.kill(target.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while True:
        states = []
        for t in os.listdir(f"/proc/{target.pid}/task"):
            with open(f"/proc/{target.pid}/task/{t}/stat", "rb") as f:
                states.append(f.read().rsplit(b")", 1)[1].split()[0])
        if all(s in (b"T", b"t") for s in states):
            return
        assert time.monotonic() < deadline, f"{target.describe()}: not stopped: {states}"
        time.sleep(0.01)


def paused_comparisons(target, times, by_interp=False):
    """@times over, with the target paused (SIGSTOP) while both read: our
    --json against RemoteUnwinder (compare_with_unwinder()); yields ours
    by thread each time."""
    keys = ("function", "file", "line", "end_line", "column", "end_column")
    for _ in range(times):
        stop(target)
        try:
            ours = dump_json(target)
            theirs = remote_unwinder(target)
        finally:
            os.kill(target.pid, signal.SIGCONT)
        yield compare_with_unwinder(target, ours, theirs, keys, by_interp=by_interp)
        time.sleep(0.3)


@pytest.mark.parametrize("paused_dumps", [3])
def test_states_against_remote_unwinder(paused_dumps, procs, tmp_path):
    """On the same paused target (SIGSTOP while both read), our --json and
    CPython 3.15's RemoteUnwinder report the same status flags and frames,
    field by field; paused several times (different GIL holders)."""
    target = start_incident(sid_315(), procs, tmp_path)
    for _ in paused_comparisons(target, paused_dumps):
        pass


class Subinterp:
    """tests/targets/sl_subinterp.py: "sub-runner" runs sub_loop() in a
    subinterpreter (its thread also has a thread state in the main one, in
    Interpreter.exec()), the main thread main_loop() in the main one."""

    def __init__(self, interp, procs, tmp_path):
        self.interp = interp
        script = stage_unique(interp, os.path.join(TARGETS, "sl_subinterp.py"), procs)
        seen, host = out_path(interp, procs, tmp_path, "subinterp.json")
        self.popen = procs.start(with_own_proc(interp, interp.argv([script, seen])),
                                 str(tmp_path / "subinterp.stderr"))
        self.pid = self.popen.pid
        wait_file(self.popen, host, f"sl_subinterp.py on {interp.label}")
        with open(host, encoding="utf-8") as f:
            self.rec = json.load(f)

    def describe(self):
        return f"sl_subinterp.py on {self.interp.label} (pid {self.pid})"


def test_subinterpreters_against_remote_unwinder(procs, tmp_path):  # noqa: F811
    """A thread running in two interpreters appears under each, with each
    interpreter's id, as CPython 3.15's RemoteUnwinder shows it; on the same
    paused target the two agree on the (thread, interpreter) pairs, their
    status flags and their frames with columns, field by field."""
    target = Subinterp(sid_315(), procs, tmp_path)
    where = target.describe()
    for got in paused_comparisons(target, 3, by_interp=True):
        sub = (target.rec["sub_tid"], 1)
        assert sub in got and got[sub]["frames"][0]["function"] in ("sub_work", "sub_loop"), (
            f"{where}: sub-runner in interpreter 1: {got.get(sub)}")


# --------------------------------------------------------------------------
# 5. several processes


def test_several_processes(procs, tmp_path):
    """-p a,b dumps both, in text and as {"processes": [...]}; -a finds them
    among every process of the host; a PID that is not Python is told on
    stderr while the others are still dumped."""
    for d in ("a", "b"):
        os.makedirs(tmp_path / d)
    a = start_incident(SUPPORTED[0], procs, tmp_path / "a")
    b = start_incident(SUPPORTED[-1], procs, tmp_path / "b")
    pids = f"{a.pid},{b.pid}"
    proc = run_tool(["dump", "-p", pids, "--json", "--no-source"])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["pid"] for d in doc["processes"]] == [a.pid, b.pid]
    for d, target in zip(doc["processes"], (a, b)):
        assert {t["tid"]: t["name"] for t in d["threads"]} == \
            {tid: t["name"] for tid, t in target.by_tid.items()}
    proc = run_tool(["dump", "-p", pids])
    text = proc.stdout.decode()
    assert proc.returncode == 0 and f"Process {a.pid}:" in text and f"Process {b.pid}:" in text
    proc = run_tool(["dump", "-a", "--json", "--no-source"])
    doc = json.loads(proc.stdout)
    got = {d["pid"] for d in doc["processes"]}
    assert {a.pid, b.pid} <= got, f"-a found {sorted(got)}; stderr: {proc.stderr!r}"
    # pid 1 is init, not Python
    proc = run_tool(["dump", "-p", f"{a.pid},1", "--json", "--no-source"])
    assert proc.returncode == 1, proc
    assert [d["pid"] for d in json.loads(proc.stdout)["processes"]] == [a.pid]
    assert b"1 of 2 processes could not be dumped" in proc.stderr, proc.stderr
