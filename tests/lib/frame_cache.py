"""Targets of the frame-cache tests (test_frame_cache, test_remote_torn): a script with
its tstate_anchor.py helper, and the collapsed stacks they check."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from lib.procs import START_TIMEOUT, TARGETS


def frame_name(text):
    """Function name of a collapsed / perf-script frame text."""
    if not text.startswith("py::"):
        return text
    return urllib.parse.unquote(text[4:].split(":", 1)[0])


def collapsed_stacks(path, period_ns):
    """(frame texts, root first, samples) of each line of a collapsed file."""
    with open(path) as f:
        for line in f:
            stack, weight = line.rstrip("\n").rsplit(" ", 1)
            yield stack.split(";"), int(weight) // period_ns


CHAIN = re.compile(r"([ab])(\d+)")


# The targets' shared helper, staged next to each of them.
HELPERS = ("tstate_anchor.py",)


class Target:
    """A target script started on an interpreter; it writes READY (JSON
    with its pid, as the host sees it: no PID namespace here)."""

    def __init__(self, py, script, *args, files=()):
        self.py = py
        self.dir = tempfile.mkdtemp(prefix="pyprof-fc-")
        self.seen_dir = None
        stage = os.path.join(py.root, "tmp", "pyprof-tests") if py.root else self.dir
        os.makedirs(stage, exist_ok=True)
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        self.ready_seen = os.path.join("/tmp/pyprof-tests" if py.root else self.dir,
                                       f"ready-{tag}")
        self.ready = py.host_path(self.ready_seen)
        self.files = {}
        for name in files:
            seen = os.path.join("/tmp/pyprof-tests" if py.root else self.dir, f"{name}-{tag}")
            self.files[name] = (seen, py.host_path(seen))
        for helper in HELPERS:
            py.stage(os.path.join(TARGETS, helper))
        path = py.stage(os.path.join(TARGETS, script))
        argv = [path, self.ready_seen] + [self.files[a][0] if a in self.files else a
                                          for a in args]
        self.proc = subprocess.Popen(py.argv(argv), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not os.path.exists(self.ready):
            if self.proc.poll() is not None:
                pytest.fail(f"{script} exited {self.proc.returncode}: "
                            f"{self.proc.stderr.read().decode(errors='replace')}")
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"{script} not ready after {START_TIMEOUT}s")
            time.sleep(0.05)
        with open(self.ready) as f:
            self.info = json.load(f)
        self.pid = self.info["pid"]

    def host(self, name):
        return self.files[name][1]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for p in [self.ready] + [h for _, h in self.files.values()]:
            try:
                os.unlink(p)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
