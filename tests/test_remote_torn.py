"""Issue #26 item 1: the remote backend without --blocking keeps no torn
stack, measured where tearing is likeliest.

tests/targets/alternating.py runs two equally deep chains a1..a30 and
b1..b30 from the same frame, over and over, so that each chain's frames
take the very addresses the other's just left, with the same sizes: a
stack read while the thread returns from one chain and climbs the other
can splice a-frames onto b-frames (or the reverse) and still look whole.
The remote backend copies a thread's stack chunks in one process_vm_readv
and keeps the copy only when the current frame and the data stack's top
were the same before, between and after two copies of the newest chunk,
the two agree on every frame of the chain, and the chain's frames sit end
to end (user/target/frame_sizes.h). A thread that left and came back to
the same depth during the copy, through frames of the same sizes, is what
the second copy is for: with one, this target kept 1 to 8 mixed stacks in
3,500.

On one interpreter of each kind (LABELS), 999 Hz for SECS s (1,700-2,000 samples), with the checks of
test_frame_cache.check_alternating but counted instead of refused:
- at most ALT_UNREAD_MAX of the samples unread ([read-fault]): this target
  calls or returns every ~50 ns, far more often than real code, and the
  copies it moves through are given up (measured 0.03-1.6% on most
  interpreters, 14-23% on pyenv's 3.12.1 and Debian's PGO-built 3.11; 43-58% on
  an AMD EPYC machine, whatever the build);
- at most MIXED_MAX of them with frames of both chains (measured: none in
  ~60,000 since the newest chunk is copied twice; 0.2% before);
- every other stack one chain, in order, whole, rooted at worker(), but
  for those marked [truncated].

tests/targets/recall_chain.py tears a copy another way: its threads call
worker -> c1 -> c2 -> c3 -> leaf again every microsecond or so, always at
the same addresses, so every pass shows the same current frame and top and
the same codes and parents. A copy that spans passes holds callers of
another pass: one caught being pushed again (its line its def line, or, on
3.11/3.12, not a frame Python shows at all: the stack lost a caller), or
one whose instruction moved. test_recalled_chain_remote: every stack kept
is the chain, in order, each caller at its call line (before callers'
instructions had to agree in both copies, 3.11-3.13 kept 0.3-1.4% of
their samples torn so: 1 in ~30,000 of threads_churn.py's on 3.12); at
most UNREAD_MAX unread (measured 8-23%).

Both copies can still tear alike (CI kept worker@45, its loop's
JUMP_BACKWARD, over a live c1: 1 of 2,336). On 3.11 and 3.12 a caller
that pushed its callee itself (no C between them) must be at an
instruction that can push a frame: user/target/call_sites.h, which -v
counts ("copies torn at a caller not at a call site"). Measured here with
two `yes` loads, 10 s runs at 999 Hz, torn stacks kept per samples:
- the plain chain, before: 1 in 65,093-76,776 (3.12), 0-2 in 63,497-74,443
  (3.11); after: 0 in 98,421 (3.12, 618 copies refused) and 0 in 89,604
  (3.11, 688 refused);
- test_recalled_split_chain_remote ("split": c1..c3 return on the line
  after their call, so a caller copied at its return under a live callee,
  the commonest such tear, shows): before 18 in 54,927 (3.12) and 11 in
  57,801 (3.11); after 0 in 50,816 and 0 in 56,368 (505 and 440 refused).
  The refused copies (~0.2% of samples) were, before, kept as stacks whose
  lines looked right. With the threads stopped (--blocking: one instant),
  real_stdlib.py and real_http.py on 3.11.2, 3.11.7 and 3.12.1 asked it of
  ~96,000 callers: none refused. 3.13+ point at the current instruction
  and have no such check yet: sid's 3.13 kept 9 torn in 63,826 samples of
  the split chain (so it runs on 3.11/3.12 only: SPLIT_LABELS).

On 3.15 the remote backend uses the frame cache (issue #26 item 2: the
walk stops at the thread's anchor, last_profiled_frame, when the copy
shows it with last time's sequence, and the callers are spliced from the
cache, user/sampling/frame_cache.h); -v counts what it did:
- test_alternating_chains_remote on 3.15: most samples spliced (measured
  ~90%), and a sample [truncated] only when the cache refused to splice
  (mismatched: none measured here);
- test_alternating_hostile_remote: the target also writes its own anchor
  as a racy profiler would (alternating.py --hostile), SECS_HOSTILE s:
  still no mixed stack, and every [truncated] one a refused splice.

Issue #38 item 3: tests/targets/docutils_sections.py, docutils rendering one
60-section document again and again on sid's 3.15 (Debian's
python3-docutils), the workload on which the remote backend gave up whole
stacks ([read-fault] alone) for 2-4.5% of its samples and said "7 samples
had more than 2048 Python frames" of stacks 6-22 deep. The causes: a thread
holding still between two instructions of a call or return (the data
stack's top moved past the current frame, the frame above it not written
or its code already cleared) was judged a corrupt chain; a frame cache
mismatch (a co_version read as 0 past an interpreter link) was delivered
[truncated]. test_docutils_sections_remote, quiet and with a CPU hog
started beside it (DOC_LOADS), DOC_SECS s at 999 Hz each: fewer than
DOC_GIVEUP_MAX of the samples given up, no [truncated] stack and no "more
than N Python frames" line (docutils is never 2,048 frames deep), every
give-up counted by the summary as a torn read or an error.

Why it fails a correct build less than once in 1,000 runs: see
DOC_GIVEUP_MAX below, with the measured rates.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_remote_torn.py </dev/null
"""
import os
import re
import select
import subprocess
import sys
import time

import pytest

from lib import pyenvs
from lib.tool import binary
from lib.interps import by_label
from lib.frame_cache import CHAIN, collapsed_stacks, frame_name
from lib.procs import START_TIMEOUT, TARGETS, stage_unique

pytestmark = [pytest.mark.root, pytest.mark.slow]

HZ = 999
SECS = 2
UNREAD_MAX = 0.5
# alternating.py's copies given up: 14-23% on the machines this test was
# written on, 43-58% on an AMD EPYC one (2026-12-06; the build before issue
# #32's, 1cf3016, alike: 49% on pyenv's 3.12.1), where a system call costs
# more against the target's ~50 ns calls. Bounded still: a backend that
# gives up on nearly everything fails.
ALT_UNREAD_MAX = 0.8
# With a second writer moving the 3.15 anchor all the time (--hostile), what
# counts is that no stack is a guess; fewer copies hold still: 72-75% unread
# on this AMD EPYC machine when quiet (6 runs), 82.7% in a CI rehearsal.
HOSTILE_UNREAD_MAX = 0.95
MIXED_MAX = 0.01
# 3.13 and 3.14 have no call-site check yet (the 3.11/3.12 one above): a
# copy torn alike twice is still kept there, 1 in 2,228 samples of the plain
# chain on CI (sid's 3.13), 9 in 63,826 of the split one. Counted, and
# bounded well below the 0.3-1.4% kept before both copies had to agree.
RECALL_TORN_MAX_UNCHECKED = 0.005
# One of each kind, for the test budget (all eight passed here): Debian's
# 3.13 and 3.15 (the frame cache), pyenv's 3.11 and 3.12.
LABELS = [i.label for i in pyenvs.supported()
          if i.label in ("sid-3.13", "sid-3.15", "pyenv-3.11.7", "pyenv-3.12.1")]
SECS_HOSTILE = 3
SECS_RECALL = 2
# The split chain where the call-site check runs (3.11, 3.12); see above.
SPLIT_LABELS = [label for label in LABELS if label in ("pyenv-3.11.7", "pyenv-3.12.1")]
RECALL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets", "recall_chain.py")


def test_labels():
    assert len(LABELS) == 4, LABELS


def tally(path, period_ns):
    """(samples, unread, mixed, other bad stacks, truncated) of a collapsed
    file."""
    total = unread = mixed = truncated = 0
    bad = []
    for frames, n in collapsed_stacks(path, period_ns):
        names = [frame_name(t) for t in frames]
        total += n
        if "[read-fault]" in names:
            unread += n
            continue
        chains = [(m.group(1), int(m.group(2))) for m in map(CHAIN.fullmatch, names) if m]
        if len({c for c, _ in chains}) > 1:
            mixed += n
            continue
        nums = [k for _, k in chains]
        what = ";".join(names)
        if "[truncated]" in names:
            truncated += n
            if nums and nums != list(range(nums[0], nums[0] + len(nums))):
                bad.append(f"chain out of order: {what}")
            continue
        if nums and nums != list(range(1, len(nums) + 1)):
            bad.append(f"chain out of order or not whole: {what}")
        if nums and "worker" not in names:
            bad.append(f"stack without its root: {what}")
    return total, unread, mixed, bad, truncated


def cache_counts(err):
    """The frame cache's -v counters: {} when it printed none."""
    m = re.search(r"frame cache: (\d+) samples spliced, (\d+) walked whole, (\d+) mismatched",
                  err)
    return dict(zip(("spliced", "whole", "mismatched"), map(int, m.groups()))) if m else {}


def record_remote(t, secs):
    out = f"{t.dir}/out.folded"
    cmd = [binary(), "record", "-p", str(t.pid), "--backend", "remote", "-F", str(HZ),
           "-d", str(secs), "--format", "collapsed", "-o", out, "-v"]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=secs + 60)
    assert p.returncode == 0, f"{cmd} exited {p.returncode}: {p.stderr}"
    return out, p.stderr


def recorded(t, secs, what, unread_max=ALT_UNREAD_MAX):
    """Record @t for @secs s; the tally, checked: enough samples, no bad
    stack, unread (at most @unread_max) and mixed within bounds. Returns
    (samples, unread, truncated, frame cache counters)."""
    out, err = record_remote(t, secs)
    total, unread, mixed, bad, truncated = tally(out, 10**9 // HZ)
    fc = cache_counts(err)
    print(f"{what}: {total} samples, {unread} unread, {mixed} mixed, {truncated} truncated, "
          f"frame cache {fc}")
    # two threads, one GIL: about one running at a time (less on a busy
    # machine)
    assert total >= secs * HZ / 4, f"{total} samples: {err}"
    assert not bad, f"{len(bad)} bad stacks, first: " + "\n".join(bad[:5])
    assert unread <= total * unread_max, f"{unread} of {total} samples unread on {what}: {err}"
    assert mixed <= total * MIXED_MAX, (f"{mixed} of {total} samples hold both chains on "
                                        f"{what}: torn stacks kept")
    return total, unread, truncated, fc


@pytest.mark.parametrize("label", LABELS)
def test_alternating_chains_remote(label, target):  # noqa: F811
    py = by_label(label)
    t = target(py, "alternating.py", "--threads", "2", "--depth", "30")
    total, unread, truncated, fc = recorded(t, SECS, label)
    if py.version < (3, 15):
        assert not fc and not truncated, fc
        return
    # The cache did the work; nothing truncated but a refused splice.
    # (~90% on the first machines, 53-64% of the samples read on the EPYC
    # one, where fewer copies hold still)
    assert fc["spliced"] >= 0.3 * (total - unread), fc
    assert truncated <= fc["mismatched"] <= total * 0.01, (truncated, fc)


def call_lines(split=False):
    """recall_chain.py's callers -> the line each calls from (@split: in
    its split chain)."""
    with open(RECALL) as f:
        marks = [(m.group(1), m.group(2), n) for n, line in enumerate(f, 1)
                 for m in [re.search(r"# (CALL|SPLIT):(\w+)", line)] if m]
    lines = {name: n for tag, name, n in marks if tag == "CALL"}
    if split:
        lines.update({name: n for tag, name, n in marks if tag == "SPLIT"})
    return lines


def tally_recall(path, period_ns, split=False):
    """(samples, unread, bad stacks) of recall_chain.py's collapsed file:
    a worker's stack must be worker -> c1 -> c2 -> c3 -> leaf, or the
    start of it, each caller at its call line."""
    calls = call_lines(split)
    chain = ["worker", "c1", "c2", "c3", "leaf"]
    total = unread = 0
    bad = []
    for frames, n in collapsed_stacks(path, period_ns):
        total += n
        names = [frame_name(t) for t in frames]
        if "[read-fault]" in names:
            unread += n
            continue
        if "worker" not in names:
            continue
        mine = frames[names.index("worker"):]
        got = [(frame_name(t), int(t.rsplit(":", 1)[1])) for t in mine]
        if ([f for f, _ in got] != chain[:len(got)]
                or any(ln != calls[f] for f, ln in got[:-1])):
            bad.append(" > ".join(f"{f}@{ln}" for f, ln in got))
    return total, unread, bad


def recalled(label, target, split):
    py = by_label(label)
    t = target(py, "recall_chain.py", "4", *(["split"] if split else []))
    out, err = record_remote(t, SECS_RECALL)
    total, unread, bad = tally_recall(out, 10**9 // HZ, split)
    refused = re.search(r"(\d+) copies torn at a caller not at a call site", err)
    print(f"{label}: {total} samples, {unread} unread, {len(bad)} torn, "
          f"{refused.group(1) if refused else '-'} copies refused at a caller")
    assert total >= SECS_RECALL * HZ / 4, f"{total} samples: {err}"
    allowed = (total * RECALL_TORN_MAX_UNCHECKED if (3, 13) <= py.version[:2] < (3, 15)
               else 0)
    assert len(bad) <= allowed, (f"{len(bad)} of {total} stacks torn (at most {allowed:.0f} "
                                 f"on {label}), e.g.:\n" + "\n".join(bad[:5]))
    assert unread <= total * UNREAD_MAX, f"{unread} of {total} samples unread: {err}"


@pytest.mark.parametrize("label", LABELS)
def test_recalled_chain_remote(label, target):  # noqa: F811
    recalled(label, target, False)


@pytest.mark.parametrize("label", SPLIT_LABELS)
def test_recalled_split_chain_remote(label, target):  # noqa: F811
    recalled(label, target, True)


def test_alternating_hostile_remote(target):  # noqa: F811
    t = target(by_label("sid-3.15"), "alternating.py", "--threads", "2", "--depth", "30",
               "--hostile")
    assert t.info["hostile"], "the target could not check the 3.15 anchor protocol"
    _, _, truncated, fc = recorded(t, SECS_HOSTILE, "hostile", HOSTILE_UNREAD_MAX)
    # Never a guess: every stack whole and right, or truncated.
    assert truncated <= fc["mismatched"], (truncated, fc)


# Issue #38 item 3 (see the top): docutils_sections.py under the remote backend.
DOC_LABEL = "sid-3.15"
DOC_SECS = 6
DOC_LOADS = ("quiet", "loaded")
# Why this fails a correct build less than once in 1,000 runs. Give-ups are
# not independent: they come in spells in which the thread never holds still
# for a copy, and their rate depends on the machine's state more than on
# chance. Measured with this test's 6 s runs (~5,300-5,900 samples) on the
# 2-CPU VM it was written on: 0-0.3% in ~50 runs at loads from 1.5 to 13,
# most 0-0.1%; in one 5-minute spell of the quiet machine, with 256 copies
# a read, 0.64-1.09% (one run failed), which copies made slower on purpose
# (an extra 16-64 KB read inside each) reproduce: 0.44-0.79% at 256, and
# 0.03-0.36% at up to 1,024 (stack_read.h: what the reader allows now). At
# that worst rate a run expects ~21 give-ups against the 59 that fail; taking
# spells of ~3 samples (variance ~3x the mean), the threshold is 4.8
# standard deviations away (under 1 in 10^6), and at the usual 0-0.1% over
# 9. A machine whose copies are slower still than that spell's is the case
# this cannot vouch for: the message gives the counts to judge by.
DOC_GIVEUP_MAX = 0.01
DOC_MIN_SAMPLES = 1500


def start_docutils(py, procs, tmp_path):
    """docutils_sections.py running on @py, after its "ready" and a second
    of warm-up (its first document imports the writer)."""
    script = stage_unique(py, os.path.join(TARGETS, "docutils_sections.py"), procs)
    err_path = str(tmp_path / "docutils.stderr")
    with open(err_path, "wb") as err:
        p = subprocess.Popen(py.argv([script, str(DOC_SECS + 60)]), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    procs.items.append(p)
    line, deadline = b"", time.monotonic() + START_TIMEOUT
    while not line.endswith(b"\n") and time.monotonic() < deadline and p.poll() is None:
        if select.select([p.stdout], [], [], 0.2)[0]:
            ch = os.read(p.stdout.fileno(), 1)
            if not ch:
                break
            line += ch
    if line != b"ready\n":
        with open(err_path, "rb") as f:
            pytest.fail(f"docutils_sections.py did not print ready ({line!r}, exit "
                        f"{p.poll()}): {f.read().decode(errors='replace')[-2000:]}")
    time.sleep(1)
    return p


def tally_docutils(path, period_ns):
    """(samples, given up, [truncated] stacks, deepest Python stack, an
    example of each bad kind) of a collapsed file."""
    total = giveups = truncated = deepest = 0
    examples = {}
    for frames, n in collapsed_stacks(path, period_ns):
        py_frames = sum(f.startswith("py::") for f in frames)
        total += n
        deepest = max(deepest, py_frames)
        if "[read-fault]" in frames and not py_frames:
            giveups += n
            examples.setdefault("given up", ";".join(frames))
        if "[truncated]" in frames:
            truncated += n
            examples.setdefault("truncated", ";".join(frames))
    return total, giveups, truncated, deepest, examples


@pytest.mark.parametrize("load", DOC_LOADS)
def test_docutils_sections_remote(load, procs, tmp_path):
    py = by_label(DOC_LABEL)
    p = start_docutils(py, procs, tmp_path)
    if load == "loaded":
        # another CPU-bound process beside the target (killed with procs)
        procs.start([sys.executable, "-c", "while 1: pass"], str(tmp_path / "hog.stderr"))
    out = str(tmp_path / "out.folded")
    cmd = [binary(), "record", "-p", str(p.pid), "--backend", "remote", "-F", str(HZ),
           "-d", str(DOC_SECS), "--format", "collapsed", "-o", out, "-v"]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=DOC_SECS + 60)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}: {r.stderr}"
    assert p.poll() is None, "docutils_sections.py ended during the recording"
    total, giveups, truncated, deepest, ex = tally_docutils(out, 10**9 // HZ)
    m = re.search(r"(\d+) samples are \[read-fault\]: their thread moved", r.stderr)
    torn = int(m.group(1)) if m else 0
    m = re.search(r"(\d+) samples in [\d.]+ s .*?(\d+) truncated, (\d+) errors", r.stderr)
    errors = int(m.group(3)) if m else -1
    what = (f"{load}: {total} samples, {giveups} given up ({giveups / max(total, 1):.2%}), "
            f"{torn} counted torn, {errors} errors, {truncated} [truncated], deepest "
            f"{deepest} Python frames")
    print(what)
    assert total >= DOC_MIN_SAMPLES, f"{what}\n{r.stderr}"
    assert giveups < total * DOC_GIVEUP_MAX, f"{what}; e.g. {ex.get('given up')}\n{r.stderr}"
    # No stack that deep here: nothing cut for its depth, nothing said so.
    assert deepest < 2048 and not truncated, f"{what}; e.g. {ex.get('truncated')}"
    assert "Python frames: their outermost" not in r.stderr, f"{what}\n{r.stderr}"
    # Every give-up counted: as a torn read, or (a chain that broke at the
    # same place in every copy) an error.
    assert torn <= giveups <= errors, f"{what}\n{r.stderr}"
