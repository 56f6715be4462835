"""A loop whose hot instruction is known (tests/test_opcodes.py).

argv: add|attr SECONDS. add: `x = x + i + i + i + i` on ints (four additions
per store, so BINARY_OP's time outweighs STORE_FAST's freeing of the old x);
attr: eight loads of an instance attribute per iteration, four per store
(3.11's attribute load costs about what its store does). After a warm-up
(the adaptive interpreter specialises the hot instructions), it prints one
JSON line: every instruction of the hot function as dis shows it from this
interpreter's adaptive bytecode, [offset, opname, base opname]; then it loops
for SECONDS.
"""
import dis
import json
import opcode
import sys
import time


class P:
    def __init__(self):
        self.v = self


def add_loop(n):
    x = 0
    for i in range(n):
        x = x + i + i + i + i
    return x


def attr_loop(p, n):
    t = 0
    for i in range(n):
        t = p.v.v.v.v
        t = p.v.v.v.v
    return t


def base_name(ins):
    """The unspecialised name of an instruction (3.11/3.12 have no
    Instruction.baseopname: their opcode module's _specializations)."""
    if hasattr(ins, "baseopname"):
        return ins.baseopname
    for base, forms in getattr(opcode, "_specializations", {}).items():
        if ins.opname in forms:
            return base
    return ins.opname


def main():
    which, secs = sys.argv[1], float(sys.argv[2])
    f, args = (add_loop, (2000,)) if which == "add" else (attr_loop, (P(), 2000))
    for _ in range(200):
        f(*args)
    print(json.dumps([[i.offset, i.opname, base_name(i)]
                      for i in dis.get_instructions(f, adaptive=True)]), flush=True)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        f(*args)


main()
