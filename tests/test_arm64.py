"""The arm64 cell (issue #34): the arm64 build, run inside a QEMU guest
(qemu-system-aarch64, TCG) booted from Debian trixie's arm64 kernel (6.12),
against the Pythons of an arm64 root made from Debian's packages
(scripts/provision-arm64.sh: sid's glibc, busybox and Python 3.13, 3.14 and
3.15).

`make release ARCH=arm64` cross-builds the binary here (tests/test_cross.py
checks the file itself); scripts/vm-run arm64 boots the guest once for the
module and runs tests/kernels/checks.py there on the root's own interpreters
(--local-pythons: what the x86 matrix runs on the host's Python runs on
3.13, what it runs on sid's 3.14 and 3.15 on those, and cpu on all three):
the same checks as the x86 kernel matrix. Each (check, interpreter) is a
test: the BPF backend (pyprof.bpf.o, chosen by
probing), and the function its mode is about where it must be: hot_spot on
top in cpu mode on 3.13, 3.14 and 3.15, idle_wait off the CPU, in_handler in
exception mode, a C function under hot_spot and zlib's deflate under
compress_spot with --native (AArch64 CFI through libdw), stat_loop over
kernel frames with --kernel, -e cs and -e syscalls:sys_enter_clock_nanosleep
(the sleeping functions alone), the task's async_busy with --async (3.14,
3.15), dump and dump --core (of the core the guest's kernel writes when the
target aborts) matching the interpreter's own traceback of every thread
(faulthandler), the agent's profiles naming hot_spot. About 100 s of guest
time, 190 s on a machine busy with the rest of the suite (GUEST_TIMEOUT caps it
at 7 minutes); `make test-arm64` runs it alone.
"""
import os
import subprocess
import time

import pytest

from lib import pyenvs
from lib.vmguest import load_checks, run_checks

ROOT = pyenvs.REPO
CHECKS = ["cpu", "off-cpu", "wall", "gil", "exception", "native", "native-zlib", "kernel",
          "event-cs", "event-tracepoint", "opcodes", "async", "subprocesses", "all", "dump",
          "agent", "version", "dump-core"]
GUEST_TIMEOUT = 420
# Cells that do not need the BPF backend.
NO_BPF = {"dump", "dump-core"}

pytestmark = [pytest.mark.slow, pytest.mark.vm]


CELLS = [(name, label) for name in CHECKS for label in load_checks().labels_of(name, True)]


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
           "--local-pythons"] + CHECKS
    t0 = time.monotonic()
    out = run_checks(cmd, ROOT, GUEST_TIMEOUT + 60)
    print(f"arm64: the guest ran {time.monotonic() - t0:.0f} s (vm-run exit {out['rc']})")
    return out


@pytest.mark.parametrize("name,label", [pytest.param(n, lb, id=f"{n}-{lb}") for n, lb in CELLS])
def test_arm64_cell(guest, name, label):
    c = guest["cells"].get((name, label))
    assert c is not None, (f"arm64: the guest gave no verdict for {name} on {label} (vm-run "
                           f"exit {guest['rc']}):\n{guest['log']}")
    print(f"arm64 ({guest['release']}) {name} {label}: {c.get('backend', '-')} {c['secs']} s: "
          f"{c['why']}")
    assert c["ok"], f"arm64 ({guest['release']}) {name} on {label}: {c['why']}"
    assert guest["release"].endswith("-arm64"), guest["release"]
    if name not in NO_BPF:
        assert (c.get("program") or "").startswith("pyprof.bpf.o ("), \
            f"arm64 {name} on {label}: loaded {c.get('program')!r}"

