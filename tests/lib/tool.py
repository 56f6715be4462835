"""The binary under test and how to run it: found once (PYPROF_BINARY), run with no
standard input, a hang or a missing binary a failure, one error line checked."""
import os
import subprocess
import time

import pytest

from lib import pyenvs


DUMP_TIMEOUT = 60


_binary_missing = [False]


def binary():
    """The pyprof-bpf binary; a failure (not a skip) when it is missing. It
    may be briefly absent while `make` relinks it: wait once for up to a
    minute."""
    deadline = time.monotonic() + (0 if _binary_missing[0] else 60)
    while not os.access(pyenvs.BINARY, os.X_OK):
        if time.monotonic() > deadline:
            _binary_missing[0] = True
            pytest.fail(f"{pyenvs.BINARY} is missing: build it with `make`")
        time.sleep(0.5)
    return pyenvs.BINARY


def run_tool(args, timeout=DUMP_TIMEOUT, user_prefix=()):
    """Runs pyprof-bpf with no standard input; a hang is a failure."""
    cmd = list(user_prefix) + [binary()] + list(args)
    try:
        for attempt in range(10):
            try:
                return subprocess.run(cmd, stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=timeout)
            except OSError:
                # `make` is relinking it right now (missing, not yet
                # executable, text busy or half written): wait and retry.
                if attempt == 9:
                    raise
                time.sleep(1)
                binary()
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`{' '.join(cmd)}` hung for more than {timeout}s; "
                    f"stderr so far: {e.stderr!r}")


def show(proc):
    return (f"exit {proc.returncode}\n--- stderr ---\n"
            f"{proc.stderr.decode('utf-8', 'replace')}--- stdout ---\n"
            f"{proc.stdout.decode('utf-8', 'replace')[:2000]}")


def one_error_line(proc, what):
    """Asserts a clean failure: positive exit status (a signal gives a
    negative one), nothing on stdout, exactly one non-empty line on stderr.
    Returns that line."""
    assert proc.returncode != 0, f"{what}: expected a failure, got {show(proc)}"
    assert proc.returncode > 0, f"{what}: killed by signal {-proc.returncode}: {show(proc)}"
    assert proc.stdout == b"", f"{what}: printed on stdout: {show(proc)}"
    err = proc.stderr.decode("utf-8", "replace")
    lines = err.rstrip("\n").split("\n")
    assert err.strip() and len(lines) == 1, (
        f"{what}: expected exactly one line on stderr, got {len(lines)}: {show(proc)}")
    return lines[0]
