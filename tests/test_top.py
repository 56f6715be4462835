"""`pyprof-bpf top` (issue #13, item 1): the live view, driven in tmux.

Every test runs ./pyprof-bpf top in a real terminal: a tmux server of its own
(-L socket), a pane of a fixed size running bash, keys sent with send-keys,
the screen read with capture-pane. The target is tests/targets/top_hot.py on
real interpreters: driver() -> hot_leaf() (about 3/4 of the main thread's
time) and warm_leaf() (1/4); driver() has a total share near 100% and an
own share near 0; with --thread a thread named "side" runs side_leaf().

1. test_hot_function_first: on every supported interpreter, hot_leaf is the
   first row (sorted by own) within 3 s of top's screen appearing (when
   sampling begins, after BPF is loaded), with the line of its `def` in the
   functions view.
2. test_keys: t sorts by total (a function with ~100% total and ~0 own
   first, hot_leaf not), n by name (rows in name order), o back; l shows
   lines (hot_leaf's row on a line of its loop, not its `def`); r switches to
   "since the start"; ] and [ show one thread (only its functions), a all;
   p pauses (the sample count stands still) and resumes. test_process_key:
   with -p A,B, P shows each process's rows alone, then both.
3. test_resize: a narrower window redraws the rows to the new width (the
   file's start cut to "...", the row still ending in ":LINE)"), a shorter
   one moves the keys line to the new last line, a wider one shows the
   whole path again.
4. test_terminal_restored: q, Ctrl-C and SIGTERM each leave the terminal as
   it was: `stty -a` before and after are the same, the shell's lines from
   before are on the screen again, the exit status is 0; so do an error while
   the screen is up (said after it); a terminal it cannot draw on (unknown,
   dumb) gets the plain snapshots with a note; what reaches stderr meanwhile is
   shown after, not over the screen.
5. test_target_exits: the target (-p) or the command (-- CMD) exiting ends
   top with a message, the terminal restored.
6. test_plain_snapshots: standard output not a terminal: a text snapshot
   each interval (hot_leaf first, the header's mode and rate those asked),
   and a last one since the start; -- CMD works the same way.

Nothing is skipped: a missing tmux, binary or interpreter fails.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_top.py
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from lib import pyenvs
from lib.tool import binary
from lib.interps import SUPPORTED, by_label
from lib.procs import stage_unique, wait_file

pytestmark = [pytest.mark.bpf, pytest.mark.root]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
HOT = os.path.join(TARGETS, "top_hot.py")
BINARY = pyenvs.BINARY
# A few versions for the tests of keys and terminal handling (each key test
# on one interpreter; item 1 runs on all).
KEYS_INTERP = "pyenv-3.12.1"
OTHER_INTERPS = ["sid-3.14", "system-3.11"]
ROW = re.compile(r"^\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)s\s+([\d.]+)s  (\S+)(?: \((.*):(\d+)\))?\s*$")
COLUMNS = re.compile(r"^\s*%Own\s+%Total\s+OwnTime\s+TotalTime\s+Function")


def def_line(name):
    with open(HOT) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(f"def {name}("):
                return i
    raise AssertionError(f"no def {name} in {HOT}")


def body_lines(name):
    """The lines of the function: its def (where a sample taken as it is
    entered is, on 3.11/3.12: its RESUME instruction), then its body up to
    the next def."""
    start = def_line(name)
    with open(HOT) as f:
        lines = f.read().splitlines()
    end = start
    while end < len(lines) and not lines[end].startswith("def "):
        end += 1
    return set(range(start, end + 1))


# --------------------------------------------------------------------------
# tmux


class Tmux:
    """A tmux server of our own with one pane running bash."""

    def __init__(self, width=100, height=30):
        if not shutil.which("tmux"):
            pytest.fail("tmux is missing: run scripts/install-deps.sh")
        self.sock = f"pyprof-top-{uuid.uuid4().hex[:8]}"
        self.tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
                  "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=screen PS1='$ ' "
                  "bash --norc --noprofile")
        self.wait_for(lambda s: "$" in s, 10, "the shell's prompt")

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-L", self.sock] + list(args), capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 0, f"tmux {args}: {p.stderr}"
        return p.stdout

    def send(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def line(self, text):
        self.tmux("send-keys", "-t", "t", "-l", text)
        self.tmux("send-keys", "-t", "t", "Enter")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t")

    def resize(self, width, height):
        self.tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            # A capture can fall in the middle of a redraw (curses sends only the
            # changed cells, tmux may read them in pieces): a new view's header over
            # the last view's rows, digits of both. Kept only when a second capture
            # 50 ms later is the same screen (a redraw is once a second).
            if pred(s):
                time.sleep(0.05)
                if self.screen() == s:
                    return s
                continue
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not on the screen within {timeout} s; it shows:\n{s}")
            time.sleep(0.05)

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True,
                       timeout=30)


@pytest.fixture
def tmux():
    made = []

    def make(width=100, height=30):
        t = Tmux(width, height)
        made.append(t)
        return t
    yield make
    for t in made:
        t.close()


# --------------------------------------------------------------------------
# the screen, parsed


def rows(screen):
    """[(own, total, function, file, line)] of the table on the screen."""
    out, table = [], False
    for line in screen.splitlines():
        if COLUMNS.match(line):
            table = True
            continue
        if not table:
            continue
        m = ROW.match(line)
        if not m:
            break
        out.append((float(m.group(1)), float(m.group(2)), m.group(5), m.group(6),
                    int(m.group(7)) if m.group(7) else None))
    return out


def header(screen, n=3):
    return screen.splitlines()[:n]


def is_top(screen):
    return screen.startswith("pyprof-bpf top: pid ")


def first_is(name):
    """The first row is name's, ahead of the second (not a tie of a few samples)."""
    def pred(s):
        r = rows(s) if is_top(s) else []
        return r and r[0][2] == name and (len(r) == 1 or r[0][0] > r[1][0])
    return pred


def view_line(screen):
    for line in screen.splitlines():
        if line.startswith("view: "):
            return line
    return ""


def samples(screen):
    m = re.search(r"^samples (\d+) ", screen, re.M)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# the target


def start_hot(procs, interp, *args):
    """top_hot.py on interp (extra args: SECONDS, --thread); its pid once ready."""
    script = stage_unique(interp, HOT, procs)
    ready_seen = f"/tmp/top-ready-{uuid.uuid4().hex[:8]}"
    ready = interp.host_path(ready_seen)
    procs.cleanup_file(ready)
    p = procs.start(interp.argv([script, ready_seen] + list(args)),
                    f"/tmp/top-target-{uuid.uuid4().hex[:8]}.err")
    procs.cleanup_file(p.stderr_path)
    wait_file(p, ready, f"top_hot.py on {interp}")
    p.script = script
    return p


def top_cmd(args, marker):
    """The pane's command line: stty before and after, top's exit status."""
    b = shlex.quote(BINARY)
    return (f"stty -a > /tmp/{marker}.before; {b} top {args}; rc=$?; "
            f"stty -a > /tmp/{marker}.after; echo TOP-EXIT=$rc")


def run_top(term, args, marker):
    """Start top in the pane and wait for its screen: sampling has begun (BPF
    is loaded: 1-2.5 s here, more on a busy machine)."""
    term.line(top_cmd(args, marker))
    return term.wait_for(is_top, 30, "top's screen")


def quit_top(term, marker):
    """q: top exits 0 and the terminal's modes are as they were."""
    term.send("q")
    s = top_ended(term)
    assert exit_status(s) == 0, s
    stty_same(marker)
    return s


def stty_same(marker):
    with open(f"/tmp/{marker}.before") as f:
        before = f.read()
    with open(f"/tmp/{marker}.after") as f:
        after = f.read()
    for ext in ("before", "after"):
        os.unlink(f"/tmp/{marker}.{ext}")
    assert before == after, f"stty -a differs:\n--- before\n{before}--- after\n{after}"


def exit_status(screen):
    m = re.search(r"^TOP-EXIT=(\d+)", screen, re.M)
    return int(m.group(1)) if m else None


def top_ended(term, timeout=20):
    """The screen once top has exited (and the pane's stty -a has run)."""
    return term.wait_for(lambda s: exit_status(s) is not None, timeout, "top's exit")


# --------------------------------------------------------------------------
# 1. the hot function, first


@pytest.mark.parametrize("interp", SUPPORTED, ids=str)
def test_hot_function_first(interp, procs, tmux):
    binary()
    t = start_hot(procs, interp)
    term = tmux()
    marker = f"top-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    # top draws its screen when sampling begins (after loading BPF: 1-2.5 s
    # of verifier time on this machine, record's start-up too)
    run_top(term, f"-p {t.pid}", marker)
    t1 = time.monotonic()
    s = term.wait_for(first_is("hot_leaf"), 10, "hot_leaf as the first row")
    took = time.monotonic() - t1
    print(f"\n{interp}: top's screen {t1 - t0:.2f} s after the command line, hot_leaf "
          f"first {took:.2f} s later")
    assert took <= 3.0, f"hot_leaf first {took:.2f} s after the screen (over 3 s):\n{s}"
    # the first draws come every 0.25 s until there are rows: a few samples;
    # the next refresh has warm_leaf too
    s = term.wait_for(lambda s: first_is("hot_leaf")(s) and "warm_leaf" in
                      [x[2] for x in rows(s)], 5, "hot_leaf first and warm_leaf")
    r = rows(s)
    own, total, fn, path, line = r[0]
    assert path == t.script and line == def_line("hot_leaf"), r[0]
    assert own > 0 and total >= own, r[0]
    names = [x[2] for x in r]
    assert "warm_leaf" in names and "driver" in names, s
    warm = r[names.index("warm_leaf")]
    assert warm[0] < own, s
    assert f"pid {t.pid} (" in header(s)[0] and f"Python {interp.version_str}" in header(s)[0], s
    quit_top(term, marker)


# --------------------------------------------------------------------------
# 2. keys


@pytest.mark.slow
def test_keys(procs, tmux):
    binary()
    interp = by_label(KEYS_INTERP)
    t = start_hot(procs, interp, "--thread")
    term = tmux(120, 40)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {t.pid}", marker)
    # settled: both threads' functions, a few refreshes' worth of samples
    want = {"hot_leaf", "warm_leaf", "driver", "side_leaf"}
    s = term.wait_for(lambda s: want <= {r[2] for r in rows(s)} and samples(s) >= 100, 20,
                      f"{sorted(want)} among the rows, 100 samples")
    assert "sorted by own" in view_line(s), s
    r = rows(s)
    assert [x[0] for x in r] == sorted((x[0] for x in r), reverse=True), s
    names = [x[2] for x in r]
    assert "driver" not in names or names.index("hot_leaf") < names.index("driver"), s

    # total: a caller of everything on the main thread first, not a leaf
    term.send("t")
    s = term.wait_for(lambda s: "sorted by total" in view_line(s), 5, "sorted by total")
    r = rows(s)
    assert [x[1] for x in r] == sorted((x[1] for x in r), reverse=True), s
    # driver (own small: its loop's test; total = hot + warm) now above
    # hot_leaf; by own it was below
    names = [x[2] for x in r]
    assert "driver" in names and "hot_leaf" in names, s
    assert names.index("driver") < names.index("hot_leaf"), s
    drv, hot = r[names.index("driver")], r[names.index("hot_leaf")]
    assert drv[0] < hot[0] and drv[1] > hot[1], s

    # name
    term.send("n")
    s = term.wait_for(lambda s: "sorted by name" in view_line(s), 5, "sorted by name")
    names = [x[2] for x in rows(s)]
    assert len(names) >= 5 and names == sorted(names), s

    # own again
    term.send("o")
    s = term.wait_for(lambda s: "sorted by own" in view_line(s), 5, "sorted by own")

    # lines: hot_leaf's row on a line of its loop
    term.send("l")
    s = term.wait_for(lambda s: ", lines," in view_line(s), 5, "the lines view")
    hot = [x for x in rows(s) if x[2] == "hot_leaf"]
    assert hot and all(x[4] in body_lines("hot_leaf") for x in hot), s
    term.send("l")
    s = term.wait_for(lambda s: ", functions," in view_line(s), 5, "the functions view")
    assert [x[4] for x in rows(s) if x[2] == "hot_leaf"] == [def_line("hot_leaf")], s

    # recent / since the start
    term.send("r")
    s = term.wait_for(lambda s: "since the start" in view_line(s), 5, "since the start")
    term.send("r")
    s = term.wait_for(lambda s: "last 5 s" in view_line(s), 5, "the recent view")

    # one thread, then the other, then all
    main_fns, side_fns = {"hot_leaf", "warm_leaf", "driver"}, {"side_leaf", "side_loop"}
    seen, tids = set(), []

    def tid_shown(s):
        m = re.search(r", thread (\d+) \((.*)\), sorted", view_line(s))
        return m and int(m.group(1)) not in tids and m
    for _ in range(2):
        term.send("]")
        s = term.wait_for(tid_shown, 5, "another thread's view")
        m = tid_shown(s)
        tids.append(int(m.group(1)))
        fns = {x[2] for x in rows(s)}
        if fns & side_fns:
            # (3.14+ names the OS thread after the Python one; 3.12 does not)
            assert not fns & main_fns and int(m.group(1)) != t.pid, s
            seen.add("side")
        else:
            assert fns & main_fns and int(m.group(1)) == t.pid, s
            seen.add("main")
    assert seen == {"main", "side"}, seen
    term.send("a")
    s = term.wait_for(lambda s: ", all threads," in view_line(s), 5, "all threads")
    fns = {x[2] for x in rows(s)}
    assert fns & main_fns and fns & side_fns, s

    # pause: the screen stands still over several refreshes, then moves again
    term.send("p")
    s = term.wait_for(lambda s: "[PAUSED]" in header(s)[0], 5, "[PAUSED]")
    n = samples(s)
    time.sleep(2.5)
    s = term.screen()
    assert samples(s) == n and "[PAUSED]" in s, s
    term.send("p")
    s = term.wait_for(lambda s: "[PAUSED]" not in header(s)[0] and samples(s) != n, 5,
                      "the refresh again")
    quit_top(term, marker)


def test_process_key(procs, tmux):
    """-p A,B: P shows one process's rows (its script's functions only), then
    the other's, then every process again."""
    binary()
    a = start_hot(procs, by_label(KEYS_INTERP))
    b = start_hot(procs, by_label(OTHER_INTERPS[0]))
    assert a.script != b.script
    term = tmux(140, 40)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {a.pid},{b.pid}", marker)
    s = term.wait_for(lambda s: {a.script, b.script} <= {r[3] for r in rows(s)}, 20,
                      "both targets' rows")
    assert "+ 1 more processes" in header(s)[0], s
    seen = []
    for _ in range(2):
        term.send("P")
        # Pressed as soon as both show, a view may hold a handful of samples
        # (CI: warm_leaf first on 6): hot_leaf leads once there are more.
        s = term.wait_for(lambda s: (m := re.search(r", pid (\d+) \(.*\), all its threads,",
                                                    view_line(s))) and
                          int(m.group(1)) not in seen and rows(s) and
                          rows(s)[0][2] == "hot_leaf", 10,
                          "another process's view, hot_leaf first")
        pid = int(re.search(r", pid (\d+) ", view_line(s)).group(1))
        seen.append(pid)
        script = {a.pid: a.script, b.pid: b.script}[pid]
        files = {r[3] for r in rows(s)} - {None}     # status rows have no file
        assert files == {script}, s
        assert rows(s)[0][2] == "hot_leaf", s
    assert sorted(seen) == sorted([a.pid, b.pid]), seen
    term.send("P")
    s = term.wait_for(lambda s: ", all threads," in view_line(s), 5, "every process again")
    assert {a.script, b.script} <= {r[3] for r in rows(s)}, s
    quit_top(term, marker)


# --------------------------------------------------------------------------
# 3. resize


@pytest.mark.slow
def test_resize(procs, tmux):
    binary()
    interp = by_label(KEYS_INTERP)
    t = start_hot(procs, interp)
    path = t.script
    line = def_line("hot_leaf")
    term = tmux(120, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {t.pid}", marker)

    def hot_row(s):
        for ln in s.splitlines():
            if re.search(r"\ds  hot_leaf( |$)", ln):
                return ln.rstrip()
        return None

    s = term.wait_for(lambda s: is_top(s) and hot_row(s), 10, "hot_leaf's row")
    assert hot_row(s).endswith(f"hot_leaf ({path}:{line})"), s
    term.resize(60, 12)
    s = term.wait_for(lambda s: hot_row(s) and "..." in hot_row(s), 5,
                      "hot_leaf's row redrawn for 60 columns")
    r = hot_row(s)
    m = re.search(r"hot_leaf \(\.\.\.(.+):(\d+)\)$", r)
    assert len(r) <= 60 and m and path.endswith(m.group(1)) and int(m.group(2)) == line, \
        repr(r)
    lines = s.split("\n")
    assert len(lines) >= 12 and lines[11].startswith("q quit"), s
    assert all(len(ln) <= 60 for ln in lines), s
    term.resize(120, 30)
    s = term.wait_for(lambda s: hot_row(s) and hot_row(s).endswith(f"({path}:{line})"), 5,
                      "hot_leaf's whole path again at 120 columns")
    assert s.split("\n")[29].startswith("q quit"), s
    term.send("q")
    s = top_ended(term)
    assert exit_status(s) == 0, s
    os.unlink(f"/tmp/{marker}.before")
    os.unlink(f"/tmp/{marker}.after")


# --------------------------------------------------------------------------
# 4. the terminal, as it was


@pytest.mark.slow
@pytest.mark.parametrize("how", ["q", "C-c", "SIGTERM"])
def test_terminal_restored(how, procs, tmux):
    binary()
    interp = by_label(OTHER_INTERPS[0])
    t = start_hot(procs, interp)
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    term.line("echo BEFORE-TOP-$((6 * 7))")
    term.wait_for(lambda s: "BEFORE-TOP-42" in s, 5, "the line before top")
    run_top(term, f"-p {t.pid}", marker)
    s = term.wait_for(first_is("hot_leaf"), 10, "hot_leaf as the first row")
    assert "BEFORE-TOP-42" not in s, s
    if how == "SIGTERM":
        pids = subprocess.run(["pgrep", "-f", f"^{re.escape(BINARY)} top -p {t.pid}$"],
                              capture_output=True, text=True).stdout.split()
        assert len(pids) == 1, pids
        os.kill(int(pids[0]), signal.SIGTERM)
    else:
        term.send(how)
    s = top_ended(term)
    assert exit_status(s) == 0, s
    assert "BEFORE-TOP-42" in s and not is_top(s), s
    assert "pyprof-bpf:" in s and " samples in " in s, s
    assert t.poll() is None, "the target (-p) must go on running"
    stty_same(marker)


@pytest.mark.slow
def test_error_restores_terminal(procs, tmux):
    """An error while the screen is up (--raw's writes failing: /dev/full)
    gives the terminal back, then says what failed; exit status 1."""
    binary()
    interp = by_label(KEYS_INTERP)
    t = start_hot(procs, interp)
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {t.pid} -F 999 --raw /dev/full", marker)
    s = top_ended(term, 60)
    assert "pyprof-bpf: writing /dev/full: No space left on device" in s, s
    assert exit_status(s) == 1 and not is_top(s), s
    stty_same(marker)


def test_stderr_kept(procs, tmux):
    """What reaches top's stderr while the screen is up does not tear it: it
    is shown once the terminal is back."""
    binary()
    interp = by_label(KEYS_INTERP)
    t = start_hot(procs, interp)
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {t.pid}", marker)
    pids = subprocess.run(["pgrep", "-f", f"^{re.escape(BINARY)} top -p {t.pid}$"],
                          capture_output=True, text=True).stdout.split()
    assert len(pids) == 1, pids
    with open(f"/proc/{pids[0]}/fd/2", "a") as f:     # appended, as a write(2) on fd 2
        f.write("A-LINE-ON-STDERR\n")
    s = term.wait_for(lambda s: samples(s) is not None and samples(s) > 0, 10, "a refresh")
    time.sleep(1.2)
    assert "A-LINE-ON-STDERR" not in term.screen(), term.screen()
    s = quit_top(term, marker)
    assert "A-LINE-ON-STDERR" in s, s


@pytest.mark.slow
@pytest.mark.parametrize("term_name", ["no-such-term", "dumb"])
def test_terminal_unusable(term_name, procs, tmux):
    """A terminal terminfo cannot draw on (unknown, or TERM=dumb): one line says
    so, and the plain snapshots come instead; the terminal is left alone."""
    binary()
    interp = by_label(KEYS_INTERP)
    t = start_hot(procs, interp)
    term = tmux(100, 40)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    term.line(top_cmd(f"-p {t.pid} -d 2.5 --rows 3", marker).replace(
        f"{shlex.quote(BINARY)} top", f"TERM={term_name} {shlex.quote(BINARY)} top"))
    s = top_ended(term, 30)
    assert exit_status(s) == 0, s
    assert re.search(rf"pyprof-bpf: the terminal \(TERM={term_name}\) .*: plain "
                     r"snapshots instead", s.replace("\n", "")), s
    assert s.count("pyprof-bpf top: pid ") == 3 and "view: since the start" in s, s
    stty_same(marker)


# --------------------------------------------------------------------------
# 5. the target exits


def test_target_exits(procs, tmux):
    binary()
    interp = by_label(OTHER_INTERPS[1])
    stop_seen = f"/tmp/top-stop-{uuid.uuid4().hex[:8]}"
    stop = interp.host_path(stop_seen)
    procs.cleanup_file(stop)
    # it exits once top has shown it (top's start-up varies with the load)
    t = start_hot(procs, interp, f"--until={stop_seen}")
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-p {t.pid}", marker)
    term.wait_for(first_is("hot_leaf"), 10, "hot_leaf as the first row")
    with open(stop, "w"):
        pass
    s = top_ended(term)
    assert t.poll() == 0, t.poll()
    assert "pyprof-bpf: the target exited" in s and exit_status(s) == 0, s
    stty_same(marker)


def test_command_exits(procs, tmux):
    binary()
    interp = by_label(KEYS_INTERP)
    ready = f"/tmp/top-ready-{uuid.uuid4().hex[:8]}"
    procs.cleanup_file(ready)
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    cmd = shlex.join(interp.argv([HOT, ready, "3"]))
    run_top(term, f"-- {cmd}", marker)
    s = term.wait_for(first_is("hot_leaf"), 10, "hot_leaf as the first row")
    s = top_ended(term)
    assert "pyprof-bpf: the command exited with status 0" in s and exit_status(s) == 0, s
    stty_same(marker)


def test_quit_kills_command(procs, tmux):
    binary()
    interp = by_label(KEYS_INTERP)
    ready = f"/tmp/top-ready-{uuid.uuid4().hex[:8]}"
    procs.cleanup_file(ready)
    term = tmux(100, 30)
    marker = f"top-{uuid.uuid4().hex[:8]}"
    run_top(term, f"-- {shlex.join(interp.argv([HOT, ready]))}", marker)
    s = term.wait_for(first_is("hot_leaf"), 10, "hot_leaf as the first row")
    pid = int(re.search(r"pid (\d+)", s).group(1))
    term.send("q")
    s = top_ended(term)
    assert f"pyprof-bpf: the command (pid {pid}) was killed" in s and exit_status(s) == 0, s
    assert not os.path.exists(f"/proc/{pid}"), f"the command {pid} still runs"
    stty_same(marker)


# --------------------------------------------------------------------------
# 6. plain snapshots


def snapshots(out):
    """The plain snapshots of top's stdout: [(header lines, rows)]."""
    out_ = []
    for block in out.split("\n\n"):
        if not block.strip():
            continue
        lines = block.splitlines()
        assert lines[0].startswith("pyprof-bpf top: ") and COLUMNS.match(lines[3]), block
        out_.append((lines[:3], rows(block)))
    return out_


@pytest.mark.parametrize("label", [KEYS_INTERP] + OTHER_INTERPS)
def test_plain_snapshots(label, procs):
    interp = by_label(label)
    t = start_hot(procs, interp)
    p = subprocess.run([binary(), "top", "-p", str(t.pid), "-d", "3.5", "-F", "199",
                        "--mode", "wall", "--rows", "8"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "\033" not in p.stdout, "terminal escapes in the plain snapshots"
    snaps = snapshots(p.stdout)
    # one a second for 3.5 s, then the last one
    assert len(snaps) == 4, p.stdout
    for hdr, r in snaps:
        assert "wall mode, 199 Hz" in hdr[0], hdr
        assert 1 <= len(r) <= 8, r
    for hdr, r in snaps[:-1]:
        assert "view: last 5 s, functions, all threads, sorted by own" == hdr[2], hdr
    assert snaps[-1][0][2].startswith("view: since the start"), snaps[-1][0]
    # In wall mode the time the target waited for a CPU ([runnable]: this
    # machine is shared) is a row of its own, as in every output: hot_leaf
    # is the first Python function.
    for hdr, r in snaps[1:]:
        py = [x for x in r if not x[2].startswith("[")]
        assert py and py[0][2] == "hot_leaf", (hdr, r)
    assert " samples in " in p.stderr, p.stderr


def test_plain_command(procs):
    interp = by_label(KEYS_INTERP)
    ready = f"/tmp/top-ready-{uuid.uuid4().hex[:8]}"
    procs.cleanup_file(ready)
    p = subprocess.run([binary(), "top", "--interval", "0.5", "--"] +
                       interp.argv([HOT, ready, "2"]),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    snaps = snapshots(p.stdout)
    assert len(snaps) >= 4, p.stdout
    assert snaps[-1][1][0][2] == "hot_leaf", snaps[-1]
    assert "pyprof-bpf: the command exited with status 0" in p.stderr, p.stderr


def test_plain_all(procs):
    """top -a (record's every-Python-process option): the header says so,
    and the target's hot_leaf is among the rows, ahead of warm_leaf."""
    interp = by_label(OTHER_INTERPS[0])
    t = start_hot(procs, interp)
    p = subprocess.run([binary(), "top", "-a", "-d", "2.5", "--rows", "100"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    snaps = snapshots(p.stdout)
    assert len(snaps) == 3, p.stdout
    hdr, r = snaps[-1]
    assert re.match(r"pyprof-bpf top: every Python process \(\d+ seen\), cpu mode", hdr[0]), hdr
    mine = [x for x in r if x[3] == t.script]
    names = [x[2] for x in mine]
    assert "hot_leaf" in names and "warm_leaf" in names, r
    assert mine[names.index("hot_leaf")][0] > mine[names.index("warm_leaf")][0], r


def test_help():
    p = subprocess.run([binary(), "top", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    for word in ("EXAMPLES:", "--mode", "--freq=HZ", "--events", "--native", "--interval",
                 "--window", "--rows", "Keys:"):
        assert word in p.stdout, word
    assert "--format" not in p.stdout and "--output" not in p.stdout, p.stdout
