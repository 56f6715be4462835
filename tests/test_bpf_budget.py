"""The BPF object's stack budget, read off the compiled object.

The verifier adds a bpf_loop callback's stack frame to its caller's and
refuses a chain past 512 bytes. Kernels differ in how strictly they count it:
6.18 refused the off-CPU program (592 bytes: 336 of its own, 288 in the
awaiters' callback) that older ones had loaded, so every off-CPU and wall
recording fell back to the remote backend there. This test holds each
program, with its largest callback or subprogram, 64 bytes under the limit,
whatever the kernel it runs on: a big local (a struct, an array) belongs in
the per-CPU scratch map.

Each function's frame is the deepest r10 offset its instructions touch
(llvm-objdump of .output/pyprof.bpf.o, as built by make).

pyprof_noloop.bpf.o (kernels without bpf_loop, bpf/compat.bpf.h) calls its
loops' chunks and steps as functions, nested (a task's step scans a set):
there every chain of calls, read off the relocations of its call
instructions, must fit with the same spare.
"""
import os
import re
import subprocess

from lib import pyenvs

OBJ = os.path.join(pyenvs.REPO, ".output", "pyprof.bpf.o")
NOLOOP = os.path.join(pyenvs.REPO, ".output", "pyprof_noloop.bpf.o")
LIMIT = 512             # MAX_BPF_STACK
SPARE = 64
PROGRAM = re.compile(r"^pyprof_\w+$")    # SEC() programs; the rest: callbacks, subprograms


def frames(obj=OBJ, calls=None):
    """{function: its deepest stack offset} of the BPF object; @calls, a
    dict, gets {function: the functions it calls}."""
    assert os.path.exists(obj), f"{obj} is missing: run make"
    dis = subprocess.run(["llvm-objdump", "-d", "-r", "--no-show-raw-insn", obj],
                         capture_output=True, text=True, check=True).stdout
    depth, cur, calling = {}, None, False
    for line in dis.splitlines():
        head = re.match(r"^[0-9a-f]+ <(\S+)>:", line)
        if head and not head.group(1).startswith("LBB"):
            cur = head.group(1)
            depth[cur] = 0
            continue
        rel = re.search(r"R_BPF_64_32\s+(\S+)", line)
        if calling and rel and calls is not None:
            calls.setdefault(cur, set()).add(rel.group(1))
        calling = bool(re.search(r"\bcall -1$", line))
        for off in re.findall(r"r10 - (\d+)", line):
            depth[cur] = max(depth[cur], int(off))
    return depth


def test_each_program_with_its_callbacks_fits():
    depth = frames()
    programs = {f: d for f, d in depth.items() if PROGRAM.match(f)}
    others = {f: d for f, d in depth.items() if not PROGRAM.match(f)}
    # The object has its programs and callbacks (a walk_frame, a
    # lookup_step...): a disassembly that lost them would pass anything.
    assert {"pyprof_sample", "pyprof_switch"} <= set(programs), sorted(depth)
    assert {"walk_frame", "lookup_step", "await_step"} <= set(others), sorted(depth)
    deepest = max(others.items(), key=lambda kv: kv[1])
    for prog, d in programs.items():
        assert d + deepest[1] <= LIMIT - SPARE, (
            f"{prog}: {d} bytes of stack + {deepest[0]}'s {deepest[1]} = {d + deepest[1]}, "
            f"over {LIMIT - SPARE} (the verifier's {LIMIT} less {SPARE} spare)")


def test_noloop_call_chains_fit():
    calls = {}
    depth = frames(NOLOOP, calls)
    # Its loops are calls: a disassembly that lost them would pass anything.
    assert {"walk_frame__chunk", "walk_frame__step", "lookup_step__step",
            "set_scan_step__chunk", "await_step__step"} <= set(depth), sorted(depth)
    assert "walk_frame__step" in calls.get("walk_frame__chunk", ()), calls

    def deepest(fn, seen=()):
        """The chain from @fn with the most stack: (bytes, [functions])."""
        best = (0, [])
        for callee in calls.get(fn, ()):
            assert callee not in seen, f"recursion through {callee}: {seen}"
            best = max(best, deepest(callee, seen + (fn,)))
        return depth.get(fn, 0) + best[0], [fn] + best[1]

    programs = [f for f in depth if PROGRAM.match(f)]
    assert {"pyprof_sample", "pyprof_switch"} <= set(programs), sorted(depth)
    for prog in programs:
        total, chain = deepest(prog)
        print(f"{prog}: {total} bytes through {' > '.join(chain)}")
        assert total <= LIMIT - SPARE, (
            f"{prog}: {total} bytes of stack through {' > '.join(chain)}, over "
            f"{LIMIT - SPARE} (the verifier's {LIMIT} less {SPARE} spare)")
