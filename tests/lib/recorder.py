"""`pyprof-bpf record` run beside a test, attached to a pid (-p) or launching a
command (-- CMD): its stderr, stdout and summary line."""
import re
import select
import signal
import subprocess
import time

import pytest

from lib.tool import binary
from lib.procs import START_TIMEOUT


def alive(p):
    return p.poll() is None


SUMMARY = re.compile(
    r"pyprof-bpf: (?P<samples>\d+) samples in (?P<secs>\d+\.\d+) s \((?P<rate>\d+\.\d+)/s, "
    r"(?P<hz>\d+) Hz asked per running thread\), (?P<lost>\d+) lost, (?P<truncated>\d+) "
    r"truncated, (?P<errors>\d+) errors, (?P<unresolved>\d+) unresolved frames")


RECORD_SLACK = 60          # seconds a recording may overrun its -d before it hangs


# pyproc__open() (user/target/pyproc.c) checks its offsets by walking the thread
# list once, without stopping the target; a thread state freed mid-walk
# (these targets end ~1,000 threads a second) fails that check as if the
# offsets were wrong, and record gives up (~1 attach in 150 here). Not what
# these tests are about: such a start is retried, and said.
TORN_LIST = "thread list does not match its offsets"
TIMEOUT = 120            # seconds a launch may take before it is a hang


def default_signals():
    """In the child: SIGINT and SIGQUIT back to their defaults. A test suite
    started in the background by a shell without job control inherits them
    ignored (POSIX), so would pyprof-bpf and the command it starts (it keeps
    the dispositions it got, as a shell does), and Python installs no
    KeyboardInterrupt handler over an ignored SIGINT: a SIGINT test would
    wait on a command that cannot get it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Recorder:
    """One `pyprof-bpf record` in its own session (killed with the test): attached
    to pid (`record -p PID ARGS`), or, with cmd, launching it (`record ARGS -- CMD`,
    see launch()). stderr and stdout go to files (stdout to a pipe with
    stdout_pipe=True). retry_torn=True starts again (up to 3 times) a recording
    that gave up on a torn thread list (TORN_LIST), for targets that churn threads."""

    def __init__(self, procs, tmp_path, pid, args, name="rec", prefix=(), cwd=None, cmd=None,
                 stdin=subprocess.DEVNULL, stdout_pipe=False, env=None, retry_torn=False):
        self.procs = procs
        self.err_path = str(tmp_path / f"{name}.stderr")
        self.out_path = str(tmp_path / f"{name}.stdout")
        self.launched = cmd is not None
        if self.launched:
            self.cmd = (list(prefix) + [binary(), "record"] + [str(a) for a in args] + ["--"]
                        + [str(c) for c in cmd])
        else:
            self.cmd = (list(prefix) + [binary(), "record", "-p", str(pid)]
                        + [str(a) for a in args])
        self.popen_kw = dict(stdin=stdin, cwd=cwd, env=env,
                             preexec_fn=default_signals if self.launched else None)
        self.stdout_pipe = stdout_pipe
        self.retry_torn = retry_torn
        self.tries = 0
        self.spawn()

    def spawn(self):
        self.tries += 1
        with open(self.err_path, "wb") as err, open(self.out_path, "wb") as out:
            self.t_launch = time.monotonic()
            self.p = subprocess.Popen(self.cmd,
                                      stdout=subprocess.PIPE if self.stdout_pipe else out,
                                      stderr=err, start_new_session=True, **self.popen_kw)
        self.p.stderr_path = self.err_path
        self.procs.items.append(self.p)
        self.t_started = self.t_exit = None

    @property
    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    @property
    def stdout(self):
        with open(self.out_path, "rb") as f:
            return f.read()

    def wait_started(self, timeout=START_TIMEOUT):
        """Waits for the "sampling process ..." line: the events are attached."""
        deadline = time.monotonic() + timeout
        while "pyprof-bpf: sampling process" not in self.stderr:
            if (self.retry_torn and not alive(self.p) and TORN_LIST in self.stderr
                    and self.tries < 3):
                print(f"\nSL attach-retry: {self.stderr.strip()}")
                self.spawn()
                continue
            if not alive(self.p):
                pytest.fail(f"`{' '.join(self.cmd)}` exited {self.p.returncode} before "
                            f"sampling; stderr:\n{self.stderr}")
            if time.monotonic() > deadline:
                pytest.fail(f"`{' '.join(self.cmd)}` did not start sampling in {timeout}s; "
                            f"stderr:\n{self.stderr}")
            time.sleep(0.002)
        self.t_started = time.monotonic()
        return self

    def wait(self, timeout=TIMEOUT):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(self.cmd)}` still running after {timeout}s; "
                        f"stderr:\n{self.stderr}")
        self.t_exit = time.monotonic()
        return self

    def check_ok(self):
        assert self.p.returncode == 0, (f"`{' '.join(self.cmd)}` exited "
                                        f"{self.p.returncode}; stderr:\n{self.stderr}")
        return self

    def expect(self, code):
        """Waits for the end (TIMEOUT) and checks the exit status."""
        rc = self.wait().p.returncode
        assert rc == code, f"`{' '.join(self.cmd)}` exited {rc}, expected {code}; " \
                           f"stderr:\n{self.stderr}"
        return self

    def finish(self, secs):
        """The end of a `-d secs` recording: exit 0, the summary last, nothing lost."""
        self.wait(secs + RECORD_SLACK).check_ok()
        assert self.summary(exact=False)["lost"] == 0, f"samples lost:\n{self.stderr}"
        return self

    def readline(self, what="ready", timeout=TIMEOUT):
        """The command's next line on stdout (stdout_pipe=True)."""
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            pytest.fail(f"no {what!r} from the command in {timeout}s; stderr:\n{self.stderr}")
        line = self.p.stdout.readline().decode()
        assert line.strip() == what, f"the command said {line!r}; stderr:\n{self.stderr}"

    def summary(self, exact=True):
        """The summary line's numbers. Attached, it must be the last line on stderr
        (exact=False: a mode's own words may follow its counts); launched, the
        command shares stderr, so it must be the one summary line there."""
        if self.launched:
            lines = [ln for ln in self.stderr.split("\n") if ln.startswith("pyprof-bpf: ")]
            found = [m for m in (SUMMARY.fullmatch(ln) for ln in lines) if m]
            assert len(found) == 1, f"one summary line expected:\n{self.stderr}"
            m = found[0]
        else:
            last = self.stderr.rstrip("\n").split("\n")[-1]
            m = SUMMARY.fullmatch(last) if exact else SUMMARY.match(last)
            assert m, f"the last line on stderr is not the summary: {last!r}\n{self.stderr}"
        return {k: (float(v) if "." in v else int(v)) for k, v in m.groupdict().items()}


def launch(procs, tmp_path, args, cmd, name="run", **kw):
    """`pyprof-bpf record ARGS -- CMD` (SIGINT and SIGQUIT at their defaults in it)."""
    return Recorder(procs, tmp_path, None, args, name=name, cmd=cmd, **kw)
