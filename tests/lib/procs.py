"""Processes a test starts: staging a script where its interpreter sees it, starting
it, waiting until it is ready (a file it writes), and killing it when the test ends."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from lib import pyenvs


TARGETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "targets")
START_TIMEOUT = 90


class Procs:
    """Processes started by a test; all killed (whole process group, so the
    unshare/chroot wrappers and their children too) when the test ends."""

    def __init__(self):
        self.items = []
        self.files = []

    def start(self, argv, stderr_path):
        err = open(stderr_path, "wb")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=err, start_new_session=True)
        err.close()
        p.stderr_path = stderr_path
        self.items.append(p)
        return p

    def cleanup_file(self, path):
        self.files.append(path)

    def close(self):
        for p in self.items:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for f in self.files:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def stderr_of(p):
    try:
        with open(p.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(no stderr: {e})"


def stage_unique(interp, path, procs):
    """Stages a script for interp under a unique name (chroot roots are
    shared with other test runs); returns the path the interpreter sees."""
    if not interp.root:
        return os.path.abspath(path)
    base, ext = os.path.splitext(os.path.basename(path))
    tmp = os.path.join("/tmp", f"{base}_{uuid.uuid4().hex[:8]}{ext}")
    shutil.copyfile(path, tmp)
    try:
        seen = interp.stage(tmp)
    finally:
        os.unlink(tmp)
    procs.cleanup_file(interp.host_path(seen))
    return seen


def out_path(interp, procs, tmp_path, name):
    """A path the target can write (seen, host)."""
    if interp.root:
        d = interp.host_path("/tmp/pyprof-tests")
        os.makedirs(d, exist_ok=True)
        seen = f"/tmp/pyprof-tests/{name}_{uuid.uuid4().hex[:8]}"
    else:
        seen = str(tmp_path / name)
    host = interp.host_path(seen)
    procs.cleanup_file(host)
    procs.cleanup_file(host + ".tmp")
    return seen, host


def wait_file(p, host_path, what, timeout=START_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not os.path.exists(host_path):
        if p.poll() is not None:
            pytest.fail(f"{what} exited with {p.returncode} before writing "
                        f"{host_path}; stderr:\n{stderr_of(p)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not write {host_path} within {timeout}s; "
                        f"stderr:\n{stderr_of(p)}")
        time.sleep(0.02)


def host_pid_of(p, pidns):
    """The host pid of the Python process (below unshare with pidns)."""
    if not pidns:
        return p.pid
    pid = pyenvs.leaf_pid(p.pid)
    assert pid != p.pid, f"no Python process below unshare {p.pid}"
    return pid


def ns_to_host_tids(pid):
    """{tid as the process sees it: host tid} for every task of pid."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        out[int(line.split()[-1])] = int(t)
        except FileNotFoundError:
            pass
    return out


def comm(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/comm", "rb") as f:
        return f.read().rstrip(b"\n")


def start(interp, procs, tmp_path, target, args, what):
    """Starts tests/targets/TARGET (staged where the interpreter sees it)
    with args; returns the process and the script's path as it sees it."""
    script = stage_unique(interp, os.path.join(TARGETS, target), procs)
    argv = [script] + [str(a) for a in args]
    return procs.start(interp.argv(argv), str(tmp_path / f"{what}.stderr")), script


def wait_json(p, host, what, pred=lambda d: True, timeout=START_TIMEOUT):
    """The JSON file host once pred(data) holds (it is replaced atomically)."""
    wait_file(p, host, what)
    deadline = time.monotonic() + timeout
    while True:
        with open(host, encoding="utf-8") as f:
            data = json.load(f)
        if pred(data):
            return data
        if p.poll() is not None:
            pytest.fail(f"{what} exited {p.returncode}; stderr:\n{stderr_of(p)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: {host} never got what was waited for: {data!r:.500}")
        time.sleep(0.01)


def argv_of(interp, script, procs, args=()):
    return interp.argv([stage_unique(interp, script, procs)] + list(args))
