"""A container that points pyprof-bpf's file reads at host files (issue #23).

A process in a chroot on its own overlay and mount namespace (a container
as far as pyprof-bpf can tell) replaces its perf map, or its executable's
path, with a symlink to a root-only host file, a symlink to a host FIFO, a
FIFO, or a file another user owns, while `pyprof-bpf record --native`
samples it. pyprof-bpf must neither open the host files (inotify watches
them) nor hang on a FIFO nor name frames from a map the target's user does
not own, must say that the map was not read, and must leave the target
running (it prints "ok" at its end). The control variant shows the map is
read when it is the target's own: its `py::` names appear.

Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (no /proc/PID/map_files),
the executable is found by path inside the target's root, where the
symlink and the FIFO are refused: a clear error, no host file opened.
"""
import re
import subprocess
import time

import pytest

from lib import pyenvs
from lib.container import Container, Inotify, SECRET_NAME, SID_INTERPS

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

MAP_VARIANTS = ["own", "map-symlink", "map-fifo-link", "map-fifo", "map-owner"]
EXE_VARIANTS = ["exe-symlink", "exe-fifo"]


def record(pid, tmp_path, caps=True, secs=2):
    out = tmp_path / "out.perf"
    cmd = [pyenvs.BINARY, "record", "--native", "-F", "199", "-d", str(secs),
           "-p", str(pid), "-o", str(out)]
    if not caps:
        # no /proc/PID/map_files: the executable is opened by path in the root
        cmd = ["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore",
               "--inh-caps", "-sys_admin,-checkpoint_restore", "--"] + cmd
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    took = time.monotonic() - t0
    data = out.read_text(errors="replace") if out.exists() else ""
    return r, data, took


def run_case(interp, tmp_path, host_files, variant, caps=True):
    secret, fifo = host_files
    watch = Inotify([secret, fifo])
    c = Container(interp, tmp_path, variant, 4, secret, fifo)
    try:
        r, data, took = record(c.pid, tmp_path, caps)
    finally:
        rc, out, err = c.finish()
    opened = watch.events()
    watch.close()
    # the target ran on as it was
    assert rc == 0 and out.strip().endswith("ok"), f"target: rc {rc}\n{out}\n{err}"
    assert not opened, "a host file was opened on the target's behalf"
    assert SECRET_NAME not in data and SECRET_NAME not in r.stderr
    # a FIFO never blocks the recording: 2 s of sampling, a few to attach
    assert took < 20, f"record took {took:.1f} s"
    return r, data


# The target's own map on every interpreter; the hostile files (resolved
# and refused by the same code whatever the version) on the newest release.
NEWEST = max((i for i in SID_INTERPS if not i.label.endswith("d")), key=lambda i: i.version)
PERF_MAP_CASES = [pytest.param(i, "own", id=f"{i}-own") for i in SID_INTERPS] + \
    [pytest.param(NEWEST, v, id=f"{NEWEST}-{v}") for v in MAP_VARIANTS[1:]]


@pytest.mark.parametrize("interp,variant", PERF_MAP_CASES)
def test_perf_map(interp, variant, tmp_path, host_files):
    r, data = run_case(interp, tmp_path, host_files, variant)
    assert r.returncode == 0, r.stderr
    assert re.search(r"\bburn\b", data), "the target's own Python frames are named"
    # a trampoline named from the map: "ADDR py::burn:FILE+0xOFF (/tmp/perf-PID.map)"
    jit_named = re.search(r"py::burn:/tmp/hostile_root\.py\+0x[0-9a-f]+ \(/tmp/perf-\d+\.map\)",
                          data)
    warning = re.search(r"warning: pid \d+: its perf map /tmp/perf-\d+\.map was not read: (.*)",
                        r.stderr)
    if variant == "own":
        assert jit_named, "the control: the target's own perf map names its trampolines"
        assert not warning, r.stderr
        return
    assert not jit_named, f"{variant}: frames named from a map that is not the target's own"
    assert warning, f"{variant}: the refusal is not said\n{r.stderr}"
    # a symlink is resolved inside the target's root, where its host path is not
    dangling = "a symbolic link to nothing inside the process's root"
    why = {"map-symlink": dangling, "map-fifo-link": dangling, "map-fifo": "not a regular file",
           "map-owner": "not owned by the process's user"}[variant]
    assert warning.group(1) == why, r.stderr


@pytest.mark.parametrize("caps", [True, False], ids=["map_files", "no-map_files"])
@pytest.mark.parametrize("variant", EXE_VARIANTS)
@pytest.mark.parametrize("interp", [SID_INTERPS[0], NEWEST], ids=str)
def test_executable(interp, variant, caps, tmp_path, host_files):
    r, data = run_case(interp, tmp_path, host_files, variant, caps)
    if caps:
        # map_files holds the very file the target runs, whatever its path became
        assert r.returncode == 0, r.stderr
        assert re.search(r"\bburn\b", data)
        return
    # by path only: the symlink resolves inside the root (nothing there), the
    # FIFO is not a regular file, and our own /usr/bin is not its file
    assert r.returncode != 0
    msg = r.stderr.strip().splitlines()
    assert msg and re.search(r"process \d+.*not a Python process|permission denied", msg[-1]), \
        r.stderr
