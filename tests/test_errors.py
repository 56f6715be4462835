"""Error paths of `pyprof-bpf dump`: each gives ONE clear line on stderr that
names the problem and a non-zero exit status (not a signal), quickly.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v tests/test_errors.py </dev/null
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from lib import pyenvs
from lib.tool import binary, one_error_line, run_tool, show
from lib.interps import by_label
from lib.procs import Procs, out_path, stage_unique, stderr_of, wait_file

pytestmark = [pytest.mark.bpf, pytest.mark.root]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
SLEEPER = os.path.join(TARGETS, "sleeper.py")
CHURN = os.path.join(TARGETS, "churn.py")
ERR_TIMEOUT = 30
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
          "--inh-caps=-all"]


def start_sleeper(interp, procs, tmp_path, name="sleeper"):
    script = stage_unique(interp, SLEEPER, procs)
    seen, host = out_path(interp, procs, tmp_path, f"{name}.ready")
    p = procs.start(interp.argv([script, seen]), str(tmp_path / f"{name}.stderr"))
    wait_file(p, host, f"sleeper.py on {interp.label}")
    return p


# --------------------------------------------------------------------------
# no such process


def pid_max():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())


NO_PROCESS = re.compile(r"no such process|does not exist|doesn't exist|not found|"
                        r"no process|not running|exited|gone", re.I)


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_pid_above_pid_max(json_flag):
    pid = pid_max() + 1
    proc = run_tool(["dump", "-p", str(pid)] + json_flag, timeout=ERR_TIMEOUT)
    line = one_error_line(proc, f"dump -p {pid}")
    assert NO_PROCESS.search(line) or str(pid) in line, (
        f"the error line does not say the process does not exist: {line!r}")


def test_pid_of_exited_process():
    p = subprocess.Popen(["true"], stdin=subprocess.DEVNULL)
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}"), "pid reused already; rerun"
    proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
    line = one_error_line(proc, f"dump -p {p.pid} (exited)")
    assert NO_PROCESS.search(line), (
        f"the error line does not say the process does not exist: {line!r}")


# --------------------------------------------------------------------------
# not Python


def test_not_python_sleep(procs, tmp_path):
    p = procs.start(["sleep", "100"], str(tmp_path / "sleep.stderr"))
    time.sleep(0.2)
    assert p.poll() is None
    proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
    line = one_error_line(proc, "dump of `sleep 100`")
    assert "python" in line.lower(), f"does not say it is not Python: {line!r}"


def test_not_python_despite_its_name(procs, tmp_path):
    """`sleep` copied to a file named python3.14: names prove nothing."""
    fake = tmp_path / "python3.14"
    shutil.copy2(shutil.which("sleep"), fake)
    p = procs.start([str(fake), "100"], str(tmp_path / "fake.stderr"))
    time.sleep(0.2)
    assert p.poll() is None
    proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
    line = one_error_line(proc, "dump of `sleep` renamed python3.14")
    assert "python" in line.lower(), f"does not say it is not Python: {line!r}"


def test_kernel_thread():
    with open("/proc/2/comm") as f:
        assert f.read().strip() == "kthreadd"
    proc = run_tool(["dump", "-p", "2", "--json"], timeout=ERR_TIMEOUT)
    one_error_line(proc, "dump of kthreadd (pid 2)")


# --------------------------------------------------------------------------
# unsupported Python


def unsupported_310():
    for i in pyenvs.load():
        if i.version[:2] == (3, 10):
            return i
    raise RuntimeError(f"no Python 3.10 in {pyenvs.LIST}: run "
                       f"scripts/provision-pythons.sh (pyenv 3.10.13)")


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_unsupported_python_310(json_flag, procs, tmp_path):
    interp = unsupported_310()
    p = start_sleeper(interp, procs, tmp_path)
    proc = run_tool(["dump", "-p", str(p.pid)] + json_flag, timeout=ERR_TIMEOUT)
    line = one_error_line(proc, f"dump of {interp.label}")
    assert "unsupported python 3.10" in line.lower(), (
        f"expected 'unsupported Python 3.10' in {line!r}")


# --------------------------------------------------------------------------
# no permission


@pytest.mark.parametrize("label", ["sid-3.14", "system-3.11", "pyenv-3.12.1"])
def test_no_permission(label, procs, tmp_path):
    interp = by_label(label)
    p = start_sleeper(interp, procs, tmp_path)
    st = os.stat(f"/proc/{p.pid}")
    assert st.st_uid == 0, "the target must be root's"
    proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT,
                    user_prefix=NOBODY)
    line = one_error_line(proc, f"dump of a root {label} process as nobody")
    assert "permission" in line.lower(), f"does not mention permission: {line!r}"
    assert p.poll() is None, "the target died"


def test_unprivileged_user_can_run_the_binary():
    """Guards test_no_permission: nobody can execute pyprof-bpf at all (else
    the permission test would fail or pass for the wrong reason)."""
    proc = subprocess.run(NOBODY + ["test", "-x", binary()], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=ERR_TIMEOUT)
    assert proc.returncode == 0, f"nobody cannot execute {binary()}: {show(proc)}"


# --------------------------------------------------------------------------
# bad arguments


@pytest.mark.parametrize("args", [
    ["dump"],
    ["dump", "--json"],
    ["dump", "-p"],
    ["dump", "-p", "abc"],
    ["dump", "-p", "12abc"],
    ["dump", "-p", ""],
    ["dump", "-p", "-5"],
    ["dump", "-p", "1.5"],
], ids=lambda a: " ".join(repr(x) if not x else x for x in a))
def test_bad_arguments(args):
    proc = run_tool(args, timeout=ERR_TIMEOUT)
    assert proc.returncode > 0, f"{args}: {show(proc)}"
    assert proc.stdout == b"", f"{args}: printed on stdout: {show(proc)}"
    err = proc.stderr.decode("utf-8", "replace")
    assert "usage" in err.lower(), f"{args}: no usage message: {show(proc)}"
    first = err.strip().split("\n")[0].lower()
    assert re.search(r"-p|'p'|pid|usage", first), (
        f"{args}: the first line does not name the problem: {show(proc)}")


@pytest.mark.parametrize("args,says", [
    (["record", "-p", "1", "--events", "bogus"], "invalid events"),
    (["record", "-p", "1", "--events", "cpu", "--backend", "remote"], "--events is for the BPF"),
    (["record", "-p", "1", "--backend", "tcp"], "invalid backend"),
], ids=["events-bogus", "events-remote", "backend-bogus"])
def test_bad_record_options(args, says):
    proc = run_tool(args, timeout=ERR_TIMEOUT)
    assert proc.returncode > 0, f"{args}: {show(proc)}"
    assert proc.stdout == b"", f"{args}: printed on stdout: {show(proc)}"
    assert says in proc.stderr.decode("utf-8", "replace"), f"{args}: {show(proc)}"


def test_pid_overflow():
    proc = run_tool(["dump", "-p", "99999999999999999999999"], timeout=ERR_TIMEOUT)
    assert proc.returncode > 0, show(proc)
    assert proc.stdout == b"", show(proc)
    assert proc.stderr.strip(), show(proc)


# --------------------------------------------------------------------------
# the target exits (or is killed) during the dump


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def check_outcome(proc, pid, what, outcomes):
    """Either valid JSON (its content is checked by test_dump.py's
    test_dump_of_changing_target) or exactly one error line; never a signal."""
    assert proc.returncode >= 0, (
        f"{what}: pyprof-bpf killed by signal {-proc.returncode}: {show(proc)}")
    if proc.returncode == 0:
        try:
            doc = json.loads(proc.stdout.decode("utf-8"))
        except ValueError as e:
            pytest.fail(f"{what}: exit 0 but not valid JSON ({e}): {show(proc)}")
        assert isinstance(doc, dict) and doc.get("pid") == pid and \
            isinstance(doc.get("threads"), list), f"{what}: {show(proc)}"
        outcomes["json"] += 1
    else:
        one_error_line(proc, what)
        outcomes["error"] += 1


def popen_tool(args):
    for attempt in range(10):
        try:
            return subprocess.Popen([binary()] + args, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError:     # being relinked by `make`
            if attempt == 9:
                raise
            time.sleep(1)


CHURN_INTERPS = ["sid-3.14", "sid-3.15", "sid-3.13", "system-3.11", "pyenv-3.12.1"]


@pytest.mark.slow
@pytest.mark.parametrize("label", CHURN_INTERPS)
def test_target_exits_during_dump(label, tmp_path):
    """Dumps back to back against a target whose threads come and go and
    which exits on its own, then dumps its zombie, then its vanished pid."""
    interp = by_label(label)
    outcomes = {"json": 0, "error": 0}
    rng = random.Random(1234)
    for rnd in range(4):
        ps = Procs()
        try:
            script = stage_unique(interp, CHURN, ps)
            seen, host = out_path(interp, ps, tmp_path, f"churn{rnd}.ready")
            lifetime = rng.uniform(0.3, 1.5)
            p = ps.start(interp.argv([script, seen, str(lifetime)]),
                         str(tmp_path / f"churn{rnd}.stderr"))
            wait_file(p, host, f"churn.py on {label}")
            n = 0
            deadline = time.monotonic() + 60
            while state(p.pid) not in ("Z", None):
                assert time.monotonic() < deadline, "churn.py did not exit"
                proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
                check_outcome(proc, p.pid, f"{label} round {rnd} dump {n} (live)",
                              outcomes)
                n += 1
            # not reaped yet: a zombie
            for k in range(2):
                proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
                check_outcome(proc, p.pid, f"{label} round {rnd} zombie dump {k}",
                              outcomes)
            p.wait(timeout=30)
            assert p.returncode == 0, f"churn.py failed: {stderr_of(p)}"
            proc = run_tool(["dump", "-p", str(p.pid), "--json"], timeout=ERR_TIMEOUT)
            check_outcome(proc, p.pid, f"{label} round {rnd} after exit", outcomes)
        finally:
            ps.close()
    assert outcomes["json"] > 0, f"no dump of the live churning target worked: {outcomes}"
    assert outcomes["error"] > 0, f"no dump saw the exit: {outcomes}"


@pytest.mark.slow
@pytest.mark.parametrize("label", CHURN_INTERPS)
def test_target_killed_during_dump(label, tmp_path):
    """SIGKILL the target at random moments while a dump runs."""
    interp = by_label(label)
    outcomes = {"json": 0, "error": 0}
    rng = random.Random(4321)
    for rnd in range(15):
        ps = Procs()
        try:
            script = stage_unique(interp, CHURN, ps)
            seen, host = out_path(interp, ps, tmp_path, f"kill{rnd}.ready")
            p = ps.start(interp.argv([script, seen, "0"]),
                         str(tmp_path / f"kill{rnd}.stderr"))
            wait_file(p, host, f"churn.py on {label}")
            d = popen_tool(["dump", "-p", str(p.pid), "--json"])
            time.sleep(rng.uniform(0, 0.02))
            os.killpg(p.pid, signal.SIGKILL)
            try:
                out, err = d.communicate(timeout=ERR_TIMEOUT)
            except subprocess.TimeoutExpired:
                d.kill()
                d.communicate()
                pytest.fail(f"{label} round {rnd}: dump hung after the target was killed")
            proc = subprocess.CompletedProcess(d.args, d.returncode, out, err)
            check_outcome(proc, p.pid, f"{label} round {rnd} (killed)", outcomes)
        finally:
            ps.close()
    assert sum(outcomes.values()) == 15


@pytest.mark.parametrize("cmd", [[], ["record"], ["top"], ["dump"], ["report"], ["agent"]],
                         ids=["main", "record", "top", "dump", "report", "agent"])
def test_help_layout(cmd):
    """Every command's --help: exit 0, on stdout, EXAMPLES given, and laid
    out as argp lays out a well-formed table (an option's doc exactly as wide
    as the margin once made glibc's argp print a run of spaces into the next
    entry's header and a line of spaces)."""
    p = subprocess.run([binary()] + cmd + ["--help"], capture_output=True, text=True,
                       timeout=ERR_TIMEOUT)
    assert p.returncode == 0 and not p.stderr, show(p)
    lines = p.stdout.split("\n")
    bad = [f"{i + 1}: {ln!r}" for i, ln in enumerate(lines)
           if ln != ln.rstrip() or len(ln) > 80 or re.match(r"^\s+-\w,\s{2,}--", ln)]
    assert not bad, f"pyprof-bpf {' '.join(cmd)} --help:\n  " + "\n  ".join(bad)
    assert "EXAMPLES" in p.stdout or "USAGE" in p.stdout, p.stdout[:500]
