#!/usr/bin/env python3
"""The kernel matrix's checks (issue #33), run inside a QEMU guest booted from
one of Debian's kernels (tests/test_kernels.py, through scripts/vm-run), or on
the host to try them:

    python3 tests/kernels/checks.py BINARY [--local-pythons] [CHECK...]

Each check records (or dumps) tests/targets/kernel_mix.py, started on one
interpreter of each kind the guest reaches (the host's /usr/bin/python3, the
sid root's through chroot), and looks for the function its mode is about
where it must be: hot_spot on top in cpu mode, idle_wait in off-CPU time,
in_handler in exception mode, stat_loop over kernel frames with --kernel,
zlib's deflate under compress_spot with --native, and so on (CHECKS);
dump, and dump --core of the core the kernel writes when the target
aborts, must match the interpreter's own traceback of every thread taken
just before (faulthandler on SIGUSR1), but for the two innermost frames of
each thread, which move on (OTHER); two events at once (the clock and a
tracepoint) each under its root frame, or on a kernel whose program takes one
event (5.10-5.16), the refusal that says so. Every recording runs with -v: its start line must say
the BPF backend, and its "BPF program:" line (the verifier's figures for
each program loaded) is passed on.

With --local-pythons (the arm64 guest, tests/test_arm64.py, whose own root
holds the versions) the interpreters are /usr/bin/python3.13, 3.14 and 3.15
themselves, no chroot, labelled "3.13", "3.14" and "3.15": a check meant for
"host" runs on 3.13, for "sid-3.14" on 3.14, for "sid-3.15" on 3.15 (LOCAL),
and cpu on all three (LOCAL_ALL).

Prints one JSON object per line: first {"kernel": uname -r}, then per check
{"check", "interp", "ok", "why", "backend", "program", "secs"}. Exits 0 once
every check has run (their verdicts are in the lines), 2 on bad usage.
"""
import collections
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))       # tests/: lib.pyenvs, pytest-free
from lib import pyenvs  # noqa: E402
TARGET = os.path.join(HERE, "..", "targets", "kernel_mix.py")
WORK = "/tmp/pyprof-kernel-checks"
SECS = 1.5
HZ = 199
TIMEOUT = 120


# --local-pythons: the label each of CHECKS' interpreters stands for, and the
# checks that run on every local interpreter whatever CHECKS says.
LOCAL = {"host": "3.13", "sid-3.14": "3.14", "sid-3.15": "3.15"}
LOCAL_ALL = {"cpu"}


def interpreters(local=False):
    """The host's /usr/bin/python3 and the sid root's 3.14 and 3.15 (chroot),
    or with @local this root's /usr/bin/python3.13, 3.14 and 3.15."""
    if local:
        return {v: pyenvs.Interp(v, f"/usr/bin/python{v}") for v in LOCAL.values()}
    out = {"host": pyenvs.Interp("host", "/usr/bin/python3")}
    out.update({i.label: i for i in pyenvs.load() if i.label in ("sid-3.14", "sid-3.15")})
    return out


def labels_of(name, local):
    """The interpreters check @name runs on (OTHER's: the host's, or 3.13)."""
    labels = CHECKS[name][1] if name in CHECKS else ["host"]
    if not local:
        return labels
    return list(LOCAL.values()) if name in LOCAL_ALL else [LOCAL[label] for label in labels]


class Target:
    """kernel_mix.py KIND on interp, up and ready."""

    def __init__(self, interp, kind):
        self.interp = interp
        script = interp.stage(os.path.abspath(TARGET))
        # beside the staged script: a directory the interpreter sees and can write
        seen = os.path.join(os.path.dirname(script) if interp.root else WORK,
                            f"ready-{kind}-{time.monotonic_ns()}")
        self.err = open(os.path.join(WORK, f"target-{interp.label}-{kind}.stderr"), "w+")
        self.p = subprocess.Popen(interp.argv([script, seen, "mix" if kind == "core" else kind]),
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 60
        while not os.path.exists(interp.host_path(seen)):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.err.seek(0)
                raise RuntimeError(f"kernel_mix.py {kind} on {interp.label} did not start: "
                                   f"{self.err.read()[-500:]}")
            time.sleep(0.05)
        with open(interp.host_path(seen)) as f:
            self.pid = int(f.read())       # the python's own (chroot runs it as a child)
        self.tb = interp.host_path(seen) + ".tb"
        time.sleep(0.3)

    def own_traceback(self):
        """The interpreter's own traceback of every thread (kernel_mix.py's
        faulthandler on SIGUSR1): a list of stacks, innermost frame first,
        each frame (function, file, line)."""
        os.kill(self.pid, signal.SIGUSR1)
        # written by the handler in one go: complete once it names the
        # thread that took the signal and stops growing
        deadline, text = time.monotonic() + 10, ""
        while time.monotonic() < deadline:
            time.sleep(0.1)
            with open(self.tb) as f:
                last, text = text, f.read()
            if "Current thread" in text and text == last:
                break
        stacks = []
        for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text.strip()):
            frames = re.findall(r'File "(.*)", line (\d+) in (\S+)', block)
            if frames:
                stacks.append([(fn, path, int(line)) for path, line, fn in frames])
        return stacks

    def close(self):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.err.close()


def folded(path):
    """{tuple of frames: weight} of a collapsed file."""
    out = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, w = line.rstrip("\n").rpartition(" ")
            if stack:
                out[tuple(stack.split(";"))] += int(w)
    return out


def py_name(frame):
    """The function of a collapsed Python frame "py::QUALNAME:FILE:LINE"
    (its last dotted part), else None."""
    m = re.match(r"py::([^:]+):", frame)
    return m.group(1).rsplit(".", 1)[-1] if m else None


def leaf_py(stack):
    for fr in reversed(stack):
        if py_name(fr):
            return py_name(fr)
    return None


def shares(stacks):
    """{function: share of the weight of stacks whose innermost Python frame it is}."""
    total = sum(stacks.values()) or 1
    out = collections.Counter()
    for st, w in stacks.items():
        out[leaf_py(st)] += w / total
    return out


def off_cpu_split(stacks, fn):
    """Why @fn's off-CPU time was off the CPU: the share of each leaf marker
    ([GIL wait], [runnable], [syscall] NAME...) in the weight of its stacks,
    and its seconds: what a verdict on @fn's share says when it fails."""
    mine = {st: w for st, w in stacks.items() if leaf_py(st) == fn}
    total = sum(mine.values()) or 1
    split = collections.Counter()
    for st, w in mine.items():
        split[next((f for f in reversed(st) if f.startswith("[")), "?")] += w / total
    return (f"{fn}: {total / 1e9:.2f} s, " +
            ", ".join(f"{k} {100 * v:.0f}%" for k, v in split.most_common(4)))


def record(binary, args, out, secs=SECS):
    cmd = [binary, "record", "-v", "-F", str(HZ), "-d", str(secs), "--format", "collapsed",
           "-o", out] + args
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT)
    return r


def start_line(stderr):
    for line in stderr.splitlines():
        if "sampling " in line and " backend" in line:
            return line
    return ""


def program_line(stderr):
    for line in stderr.splitlines():
        if line.startswith("pyprof-bpf: BPF program: "):
            return line[len("pyprof-bpf: BPF program: "):]
    return ""


def want(sh, fn, at_least, top=False):
    if sh.get(fn, 0.0) < at_least:
        return f"{fn} has {100 * sh.get(fn, 0.0):.0f}% of the weight, want {100 * at_least:.0f}%+"
    if top and max(sh, key=sh.get) != fn:
        return f"{max(sh, key=sh.get)} is on top, not {fn}"
    return None


def any_stack(stacks, pred):
    return any(pred(st) for st in stacks)


# check name -> (target kind, interpreters, record args, verdict(stacks) -> None or why)
def after(fn, pred):
    """Some stack has fn, and a frame after it for which pred holds."""
    def check(stacks):
        for st in stacks:
            names = [py_name(f) for f in st]
            if fn in names and any(pred(f) for f in st[names.index(fn) + 1:]):
                return None
        return f"no stack with {fn} followed by the frames asked for"
    return check


def sleepers_only(stacks):
    """None when every stack's innermost Python function is one that calls
    time.sleep() (and the sleeper's idle_wait is among them)."""
    sleepers = {"idle_wait", "raiser", "sys_worker"}
    leaves = {leaf_py(st) for st in stacks}
    if not leaves <= sleepers:
        odd = next(st for st in stacks if leaf_py(st) not in sleepers)
        return (f"clock_nanosleep hit in {sorted(leaves - sleepers, key=str)} "
                f"({stacks[odd]} of {sum(stacks.values())}; one: {';'.join(odd)[-300:]})")
    return None if "idle_wait" in leaves else "no hit in idle_wait"


CHECKS = {
    "cpu": ("mix", ["host", "sid-3.15"], [],
            lambda st: want(shares(st), "hot_spot", 0.3, top=True)),
    # The busy thread waits too (for the GIL it hands over): 8-15% seen.
    "off-cpu": ("mix", ["host", "sid-3.14"], ["--mode", "off-cpu"],
                lambda st: want(shares(st), "idle_wait", 0.1)
                or ("hot_spot is on top of the off-CPU time (" + off_cpu_split(st, "hot_spot")
                    + "; " + off_cpu_split(st, "idle_wait") + ")"
                    if max(shares(st), key=shares(st).get) == "hot_spot" else None)),
    "wall": ("mix", ["host"], ["--mode", "wall"],
             lambda st: want(shares(st), "hot_spot", 0.05) or want(shares(st), "idle_wait", 0.05)),
    "gil": ("mix", ["host"], ["--mode", "gil"],
            lambda st: want(shares(st), "hot_spot", 0.2)),
    "exception": ("mix", ["host"], ["--mode", "exception"],
                  lambda st: want(shares(st), "in_handler", 0.5, top=True)),
    "native": ("mix", ["host"], ["--native"],
               after("hot_spot", lambda f: not f.startswith(("py::", "[")))),
    # zlib's own function under the Python frame that called it
    "native-zlib": ("zlib", ["host"], ["--native"],
                    after("compress_spot", lambda f: f == "deflate")),
    "kernel": ("mix", ["host"], ["--kernel"], after("stat_loop", lambda f: f.endswith("_[k]"))),
    # -e: a software event on the target's threads (the sleeper's switches
    # among them), and a tracepoint hit by time.sleep() alone
    "event-cs": ("mix", ["host"], ["-e", "cs"],
                 lambda st: None if any_stack(st, lambda s: "idle_wait" in map(py_name, s))
                 else "no context switch in idle_wait"),
    # (through a --filter every hit passes: the filter's code verified too)
    "event-tracepoint": ("mix", ["host"], ["-e", "syscalls:sys_enter_clock_nanosleep",
                                           "--filter", "which_clock < 16 && rqtp != 0"],
                         lambda st: sleepers_only(st)),
    "opcodes": ("mix", ["host"], ["--opcodes"], after("hot_spot", lambda f: f.startswith("[op] "))),
    "async": ("async", ["sid-3.14", "sid-3.15"], ["--async"],
              lambda st: want(shares(st), "hot_spot", 0.3)
              or (None if any_stack(st, lambda s: "async_busy" in map(py_name, s))
                  else "no stack holds the task's async_busy")),
    "subprocesses": ("spawn", ["host"], ["--subprocesses"],
                     lambda st: want(shares(st), "child_hot", 0.02)),
}
OTHER = ("all", "dump", "agent", "version", "dump-core", "event-multi")
# OTHER's targets: the host's mix, but dump-core's, which it aborts.
OTHER_KIND = {"dump-core": "core"}


def run_record(binary, name, interp, target, args, verdict):
    out = os.path.join(WORK, f"{name}-{interp.label}.folded")
    r = record(binary, ["-p", str(target.pid)] + args, out,
               secs=2.5 if name == "subprocesses" else SECS)
    res = {"backend": "bpf" if "with the BPF backend" in start_line(r.stderr) else
           ("remote" if "remote backend" in start_line(r.stderr) else "?"),
           "program": program_line(r.stderr)}
    if r.returncode != 0:
        return dict(res, ok=False, why=f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if res["backend"] != "bpf":
        return dict(res, ok=False, why=f"not the BPF backend: {start_line(r.stderr)!r}")
    stacks = folded(out)
    if not stacks:
        return dict(res, ok=False, why=f"nothing recorded: {r.stderr.strip()[-300:]}")
    why = verdict(stacks)
    top = ", ".join(f"{k} {100 * v:.0f}%" for k, v in shares(stacks).most_common(4))
    return dict(res, ok=why is None, why=why or f"top: {top}")


def run_all(binary, interp, target):
    out = os.path.join(WORK, "all.folded")
    r = subprocess.run([binary, "record", "-v", "-a", "-F", str(HZ), "-d", str(SECS),
                        "--format", "collapsed", "-o", out], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=TIMEOUT)
    res = {"backend": "bpf" if "BPF backend" in start_line(r.stderr) else "?",
           "program": program_line(r.stderr)}
    if r.returncode != 0:
        return dict(res, ok=False, why=f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
    why = want(shares(folded(out)), "hot_spot", 0.2)
    return dict(res, ok=why is None, why=why or "hot_spot named")


def compare_dump(own, out):
    """None when `dump --json` output @out matches the interpreter's own
    traceback @own (Target.own_traceback, taken just before): as many
    threads, and each of its stacks matched by one of the dump's, frame by
    frame (function, file, line) from the outermost, up to the innermost
    two (the threads ran on between the two looks); else why not."""
    try:
        threads = json.loads(out)["threads"]
    except (ValueError, KeyError, TypeError) as e:
        return f"dump --json unreadable: {e}"
    dumped = [[(f["function"].rsplit(".", 1)[-1], f["file"], f["line"]) for f in t["frames"]]
              for t in threads]
    if len(dumped) != len(own):
        return f"{len(dumped)} threads dumped, the interpreter has {len(own)}"
    for st in own:
        def common(d):
            n = 0
            for a, b in zip(reversed(st), reversed(d)):
                if a != b:
                    break
                n += 1
            return n
        if not any(common(d) >= max(len(st), len(d)) - 2 for d in dumped):
            return (f"no dumped thread matches the interpreter's own {st[::-1]} "
                    f"(dumped: {[d[::-1] for d in dumped]})")[:900]
    return None


def run_dump(binary, interp, target):
    own = target.own_traceback()
    r = subprocess.run([binary, "dump", "-p", str(target.pid), "--json"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT)
    if r.returncode != 0:
        return {"ok": False, "why": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    why = compare_dump(own, r.stdout)
    return {"ok": why is None,
            "why": why or f"{len(own)} threads, as the interpreter's own traceback says"}


def run_dump_core(binary, interp, target):
    """dump --core of the core the kernel writes when the target aborts,
    compared with the interpreter's own traceback taken just before."""
    import resource
    pattern = "/proc/sys/kernel/core_pattern"
    core = os.path.join(WORK, f"core.{target.pid}")
    with open(pattern) as f:
        old = f.read()
    resource.prlimit(target.pid, resource.RLIMIT_CORE,
                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    own = target.own_traceback()
    try:
        with open(pattern, "w") as f:
            f.write(os.path.join(WORK, "core.%p"))
        os.kill(target.pid, signal.SIGABRT)
        target.p.wait(timeout=60)
    finally:
        with open(pattern, "w") as f:
            f.write(old)
    if not os.path.exists(core):
        return {"ok": False, "why": f"the kernel wrote no core at {core}"}
    r = subprocess.run([binary, "dump", "--core", core, "--json"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=TIMEOUT)
    os.unlink(core)
    if r.returncode != 0:
        return {"ok": False, "why": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    why = compare_dump(own, r.stdout)
    return {"ok": why is None, "why": why or f"{len(own)} threads, as the interpreter's own "
            "traceback said before it aborted"}


def run_event_multi(binary, interp, target):
    """-e cpu-clock,TRACEPOINT: each event's samples under its root frame
    (the clock's on hot_spot, the tracepoint's in the sleepers alone); where
    the kernel runs the program for kernels without bpf_loop (one event a
    recording: no attach cookies before 5.15), the refusal that says so."""
    tp = "syscalls:sys_enter_clock_nanosleep"
    out = os.path.join(WORK, "event-multi.folded")
    r = record(binary, ["-p", str(target.pid), "-e", f"cpu-clock,{tp}"], out)
    res = {"backend": "bpf" if "with the BPF backend" in start_line(r.stderr) else "?",
           "program": program_line(r.stderr)}
    if r.returncode != 0 and "several events at once" in r.stderr:
        v = run_version(binary, interp, target)
        ok = (v.get("program") or "").startswith("pyprof_noloop.bpf.o")
        return dict(res, backend=v["backend"], program=v["program"], ok=ok,
                    why=f"refused: {r.stderr.strip().splitlines()[-1]}")
    if r.returncode != 0:
        return dict(res, ok=False, why=f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
    parts = {"[cpu-clock]": collections.Counter(), f"[{tp}]": collections.Counter()}
    for st, w in folded(out).items():
        root = next((f for f in st if f in parts), None)
        if root is None:
            return dict(res, ok=False, why=f"a stack with no event root: {';'.join(st)[:200]}")
        parts[root][st] += w
    why = (want(shares(parts["[cpu-clock]"]), "hot_spot", 0.3)
           or (sleepers_only(parts[f"[{tp}]"]) if parts[f"[{tp}]"] else f"no {tp} sample"))
    # (a tick inside a tracepoint's program, 7.2: skipped, said, never torn)
    nested = re.search(r"(\d+) samples not taken", r.stderr)
    return dict(res, ok=why is None,
                why=why or f"{sum(parts['[cpu-clock]'].values())} ns of cpu-clock, "
                f"{sum(parts[f'[{tp}]'].values())} {tp} events"
                + (f", {nested.group(1)} nested ticks not taken" if nested else ""))


def run_version(binary, interp, target):
    """--version -v: the program this kernel loads, found by probing, and why."""
    r = subprocess.run([binary, "--version", "-v"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=TIMEOUT)
    m = re.search(r"^this kernel \(\S+\): loads (.*)$", r.stdout, re.M)
    res = {"backend": "bpf" if m else "?", "program": m.group(1) if m else None}
    if r.returncode != 0 or not m:
        return dict(res, ok=False, why=f"exit {r.returncode}: {(r.stdout + r.stderr)[-400:]}")
    return dict(res, ok=True, why=m.group(0))


def run_agent(binary, interp, target):
    d = os.path.join(WORK, "agent")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p = subprocess.Popen([binary, "agent", "-v", "-p", str(target.pid), "--window", "1",
                          "-F", str(HZ), "--output-dir", d], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(3.5)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        return {"ok": False, "why": "the agent did not exit 30 s after SIGTERM"}
    files = [f for f in os.listdir(d) if f.endswith(".pb.gz")]
    named = [f for f in files if b"hot_spot" in gzip.open(os.path.join(d, f)).read()]
    # The agent's start line names no backend: its "BPF program:" line does.
    res = {"backend": "bpf" if program_line(err) else "?", "program": program_line(err)}
    if p.returncode != 0 or not named or res["backend"] != "bpf":
        return dict(res, ok=False, why=f"exit {p.returncode}, {len(files)} profiles, "
                    f"{len(named)} naming hot_spot, backend {res['backend']}: "
                    f"{err.strip()[-300:]}")
    return dict(res, ok=True, why=f"{len(files)} profiles, {len(named)} naming hot_spot")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    args = sys.argv[2:]
    local = "--local-pythons" in args
    binary, only = os.path.abspath(sys.argv[1]), set(args) - {"--local-pythons"}
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    print(json.dumps({"kernel": os.uname().release}), flush=True)
    interps = interpreters(local)
    plan = collections.defaultdict(list)     # (kind, interp) -> [check]
    for name in list(CHECKS) + list(OTHER):
        kind = CHECKS[name][0] if name in CHECKS else OTHER_KIND.get(name, "mix")
        for label in labels_of(name, local):
            if label in interps and (not only or name in only):
                plan[(kind, label)].append(name)
    for (kind, label), names in plan.items():
        interp = interps[label]
        try:
            target = Target(interp, kind)
        except (RuntimeError, OSError) as e:
            for name in names:
                print(json.dumps({"check": name, "interp": label, "ok": False, "why": str(e)}),
                      flush=True)
            continue
        try:
            for name in names:
                t0 = time.monotonic()
                try:
                    if name in CHECKS:
                        _, _, args, verdict = CHECKS[name]
                        res = run_record(binary, name, interp, target, args, verdict)
                    else:
                        res = globals()[f"run_{name.replace('-', '_')}"](binary, interp,
                                                                          target)
                except (subprocess.TimeoutExpired, OSError, ValueError) as e:
                    res = {"ok": False, "why": f"{type(e).__name__}: {e}"}
                res.update(check=name, interp=label, secs=round(time.monotonic() - t0, 1))
                print(json.dumps(res), flush=True)
        finally:
            target.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
