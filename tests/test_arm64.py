"""The arm64 cell (issue #34): the arm64 build, run inside a QEMU guest
(qemu-system-aarch64, TCG) booted from Debian trixie's arm64 kernel (6.12),
against the Python of an arm64 root made from Debian's packages
(scripts/provision-arm64.sh: bookworm's glibc and Python 3.11, busybox).

`make release ARCH=arm64` cross-builds the binary here (tests/test_cross.py
checks the file itself); scripts/vm-run arm64 boots the guest once for the
module and runs tests/kernels/checks.py there on the root's Python
(--host-only): the same checks as the x86 kernel matrix, but --native
(native unwinding is x86-64's so far: refused, checked in test_cross) and
--async (3.14+; the root has 3.11). Each check is a test: the BPF backend
(pyprof.bpf.o, chosen by probing), and the function its mode is about where
it must be: hot_spot on top in cpu mode, idle_wait off the CPU, in_handler
in exception mode, stat_loop over kernel frames with --kernel, every
thread's function in dump, the agent's profiles naming hot_spot. About a
minute of guest time; `make test-arm64` runs it alone.
"""
import os
import subprocess

import pytest

from lib import pyenvs
from lib.vmguest import run_checks

ROOT = pyenvs.REPO
CHECKS = ["cpu", "off-cpu", "wall", "gil", "exception", "kernel", "opcodes", "subprocesses",
          "all", "dump", "agent", "version"]
GUEST_TIMEOUT = 480

pytestmark = [pytest.mark.slow, pytest.mark.vm]


@pytest.fixture(scope="module")
def guest():
    r = subprocess.run([os.path.join(ROOT, "scripts", "provision-arm64.sh")],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"provision-arm64.sh failed:\n{r.stdout}{r.stderr}"
    r = subprocess.run(["make", "-s", "-j2", "ARCH=arm64", "release"], cwd=ROOT,
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"make ARCH=arm64 release failed:\n{r.stdout}{r.stderr}"
    cmd = [os.path.join(ROOT, "scripts", "vm-run"), "--timeout", str(GUEST_TIMEOUT), "arm64",
           "--", "python3", "tests/kernels/checks.py", ".output/arm64/release/pyprof-bpf",
           "--host-only"] + CHECKS
    return run_checks(cmd, ROOT, GUEST_TIMEOUT + 60)


@pytest.mark.parametrize("name", CHECKS)
def test_arm64_cell(guest, name):
    c = guest["cells"].get((name, "host"))
    assert c is not None, (f"arm64: the guest gave no verdict for {name} (vm-run exit "
                           f"{guest['rc']}):\n{guest['log']}")
    print(f"arm64 ({guest['release']}) {name}: {c.get('backend', '-')} {c['secs']} s: {c['why']}")
    assert c["ok"], f"arm64 ({guest['release']}) {name}: {c['why']}"
    assert guest["release"].endswith("-arm64"), guest["release"]
    if name != "dump":
        assert (c.get("program") or "").startswith("pyprof.bpf.o ("), \
            f"arm64 {name}: loaded {c.get('program')!r}"
