"""The house's rules on the built objects (scripts/check-layers, issue #32).

A sample walks one way: nothing under resolve/, symbols/ or output/ calls
into sampling/ or commands/; files never call each other in a loop unless
they are one object split behind one internal.h. The check reads the
objects of the build with nm; these tests run it on the tree (it must
pass) and on copies of the build with a planted breach (it must fail and
name it).
"""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(REPO, "scripts", "check-layers")
OBJDIR = os.path.join(REPO, ".output")


def check(objdir):
    return subprocess.run([CHECK, objdir], capture_output=True, text=True, timeout=120,
                          cwd=REPO)


def defined_in(objdir, folder):
    """The global functions the objects under folder/ define."""
    syms = []
    for d, _, files in os.walk(os.path.join(objdir, folder)):
        for f in sorted(files):
            if f.endswith(".o"):
                out = subprocess.run(["nm", "-g", "--defined-only", os.path.join(d, f)],
                                     capture_output=True, text=True, check=True).stdout
                syms += [p[2] for p in (l.split() for l in out.splitlines())
                         if len(p) == 3 and p[1] == "T"]
    return syms


@pytest.fixture
def build_copy(tmp_path):
    """The build's objects (not the sanitizer, fuzz or release ones), copied."""
    if not os.path.isdir(OBJDIR):
        pytest.fail("no .output: build first (make all)")
    dst = tmp_path / "objs"
    shutil.copytree(OBJDIR, dst, ignore=shutil.ignore_patterns("san", "fuzz", "release",
                                                               "*.bpf.o", "*.skel.h"))
    return dst


def plant(objdir, rel, code):
    src = objdir / (rel + ".c")
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(code)
    subprocess.run(["gcc", "-c", "-o", str(objdir / (rel + ".o")), str(src)], check=True)
    src.unlink()


def test_tree_keeps_the_rules():
    r = check(OBJDIR)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "one way down, no circles" in r.stdout


@pytest.mark.parametrize("caller,callee", [("output", "sampling"), ("resolve", "commands"),
                                           ("symbols", "sampling")])
def test_planted_call_up_fails(build_copy, caller, callee):
    sym = defined_in(build_copy, callee)[0]
    plant(build_copy, f"{caller}/planted",
          f"extern void {sym}(void);\nvoid planted_up(void) {{ {sym}(); }}\n")
    r = check(str(build_copy))
    assert r.returncode == 1, r.stdout
    assert f"call up: {caller}/planted.o -> {callee}/" in r.stdout
    assert f"({sym})" in r.stdout


def test_planted_circle_fails(build_copy):
    plant(build_copy, "planted/a",
          "extern void planted_b(void);\nvoid planted_a(void) { planted_b(); }\n")
    plant(build_copy, "planted/b",
          "extern void planted_a(void);\nvoid planted_b(void) { planted_a(); }\n")
    r = check(str(build_copy))
    assert r.returncode == 1, r.stdout
    assert "circle: planted/a.o, planted/b.o" in r.stdout
