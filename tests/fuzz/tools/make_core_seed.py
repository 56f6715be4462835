#!/usr/bin/env python3
"""Writes small x86-64 ELF core files, seeds for tests/fuzz/fuzz_core_file.c:
the notes a kernel or gcore writes (NT_PRSTATUS per thread, NT_PRPSINFO,
NT_AUXV, NT_FILE) and PT_LOAD segments, one of them not dumped (its file
size 0, as a read-only file mapping is).

    python3 tests/fuzz/tools/make_core_seed.py tests/fuzz/corpus/core_file
"""
import os
import struct
import sys


def note(name, ntype, desc):
    name_b = name + b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name_b), len(desc), ntype) + pad(name_b) + pad(desc)


def prstatus(tid, orig_rax):
    regs = [0] * 27
    regs[14], regs[15], regs[16], regs[19], regs[21] = (0x1000, orig_rax & (2**64 - 1), 0x401000,
                                                        0x7ff000, 0x7f0000)
    body = bytearray(336)
    struct.pack_into("<i", body, 32, tid)
    struct.pack_into("<27Q", body, 112, *regs)
    return bytes(body)


def core(threads, files):
    notes = b""
    for tid, rax in threads:
        notes += note(b"CORE", 1, prstatus(tid, rax))
    ps = bytearray(136)
    struct.pack_into("<i", ps, 24, threads[0][0])
    ps[40:40 + 7] = b"python3"
    notes += note(b"CORE", 3, bytes(ps))
    notes += note(b"CORE", 6, struct.pack("<4Q", 3, 0x400040, 0, 0))
    nt = struct.pack("<QQ", len(files), 4096)
    for start, end, off, _ in files:
        nt += struct.pack("<3Q", start, end, off)
    nt += b"".join(p.encode() + b"\0" for *_, p in files)
    notes += note(b"CORE", 0x46494c45, nt)
    data = bytes(range(256)) * 16
    loads = [(0x400000, 0x1000, 0), (0x7fe000, 0x2000, len(data)), (0x7f0000, 0x1000, 0x1000)]
    phnum = 1 + len(loads)
    off = 64 + 56 * phnum
    ph = struct.pack("<IIQQQQQQ", 4, 0, off, 0, 0, len(notes), 0, 4)
    body = notes
    for vaddr, memsz, filesz in loads:
        o = off + len(body)
        ph += struct.pack("<IIQQQQQQ", 1, 6, o, vaddr, 0, min(filesz, len(data)), memsz, 4096)
        body += data[:min(filesz, len(data))]
    eh = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9, 4, 62, 1, 0,
                     64, 0, 0, 64, 56, phnum, 64, 0, 0)
    return eh + ph + body


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = [(0x400000, 0x401000, 0, "/usr/bin/python3"),
             (0x7fe000, 0x800000, 2, "/usr/lib/libpython3.so")]
    seeds = {"two-threads": core([(100, 230), (101, -1)], files),
             "one-thread-no-files": core([(7, 202)], [])}
    for name, b in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)


if __name__ == "__main__":
    main()
