"""End-to-end tests of `pyprof-bpf [record] -o FILE -- CMD [ARGS...]` (issue 9).

pyprof-bpf starts the command and samples it until it exits, then exits with
its status. Every test runs the real binary on real interpreters with real
BPF; the commands are tests/targets/launched.py (one mode per behaviour),
short.py and first_spin.py:

1. test_exit_status: 0, 3 and a death by SIGKILL/SIGTERM come back as 0, 3,
   137 and 143, the recording written, on a chrooted and a pyenv interpreter.
2. test_stdio: standard input reaches the command, its stdout is
   pyprof-bpf's stdout byte for byte (nothing of ours in it), its stderr
   passes, and its own options (-v, --format) stay its own.
3. test_short_program / test_first_statement: on every interpreter, a program
   of 50 ms (CPU) has samples of its module body; one whose first statement
   spins for 200 ms has them there, most of its samples.
4. test_ctrl_c_on_a_terminal: pyprof-bpf on a real pseudo-terminal, ^C typed
   on it: the command gets SIGINT exactly once (the terminal's, not also one
   passed on), pyprof-bpf records on until it exits, and exits with its
   status. test_sigint_to_the_process_group: os.killpg(SIGINT) ends both
   (Python dies of its KeyboardInterrupt: 130), the recording written.
   test_signal_forwarded: SIGINT or SIGTERM sent to pyprof-bpf alone reach
   the command exactly once; samples after it are recorded.
5. test_duration: -d ends the recording (written at once), pyprof-bpf waits
   for the command and exits with its status.
6. test_sudo_identity: run as root with SUDO_UID/SUDO_GID/SUDO_USER (and
   through a real sudo, as nobody), the command runs with the invoking
   user's uid, gid and groups (a temporary group makes the list non-trivial),
   HOME/USER/LOGNAME as sudo left them.
7. test_exec_failures, test_command_without_python, test_usage: clear
   messages; 127 and 126 as in shells; the command's status when it exits
   before running Python; a command that runs no Python is killed after 5 s;
   -o is required, -p and a command exclude each other.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_launch.py </dev/null
"""
import errno
import grp
import json
import os
import pty
import pwd
import select
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from lib import pyenvs
from lib import formats as tf
from lib.tool import binary
from lib.interps import SUPPORTED, by_label
from lib.procs import argv_of, stage_unique
from lib.recorder import TIMEOUT, launch
from lib.perf import line_of, parse_folded, parse_perf

pytestmark = [pytest.mark.bpf, pytest.mark.root]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
LAUNCHED = os.path.join(TARGETS, "launched.py")
SHORT = os.path.join(TARGETS, "short.py")
FIRST_SPIN = os.path.join(TARGETS, "first_spin.py")
SYSTEM = "system-3.11"   # readable by nobody (pyenv's live under /root)


def module_stacks(folded, script_seen):
    """{line of the script's outermost <module> frame: weight} of a collapsed
    recording (stacks whose outermost Python frame is the script's module)."""
    out = {}
    for stack, w in folded.items():
        py = [tf.decode_text(f) for f in stack if f.startswith("py::")]
        if py and py[0][0] == "<module>" and py[0][1] == script_seen:
            out[py[0][2]] = out.get(py[0][2], 0) + w
    return out


def functions(samples):
    return {fr.func for s in samples for fr in s.frames if fr.python}


def read(path):
    with open(path, "rb") as f:
        return f.read()


# --------------------------------------------------------------------------
# 1. exit statuses

@pytest.mark.parametrize("label", ["sid-3.14", "pyenv-3.12.1"])
@pytest.mark.parametrize("mode,arg,code,says", [
    ("exit", 0, 0, "exited with status 0"),
    ("exit", 3, 3, "exited with status 3"),
    ("kill", int(signal.SIGKILL), 137, "was killed by signal 9"),
    ("kill", int(signal.SIGTERM), 143, "was killed by signal 15"),
])
def test_exit_status(label, mode, arg, code, says, procs, tmp_path):
    interp = by_label(label)
    out = tmp_path / "out.perf"
    r = launch(procs, tmp_path, ["-F", 999, "-o", out],
            argv_of(interp, LAUNCHED, procs, [mode, arg])).expect(code)
    assert f"pyprof-bpf: the command {says}" in r.stderr, r.stderr
    samples = parse_perf(read(out))
    assert r.summary()["samples"] == len(samples)
    assert r.stdout == b""


# --------------------------------------------------------------------------
# 2. standard input, output and error

@pytest.mark.parametrize("label", ["sid-3.15", "pyenv-3.13.0"])
def test_stdio(label, procs, tmp_path):
    interp = by_label(label)
    data = "".join(f"line {i} ünïcode\n" for i in range(2000))
    inp = tmp_path / "stdin.txt"
    inp.write_text(data, encoding="utf-8")
    with open(inp, "rb") as f:
        r = launch(procs, tmp_path, ["-o", tmp_path / "out.folded"],
                argv_of(interp, LAUNCHED, procs, ["echo", "-v", "--format", "x", "--"]),
                stdin=f).expect(0)
    want = json.dumps(["-v", "--format", "x", "--"]) + "\n" + data.upper()
    assert r.stdout.decode("utf-8") == want
    assert "to stderr\n" in r.stderr
    parse_folded(read(tmp_path / "out.folded"))


# --------------------------------------------------------------------------
# 3. sampled from the start

@pytest.mark.parametrize("interp", SUPPORTED, ids=repr)
def test_short_program(interp, procs, tmp_path):
    out = tmp_path / "out.folded"
    seen = stage_unique(interp, SHORT, procs)
    r = launch(procs, tmp_path, ["-F", 9999, "-o", out], interp.argv([seen])).expect(0)
    folded = parse_folded(read(out))
    mod = module_stacks(folded, seen)
    assert mod.get(line_of(SHORT, "spin"), 0) > 0, (
        f"no sample of short.py's module body (line {line_of(SHORT, 'spin')}): {mod}\n"
        f"{r.stderr}")
    # The interpreter's start-up before its first thread state (loading,
    # 1-10 ms here: ~10-100 samples at 9999 Hz) is said as a start, not as a
    # thread with no Python: the main thread was born at the fork, long
    # before the exec (the launch waits for the events).
    nostate = {";".join(st): w for st, w in folded.items() if "[no-python-state]" in st}
    assert not nostate, f"start-up samples said [no-python-state]: {nostate}\n{r.stderr}"


@pytest.mark.parametrize("interp", SUPPORTED, ids=repr)
def test_first_statement(interp, procs, tmp_path):
    out = tmp_path / "out.folded"
    seen = stage_unique(interp, FIRST_SPIN, procs)
    r = launch(procs, tmp_path, ["-F", 999, "-o", out], interp.argv([seen]),
            stdout_pipe=True)
    r.readline("done")
    r.expect(0)
    folded = parse_folded(read(out))
    mod = module_stacks(folded, seen)
    there = sum(mod.get(line_of(FIRST_SPIN, k), 0) for k in ("spin", "pass"))
    python = sum(w for st, w in folded.items() if any(f.startswith("py::") for f in st))
    # 200 ms of CPU in the statement against the interpreter's start-up
    # (20-100 ms): sampled from its start, it has most of the samples.
    assert there > 0.5 * python, (
        f"the first statement has {there / 1e6:.1f} ms of {python / 1e6:.1f} ms sampled in "
        f"Python: {mod}\n{r.stderr}")


# --------------------------------------------------------------------------
# 4. Ctrl-C and signals

def run_on_pty(args, timeout=TIMEOUT):
    """Runs pyprof-bpf ARGS on a new pseudo-terminal (its controlling
    terminal, pyprof-bpf in its foreground process group, as from a shell);
    types ^C once the command says "ready". Returns (wait status, output)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execv(args[0], args)
        finally:
            os._exit(127)
    buf, typed = b"", False
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"pyprof-bpf on a terminal still running after {timeout}s:\n"
                            f"{buf.decode('utf-8', 'replace')}")
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(master, 4096)
                except OSError as e:    # EIO: the terminal's last user left
                    if e.errno != errno.EIO:
                        raise
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
            if not typed and b"ready" in buf:
                os.write(master, b"\x03")
                typed = True
        _, status = os.waitpid(pid, 0)
        pid = None
    finally:
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        os.close(master)
    assert typed, f"the command never said ready:\n{buf.decode('utf-8', 'replace')}"
    return status, buf.decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.mark.slow
@pytest.mark.parametrize("label", ["sid-3.14", "pyenv-3.12.1"])
def test_ctrl_c_on_a_terminal(label, procs, tmp_path):
    interp = by_label(label)
    out = tmp_path / "out.perf"
    args = ([binary(), "-F", "999", "-o", str(out), "--"]
            + argv_of(interp, LAUNCHED, procs, ["count"]))
    status, text = run_on_pty(args)
    # One SIGINT, from the terminal: not passed on a second time.
    assert os.waitstatus_to_exitcode(status) == 21, text
    assert "pyprof-bpf: the command exited with status 21" in text, text
    assert "after_signal" in functions(parse_perf(read(out))), text


@pytest.mark.parametrize("label", ["sid-3.15", "pyenv-3.11.7"])
def test_sigint_to_the_process_group(label, procs, tmp_path):
    interp = by_label(label)
    out = tmp_path / "out.perf"
    r = launch(procs, tmp_path, ["-F", 999, "-o", out],
            argv_of(interp, LAUNCHED, procs, ["interrupt"]), stdout_pipe=True)
    r.readline()
    # "ready" may come before the recorder has attached (a slow BPF load on
    # a busy machine): the samples start at its "sampling" line.
    deadline = time.monotonic() + TIMEOUT
    while "sampling" not in r.stderr and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(r.p.pid, signal.SIGINT)
    r.expect(128 + signal.SIGINT)
    assert "pyprof-bpf: the command was killed by signal 2" in r.stderr, r.stderr
    samples = parse_perf(read(out))
    assert "main" in functions(samples)
    assert r.summary()["samples"] == len(samples)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("label", ["sid-3.14", "pyenv-3.13.0"])
def test_signal_forwarded(label, sig, procs, tmp_path):
    interp = by_label(label)
    out = tmp_path / "out.perf"
    r = launch(procs, tmp_path, ["-F", 999, "-o", out],
            argv_of(interp, LAUNCHED, procs, ["count"]), stdout_pipe=True)
    r.readline()
    os.kill(r.p.pid, sig)       # pyprof-bpf alone: it passes it on, once
    r.expect(21)
    samples = parse_perf(read(out))
    after = line_of(LAUNCHED, "after")
    assert any(fr.func == "after_signal" and fr.line == after
               for s in samples for fr in s.frames if fr.python), (
        f"nothing recorded after the signal\n{r.stderr}")


# --------------------------------------------------------------------------
# 5. -d

@pytest.mark.slow
def test_duration(procs, tmp_path):
    interp = by_label("sid-3.14")
    out = tmp_path / "out.perf"
    t0 = time.monotonic()
    r = launch(procs, tmp_path, ["-d", 0.5, "-o", out],
            argv_of(interp, LAUNCHED, procs, ["spin", 2.5, 5]), stdout_pipe=True)
    deadline = time.monotonic() + TIMEOUT
    while "the recording is written" not in r.stderr:
        assert r.p.poll() is None, r.stderr
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.02)
    samples = parse_perf(read(out))      # complete while the command runs
    assert r.p.poll() is None, "pyprof-bpf did not wait for the command"
    r.readline("done")
    r.expect(5)
    assert time.monotonic() - t0 >= 2.5
    s = r.summary()
    assert s["samples"] == len(samples) and s["secs"] < 1.5, r.stderr
    lines = r.stderr.rstrip("\n").split("\n")
    assert lines[-1] == "pyprof-bpf: the command exited with status 5", r.stderr


# --------------------------------------------------------------------------
# 6. sudo

@pytest.fixture
def nobody_group():
    """A temporary group with nobody in it, so that nobody's group list is
    more than its primary group. Removed after the test."""
    name = f"pyprof-lt-{uuid.uuid4().hex[:8]}"
    subprocess.run(["groupadd", "-U", "nobody", name], check=True)
    try:
        yield grp.getgrnam(name).gr_gid
    finally:
        subprocess.run(["groupdel", name], check=True)


def expected_ids(user):
    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid, sorted(set(os.getgrouplist(user, pw.pw_gid)))


def check_ids(r, user, env):
    uid, gid, groups = expected_ids(user)
    got = json.loads(r.p.stdout.read().decode())
    assert (got["uid"], got["gid"], sorted(set(got["groups"]))) == (uid, gid, groups), (
        f"{got}\n{r.stderr}")
    assert got["env"] == env, got
    return got


@pytest.mark.slow
def test_sudo_identity(nobody_group, procs, tmp_path):
    interp = by_label(SYSTEM)
    uid, gid, groups = expected_ids("nobody")
    assert nobody_group in groups
    env = dict(os.environ, SUDO_UID=str(uid), SUDO_GID=str(gid), SUDO_USER="nobody",
               HOME="/home/someone", USER="root", LOGNAME="root")
    r = launch(procs, tmp_path, ["-o", tmp_path / "out.perf"],
            interp.argv([LAUNCHED, "ids"]), stdout_pipe=True, env=env)
    r.expect(0)
    check_ids(r, "nobody", {"HOME": "/home/someone", "USER": "root", "LOGNAME": "root"})
    parse_perf(read(tmp_path / "out.perf"))


@pytest.fixture
def sudoers_nobody():
    """A sudoers rule that lets nobody run pyprof-bpf and env as root
    without a password. Removed after the test."""
    if not shutil.which("sudo") or not shutil.which("visudo"):
        pytest.fail("sudo is missing: run scripts/install-deps.sh")
    path = f"/etc/sudoers.d/pyprof-bpf-test-{uuid.uuid4().hex[:8]}"
    with open(path, "w") as f:
        f.write(f"nobody ALL=(root) NOPASSWD: {binary()}, /usr/bin/env\n")
    os.chmod(path, 0o440)
    try:
        subprocess.run(["visudo", "-cf", path], check=True, capture_output=True)
        yield
    finally:
        os.unlink(path)


@pytest.mark.slow
def test_real_sudo(nobody_group, sudoers_nobody, procs, tmp_path):
    interp = by_label(SYSTEM)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups"]
    sudo_env = subprocess.run(as_nobody + ["sudo", "-n", "/usr/bin/env"], check=True,
                              capture_output=True, text=True, cwd="/").stdout
    sudo_env = dict(ln.split("=", 1) for ln in sudo_env.splitlines() if "=" in ln)
    assert sudo_env.get("SUDO_USER") == "nobody", sudo_env
    script = stage_unique(interp, LAUNCHED, procs)
    r = launch(procs, tmp_path, ["-o", tmp_path / "out.perf"], interp.argv([script, "ids"]),
            stdout_pipe=True, prefix=as_nobody + ["sudo", "-n"])
    r.expect(0)
    check_ids(r, "nobody", {k: sudo_env.get(k) for k in ("HOME", "USER", "LOGNAME")})
    parse_perf(read(tmp_path / "out.perf"))


# --------------------------------------------------------------------------
# 7. errors

@pytest.mark.parametrize("what", ["missing", "not-executable", "directory"])
def test_exec_failures(what, procs, tmp_path):
    if what == "missing":
        cmd, code, says = "pyprof-bpf-no-such-command", 127, "No such file or directory"
    elif what == "not-executable":
        cmd, code, says = str(tmp_path / "plain.txt"), 126, "Permission denied"
        (tmp_path / "plain.txt").write_text("print(1)\n")
    else:
        cmd, code, says = str(tmp_path), 126, "Permission denied"
    out = tmp_path / "out.perf"
    r = launch(procs, tmp_path, ["-o", out], [cmd, "arg"]).expect(code)
    assert r.stderr == f"pyprof-bpf: cannot run {cmd}: {says}\n"
    assert not out.exists()


@pytest.mark.slow
def test_command_without_python(procs, tmp_path):
    out = tmp_path / "out.perf"
    r = launch(procs, tmp_path, ["-o", out], ["sh", "-c", "exit 4"], name="exits").expect(4)
    assert r.stderr == ("pyprof-bpf: the command exited with status 4 before running "
                        "Python; nothing recorded\n")
    t0 = time.monotonic()
    r = launch(procs, tmp_path, ["-o", out], ["sleep", "60"], name="sleeps").expect(1)
    assert 4.5 < time.monotonic() - t0 < 30, r.stderr
    assert "the command runs no Python after 5 s" in r.stderr, r.stderr
    assert "pyprof-bpf: the command (pid" in r.stderr and "was killed" in r.stderr, r.stderr
    with pytest.raises(ProcessLookupError):   # nothing left in its process group
        os.killpg(r.p.pid, 0)


@pytest.mark.parametrize("args,says", [
    (["--", "true"], "with a command, -o FILE is needed"),
    (["-o", "-", "--", "true"], "with a command, -o FILE is needed"),
    (["-o", "x.perf", "--raw", "-", "--", "true"], "with a command, --raw needs a file"),
    (["-p", "1", "-o", "x.perf", "--", "true"], "-p PID and a command exclude each other"),
    (["record"], "a target is needed: -p PID, -a, or -- COMMAND"),
])
def test_usage(args, says, tmp_path):
    p = subprocess.run([binary()] + args, capture_output=True, text=True, cwd=tmp_path,
                       stdin=subprocess.DEVNULL, timeout=TIMEOUT)
    assert p.returncode == 64 and says in p.stderr, p.stderr
    assert p.stdout == ""
    assert not (tmp_path / "x.perf").exists()


def test_help_documents_launch():
    p = subprocess.run([binary(), "record", "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    text = " ".join(p.stdout.split())
    for what in ("-- CMD [ARGS...]", "-o FILE is required", "-d ends the recording, not "
                 "the command", "exits with the command's status", "127 or 126"):
        assert what in text, f"record --help does not say {what!r}:\n{p.stdout}"


def test_interpreters_listed():
    labels = {i.label for i in pyenvs.load()}
    for label in ("sid-3.13", "sid-3.14", "sid-3.15", "pyenv-3.11.7", "pyenv-3.12.1",
                  "pyenv-3.13.0", SYSTEM):
        assert label in labels, f"{label} is not in {pyenvs.LIST}"
