"""Builds for another architecture on this x86-64 machine (issue #34).

So far the BPF side: `make ARCH=arm64 bpf` compiles both programs
(pyprof.bpf.o and pyprof_noloop.bpf.o) against vmlinux/arm64/vmlinux.h, made
once by scripts/vmlinux-h.sh from Debian's arm64 kernel and committed, with
everything the program reads differently per architecture behind
bpf/arch_arm64.bpf.h; the Makefile itself checks that the two skeletons
declare the same maps, programs and globals. Here: both objects are BPF
ELF files whose BTF holds AArch64's registers (pstate, syscallno: what the
program reads of them), not x86-64's (orig_ax), and whose programs are all
there.
"""
import os
import subprocess

import pytest

from lib import pyenvs

OUT = os.path.join(pyenvs.REPO, ".output", "arm64")
EM_BPF = 247


def btf_c(obj):
    return subprocess.run(["bpftool", "btf", "dump", "file", obj, "format", "c"],
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def arm64_objects():
    r = subprocess.run(["make", "-s", "ARCH=arm64", "bpf"], cwd=pyenvs.REPO,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"make ARCH=arm64 bpf failed:\n{r.stdout}{r.stderr}"
    return [os.path.join(OUT, name) for name in ("pyprof.bpf.o", "pyprof_noloop.bpf.o")]


def test_arm64_bpf_objects(arm64_objects):
    for obj in arm64_objects:
        with open(obj, "rb") as f:
            head = f.read(20)
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == EM_BPF, obj
        c = btf_c(obj)
        for field in ("pstate", "syscallno", "tp_value"):
            assert field in c, f"{obj}: no {field} in its BTF: not built for AArch64"
        assert "orig_ax" not in c, f"{obj}: x86-64's orig_ax in its BTF"
        syms = subprocess.run(["llvm-objdump", "-t", obj], capture_output=True, text=True,
                              check=True).stdout
        for prog in ("pyprof_sample", "pyprof_switch", "pyprof_wakeup", "pyprof_fork",
                     "pyprof_exec", "pyprof_exit"):
            assert f" {prog}\n" in syms, f"{obj}: no program {prog}"
