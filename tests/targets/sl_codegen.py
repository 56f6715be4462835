"""Code that lives a few milliseconds: exec'd and eval'd, then freed.

    python sl_codegen.py LAYOUT LOG

Generation g compiles a fresh source text (source(g) below) under the file
name "<gen g>", exec's it, which defines gen_<g>; calls gen_<g> in a loop
from drive(); then eval's a fresh expression compiled under "<eval g>"
that calls gen_<g> and a generator expression of its own; then drops it
all, so every one of these code objects is freed moments after it ran, and
the next generation's usually land at the same addresses.

gen_<g>'s body starts 10 * (g % 5) lines lower in each of 5 successive
generations, so a line taken from the wrong generation's table is a line
gen_<g> does not have.

LAYOUT (JSON, written once at start) holds the version, the pid, this
file's name and, for each of the 5 paddings, the (qualname, [lines]) of every
code object of the generated texts (co_lines() of this interpreter):
"gen_module" (the exec'd <module>), "gen" (gen_<g>), "eval" (the eval'd
<module>) and "genexpr" (its generator expression).

LOG gets one line per generation, "g t0_ns t1_ns": CLOCK_MONOTONIC before
the compile and after the last use (the only times its code can be on the
stack), written in batches of 20. Runs until killed. CPython 3.11+.
"""
import json
import os
import sys
import time

LAYOUT, LOG = sys.argv[1], sys.argv[2]
PADS = 5


def source(g):
    return ("\n" * (10 * (g % PADS)) +
            f"def gen_{g}(n):\n"
            f"    x = 0\n"
            f"    for i in range(n):\n"
            f"        x += i * i % 7\n"
            f"    return x\n")


def expression(g):
    return f"gen_{g}(200) + sum(i * i for i in range(300))"


def code_lines(code):
    return sorted({ln for _, _, ln in code.co_lines() if ln is not None})


def nested(code):
    return [c for c in code.co_consts if hasattr(c, "co_lines")]


def layout():
    out = {}
    for pad in range(PADS):
        mod = compile(source(pad), f"<gen {pad}>", "exec")
        fn, = nested(mod)
        ev = compile(expression(pad), f"<eval {pad}>", "eval")
        ge, = nested(ev)
        out[pad] = {k: [c.co_qualname, code_lines(c)] for k, c in
                    (("gen_module", mod), ("gen", fn), ("eval", ev), ("genexpr", ge))}
    return out


def drive(fn, calls):
    x = 0
    for _ in range(calls):
        x += fn(300)
    return x


def main():
    with open(LAYOUT + ".tmp", "w") as f:
        json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
                   "file": __file__, "layout": layout()}, f)
    os.replace(LAYOUT + ".tmp", LAYOUT)
    log = open(LOG, "w")
    lines = []
    g = 0
    while True:
        t0 = time.monotonic_ns()
        ns = {}
        exec(compile(source(g), f"<gen {g}>", "exec"), ns)
        drive(ns[f"gen_{g}"], 10)
        ev = compile(expression(g), f"<eval {g}>", "eval")
        for _ in range(5):
            eval(ev, ns)
        ns.clear()  # gen_<g> and ns refer to each other: free both now
        del ns, ev
        t1 = time.monotonic_ns()
        lines.append(f"{g} {t0} {t1}\n")
        g += 1
        if len(lines) >= 20:
            log.writelines(lines)
            log.flush()
            lines.clear()


if __name__ == "__main__":
    main()
