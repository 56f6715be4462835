"""Module bodies that run once and are freed: an import loop.

    python sl_imports.py DIR LAYOUT LOG

Round i writes a fresh module file DIR/slmod_<i>.py (source(i) below),
imports it with importlib (caches invalidated first, no bytecode written),
then deletes it from sys.modules and removes the file: the module's code
object (its body) is freed as soon as the import returns; the module's
namespace, its function fold() and fold's code (they refer to each other)
at the garbage collector's next pass. Each body works at import
time: a loop at module level, then a call of fold(), defined in the module.
The loop comes after PRELUDE one-line statements, so that its entries lie
past the first 8 KB of the body's line table (~9 KB before the loop).
The body starts 10 * (i % 5) lines lower in each of 5 successive rounds, so
that a line from another round's table is a line this one does not have.

LAYOUT (JSON, written once at start) holds the version, the pid, and for
each of the 5 paddings the (qualname, [lines]) of the module body ("module")
and of fold ("fold") (co_lines() of this interpreter). LOG gets one line
per round, "i t0_ns t1_ns path": CLOCK_MONOTONIC before the import and after
the module was dropped, and the file's path as the target sees it; written
in batches of 10. Runs until killed. CPython 3.11+.
"""
import importlib
import json
import os
import sys
import time

DIR, LAYOUT, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
PADS = 5
# Statements before the body's loop: its line table runs past 8 KB before
# the loop's entries (a snapshot's copy once stopped there).
PRELUDE = 1800


def source(i):
    return ("\n" * (10 * (i % PADS)) +
            f"# module {i}\n" +
            "".join(f"v{j} = {j}\n" for j in range(PRELUDE)) +
            f"x = 0\n"
            f"for k in range(60000):\n"
            f"    x += k * k % 7\n"
            f"\n"
            f"def fold(n):\n"
            f"    y = 0\n"
            f"    for k in range(n):\n"
            f"        y ^= k * 3\n"
            f"    return y\n"
            f"\n"
            f"x += fold(20000)\n")


def code_lines(code):
    return sorted({ln for _, _, ln in code.co_lines() if ln is not None})


def layout():
    out = {}
    for pad in range(PADS):
        mod = compile(source(pad), "x.py", "exec")
        fold, = [c for c in mod.co_consts if hasattr(c, "co_lines")]
        out[pad] = {"module": [mod.co_qualname, code_lines(mod)],
                    "fold": [fold.co_qualname, code_lines(fold)]}
    return out


def load(i):
    name = f"slmod_{i}"
    path = os.path.join(DIR, name + ".py")
    with open(path, "w") as f:
        f.write(source(i))
    importlib.invalidate_caches()
    t0 = time.monotonic_ns()
    importlib.import_module(name)
    del sys.modules[name]
    t1 = time.monotonic_ns()
    os.unlink(path)
    return t0, t1, path


def main():
    sys.dont_write_bytecode = True
    sys.path.insert(0, DIR)
    with open(LAYOUT + ".tmp", "w") as f:
        json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
                   "layout": layout()}, f)
    os.replace(LAYOUT + ".tmp", LAYOUT)
    log = open(LOG, "w")
    lines = []
    i = 0
    while True:
        t0, t1, path = load(i)
        lines.append(f"{i} {t0} {t1} {path}\n")
        i += 1
        if len(lines) >= 10:
            log.writelines(lines)
            log.flush()
            lines.clear()


if __name__ == "__main__":
    main()
