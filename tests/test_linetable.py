"""Location-table and str decoding checked against every test interpreter.

For each interpreter in tests/pyenvs.py, tests/tools/dump_linetables.py
writes what that interpreter itself says about its code objects (co_lines(),
co_positions(), PyCode_Addr2Line()) and str objects; the ASan/UBSan unit
test binaries built by `make unit` then decode the same bytes with
user/linetable.c and user/unicode.c and must agree on every entry. Each
interpreter runs twice: as is, and with -X no_debug_ranges (tables without
columns). An interpreter older than 3.11 must make the dumper refuse.

Run as root from the repository root (the sid interpreters need chroot):
    /usr/bin/python3 -m pytest -v tests/test_linetable.py
"""
import os
import re
import subprocess

import pytest

from lib import pyenvs

pytestmark = [pytest.mark.root, pytest.mark.slow]

DUMP = os.path.join(pyenvs.REPO, "tests", "tools", "dump_linetables.py")
SAN = os.path.join(pyenvs.REPO, ".output", "san")
TEST_LINETABLE = os.path.join(SAN, "test_linetable")
TEST_UNICODE = os.path.join(SAN, "test_unicode")

# A fixture smaller than this means the dump lost most of what it should
# reach (own module, generated source, typing, argparse): about 500 code
# objects and 40,000+ instructions on every version measured.
MIN_CODES = 300
MIN_INSTRUCTIONS = 20000
MIN_STRINGS = 15

# What must be there: every supported minor version, and the debug build.
REQUIRED_MINORS = {(3, 11), (3, 12), (3, 13), (3, 14), (3, 15)}


def interpreters():
    """Every listed interpreter; a missing list becomes one failing case
    instead of a collection error or an empty (silently passing) run."""
    try:
        return pyenvs.load()
    except RuntimeError as e:
        return [e]


def _id(i):
    return getattr(i, "label", "pythons.txt-missing")


def require_binary(path):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: build it with `make unit`")


def run_dump(interp, out_seen, extra=()):
    script = interp.stage(DUMP)
    return subprocess.run(interp.argv(list(extra) + [script, out_seen]),
                          capture_output=True, text=True, timeout=600)


def fixture_paths(interp, tmp_path, tag):
    """(path the interpreter writes to, path on the host)."""
    name = f"linetable-{interp.label}-{tag}-{os.getpid()}.txt"
    if interp.root:
        seen = f"/tmp/pyprof-tests/{name}"
        os.makedirs(os.path.dirname(interp.host_path(seen)), exist_ok=True)
        return seen, interp.host_path(seen)
    path = str(tmp_path / name)
    return path, path


def run_binary(binary, fixture):
    return subprocess.run([binary, fixture], capture_output=True, text=True,
                          timeout=600, cwd=pyenvs.REPO)


def test_all_interpreters_present():
    interps = interpreters()
    assert interps and not isinstance(interps[0], Exception), interps
    minors = set()
    debug = False
    for i in interps:
        minors.add(i.version[:2])  # fails loudly when a launcher is gone
        debug = debug or i.exe.endswith("d")
    missing = REQUIRED_MINORS - minors
    assert not missing, f"no interpreter for {sorted(missing)} in {pyenvs.LIST}"
    assert debug, f"no debug build (python3.Xd) in {pyenvs.LIST}"


@pytest.mark.parametrize("interp", interpreters(), ids=_id)
@pytest.mark.parametrize("mode", ["default", "no_debug_ranges"])
def test_interpreter_fixture(interp, mode, tmp_path):
    if isinstance(interp, Exception):
        pytest.fail(str(interp))
    require_binary(TEST_LINETABLE)
    require_binary(TEST_UNICODE)
    seen, host = fixture_paths(interp, tmp_path, mode)
    extra = ["-X", "no_debug_ranges"] if mode == "no_debug_ranges" else []
    try:
        res = run_dump(interp, seen, extra)
        if interp.version < (3, 11):
            # no location tables: the dumper must refuse, not write garbage
            assert res.returncode == 2, res
            assert "has no location tables" in res.stderr
            assert not os.path.exists(host)
            return
        assert res.returncode == 0, f"dump failed:\n{res.stdout}\n{res.stderr}"

        lt = run_binary(TEST_LINETABLE, host)
        assert lt.returncode == 0, f"test_linetable failed:\n{lt.stdout}\n{lt.stderr}"
        m = re.search(r"python (\S+) \S+: checked (\d+) code objects, (\d+) instructions",
                      lt.stdout)
        assert m, lt.stdout
        assert m.group(1) == interp.version_str
        codes, instrs = int(m.group(2)), int(m.group(3))
        assert codes >= MIN_CODES and instrs >= MIN_INSTRUCTIONS, m.group(0)

        uc = run_binary(TEST_UNICODE, host)
        assert uc.returncode == 0, f"test_unicode failed:\n{uc.stdout}\n{uc.stderr}"
        m = re.search(r"checked (\d+) strings", uc.stdout)
        assert m and int(m.group(1)) >= MIN_STRINGS, uc.stdout
        print(f"{interp.label} ({mode}): {codes} code objects, {instrs} instructions, "
              f"{m.group(1)} strings")
    finally:
        if os.path.exists(host):
            os.unlink(host)
