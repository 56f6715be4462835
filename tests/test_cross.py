"""Builds for another architecture on this x86-64 machine (issue #34).

The BPF side: `make ARCH=arm64 bpf` compiles both programs
(pyprof.bpf.o and pyprof_noloop.bpf.o) against vmlinux/arm64/vmlinux.h, made
once by scripts/vmlinux-h.sh from Debian's arm64 kernel and committed, with
everything the program reads differently per architecture behind
bpf/arch_arm64.bpf.h; the Makefile itself checks that the two skeletons
declare the same maps, programs and globals. Here: both objects are BPF
ELF files whose BTF holds AArch64's registers (pstate, syscallno: what the
program reads of them), not x86-64's (orig_ax), and whose programs are all
there.

The release: `make release ARCH=arm64` cross-builds with clang and lld
against a sysroot of Debian's arm64 packages (scripts/provision-sysroot.sh,
which make test-deps runs). The binary is run under qemu-user:
what runs without an arm64 kernel (no BPF there) is checked. The arm64
kernel under QEMU is tests/test_arm64.py's.
"""
import os
import re
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


SYSROOT = os.path.join(os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf"), "sysroot-arm64")
EM_AARCH64 = 183


def qemu(binary, args):
    assert os.path.isdir(SYSROOT), f"{SYSROOT} missing: scripts/provision-sysroot.sh arm64"
    return subprocess.run(["qemu-aarch64-static", "-L", SYSROOT, binary] + args,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_arm64_release(tmp_path):
    """`make release ARCH=arm64`: an AArch64 executable that needs glibc alone,
    which runs (under qemu-user): --version names arm64, --version -v the two
    programs it carries, dump --core refuses an x86-64 core in one line (it
    reads its own architecture's)."""
    r = subprocess.run(["make", "-s", "-j2", "ARCH=arm64", "release"], cwd=pyenvs.REPO,
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"make ARCH=arm64 release failed:\n{r.stdout}{r.stderr}"
    binary = os.path.join(OUT, "release", "pyprof-bpf")
    with open(binary, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == EM_AARCH64, binary
    dyn = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                         check=True).stdout
    needed = sorted(set(re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)))
    assert needed == ["ld-linux-aarch64.so.1", "libc.so.6"], needed
    p = qemu(binary, ["--version", "-v"])
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert re.match(r"^pyprof-bpf \S+ \(commit [0-9a-f]{7,40}(-dirty)?, arm64\)$", first), first
    assert "pyprof.bpf.o (kernels with bpf_loop" in p.stdout and "pyprof_noloop.bpf.o" in p.stdout
    core = str(tmp_path / "core")
    with open(core, "wb") as f:     # an ELF header: ELFCLASS64, LSB, ET_CORE, EM_X86_64
        f.write(b"\x7fELF\x02\x01\x01" + bytes(9) + (4).to_bytes(2, "little")
                + (62).to_bytes(2, "little") + (1).to_bytes(4, "little") + bytes(40))
    p = qemu(binary, ["dump", "--core", core])
    assert p.returncode != 0
    assert "not an AArch64 core (this pyprof-bpf reads AArch64's)" in p.stderr, p.stderr


@pytest.mark.slow
def test_arm64_deb():
    """`make deb ARCH=arm64`: a package for arm64 holding the AArch64 release
    binary, its Depends the glibc it needs, its Static-Built-Using the
    sysroot's source packages of the libraries linked in."""
    r = subprocess.run(["make", "-s", "ARCH=arm64", "deb"], cwd=pyenvs.REPO,
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"make ARCH=arm64 deb failed:\n{r.stdout}{r.stderr}"
    debs = [f for f in os.listdir(OUT) if f.endswith("_arm64.deb")]
    assert len(debs) == 1, os.listdir(OUT)
    deb = os.path.join(OUT, debs[0])
    field = lambda name: subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True,
                                        text=True, check=True).stdout.strip()
    assert field("Architecture") == "arm64"
    assert re.fullmatch(r"libc6 \(>= 2\.\d+\)", field("Depends")), field("Depends")
    sbu = field("Static-Built-Using")
    for src in ("libbpf", "elfutils", "zlib"):
        assert re.search(rf"\b{src} \(= [^)]+\)", sbu), sbu
    files = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                           check=True).stdout
    assert "./usr/bin/pyprof-bpf" in files, files
    x = os.path.join(OUT, "deb-x")
    subprocess.run(["rm", "-rf", x], check=True)
    subprocess.run(["dpkg-deb", "-x", deb, x], check=True)
    with open(os.path.join(x, "usr/bin/pyprof-bpf"), "rb") as f:
        head = f.read(20)
    assert int.from_bytes(head[18:20], "little") == EM_AARCH64
