#!/usr/bin/env python3
"""mkinitramfs.py: the small initramfs a test guest boots (issue #33).

  mkinitramfs.py MODDIR OUT.cpio.gz INIT BUSYBOX MODULE...

MODDIR is an unpacked kernel package's lib/modules/KVER. The initramfs holds
a static busybox, INIT as /init, and the named modules (those not built
in) with every module they depend on (read from each one's .modinfo "depends=", as modprobe
would from modules.dep, which Debian's packages do not ship), decompressed,
in load order, listed in /modules.order.
"""
import gzip
import lzma
import os
import stat
import struct
import subprocess
import sys


def find_modules(moddir):
    """{name: path} of every module under moddir (names with '-' as '_')."""
    found = {}
    for d, _, files in os.walk(moddir):
        for f in files:
            for ext in (".ko", ".ko.xz", ".ko.zst"):
                if f.endswith(ext):
                    found[f[: -len(ext)].replace("-", "_")] = os.path.join(d, f)
    return found


def read_module(path):
    data = open(path, "rb").read()
    if path.endswith(".xz"):
        return lzma.decompress(data)
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return data


def modinfo_depends(elf):
    """The depends= of an ELF64 little-endian module's .modinfo section."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not an ELF64 little-endian module")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    stroff = sections[shstrndx][4]
    for s in sections:
        name = elf[stroff + s[0]: elf.index(b"\0", stroff + s[0])]
        if name == b".modinfo":
            for kv in elf[s[4]: s[4] + s[5]].split(b"\0"):
                if kv.startswith(b"depends="):
                    return [m.replace("-", "_") for m in kv[8:].decode().split(",") if m]
            return []
    return []


def builtin_modules(moddir):
    """The modules built into the kernel (modules.builtin): nothing to load."""
    try:
        lines = open(os.path.join(moddir, "modules.builtin")).read().split()
    except FileNotFoundError:
        return None
    return {os.path.basename(l)[:-3].replace("-", "_") for l in lines if l.endswith(".ko")}


def load_order(wanted, found, builtin):
    order, seen, blobs = [], set(), {}

    def visit(name, chain):
        if name in seen or (builtin and name in builtin):
            return
        if name not in found:
            # Without modules.builtin (7.x packages), a module the package
            # lacks is taken as built in; the guest says so if it is not.
            if builtin is not None:
                sys.exit(f"mkinitramfs: module {name} (for {' <- '.join(chain)}) is not in the package")
            seen.add(name)
            return
        seen.add(name)
        blobs[name] = read_module(found[name])
        for dep in modinfo_depends(blobs[name]):
            visit(dep, chain + [dep])
        order.append(name)

    for w in wanted:
        visit(w.replace("-", "_"), [w])
    return order, blobs


class Cpio:
    """A newc archive."""

    def __init__(self):
        self.parts, self.ino = [], 1

    def add(self, name, mode, data=b""):
        name_b = name.encode() + b"\0"
        hdr = b"070701" + b"".join(b"%08X" % v for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        self.ino += 1
        rec = hdr + name_b
        rec += b"\0" * (-len(rec) % 4) + data
        rec += b"\0" * (-len(rec) % 4)
        self.parts.append(rec)

    def bytes(self):
        self.add("TRAILER!!!", 0)
        return b"".join(self.parts)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    moddir, out, init, busybox, wanted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    order, blobs = load_order(wanted, find_modules(moddir), builtin_modules(moddir))
    c = Cpio()
    for d in ("bin", "dev", "proc", "sys", "host", "out", "lib", "lib/modules"):
        c.add(d, stat.S_IFDIR | 0o755)
    c.add("bin/busybox", stat.S_IFREG | 0o755, open(busybox, "rb").read())
    c.add("init", stat.S_IFREG | 0o755, open(init, "rb").read())
    for m in order:
        c.add(f"lib/modules/{m}.ko", stat.S_IFREG | 0o644, blobs[m])
    c.add("modules.order", stat.S_IFREG | 0o644, "".join(m + "\n" for m in order).encode())
    tmp = out + ".tmp"
    with gzip.open(tmp, "wb", compresslevel=6) as f:
        f.write(c.bytes())
    os.replace(tmp, out)
    print(" ".join(order))


if __name__ == "__main__":
    main()
