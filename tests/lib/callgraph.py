"""The callgraph_split.py target and its recording (test_views_callgraph, test_blocking),
and the share check they both make."""
import json
import math
import os
import shlex

from lib.procs import TARGETS, out_path, stage_unique, stderr_of, wait_file
from lib.recorder import RECORD_SLACK, Recorder, alive


SCRIPT = os.path.join(TARGETS, "callgraph_split.py")
# ~800 samples of one busy thread, as 4 s at 199 Hz gave, in half the time
HZ = 399
SECS = 2
Z = 4.5


class Split:
    """The running target, its layout and its own timing."""

    def __init__(self, interp, popen, layout, stats_host):
        self.interp, self.popen, self.pid = interp, popen, popen.pid
        self.layout, self.stats_host = layout, stats_host
        self.file = layout["file"]

    def stats(self):
        """(hot_a, hot_b, warm, cold, rec) CPU ns so far."""
        with open(self.stats_host) as f:
            return tuple(int(x) for x in f.read().split()[1:])

    def key(self, fn):
        """The pstats key of one of its functions."""
        return (self.file, self.layout["first"][fn], fn)

    def line(self, site):
        return self.layout["sites"][site]


def start(interp, procs, tmp_path, mount_proc=False):  # noqa: F811
    """Starts the target and waits for its first cycle. mount_proc: in a
    mount namespace of its own with /proc mounted inside the sid root, so
    that CPython's own profiler can run in the root beside it."""
    script = stage_unique(interp, SCRIPT, procs)
    lay_seen, lay_host = out_path(interp, procs, tmp_path, "layout.json")
    st_seen, st_host = out_path(interp, procs, tmp_path, "stats")
    cmd = interp.argv([script, lay_seen, st_seen])
    if mount_proc and interp.root:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               f"mount -t proc proc {shlex.quote(os.path.join(interp.root, 'proc'))} && "
               f"exec {shlex.join(cmd)}"]
    p = procs.start(cmd, str(tmp_path / "target.stderr"))
    what = f"callgraph_split.py on {interp.label}"
    wait_file(p, lay_host, what)
    with open(lay_host, encoding="utf-8") as f:
        layout = json.load(f)
    assert layout["python"] == interp.version_str, layout
    wait_file(p, st_host, what)
    return Split(interp, p, layout, st_host)


def record(target, procs, tmp_path, out_name, extra=(), name="rec"):  # noqa: F811
    """Records the target for SECS into tmp_path/out_name and --raw
    tmp_path/NAME.pyprof; returns (output path, raw path, the target's own
    (hot_a, hot_b, warm, cold, rec) ns over the recording, recorder)."""
    out, raw = str(tmp_path / out_name), str(tmp_path / f"{name}.pyprof")
    rec = Recorder(procs, tmp_path, target.pid, ["-F", HZ, "-d", SECS, "-o", out, "--raw", raw]
                   + list(extra), name=name).wait_started()
    st0 = target.stats()
    rec.wait(SECS + RECORD_SLACK)
    st1 = target.stats()
    rec.check_ok()
    assert alive(target.popen), f"the target died: {stderr_of(target.popen)}"
    own = tuple(b - a for a, b in zip(st0, st1))
    assert min(own) > 0, f"the target did not cycle during the recording: {own}"
    return out, raw, own, rec


def check_share(what, got_num, got_den, own_num, own_den):
    """got_num/got_den samples against the share the target timed, within Z
    standard errors of a share of got_den samples."""
    assert got_den > 0, f"{what}: no samples"
    p = own_num / own_den
    got = got_num / got_den
    tol = Z * math.sqrt(max(p * (1 - p), 1 / got_den) / got_den)
    assert abs(got - p) <= tol, (
        f"{what}: {100 * got:.1f}% of {got_den:g} samples, the target timed {100 * p:.1f}% "
        f"(allowed {100 * tol:.1f} points)")
    return got, p
