"""pyprof_noloop.bpf.o, the program for kernels without bpf_loop (5.10 to
5.16; bpf/compat.bpf.h), on this host (issue #33 item 3).

The kernel matrix (test_kernels.py) runs it where it is chosen, 5.10, but
inside TCG and on one target per mode. Here PYPROF_BPF_PROGRAM=pyprof_noloop
makes the binary load it on this kernel, and each test below is another
module's test run unchanged with it: the same targets, the same truths
(exact stacks 1,000 deep and one frame over --max-depth, which crosses the
loop's chunks of 64 steps many times; 3.11's from-caller walk; entry frames
through C; 50 threads coming and going, found by the in-kernel lookup;
off-CPU intervals; asyncio task trees; --native and --kernel stacks). After
each, no recording of it may have fallen back to the remote backend (the
forced program is the only one tried, so a clean stderr means it ran), and
the -v line must name it. The choice by probing is the matrix's to show;
the override's errors are checked here.
"""
import re
import subprocess

import pytest

import test_async_record
import test_modes
import test_native
import test_record
from lib.interps import by_label
from lib.tool import binary
from test_modes import disk_dir, mixes  # noqa: F401 (fixtures of the reused tests)

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

PROGRAM = "pyprof_noloop"


@pytest.fixture
def noloop(monkeypatch, tmp_path):
    """Every recording of the test loads pyprof_noloop.bpf.o, or fails."""
    monkeypatch.setenv("PYPROF_BPF_PROGRAM", PROGRAM)
    yield
    errs = sorted(tmp_path.rglob("*.stderr"))
    assert errs, f"no recording's stderr under {tmp_path}"
    for p in errs:
        text = p.read_text(errors="replace")
        assert "cannot use BPF" not in text, f"{p.name}: fell back to the remote backend:\n{text}"


def test_program_named(noloop, procs, tmp_path):
    """-v says the program loaded and why; its verifier figures follow."""
    interp = by_label("sid-3.14")
    p, _, _ = test_record.start_deep(interp, procs, tmp_path, 100)
    out = tmp_path / "named.perf"
    rec = test_record.Recorder(procs, tmp_path, p.pid, ["-F", 99, "-d", 1, "-v", "-o", out],
                               name="named").wait_started()
    rec.wait(1 + test_record.RECORD_SLACK).check_ok()
    assert (f"BPF program: {PROGRAM}.bpf.o (PYPROF_BPF_PROGRAM says so); verifier: "
            "pyprof_sample ") in rec.stderr, rec.stderr


def test_unknown_program_refused(procs, tmp_path):
    """A name that is neither program: one clear line, exit 1, no fallback."""
    interp = by_label("sid-3.14")
    p, _, _ = test_record.start_deep(interp, procs, tmp_path, 10)
    r = subprocess.run([binary(), "record", "-p", str(p.pid), "-d", "1", "--backend", "bpf",
                        "-o", str(tmp_path / "x.perf")],
                       env={"PATH": "/usr/bin:/bin", "PYPROF_BPF_PROGRAM": "pyprof_fast"},
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "PYPROF_BPF_PROGRAM=pyprof_fast: the programs are pyprof and pyprof_noloop" \
        in r.stderr, r.stderr


def test_deep_recursion(noloop, procs, tmp_path):
    """3.11: the check of the C frame record's caller, and the walk again
    from it, run the loop twice in one sample (3.15's anchors: below)."""
    test_record.test_deep_recursion("pyenv-3.11.7", procs, tmp_path)


def test_deep_through_c(noloop, procs, tmp_path):
    test_record.test_deep_through_c("pyenv-3.12.1", procs, tmp_path)


def test_threads_churn(noloop, procs, tmp_path):
    """3.15: the frame cache's anchors, in threads that come and go."""
    test_record.test_threads_churn("sid-3.15", "thread", procs, tmp_path)


def test_off_cpu(noloop, procs, tmp_path, disk_dir, mixes):  # noqa: F811
    test_modes.test_off_cpu(by_label("sid-3.14"), procs, tmp_path, disk_dir, mixes)


def test_task_tree(noloop, procs, tmp_path):
    test_async_record.test_task_tree(by_label("sid-3.14"), procs, tmp_path)


def test_native_kernel_paths(noloop, procs, tmp_path):
    test_native.test_native_kernel_paths("sid-3.14", procs, tmp_path)


def test_version_names_programs():
    """--version -v: both programs carried, the one this kernel loads and
    why; PYPROF_BPF_PROGRAM's choice said as such."""
    def version(env):
        r = subprocess.run([binary(), "--version", "-v"], env=env, capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        return r.stdout
    out = version({"PATH": "/usr/bin:/bin"})
    assert "BPF programs: pyprof.bpf.o (kernels with bpf_loop" in out, out
    assert "pyprof_noloop.bpf.o (5.8 to 5.16)" in out, out
    assert re.search(r"this kernel \(\S+\): loads pyprof(_noloop)?\.bpf\.o \(the kernel has ", out), out
    out = version({"PATH": "/usr/bin:/bin", "PYPROF_BPF_PROGRAM": PROGRAM})
    assert re.search(r"this kernel \(\S+\): loads pyprof_noloop\.bpf\.o \(PYPROF_BPF_PROGRAM "
                     r"says so\)", out), out


def test_no_btf_said_plainly(procs, tmp_path):
    """A kernel without BTF (here: an empty /sys/kernel/btf in a mount
    namespace of the recorder's own): one line naming it; cpu mode samples
    with the remote backend, off-CPU mode is refused, --version -v says so."""
    interp = by_label("sid-3.14")
    p, script, info = test_record.start_deep(interp, procs, tmp_path, 20)
    hide = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs none /sys/kernel/btf && exec "$@"', "sh"]
    out = tmp_path / "nobtf.perf"

    def run(args):
        return subprocess.run(hide + [binary()] + args, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    why = "kernel has no BTF (/sys/kernel/btf/vmlinux)"
    r = run(["record", "-p", str(p.pid), "-d", "1", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert f"cannot use BPF ({why}): sampling with the remote backend instead" in r.stderr, \
        r.stderr
    samples = test_record.parse_perf(test_record.read_file(str(out)))
    assert samples, r.stderr
    test_record.check_deep(samples, script, info, 2048, "sid-3.14 20 deep, remote, no BTF")
    r = run(["record", "-p", str(p.pid), "-d", "1", "--mode", "off-cpu", "-o", str(out)])
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == \
        f"pyprof-bpf: BPF backend (--mode off-cpu needs it): {why}", r.stderr
    r = run(["--version", "-v"])
    assert f"no BPF backend: {why}" in r.stdout, r.stdout
