#!/usr/bin/env python3
"""Seeds of fuzz_linetable from the interpreter that runs this: the location
tables of a few code objects of its own stdlib (smallest, largest and some
between), as [u8 0][i32 co_firstlineno][i32 a byte offset][co_linetable].

    python3.X linetable_seeds.py OUTDIR"""
import os, struct, sys, types
import asyncio, dataclasses, json.decoder, threading

def codes(obj, seen):
    for c in obj.co_consts:
        if isinstance(c, types.CodeType) and id(c) not in seen:
            seen.add(id(c))
            yield c
            yield from codes(c, seen)

out, seen, all_codes = sys.argv[1], set(), []
for mod in (asyncio.tasks, dataclasses, json.decoder, threading):
    src = open(mod.__file__).read()
    all_codes += list(codes(compile(src, mod.__file__, "exec"), seen))
all_codes.sort(key=lambda c: len(c.co_linetable))
pick = [all_codes[i * (len(all_codes) - 1) // 5] for i in range(6)]
for i, c in enumerate(pick):
    off = len(c.co_code) // 2 & ~1
    name = "py%d.%d-%d" % (sys.version_info[0], sys.version_info[1], i)
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<Bii", 0, c.co_firstlineno, off) + c.co_linetable)
