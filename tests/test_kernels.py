"""The kernel matrix (issue #33): the real build, run inside QEMU guests
booted from Debian's own kernel packages, on real Pythons.

scripts/provision-kernels.sh keeps each kernel (bullseye's 5.10, bookworm's
6.1, trixie's 6.12, sid's newest) with a small initramfs; scripts/vm-run
boots one under TCG with this host's root shared read-only and runs
tests/kernels/checks.py there: every mode, --native (zlib's deflate under
the Python frame that called it among them), --kernel, --opcodes, --async,
-a, --subprocesses, -e (a software event, a tracepoint, and two events at
once: refused on 5.10 with a message), dump and dump
--core of the kernel's core of the target
(each compared with the interpreter's own traceback of every thread) and an
agent window, on the host's
Python and the sid root's (CHECKS in checks.py says which where). One guest
per kernel runs every check once (module-scoped); each (check, interpreter)
is a test of its own here, so a failure names its cell.

Every recording must have run the BPF backend, and the verifier's figures
of every program it loaded are printed (-s) and must stay 20% below the
kernel's limits (instructions processed, stack).

KERNELS (environment, space-separated release names) picks kernels: `make
test-kernels KERNELS=bookworm`. Kernels without bpf_loop (5.10 to 5.16)
run pyprof_noloop.bpf.o (bpf/compat.bpf.h), every other one pyprof.bpf.o:
every BPF cell checks that the program the loader chose by probing is the
one its kernel must run.
"""
import os
import re
import subprocess

import pytest

from lib.tool import binary
from lib.vmguest import load_checks, run_checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
ALL = {"bullseye": "5.10", "bookworm": "6.1", "trixie": "6.12", "sid": "newest"}
KERNELS = os.environ.get("KERNELS", "").split() or list(ALL)
NO_BPF_LOOP = {"bullseye"}
# The object each kernel must run, as the "BPF program:" line names it.
PROGRAM = {rel: "pyprof_noloop.bpf.o" if rel in NO_BPF_LOOP else "pyprof.bpf.o" for rel in ALL}
GUEST_TIMEOUT = 420


CHECKS = load_checks()
CELLS = [(name, label) for name, (_, labels, _, _) in CHECKS.CHECKS.items() for label in labels] \
    + [(name, "host") for name in CHECKS.OTHER]
# Cells that do not need the BPF backend.
NO_BPF = {"dump", "dump-core"}


def provision(rel):
    k = os.path.join(CACHE, "kernels", rel)
    if not (os.path.exists(os.path.join(k, "vmlinuz")) and os.path.exists(os.path.join(k, "release"))):
        r = subprocess.run([os.path.join(ROOT, "scripts", "provision-kernels.sh"), rel],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"provision-kernels.sh {rel} failed:\n{r.stdout}{r.stderr}"


_results = {}


def guest(rel):
    """{(check, interp): cell} and the kernel release, from one guest run."""
    if rel in _results:
        return _results[rel]
    provision(rel)
    cmd = [os.path.join(ROOT, "scripts", "vm-run"), "--timeout", str(GUEST_TIMEOUT), rel, "--",
           "/usr/bin/python3", os.path.join(ROOT, "tests", "kernels", "checks.py"), binary()]
    out = run_checks(cmd, ROOT, GUEST_TIMEOUT + 60)
    _results[rel] = out
    return out


def cell_params():
    for rel in KERNELS:
        for name, label in CELLS:
            yield pytest.param(rel, name, label, id=f"{ALL.get(rel, rel)}-{name}-{label}")


@pytest.mark.slow
@pytest.mark.vm
@pytest.mark.parametrize("rel,name,label", list(cell_params()))
def test_cell(rel, name, label):
    g = guest(rel)
    c = g["cells"].get((name, label))
    assert c is not None, (f"{rel}: the guest gave no verdict for {name} on {label} (vm-run "
                           f"exit {g['rc']}):\n{g['log']}")
    print(f"{rel} ({g['release']}) {name} {label}: {c.get('backend', '-')} {c['secs']} s: "
          f"{c['why']}")
    assert c["ok"], f"{rel} ({g['release']}) {name} on {label}: {c['why']}"
    if name not in NO_BPF:
        want = PROGRAM.get(rel, "pyprof.bpf.o")
        assert (c.get("program") or "").startswith(want + " ("), \
            f"{rel} ({g['release']}) {name} on {label}: loaded {c.get('program')!r}, not {want}"


# "PROG N insns of L (P%), stack S of 512 bytes", or "stack not said" where
# the kernel wrote no statistics (7.x: the instructions from the program's info).
FIGURE = re.compile(r"(\w+) (\d+) insns of (\d+) \(([\d.]+)%\), stack (?:(\d+) of (\d+) bytes|"
                    r"not said)( \(near a limit\))?")


@pytest.mark.slow
@pytest.mark.vm
@pytest.mark.parametrize("rel", [pytest.param(r, id=ALL.get(r, r)) for r in KERNELS])
def test_verifier_headroom(rel):
    """Each program loaded on this kernel: instructions processed and stack
    depth, printed; within 20% of either limit fails."""
    g = guest(rel)
    seen, near = {}, []
    for c in g["cells"].values():
        for m in FIGURE.finditer(c.get("program") or ""):
            prog, insns, limit, pct, stack, slimit, flag = m.groups()
            stack, slimit = int(stack or 0), int(slimit or 512)
            key = (prog, c["check"])
            seen[key] = (int(insns), int(limit), stack, slimit)
            if flag or int(insns) >= 0.8 * int(limit) or stack >= 0.8 * slimit:
                near.append(f"{prog} ({c['check']}): {m.group(0)}")
    assert seen, f"{rel}: no verifier figures in any cell:\n{g['log']}"
    worst = {}
    for (prog, check), v in seen.items():
        if prog not in worst or v[0] > worst[prog][0]:
            worst[prog] = v + (check,)
    for prog, (insns, limit, stack, slimit, check) in sorted(worst.items()):
        print(f"{rel} ({g['release']}) {prog}: {insns} insns of {limit} "
              f"({100 * insns / limit:.1f}%), stack {stack} of {slimit} (worst: {check})")
    assert not near, f"{rel}: within 20% of a verifier limit: {near}"
