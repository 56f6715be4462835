"""Real programs, nobody here wrote their hot code: how much of their profile
has a frame without a name (issue #9, "what shows it is done", first bullet).

Each tests/targets/real_*.py drives real library code in a CPU-bound loop and
prints "ready" when the loop starts:

  program    libraries                               interpreters
  http       http.server.ThreadingHTTPServer, a      every supported one
             thread per request, driven by a client
             process (http.client, urllib)
  stdlib     exec/eval of generated code, fresh      every supported one
             imports of stdlib modules, json, email,
             compileall
  templates  jinja2 templates compiled from strings, sid 3.13, 3.14, 3.15
             exec/eval of generated code, fresh      (Debian's python3-jinja2
             imports                                 and the others, from
  docutils   docutils: reStructuredText to HTML      scripts/provision-pythons.sh)
  sympy      sympy: expand, factor, simplify,
             integrate, solve, series
  flask      a Flask app and its test client
             (werkzeug, jinja2)

For each program on each interpreter it can run on: start it, wait for
"ready", run `pyprof-bpf record -p PID -F 999 -d 3 --format collapsed`, and
measure the profile with tests/tools/unnamed_share.py. The test asserts:

  (a) at most 0.5% of the sampled weight is in samples that have an unnamed
      frame ([no-python-state], [read-fault], [truncated], <unknown>, any
      marker it does not know); the markers that claim the thread had no
      Python frame at all ([no-python-frames], [thread-start/exit],
      [thread-exit]) are reported but not counted, and checked by (d);
  (b) there are samples: at least 0.3 s of CPU in 2 s of a CPU-bound target;
  (c) every named Python frame is one the program really has: its file is
      the script or a file in one of the interpreter's sys.path directories
      that exists in the target's file system (through the chroot), its line
      is inside that file, and every name in its qualname is defined there
      (def/class), or is a name Python itself gives (<module>, <lambda>,
      <genexpr>, ...); code compiled from strings is allowed only under the
      pseudo-file names the program (or its libraries) uses, with the names
      it gives them: "<template>" for jinja2, "<generated-N>" with that N's
      functions, "<string>" for eval and the stdlib's namedtuple/dataclass
      code (and sympy's monomial_* functions), "<werkzeug routing>" for
      werkzeug's URL builders; "<frozen X>" only for a stdlib module X that
      defines the names; and the functions that do the program's work show
      up (the HTTP handler's do_GET and do_POST, jinja2's template root(),
      ...);
  (d) every claim of "no Python frame" agrees with the target's own clock
      (the same samples, recorded with --raw as well and reported as
      perf-script text with thread ids and times): never on the main thread
      (it runs Python throughout); [thread-start/exit] (a young thread)
      never between two samples of the same thread with Python frames,
      [thread-exit] never before one,
      [no-python-frames] never between two; and for the HTTP server, whose
      request threads log when process_request_thread began and ended
      (time.monotonic_ns(), the clock of the samples), none inside that
      span, and no [thread-exit] before it.

With --blocking (issue #26: the remote backend, the target's threads stopped
for each tick's reads), sympy, docutils and stdlib on sid 3.15 and pyenv
3.11 are recorded again and held to the same checks, and to no [read-fault]
at all (3.11: at most 0.5%, a thread stopped at an eval-loop entry).

Every failure message prints the measured shares, per marker.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_real_programs.py
Nothing is skipped: a missing binary, interpreter or package is a failure.
"""
import functools
import json
import os
import re
import subprocess
import sys
import time

import pytest

from lib.tool import run_tool
from lib.interps import SUPPORTED
from lib.procs import out_path
from lib.perf import parse_perf
from lib.programs import HERE, PROGRAMS, names_of, start

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

sys.path.insert(0, os.path.join(HERE, "tools"))
import unnamed_share  # noqa: E402

HZ = 999
SECONDS = 2
MAX_UNNAMED = 0.005       # (a)
MIN_SAMPLED_S = 0.3       # (b)
DEBIAN = ("sid-3.13", "sid-3.14", "sid-3.15")

# Names Python gives code objects that no def/class in the source spells.
SYNTHETIC = re.compile(r"^(<module>|<lambda>|<genexpr>|<listcomp>|<dictcomp>|<setcomp>|"
                       r"<locals>|__annotate__|__annotate_fn__|<generic parameters of .+>|"
                       r"<annotate>|<annotations of .+>)$")


# --blocking (issue #26): the remote backend with the target's threads
# stopped per tick, on the programs whose stacks move fastest: not one
# sample may be torn ([read-fault]), where without it 17 to 37% are.
BLOCKING = {"sympy", "docutils", "stdlib"}
BLOCKING_ON = {"sid-3.15", "pyenv-3.11.7"}
BLOCKING_OLD_CFRAME_MAX = 0.005


# The remote backend without --blocking (issue #26 item 1): one copy of each
# thread's stack chunks per sample, kept when it held still and in shape.
# At most REMOTE_UNREAD_MAX of the samples unread (measured 0.6-2.2% on
# these programs, 3.11 to 3.15, on the machine of issue #26; on this AMD
# EPYC one, Debian's PGO-built 3.11 tears 3.6-6.9% of its copies (9 runs,
# 5.02% failed a CI rehearsal at the old 5%), pyenv's 3.12 1.6-2.5%, with
# 0-1 per 2 s refused by the call-site check: the copies change under the
# reader, a property of the machine, not of the build). 12% still catches a
# reader that stops keeping copies. Other unnamed frames: REMOTE_UNNAMED_MAX,
# for the code objects of exec'd code (namedtuple, dataclasses) that are
# freed before the reader gets to them (0.5-1.2% on stdlib), where the BPF
# backend reads them in the kernel while the thread is stopped.
# stdlib on an interpreter of each kind (Debian's PGO-built 3.11, pyenv's
# 3.12 with its C frame record, sid's 3.13 and debug 3.14), sympy and docutils
# on sid 3.15 (all eight interpreters measured by hand: 0.9-2.1%).
REMOTE_ON = {"stdlib": {"system-3.11", "pyenv-3.12.1", "sid-3.13", "sid-3.14d"},
             "sympy": {"sid-3.15"}, "docutils": {"sid-3.15"}}
REMOTE_UNREAD_MAX = 0.12
REMOTE_UNNAMED_MAX = 0.03


def cases():
    out = []
    for prog in PROGRAMS:
        for interp in SUPPORTED:
            if prog.debian and interp.label not in DEBIAN:
                continue
            out.append(pytest.param(prog, interp, (), id=f"{prog.name}-{interp.label}"))
            if prog.name in BLOCKING and interp.label in BLOCKING_ON:
                out.append(pytest.param(prog, interp, ("--blocking",),
                                        id=f"{prog.name}-{interp.label}-blocking"))
            if interp.label in REMOTE_ON.get(prog.name, ()):
                out.append(pytest.param(prog, interp, ("--backend", "remote"),
                                        id=f"{prog.name}-{interp.label}-remote"))
    return out


# --------------------------------------------------------------------------
# the interpreter's file system

@functools.lru_cache(maxsize=None)
def sys_path(interp):
    """The interpreter's sys.path directories (as it sees them) and its
    stdlib directory."""
    out = subprocess.run(interp.argv(["-c", "import json, sys, sysconfig; print(json.dumps("
                                      "[sys.path, sysconfig.get_paths()['stdlib']]))"]),
                         capture_output=True, text=True, timeout=60, check=True)
    path, stdlib = json.loads(out.stdout)
    return tuple(p.rstrip("/") for p in path if p.startswith("/")), stdlib


@functools.lru_cache(maxsize=4096)
def source_of(host_file):
    try:
        with open(host_file, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


@functools.lru_cache(maxsize=16384)
def defines(host_file, name):
    src = source_of(host_file)
    return src is not None and re.search(
        r"^[ \t]*(async[ \t]+)?(def|class)[ \t]+%s\b" % re.escape(name), src, re.M) is not None


def frame_problem(prog, interp, script, f):
    """Why the named frame f is not one the program has, or None."""
    file, qual, line = f.file, f.qualname, f.line
    names = names_of(qual)
    if file.startswith("<") and file.endswith(">"):
        m = re.fullmatch(r"<frozen ([\w.]+)>", file)
        if m:
            # a frozen stdlib module: its source is in the stdlib too
            _, stdlib = sys_path(interp)
            mod = m.group(1).replace(".", "/")
            hosts = [interp.host_path(os.path.join(stdlib, mod + ext))
                     for ext in (".py", "/__init__.py")]
            host = next((h for h in hosts if os.path.exists(h)), None)
            if host is None:
                return f"{file}: no stdlib module {m.group(1)} in {stdlib}"
            for n in names:
                if not SYNTHETIC.match(n) and not defines(host, n):
                    return f"{host} defines no {n!r} (qualname {qual!r})"
            return None
        for pat, allowed in prog.pseudo.items():
            m = re.fullmatch(pat, file)
            if m:
                if not allowed(m)(qual):
                    return f"{qual!r} is not a name {prog.name} puts in {file}"
                return None
        return f"pseudo-file {file} is not one {prog.name} compiles code under"
    if not file.startswith("/"):
        return f"file {file!r} is not an absolute path"
    dirs, _ = sys_path(interp)
    if file != script and not any(file.startswith(d + "/") for d in dirs):
        return f"{file} is neither the script nor under the interpreter's sys.path"
    host = interp.host_path(file)
    src = source_of(host)
    if src is None:
        return f"{file} does not exist in the target's file system ({host})"
    nlines = src.count("\n") + 1
    if not 0 <= line <= nlines:
        return f"line {line} outside {file} ({nlines} lines)"
    for n in names:
        if not SYNTHETIC.match(n) and not defines(host, n):
            return f"{file} defines no {n!r} (qualname {qual!r})"
    return None


# --------------------------------------------------------------------------
# running a program


def record(pid, tmp_path, extra=()):
    """(collapsed text, record's stderr, perf-script samples) of one
    recording (@extra: more options): the collapsed output and a raw
    recording of the same samples, reported again as perf-script text for
    the thread ids and times."""
    out, raw, perf = (str(tmp_path / n) for n in ("out.folded", "rec.pyprof", "out.perf"))
    r = run_tool(["record", "-p", str(pid), "-F", str(HZ), "-d", str(SECONDS),
                  "--format", "collapsed", "-o", out, "--raw", raw] + list(extra),
                 timeout=SECONDS + 90)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, f"pyprof-bpf record exited {r.returncode}:\n{err}"
    rep = run_tool(["report", "-i", raw, "--format", "perf-script", "-o", perf])
    assert rep.returncode == 0, (f"pyprof-bpf report exited {rep.returncode}:\n"
                                 f"{rep.stderr.decode('utf-8', 'replace')}")
    with open(out, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    with open(perf, "rb") as f:
        samples = parse_perf(f.read())
    return text, err, samples


def claim_of(sample):
    """The CLAIMS marker of a perf-script sample, 'python' when it has a
    Python frame, else None."""
    if any(f.python for f in sample.frames):
        return "python"
    for f in sample.frames:
        if f.sym in unnamed_share.CLAIMS:
            return f.sym
    return None


def read_spans(host_log):
    """{tid: [(start_ns, end_ns)]} and the long-lived tids of real_http's log."""
    spans, main = {}, set()
    try:
        with open(host_log) as f:
            for line in f:
                w = line.split()
                if w[0] == "main":
                    main.add(int(w[1]))
                elif len(w) == 3:
                    spans.setdefault(int(w[0]), []).append((int(w[1]), int(w[2])))
    except FileNotFoundError:
        pass
    return spans, main


def claim_problems(samples, pid, spans, long_lived, cframe_window=False):
    """(d): the samples whose claim of no Python frame (or whose reason for
    it: starting, ending) the target refutes.

    cframe_window: 3.11/3.12 keep the current frame in a C frame record that
    _PyEval_EvalFrameDefault installs in the thread state a few instructions
    before it sets the record's frame: a sample in between reads no frame on
    a thread that has Python frames. One such sample per thread is allowed
    there; more is a bug."""
    bad = []
    by_tid = {}
    for s in samples:
        by_tid.setdefault(s.tid, []).append(s)
    # The sample's time is truncated to the microsecond; a span is only
    # trusted from 20 us inside its ends.
    slack = 20_000
    for tid, ss in by_tid.items():
        ss.sort(key=lambda s: s.ts)
        kinds = [claim_of(s) for s in ss]
        py = [i for i, k in enumerate(kinds) if k == "python"]
        for i, (s, k) in enumerate(zip(ss, kinds)):
            if k in (None, "python"):
                continue
            t_ns = s.ts * 1000
            why = None
            if (tid == pid or tid in long_lived) and cframe_window and \
                    k == "[no-python-frames]" and kinds.count(k) == 1:
                pass
            elif tid == pid or tid in long_lived:
                why = "on a thread that runs Python throughout"
            elif k == "[thread-exit]" and py and py[-1] > i:
                why = f"before a sample with Python frames at {ss[py[-1]].ts / 1e6:.6f}"
            elif k in ("[no-python-frames]", "[thread-start/exit]") and py and \
                    py[0] < i < py[-1]:
                why = "between samples with Python frames"
            else:
                for a, b in spans.get(tid, ()):
                    if a + slack < t_ns < b - slack:
                        why = (f"{(t_ns - a) / 1e3:.0f} us into the thread's "
                               f"process_request_thread ({(b - a) / 1e3:.0f} us long)")
                    elif k == "[thread-exit]" and t_ns < a - slack:
                        why = (f"{(a - t_ns) / 1e3:.0f} us before the thread's "
                               f"process_request_thread began: the thread is starting")
                    if why:
                        break
            if why:
                bad.append(f"    {k} tid {tid} at {s.ts / 1e6:.6f}: {why}")
    return bad


def format_stack(stack, n=12):
    fr = list(stack)
    if len(fr) > n:
        fr = fr[:4] + ["..."] + fr[-(n - 4):]
    return " ; ".join(fr)


@pytest.mark.parametrize("prog, interp, extra", cases())
def test_real_program(prog, interp, extra, procs, tmp_path):  # noqa: F811
    log_seen = log_host = None
    if prog.name == "http":
        log_seen, log_host = out_path(interp, procs, tmp_path, "spans")
    p, script = start(prog, interp, procs, tmp_path, log_seen)
    text, err, samples = record(p.pid, tmp_path, extra)
    if p.poll() is not None:
        with open(p.stderr_path, "rb") as f:
            perr = f.read().decode("utf-8", "replace")
        pytest.fail(f"real_{prog.name}.py on {interp.label} exited {p.returncode} during "
                    f"the recording; its stderr:\n{perr[-3000:]}")
    s = unnamed_share.measure(unnamed_share.parse(text))
    what = f"real_{prog.name}.py on {interp.label}"
    summary = err.strip().splitlines()[-1] if err.strip() else "(no summary)"
    print(f"\nREAL {prog.name} {interp.label} share={s.share:.6f} total_ns={s.total} "
          f"markers={json.dumps({m: s.marker_share(m) for m in s.by_marker})} "
          f"claims={json.dumps({c: s.claim_share(c) for c in s.by_claim})}")

    problems = []
    remote = "--backend" in extra
    blocking = "--blocking" in extra
    # 3.11/3.12 keep the frame pointer in a C frame record that an evaluation
    # loop publishes a few instructions before it sets its frame: a thread
    # stopped there has no stack to read (the BPF backend says [eval-entry]),
    # 2 samples in 2,900 of stdlib's exec()s on 3.11. From 3.13 on, none.
    old_cframe = tuple(map(int, interp.version_str.split(".")[:2])) < (3, 13)
    torn_max = BLOCKING_OLD_CFRAME_MAX if old_cframe else 0.0
    if remote and s.marker_share("[read-fault]") > REMOTE_UNREAD_MAX:
        problems.append(f"--backend remote: {s.marker_share('[read-fault]'):.3%} of the "
                        f"weight is [read-fault] (at most {REMOTE_UNREAD_MAX:.0%})")
    if blocking and s.marker_share("[read-fault]") > torn_max:
        problems.append(f"{' '.join(extra)}: {s.marker_share('[read-fault]'):.3%} of the "
                        f"weight is [read-fault] (at most {torn_max:.1%}): a stack torn "
                        f"while its threads were stopped")
    if blocking and "--blocking: the target's threads were stopped" not in err:
        problems.append(f"--blocking: the summary does not say how long the threads were "
                        f"stopped:\n{err}")
    # (b) samples
    if s.total < MIN_SAMPLED_S * 1e9:
        problems.append(f"(b) only {s.total / 1e9:.3f} s of CPU sampled, expected at least "
                        f"{MIN_SAMPLED_S} s in {SECONDS} s of a CPU-bound target")
    # (a) unnamed share (remote: besides [read-fault], checked above)
    unnamed = s.share - (s.marker_share("[read-fault]") if remote else 0)
    unnamed_max = REMOTE_UNNAMED_MAX if remote else MAX_UNNAMED
    if unnamed > unnamed_max:
        ex = [f"    heaviest stack with {m}: {format_stack(s.examples[m])}"
              for m, _ in s.by_marker.most_common()]
        problems.append(f"(a) {unnamed:.2%} of the sampled weight has an unnamed frame, more "
                        f"than {unnamed_max:.1%}:\n" + "\n".join(
                            f"    {m:<20} {s.marker_share(m):8.3%}"
                            for m, _ in s.by_marker.most_common()) + "\n" + "\n".join(ex))
    # (c) every named frame is the program's
    named = s.named_frames()
    bad = []
    for f in named:
        why = frame_problem(prog, interp, script, f)
        if why:
            bad.append(f"    {f.qualname} {f.file}:{f.line}: {why}")
    if bad:
        problems.append(f"(c) {len(bad)} of {len(named)} named frames are not ones the "
                        f"program has:\n" + "\n".join(sorted(bad)[:25]))
    for qual_rx, where in prog.expect:
        hits = [f for f in named if re.fullmatch(qual_rx, f.qualname) and (
            f.file == script if where == "script" else
            re.fullmatch(where, f.file) if where.startswith("<") else
            re.search(where + "$", f.file))]
        if not hits:
            problems.append(f"(c) no frame {qual_rx!r} in {where} among {len(named)} "
                            f"named frames")
    # (d) the claims of no Python frame, against the target's own clock
    if log_host:
        time.sleep(0.2)         # the log is flushed every 50 ms
    spans, long_lived = read_spans(log_host) if log_host else ({}, set())
    if log_host and not spans:
        problems.append("(d) the HTTP server logged no request thread")
    if len(samples) * (10**9 // HZ) != s.total:
        problems.append(f"(d) the perf-script report of the raw recording has {len(samples)} "
                        f"samples, the collapsed output {s.total} ns at {HZ} Hz")
    bad = claim_problems(samples, p.pid, spans, long_lived,
                         cframe_window=interp.version < (3, 13))
    if bad:
        problems.append(f"(d) {len(bad)} samples claim no Python frame (or say why) where "
                        f"the target's own clock refutes it:\n" + "\n".join(bad[:20]))
    if problems:
        pytest.fail(f"{what}: {s.describe()}\n  pyprof-bpf: {summary}\n  "
                    + "\n  ".join(problems), pytrace=False)
