"""A target that recurses DEPTH frames deep and spins at the bottom forever.

    python deep.py READY DEPTH [c]

Its one thread's stack, once READY exists, never changes again:

    <module> -> main -> down x DEPTH -> spin

With "c" the recursion goes through C (down_c calls itself through the
builtins sum and map), so from 3.12 on an interpreter-owned entry frame sits
between every two Python frames:

    <module> -> main -> down_c x DEPTH -> spin

READY (JSON, written atomically from the deepest frame before it starts
spinning) holds the version, the lines that spin()'s code object holds
(co_lines() of this very interpreter) and DEPTH. The call sites are marked in
the source with `# LINE:<caller>-><callee>` comments. Runs on CPython 3.11+.
"""
import json
import os
import sys

READY = sys.argv[1]
DEPTH = int(sys.argv[2])
VIA_C = len(sys.argv) > 3 and sys.argv[3] == "c"


def spin():
    x = 0
    while True:  # LOOP:spin
        x = (x + 1) & 0xFFFF  # LOOP:spin


def ready():
    lines = sorted({ln for _, _, ln in spin.__code__.co_lines() if ln is not None})
    with open(READY + ".tmp", "w") as f:
        json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
                   "depth": DEPTH, "spin_lines": lines}, f)
    os.replace(READY + ".tmp", READY)


def down(n):
    if n > 1:
        return down(n - 1)  # LINE:down->down
    ready()
    return spin()  # LINE:down->spin


def down_c(n):
    if n > 1:
        return sum(map(down_c, (n - 1,)))  # LINE:down_c->down_c
    ready()
    return spin()  # LINE:down_c->spin


def main():
    sys.setrecursionlimit(DEPTH + 1000)
    (down_c if VIA_C else down)(DEPTH)  # LINE:main->down


if __name__ == "__main__":
    main()  # LINE:<module>->main
