"""End-to-end tests of `pyprof-bpf record --native` (and `--native --kernel`),
issue 11: native frames merged with the Python frames in true call order.

tests/targets/native_paths.py runs five known native call paths, each looping
in its own thread (so every sample is attributed to its path by its tid):
  sort:    sorted(big_list, key=python_fn)
  qsort:   libc qsort through ctypes with a CFUNCTYPE Python comparator
  zlib:    zlib.compress of a 2 MB pseudo-random buffer
  hashlib: hashlib.sha256 of an 8 MB buffer
  read:    os.read of 1 MB chunks of /dev/zero
(no os.urandom: the vDSO getrandom is a known unwinding gap, README).

On sid 3.13, 3.14, 3.15 and pyenv 3.12.1 (a shared-libpython build), each
test records the running target for 2 s at 499 Hz with the BPF backend, parses
every line of the perf-script output (its own parser: test_record's rejects
native frames) and checks every sample, root first:
  (a) a sample whose innermost Python frame is python_fn has, between it and
      the Python frame below it, at least one native frame (the C sort calls
      the key function), and that Python frame is sort_loop on the sorted()
      line; where the interpreter has a symbol table (readelf: .symtab in the
      DSO of those frames), one of them is named *sort*;
  (b) a comparator sample has, between qsort_loop's qsort line and the
      comparator, native frames that contain in this order a libffi frame
      (ffi_call), a libc frame (qsort* or [unknown]) and a libffi frame (the
      closure);
  (c) libz frames only under the zlib line, and at least 80% of the zlib
      line's samples have their leaf in libz;
  (d) the same for sha256 with the DSO the interpreter's hashlib uses
      (the target says which module implements sha256: _hashlib -> libcrypto;
      otherwise _sha2/HACL*: that module's file, or the interpreter itself
      when it is built in);
  (e) with --kernel, at least half of the os.read line's samples end in
      kernel frames ([kernel.kallsyms]), some in read_zero, with a libc frame
      between the kernel and the Python frame; without --kernel no kernel
      frame at all;
  (f) at most 1% of samples are cut at [unwind-failed] (the failure message
      says at which native frames the cut samples end);
  (g) the perf-script output through stackcollapse-perf.pl's rules
      (test_formats.stackcollapse_perf) keeps every native frame: per DSO,
      the collapsed weight of stacks holding its frames equals the parsed
      samples that hold them.
Each test prints a line "NATIVE <label> ..." with its numbers.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_native.py </dev/null
"""
import collections
import os
import re
import subprocess

import pytest

from lib import formats as tf
from lib.interps import by_label
from lib.procs import TARGETS, argv_of, stderr_of
from lib.recorder import RECORD_SLACK, Recorder, alive, launch
from lib.perf import line_of, read_file
from lib.native import CUT, PATHS_PY, parse_native_perf, start_paths

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

LABELS = ["sid-3.13", "sid-3.14", "sid-3.15", "pyenv-3.12.1"]
HZ = 499
SECS = 2
MAX_CUT_SHARE = 0.01
PERIOD = 1000000000 // HZ     # ns: a cpu-clock sample's weight in collapsed stacks


# --------------------------------------------------------------------------
# perf-script with native frames, parsed strictly


# --------------------------------------------------------------------------
# the target


def has_symtab(path, cache={}):
    if path not in cache:
        out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, f"readelf {path}: {out.stderr}"
        cache[path] = bool(re.search(r"\]\s+\.symtab\s", out.stdout))
    return cache[path]


def python_indices(fr):
    return [i for i, f in enumerate(fr) if f.kind == "python"]


def innermost_python(fr):
    idx = python_indices(fr)
    return idx[-1] if idx else None


def user_leaf(s):
    """The innermost frame that is not a kernel frame."""
    for f in s.frames:
        if f.kind != "kernel":
            return f
    return None


def subsequence(seq, preds):
    it = iter(seq)
    return all(any(p(x) for x in it) for p in preds)


def hash_dso_pred(info):
    """Which DSO sha256's leaf frames are in, from what implements it."""
    if info["sha256_module"] == "_hashlib":
        return "libcrypto", lambda dso: "libcrypto" in dso
    if info["sha256_file"]:
        base = os.path.basename(info["sha256_file"])
        return base, lambda dso: os.path.basename(dso) == base
    exe = os.path.basename(info["executable"])
    return f"{exe}/libpython", lambda dso: "libpython" in dso or os.path.basename(dso) == exe


# --------------------------------------------------------------------------
# the checks

def record(interp, procs, tmp_path, kernel, xargs=()):
    p, script, info = start_paths(interp, procs, tmp_path, xargs)
    name = "native_kernel" if kernel else "native"
    out = str(tmp_path / f"{name}.perf")
    args = ["-v", "--native"] + (["--kernel"] if kernel else []) + ["-F", HZ, "-d", SECS, "-o", out]
    rec = Recorder(procs, tmp_path, p.pid, args, name=name).wait_started()
    rec.wait(SECS + RECORD_SLACK).check_ok()
    assert alive(p), f"native_paths.py on {interp.label} died: {stderr_of(p)}"
    data = read_file(out)
    samples = parse_native_perf(data)
    return rec, info, script, data, samples


def check_paths(label, rec, info, script, data, samples, kernel):
    L = lambda n: line_of(PATHS_PY, n)
    tids = {v: k for k, v in info["tids"].items()}
    problems = []
    n = len(samples)
    assert n > 0, f"no samples on {label}\n{rec.stderr}"

    # the summary: sample count and the cut count agree with the output
    m = re.search(r"pyprof-bpf: (\d+) samples in", rec.stderr)
    assert m and int(m.group(1)) == n, f"summary vs {n} samples:\n{rec.stderr}"
    cuts = [s for s in samples if s.cut]
    m = re.search(r"--native: (\d+) of (\d+) samples could not be unwound", rec.stderr)
    said = int(m.group(1)) if m else 0
    if said != len(cuts):
        problems.append(f"the summary says {said} cut samples, the output has {len(cuts)}")

    per_path = collections.Counter(tids.get(s.tid, "other") for s in samples)
    good = [s for s in samples if not s.cut]
    counts = collections.Counter()

    # (a) sorted(key=python_fn)
    sort_named = None
    for s in good:
        fr = s.root_first
        py = python_indices(fr)
        for j, k in enumerate(py):
            if fr[k].func == "python_fn":
                below = fr[py[j - 1]] if j else None
                between = fr[py[j - 1] + 1:k] if j else fr[:k]
                counts["key"] += 1
                if below is None or below.func != "sort_loop" or below.line != L("sorted"):
                    problems.append(f"(a) python_fn not called from sort_loop's sorted() line: "
                                    f"{s.describe()}")
                elif not any(f.kind == "native" for f in between):
                    problems.append(f"(a) no native frame between sort_loop and python_fn: "
                                    f"{s.describe()}")
                else:
                    dsos = {f.dso for f in between if f.kind == "native"}
                    if all(has_symtab(d) for d in dsos):
                        sort_named = True if sort_named is None else sort_named
                        if not any("sort" in f.sym for f in between):
                            problems.append(f"(a) no *sort* frame between sort_loop and "
                                            f"python_fn though {sorted(dsos)} have symbol "
                                            f"tables: {s.describe()}")
                    else:
                        sort_named = False
            if fr[k].func == "sort_loop" and j + 1 < len(py) and py[j + 1] == k + 1 \
                    and fr[k + 1].func == "python_fn":
                problems.append(f"(a) python_fn directly on sort_loop: {s.describe()}")
    # (b) ctypes qsort with a Python comparator
    libffi = lambda f: f.kind == "native" and "libffi" in f.dso
    libc_qsort = lambda f: (f.kind == "native" and "libc.so" in f.dso
                            and ("qsort" in f.sym or f.sym == "[unknown]"))
    for s in good:
        fr = s.root_first
        py = python_indices(fr)
        for j, k in enumerate(py):
            if fr[k].func != "comparator":
                continue
            counts["cmp"] += 1
            below = fr[py[j - 1]] if j else None
            if below is None or below.func != "qsort_loop" or below.line != L("qsort"):
                problems.append(f"(b) comparator not called from qsort_loop's qsort line: "
                                f"{s.describe()}")
                continue
            between = fr[py[j - 1] + 1:k]
            if not subsequence(between, [libffi, libc_qsort, libffi]):
                problems.append(f"(b) between qsort_loop and comparator no libffi > libc "
                                f"qsort > libffi: {s.describe()}")
    # (c) zlib, (d) hashlib: leaf DSOs under their lines
    hname, hpred = hash_dso_pred(info)
    for what, line, pred, dname in (("zlib", L("zlib"), lambda d: "libz" in d, "libz"),
                                    ("hashlib", L("hashlib"), hpred, hname)):
        on_line = in_dso = 0
        leaves = collections.Counter()
        for s in good:
            fr = s.root_first
            k = innermost_python(fr)
            leaf = user_leaf(s)
            at_line = (k is not None and fr[k].func == f"{what}_loop" and fr[k].line == line)
            if any(f.kind == "native" and pred(f.dso) for f in fr) and not at_line:
                problems.append(f"({what}) a {dname} frame not under the {what} line: "
                                f"{s.describe()}")
            if at_line:
                on_line += 1
                leaves[repr(leaf)] += 1
                if leaf.kind == "native" and pred(leaf.dso):
                    in_dso += 1
        counts[what] = in_dso
        counts[what + "_line"] = on_line
        if on_line < 10 or in_dso < 0.8 * on_line:
            problems.append(f"({what}) {in_dso} of {on_line} samples of the {what} line have "
                            f"their leaf in {dname}; leaves: {leaves.most_common(6)}")
    # (e) kernel frames
    kern = [s for s in samples if s.frames[0].kind == "kernel"]
    if not kernel:
        if kern:
            problems.append(f"(e) {len(kern)} samples with kernel frames without --kernel: "
                            f"{kern[0].describe()}")
    else:
        on_line = in_kernel = read_zero = 0
        for s in good:
            fr = s.root_first
            k = innermost_python(fr)
            if k is None or fr[k].func != "read_loop" or fr[k].line != L("read"):
                continue
            on_line += 1
            if s.frames[0].kind != "kernel":
                continue
            in_kernel += 1
            if any(f.sym == "read_zero" for f in s.frames if f.kind == "kernel"):
                read_zero += 1
                mid = [f for f in fr[k + 1:] if f.kind == "native"]
                if not any("libc.so" in f.dso for f in mid):
                    problems.append(f"(e) no libc frame between os.read and the kernel: "
                                    f"{s.describe()}")
        counts["read_line"], counts["read_kernel"], counts["read_zero"] = \
            on_line, in_kernel, read_zero
        if on_line < 10 or in_kernel < 0.5 * on_line or read_zero == 0:
            problems.append(f"(e) of {on_line} samples of the os.read line {in_kernel} end in "
                            f"kernel frames, {read_zero} in read_zero")
    # (f) cuts
    share = len(cuts) / n
    ends = collections.Counter()
    for s in cuts:
        i = next(i for i, f in enumerate(s.frames) if f.kind == "synthetic" and f.sym == CUT)
        above = [f for f in s.frames[:i] if f.kind == "native"]
        ends[(repr(above[-1]) if above else "(no native frame)",
              repr(s.frames[i + 1]) if i + 1 < len(s.frames) else "-",
              tids.get(s.tid, "other"))] += 1
    unwinds = " | ".join(l[len("pyprof-bpf: "):] for l in rec.stderr.split("\n")
                         if " unwinds, " in l)
    # (g) stackcollapse-perf.pl rules keep the native frames
    folded = tf.stackcollapse_perf(data)
    weights = collections.Counter()
    for ln in folded.decode("utf-8").split("\n")[:-1]:
        stack, w = ln.rsplit(" ", 1)
        assert int(w) % PERIOD == 0, ln
        weights[stack] += int(w) // PERIOD
    if sum(weights.values()) != n:
        problems.append(f"(g) stackcollapse weight {sum(weights.values())} for {n} samples")
    for key in ("libz", "libffi", "libcrypto", "libc.so", "_ctypes"):
        want = sum(1 for s in samples
                   if any(f.kind == "native" and key in f.dso for f in s.frames))
        # named frames keep their symbol, [unknown] becomes [basename of the dso]
        names = {(f.sym if f.sym != "[unknown]" else f"[{os.path.basename(f.dso)}]")
                 for s in samples for f in s.frames if f.kind == "native" and key in f.dso}
        got = sum(w for st, w in weights.items() if set(st.split(";")[1:]) & names)
        if got != want:
            problems.append(f"(g) {key}: {want} samples hold its frames, the collapsed "
                            f"stacks holding them weigh {got}")
        counts["g_" + key] = got

    print(f"NATIVE {label}{' --kernel' if kernel else ''}: {n} samples, "
          f"{len(cuts)} cut ({100 * share:.2f}%), per thread {dict(per_path)}, "
          f"key-fn {counts['key']}, comparator {counts['cmp']}, "
          f"zlib leaf in libz {counts['zlib']}/{counts['zlib_line']}, "
          f"sha256 leaf in {hname} {counts['hashlib']}/{counts['hashlib_line']}"
          + (f", os.read in kernel {counts['read_kernel']}/{counts['read_line']} "
             f"(read_zero {counts['read_zero']})" if kernel else "")
          + f", sort frames named: {sort_named}"
          + f", collapsed weights libz {counts['g_libz']} libffi {counts['g_libffi']} "
            f"libcrypto {counts['g_libcrypto']} libc {counts['g_libc.so']}"
          + (f", cuts end at {dict(ends.most_common(6))}" if cuts else "")
          + f"; unwinder: {unwinds}")
    if counts["key"] < 5:
        problems.append(f"(a) only {counts['key']} samples in python_fn")
    if counts["cmp"] < 3:
        problems.append(f"(b) only {counts['cmp']} samples in the comparator")
    if share > MAX_CUT_SHARE:
        problems.append(f"(f) {len(cuts)} of {n} samples ({100 * share:.2f}%) cut at "
                        f"{CUT}, above {100 * MAX_CUT_SHARE:.0f}%; (innermost native frame "
                        f"before the cut, frame after it, thread): {dict(ends.most_common(8))}; "
                        f"the unwinder (-v): {unwinds}; e.g. " + "; ".join(
                            c.describe() for c in cuts[:2]))
    assert not problems, f"{label}: {len(problems)} problems:\n  " + "\n  ".join(
        problems[:15])


@pytest.mark.parametrize("label", LABELS)
def test_native_paths(label, procs, tmp_path):
    interp = by_label(label)
    rec, info, script, data, samples = record(interp, procs, tmp_path, kernel=False)
    check_paths(label, rec, info, script, data, samples, kernel=False)


@pytest.mark.parametrize("label", LABELS)
def test_native_kernel_paths(label, procs, tmp_path):
    interp = by_label(label)
    rec, info, script, data, samples = record(interp, procs, tmp_path, kernel=True)
    check_paths(label, rec, info, script, data, samples, kernel=True)


@pytest.mark.parametrize("label", LABELS)
def test_native_perf_trampolines(label, procs, tmp_path):
    """`python -X perf`: the interpreter enters every Python function through
    a copy of its perf trampoline in anonymous memory, which no CFI covers
    (every sample was cut at [unwind-failed] at the first one). The paths
    pass every check of test_native_paths, and each trampoline frame is
    named from the target's perf map (/tmp/perf-PID.map, as perf script
    names it) after the function whose Python frame sits right above it
    (none above it: the call is being entered or left, its frame not
    shown)."""
    interp = by_label(label)
    rec, info, script, data, samples = record(interp, procs, tmp_path, kernel=False,
                                              xargs=["-X", "perf"])
    # CPython leaves its perf map behind: the test takes it away
    for dso in {f.dso for s in samples for f in s.frames if f.kind == "jit"}:
        procs.cleanup_file(interp.host_path(dso))
    check_paths(label, rec, info, script, data, samples, kernel=False)
    problems, with_jit, deep = [], 0, 0
    for s in samples:
        if s.cut:
            continue
        fr = s.root_first
        if len(python_indices(fr)) >= 2:
            deep += 1
            with_jit += any(f.kind == "jit" for f in fr)
        for i, f in enumerate(fr):
            if f.kind != "jit":
                continue
            above = fr[i + 1] if i + 1 < len(fr) else None
            if not any(x.kind == "python" for x in fr[i + 1:]):
                continue    # the call is entered or left: its frame is not shown
            if above.kind != "python" or \
                    f.sym != f"py::{above.func}:{above.file}":
                problems.append(f"a trampoline frame {f.sym!r} not right below its "
                                f"function's Python frame: {s.describe()}")
    print(f"NATIVE -X perf {label}: {len(samples)} samples, {with_jit} of {deep} with "
          f"two Python frames or more hold trampoline frames")
    assert deep >= 50 and with_jit >= 0.9 * deep, (
        f"{label}: {with_jit} of {deep} samples with two Python frames or more hold "
        f"trampoline frames named from the perf map\n{rec.stderr}")
    assert not problems, f"{label}: {len(problems)} problems:\n  " + "\n  ".join(problems[:8])


# --------------------------------------------------------------------------
# samples with no Python frame

EXIT_PY = os.path.join(TARGETS, "native_exit.py")


@pytest.mark.parametrize("label", ["sid-3.14", "pyenv-3.12.1"])
def test_native_without_python_frames(label, procs, tmp_path):
    """A launched program's finalization (no Python frame on its stack)
    after its Python code: those samples unwind whole, to the thread's first
    frame, and are not cut at [unwind-failed] (they were when the runs of
    the sample before them were used to merge them)."""
    interp = by_label(label)
    out = str(tmp_path / "exit.perf")
    r = launch(procs, tmp_path, ["-v", "--native", "-F", 999, "-o", out],
            argv_of(interp, EXIT_PY, procs)).expect(0)
    samples = parse_native_perf(read_file(out))
    with_py = [s for s in samples if python_indices(s.frames)]
    without = [s for s in samples if not python_indices(s.frames)
               and any(f.kind == "native" for f in s.frames)]
    assert len(with_py) >= 100, f"{len(with_py)} samples with Python frames\n{r.stderr}"
    assert len(without) >= 20, (
        f"{len(without)} samples without a Python frame (finalization)\n{r.stderr}")
    cut = [s for s in without if s.cut]
    assert len(cut) <= MAX_CUT_SHARE * len(without) + 1, (
        f"{label}: {len(cut)} of {len(without)} samples with no Python frame are cut at "
        f"{CUT}, e.g.:\n  " + "\n  ".join(s.describe() for s in cut[:3]) + f"\n{r.stderr}")
    roots = collections.Counter(s.frames[-1].sym for s in without if not s.cut)
    assert roots and roots.most_common(1)[0][0] in ("_start", "__libc_start_main", "main"), (
        f"{label}: the samples without Python frames end at {dict(roots.most_common(5))}")


# --------------------------------------------------------------------------
# greenlets

GREENLETS_PY = os.path.join(TARGETS, "greenlets.py")


@pytest.mark.parametrize("label", ["sid-3.14", "sid-3.15"])
def test_native_greenlets(label, procs, tmp_path):
    """A greenlet runs on top of its parent's suspended C stack: the native
    stack holds the parent's evaluation loop, whose Python frames are not in
    the running chain. Runs pair with evaluation frames by their entry
    frames' addresses (3.12+), so the greenlet's Python frames sit above
    greenlet's start (g_initialstub), never below it (pairing by count put
    them on the parent's loop: 72% of samples cut, the rest in wrong
    order), and the unwind ends at greenlet's start (below it lies another
    greenlet's stale stack: 99% cut on 3.15). sid's python3-greenlet (3.14
    and 3.15 builds)."""
    interp = by_label(label)
    out = str(tmp_path / "greenlets.perf")
    r = launch(procs, tmp_path, ["-v", "--native", "-F", HZ, "-o", out],
            argv_of(interp, GREENLETS_PY, procs, ["2"])).expect(0)
    samples = parse_native_perf(read_file(out))
    start = lambda f: f.kind == "native" and "g_initialstub" in f.sym
    workers = [s for s in samples
               if any(f.kind == "python" and f.func in ("worker_a", "worker_b")
                      for f in s.frames)]
    cut = [s for s in workers if s.cut]
    problems, mid_switch = [], []
    for s in workers:
        if s.cut:
            continue
        fr = s.root_first
        first_py = python_indices(fr)[0]
        # A sample in the middle of a switch (the C stack switched, the frame
        # chain not yet, or the reverse) pairs one greenlet's Python frames
        # with another's stack: a few are allowed, and counted.
        if any(f.kind == "native" and "g_switchstack" in f.sym for f in fr) and \
                not any(start(f) for f in fr[:first_py]):
            mid_switch.append(s)
            continue
        if not any(start(f) for f in fr[:first_py]):
            problems.append(f"no greenlet start below the greenlet's Python frames: "
                            f"{s.describe()}")
        if any(start(f) for f in fr[first_py:]):
            problems.append(f"a greenlet start above the greenlet's Python frames: "
                            f"{s.describe()}")
        if fr[first_py].func != "main.<locals>.<lambda>":
            problems.append(f"the outermost Python frame is not the greenlet's: "
                            f"{s.describe()}")
    print(f"NATIVE greenlets {label}: {len(samples)} samples, {len(workers)} in the "
          f"greenlets, {len(cut)} cut, {len(mid_switch)} in a switch with another's stack")
    assert len(mid_switch) <= MAX_CUT_SHARE * len(workers) + 1, (
        f"{label}: {len(mid_switch)} samples in a switch with another greenlet's stack, "
        f"e.g.:\n  " + "\n  ".join(s.describe() for s in mid_switch[:3]))
    assert len(workers) >= 300, f"{len(workers)} samples in the greenlets\n{r.stderr}"
    assert len(cut) <= MAX_CUT_SHARE * len(workers) + 1, (
        f"{label}: {len(cut)} of {len(workers)} greenlet samples cut at {CUT}, e.g.:\n  "
        + "\n  ".join(s.describe() for s in cut[:3]) + f"\n{r.stderr}")
    assert not problems, f"{label}: {len(problems)} problems:\n  " + "\n  ".join(problems[:5])


# --------------------------------------------------------------------------
# stack copies bounded by the thread's outermost frame

DEEP_C_PY = os.path.join(TARGETS, "deep_c_stack.py")
DEEP_LEVELS = 4


@pytest.mark.parametrize("label", ["sid-3.14", "sid-3.15"])
def test_native_stack_copy_bounds(label, procs, tmp_path):
    """A thread's stack copies stop at its outermost frame once an unwind
    has found it (a pthread's stack runs on into its TLS: every copy took
    the whole 32 KB). A thread alternating a 3 KB C stack and a ~25 KB one
    (a recursion through sorted(key=)): the deep samples are whole (a copy
    grows with the stack, up to the end learnt), and the copies average
    well under the 32 KB (-v)."""
    interp = by_label(label)
    out = str(tmp_path / "deepc.perf")
    r = launch(procs, tmp_path, ["-v", "--native", "-F", HZ, "-o", out],
            argv_of(interp, DEEP_C_PY, procs, ["/dev/null", str(DEEP_LEVELS), "2"])).expect(0)
    samples = parse_native_perf(read_file(out))
    deep = [s for s in samples
            if sum(1 for f in s.frames if f.kind == "python" and f.func == "key")
            == DEEP_LEVELS + 1 and any(f.kind == "python" and f.func == "spin"
                                       for f in s.frames)]
    cut = [s for s in samples if s.cut]
    m = re.search(r"stack copies of ([\d.]+) KB a sample on average \((\d+) cut at an end",
                  r.stderr)
    print(f"NATIVE stack copies {label}: {len(samples)} samples, {len(deep)} at the deep "
          f"leaf, {len(cut)} cut; " + (m.group(0) if m else "no -v copy line"))
    assert m, f"-v says nothing of the stack copies\n{r.stderr}"
    assert len(deep) >= 50, f"{len(deep)} samples at the deep leaf\n{r.stderr}"
    deep_cut = [s for s in deep if s.cut]
    assert not deep_cut, (f"{label}: {len(deep_cut)} of {len(deep)} deep samples cut, e.g. "
                          f"{deep_cut[0].describe()}\n{r.stderr}")
    assert len(cut) <= MAX_CUT_SHARE * len(samples) + 1, (
        f"{label}: {len(cut)} of {len(samples)} samples cut, e.g. {cut[0].describe()}"
        f"\n{r.stderr}")
    assert float(m.group(1)) < 16, f"{label}: copies average {m.group(1)} KB\n{r.stderr}"
