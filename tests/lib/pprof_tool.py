"""The real `pprof` tool, built from Debian's google/pprof sources by
scripts/provision-otel.sh (issue #36): where it is, and what it says of a
profile (`pprof -raw`: the sample types and each one's total; `pprof -top`:
a function's flat share)."""
import os
import re
import subprocess

import pytest

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
PPROF = os.path.join(CACHE, "otel", "pprof")


def pprof():
    if not os.access(PPROF, os.X_OK):
        pytest.fail(f"{PPROF} is missing: run scripts/provision-otel.sh (make test-deps)")
    return PPROF


def _run(args):
    p = subprocess.run([pprof()] + args, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, env=dict(os.environ, HOME="/tmp"))
    assert p.returncode == 0, f"pprof {' '.join(args)} exited {p.returncode}: {p.stderr}"
    return p.stdout


def raw_totals(path):
    """{sample type: total} of the profile at @path, as `pprof -raw` lists
    its samples (each line: one value per sample type, then the stack)."""
    out = _run(["-raw", path])
    lines = out.splitlines()
    i = lines.index("Samples:")
    types = [t.split("/")[0].replace("[dflt]", "") for t in lines[i + 1].split()]
    totals = [0] * len(types)
    for ln in lines[i + 2:]:
        m = re.match(r"\s+((?:-?\d+\s+)+)-?\d*:?", ln)
        if not m or ":" not in ln:
            if ln and not ln.startswith(" "):
                break          # Locations: and the rest
            continue
        vals = ln.split(":")[0].split()
        if len(vals) != len(types):
            continue
        for k, v in enumerate(vals):
            totals[k] += int(v)
    return dict(zip(types, totals))


def flat_share(path, function, sample_index=None):
    """The flat (self) share of @function in `pprof -top`, in percent, 0.0
    when pprof does not list it."""
    args = ["-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0"]
    if sample_index:
        args.append(f"-sample_index={sample_index}")
    out = _run(args + [path])
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) >= 6 and parts[-1] == function and parts[1].endswith("%"):
            return float(parts[1].rstrip("%"))
    return 0.0
