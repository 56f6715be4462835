"""tests/kernels/checks.py run in a QEMU guest through scripts/vm-run, its JSON
lines read back (tests/test_kernels.py, tests/test_arm64.py)."""
import importlib.util
import json
import os
import re
import subprocess

CHECKS_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "kernels", "checks.py")


def load_checks():
    """tests/kernels/checks.py as a module (its CHECKS, OTHER, labels_of)."""
    spec = importlib.util.spec_from_file_location("kernel_checks", CHECKS_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_checks(cmd, cwd, timeout):
    """{"cells": {(check, interp): verdict}, "release": the guest's uname -r,
    "rc": vm-run's exit code, "log": what else it printed (the tail)}."""
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    cells, release, junk = {}, None, []
    for line in r.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            junk.append(line)
            continue
        if "kernel" in obj:
            release = obj["kernel"]
        else:
            cells[(obj["check"], obj["interp"])] = obj
    return {"cells": cells, "release": release, "rc": r.returncode,
            "log": oops_head(junk) + "\n".join(junk[-30:]) + r.stderr[-2000:]}


OOPS = re.compile(r"BUG:|Oops|cut here|general protection|Kernel panic|WARNING:")


def oops_head(lines):
    """The first 40 lines of a guest kernel's oops: the tail alone ends in
    the register dump and loses what went wrong and where it was called from."""
    for i, line in enumerate(lines):
        if OOPS.search(line):
            return "\n".join(lines[i:i + 40]) + "\n[...]\n"
    return ""
