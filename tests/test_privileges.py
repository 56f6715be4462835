"""Capabilities pyprof-bpf keeps once attached (user/util/privileges.h, issue #23).

While a recording runs, /proc/PID/status of pyprof-bpf shows exactly the
documented set in its effective, permitted and bounding sets, nothing
inheritable or ambient, and no_new_privs; CAP_KILL only when it launched a
command (which runs as another user under sudo); and the recording is whole.
"""
import re
import subprocess
import time

import pytest

from lib import pyenvs

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

CAP = {"dac_override": 1, "dac_read_search": 2, "kill": 5, "sys_ptrace": 19,
       "sys_admin": 21, "syslog": 34, "perfmon": 38, "bpf": 39, "checkpoint_restore": 40}
KEPT = ["sys_ptrace", "dac_read_search", "dac_override", "checkpoint_restore", "bpf",
        "perfmon", "syslog"]
PY = "/usr/bin/python3"
SPIN = "import time\nt=time.time()\nwhile time.time()-t < 6: pass\n"


def mask(names):
    return sum(1 << CAP[n] for n in names)


def status_of(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def caps_while_recording(cmd, tmp_path):
    """pyprof-bpf's status 2 s into a 3 s recording, and its result."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    st = status_of(p.pid)
    out, err = p.communicate(timeout=60)
    return st, p.returncode, err


def check(st, names):
    want = mask(names)
    for k in ("CapEff", "CapPrm", "CapBnd"):
        assert int(st[k], 16) == want, f"{k} {st[k]} != {want:016x}"
    assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0
    assert st["NoNewPrivs"] == "1"


@pytest.fixture
def target():
    t = subprocess.Popen([PY, "-c", SPIN])
    time.sleep(0.3)
    yield t
    t.kill()
    t.wait()


def test_attached(target, tmp_path):
    assert int(open("/proc/sys/kernel/cap_last_cap").read()) >= 40, \
        "a kernel without CAP_CHECKPOINT_RESTORE keeps CAP_SYS_ADMIN: not this machine"
    out = tmp_path / "o.txt"
    st, rc, err = caps_while_recording([pyenvs.BINARY, "record", "-p", str(target.pid),
                                        "-d", "3", "-o", str(out)], tmp_path)
    assert rc == 0, err
    check(st, KEPT)
    assert "0 lost, 0 truncated, 0 errors" in err
    assert "<module>" in out.read_text()


def test_native_all(tmp_path, target):
    """--native -a: files of every process are opened after the drop."""
    out = tmp_path / "o.txt"
    st, rc, err = caps_while_recording([pyenvs.BINARY, "record", "-a", "--native",
                                        "-d", "3", "-o", str(out)], tmp_path)
    assert rc == 0, err
    check(st, KEPT)
    # perf-script sample headers: "COMM PID/TID ..."; the target found after the drop
    assert re.search(rf"^\S+\s+{target.pid}/{target.pid}\s", out.read_text(), re.M)


def test_launched(tmp_path):
    script = tmp_path / "spin.py"
    script.write_text(SPIN.replace("6", "3"))
    out = tmp_path / "o.txt"
    st, rc, err = caps_while_recording([pyenvs.BINARY, "record", "-o", str(out), "--",
                                        PY, str(script)], tmp_path)
    assert rc == 0, err
    check(st, KEPT + ["kill"])
