"""The profilers the benchmark runs, and the interpreters they run against.

Each profiler names its target interpreter (the workload runs there, and so
does its unprofiled twin), how it counts samples, and how to read the number
of samples it delivered from what it leaves behind.

clock "cpu": samples are taken while a thread runs on a CPU (pyprof-bpf's BPF
backend, perf's cpu-clock event): the asked rate applies per CPU-second of the
target, so the samples expected are rate x the target's CPU seconds.
clock "wall": every thread is sampled on every tick (pyprof-bpf's remote
backend, CPython's profiling.sampling -a, austin): expected = rate x duration
x threads. Either way a "sample" is one thread's stack.
"""
import os
import re
import shlex
import shutil
import subprocess

import procstat

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
SID = os.path.join(CACHE, "sid")
PEERS = os.environ.get("PYPROF_PEERS", os.path.join(CACHE, "peers"))
PYENV_313 = os.path.expanduser("~/.pyenv/versions/3.13.0/bin/python3")
AUSTIN = os.path.join(PEERS, "austin/usr/bin/austin")
# austin is built against sid's libc (newer than the host's): run it on the host
# with sid's loader and libraries. It does not recognize the sid root's static
# python3.13 as Python (neither from the host nor from inside the root, and it
# spends minutes trying), so its target is pyenv's 3.13.0 (shared libpython).
AUSTIN_RUN = [os.path.join(SID, "lib64/ld-linux-x86-64.so.2"), "--library-path",
              "%s/lib/x86_64-linux-gnu:%s/usr/lib/x86_64-linux-gnu" % (SID, SID), AUSTIN]


class Target:
    """An interpreter to run the workload in.

    mountns: start it in a private mount namespace with /proc mounted inside
    the sid root, so a profiler that runs in the root (CPython's own) can join
    that namespace with nsenter and find everything by the paths it sees.
    Nothing is mounted in the host's namespace; the mount dies with the last
    process in the namespace.
    """

    def __init__(self, key, label, argv, chroot, mountns=False):
        self.key, self.label, self.argv, self.chroot, self.mountns = \
            key, label, argv, chroot, mountns

    def exists(self):
        exe = self.argv[0]
        return os.access(os.path.join(SID, exe.lstrip("/")) if self.chroot else exe, os.X_OK)

    def command(self, args):
        if not self.chroot:
            return self.argv + args
        cmd = ["chroot", SID] + self.argv + args
        if self.mountns:
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   "mount -t proc proc %s/proc && exec %s" % (shlex.quote(SID), shlex.join(cmd))]
        return cmd


TARGETS = {
    "sid-3.15": Target("sid-3.15", "3.15 (sid)", ["/usr/bin/python3.15"], True),
    "sid-3.15-ns": Target("sid-3.15-ns", "3.15 (sid)", ["/usr/bin/python3.15"], True,
                          mountns=True),
    "sid-3.14": Target("sid-3.14", "3.14 (sid)", ["/usr/bin/python3.14"], True),
    "sid-3.13": Target("sid-3.13", "3.13 (sid)", ["/usr/bin/python3.13"], True),
    "sid-3.14-perf": Target("sid-3.14-perf", "3.14 -X perf (sid)",
                            ["/usr/bin/python3.14", "-X", "perf"], True),
    "pyenv-3.13.0": Target("pyenv-3.13.0", "3.13.0 (pyenv)", [PYENV_313], False),
}


class Failed(Exception):
    """The profiler ran but did not do what was asked (a result, not an error
    of the benchmark)."""


class Run:
    """What one profiler run needs: the target pid, the rate, the duration,
    a work directory (host path, and the same seen from the sid root), and
    the workload's kind (workload.py: spin, or a churn)."""

    def __init__(self, pid, rate, duration, work_host, work_root, kind="spin"):
        self.pid, self.rate, self.duration = pid, rate, duration
        self.work_host, self.work_root = work_host, work_root
        self.kind = kind


class Profiler:
    key = label = None
    target = None
    clock = "wall"
    bpf = False                 # add the run time of its BPF programs
    notes = ""
    ends_after_duration = False # its sampling ends exactly `duration` after it starts
    start_visible = False       # sampling_started() works for it
    # clock "wall" but only threads on a CPU are sampled: expected = rate x
    # duration x the target's cores over the measured window
    expected_by_cpu = False

    def sampling_started(self, watcher):
        """Polled while it runs: has it started sampling? (needed for clock "cpu")"""
        return False

    def sampling_ended(self, watcher, now):
        """Polled once it has started: has it stopped sampling?"""
        return False

    def unavailable(self):
        """None when it can run here, else why not."""
        return None

    def command(self, run):
        raise NotImplementedError

    def parse(self, run, stderr):
        """{"samples": N, plus what else it reports}; raises Failed when the
        profiler did not do what was asked, ValueError when its output does
        not have the expected shape (an error of the benchmark)."""
        raise NotImplementedError


# The churn cells' (and their steady reference's) options: per-thread events,
# so that the BPF program runs on the target's ticks only (per-CPU events run
# it on every task's, and a churn leaves the CPU to others more than a steady
# spin: its BPF time per sample would count those); --threads, to tell whose
# samples they are.
CHURN_ARGS = ["--events", "thread", "--threads"]


class PyprofBpf(Profiler):
    """pyprof-bpf: the build under test, or (key, label given) another build
    of it, e.g. the baseline. tree: the source tree it was built from (its
    bpf/pyprof.h names the BPF counters)."""

    def __init__(self, binary, backend, target="sid-3.15", extra=(), key=None, label=None,
                 tree=None):
        self.binary, self.backend, self.extra = binary, backend, list(extra)
        self.key = key or "pyprof-" + backend
        self.label = label or "pyprof-bpf (%s)" % ("BPF" if backend == "bpf" else "remote")
        self.tree = tree
        self.target = TARGETS[target]
        self.clock = "cpu" if backend == "bpf" else "wall"
        self.bpf = backend == "bpf"
        self.ends_after_duration = True
        self.start_visible = True

    def sampling_started(self, watcher):
        # printed just before its sampling loop starts its clock
        return re.search(r"pyprof-bpf: sampling process \d+", watcher.log_text()) is not None

    def sampling_ended(self, watcher, now):
        if now < watcher.t_start + watcher.duration:
            return False
        if self.backend != "bpf":
            return True
        # Its perf events may stay open (and sample) after its duration, while
        # it drains the ring and writes its output: sampling ends when they close.
        return procstat.perf_event_fds(watcher.pid) == 0

    def unavailable(self):
        if not os.access(self.binary, os.X_OK):
            return "%s is missing (run make)" % self.binary
        return None

    def command(self, run):
        return [self.binary, "-p", str(run.pid), "-F", str(run.rate), "-d", str(run.duration),
                "-o", os.path.join(run.work_host, "out.folded"), "--format", "collapsed",
                "--backend", self.backend] + self.extra + \
            (CHURN_ARGS if run.kind != "spin" else self.same_events(run.rate))

    def same_events(self, rate):
        """Unless the options name them, the events the build under test's
        `--events auto` picks at this rate (user/sampling/bpf/lifecycle.c: per CPU up to 1 kHz
        and CPUs x rate <= 200,000), named, so that an older build (issue #9's
        baseline, whose auto rule differs) samples with the same events."""
        if not self.bpf or "--events" in self.extra or \
                any(a.startswith("--events=") for a in self.extra):
            return []
        per_cpu = rate <= 1000 and (os.cpu_count() or 1) * rate <= 200000
        return ["--events", "cpu" if per_cpu else "thread"]

    def parse(self, run, stderr):
        want = "with the %s backend" % ("BPF" if self.backend == "bpf" else "remote")
        if want not in stderr:
            m = re.search(r"pyprof-bpf: cannot use BPF \((.*?)\)", stderr)
            raise Failed("did not sample %s%s" % (want, ": " + m.group(1) if m else ""))
        m = re.search(r"(\d+) samples in ([\d.]+) s .*?, (\d+) lost, (\d+) truncated, "
                      r"(\d+) errors, (\d+) unresolved", stderr)
        if not m:
            raise ValueError("no final statistics line from pyprof-bpf")
        keys = ("samples", "seconds", "lost", "truncated", "errors", "unresolved")
        out = {k: (float(v) if k == "seconds" else int(v)) for k, v in zip(keys, m.groups())}
        return out


class CPython315(Profiler):
    key = "cpython-3.15"
    label = "CPython 3.15 profiling.sampling"
    target = TARGETS["sid-3.15-ns"]
    clock = "wall"

    def unavailable(self):
        if not self.target.exists():
            return "no python3.15 in %s (run scripts/provision-pythons.sh)" % SID
        if not shutil.which("nsenter") or not shutil.which("unshare"):
            return "nsenter/unshare missing (util-linux)"
        r = subprocess.run(["chroot", SID, "/usr/bin/python3.15", "-c",
                            "import profiling.sampling"], capture_output=True, text=True)
        if r.returncode:
            why = (r.stderr.strip().splitlines() or ["?"])[-1]
            return "python3.15 -m profiling.sampling: " + why
        return None

    def command(self, run):
        return ["nsenter", "--mount=/proc/%d/ns/mnt" % run.pid, "--", "chroot", SID,
                "/usr/bin/python3.15", "-m", "profiling.sampling", "attach", "-a",
                "-r", str(run.rate), "-d", str(run.duration), "--collapsed",
                "-o", os.path.join(run.work_root, "out.folded"), str(run.pid)]

    def parse(self, run, stderr):
        path = os.path.join(run.work_host, "out.folded")
        total = 0
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    total += int(line.rsplit(" ", 1)[1])
        m = re.search(r"Captured (\d+) samples", stderr)
        if not m:
            raise ValueError("no 'Captured N samples' line from profiling.sampling")
        return {"samples": total, "ticks": int(m.group(1))}


class CPython315Cpu(CPython315):
    """The same profiler in --mode cpu: it still reads every thread on every
    tick but keeps only the threads on a CPU, so its samples are what a
    CPU-time sampler's are (the like-for-like row for pyprof-bpf's BPF
    backend). Its expected count is rate x the target's CPU seconds, taken
    over the measured window (the profiler does not say when it starts)."""
    key = "cpython-3.15-cpu"
    label = "CPython 3.15 profiling.sampling --mode cpu"
    expected_by_cpu = True

    def command(self, run):
        cmd = super().command(run)
        i = cmd.index("attach") + 1
        return cmd[:i] + ["--mode", "cpu"] + cmd[i:]


class Austin(Profiler):
    key = "austin"
    label = "austin 3.7"
    target = TARGETS["pyenv-3.13.0"]
    clock = "wall"

    def unavailable(self):
        if not self.target.exists():
            return "no CPython 3.13 target at %s (austin 3.7 reads up to 3.13)" % PYENV_313
        if not os.access(AUSTIN, os.X_OK):
            return "%s is missing (run scripts/install-peers.sh)%s" % (AUSTIN,
                                                                       _install_note("austin"))
        r = subprocess.run(AUSTIN_RUN + ["--version"], capture_output=True, text=True)
        if r.returncode:
            return "austin does not run: " + (r.stderr.strip() or r.stdout.strip())[:200]
        return None

    def command(self, run):
        interval = max(1, round(1e6 / run.rate))
        # -o /dev/null: austin writes every sample as a line (no aggregation);
        # 1,000-deep stacks from 32 threads would write gigabytes. It still
        # formats them; its statistics on stderr count the samples.
        return AUSTIN_RUN + ["-i", "%dus" % interval, "-x", str(run.duration),
                             "-p", str(run.pid), "-o", "/dev/null"]

    def parse(self, run, stderr):
        plain = re.sub(r"\x1b\[[0-9;]*m", "", stderr)
        m = re.search(r"Error rate\s*:\s*(\d+)/(\d+)", plain)
        if not m:
            raise ValueError("no 'Error rate : E/N' statistics from austin")
        return {"samples": int(m.group(2)), "errors": int(m.group(1))}


class Perf(Profiler):
    key = "perf"
    label = "perf record -g"
    target = TARGETS["sid-3.14-perf"]
    clock = "cpu"
    notes = "its in-kernel sampling cost is paid in the target's context (see throughput)"
    start_visible = True

    def unavailable(self):
        if not self.target.exists():
            return "no python3.14 in %s" % SID
        if not shutil.which("perf"):
            return "perf is not installed (linux-perf)%s" % _install_note("perf")
        r = subprocess.run(["perf", "--version"], capture_output=True, text=True)
        if r.returncode:
            return "perf does not run: " + (r.stderr.strip() or r.stdout.strip())[:200]
        return None

    # perf forks its workload (sleep) first, and lets it exec only once the
    # events are enabled; they are disabled when it exits.
    @staticmethod
    def _sleep_child(pid):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
        except OSError:
            return None
        for k in kids:
            try:
                with open("/proc/%s/stat" % k) as f:
                    st = f.read()
            except OSError:
                continue
            comm = st[st.index("(") + 1:st.rindex(")")]
            state = st[st.rindex(")") + 2:].split()[0]
            if comm == "sleep" and state != "Z":
                return int(k)
        return None

    def sampling_started(self, watcher):
        return self._sleep_child(watcher.pid) is not None

    def sampling_ended(self, watcher, now):
        return self._sleep_child(watcher.pid) is None

    def command(self, run):
        return ["perf", "record", "-e", "cpu-clock", "-F", str(run.rate), "-g",
                "-p", str(run.pid), "-o", os.path.join(run.work_host, "perf.data"),
                "--", "sleep", str(run.duration)]

    def parse(self, run, stderr):
        m = re.search(r"perf record: Captured and wrote .*\((\d+) samples\)", stderr)
        if not m:
            raise ValueError("no 'Captured and wrote ... (N samples)' line from perf record")
        lost = re.search(r"lost (\d+) chunks", stderr)
        return {"samples": int(m.group(1)), "lost": int(lost.group(1)) if lost else 0}


def _install_note(name):
    try:
        with open(os.path.join(PEERS, "status")) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("\t")
                if k == name and v.startswith("unavailable"):
                    return "; install-peers: " + v
    except OSError:
        pass
    return ""


BASELINE = "pyprof-baseline"


def all_profilers(binary, pyprof_target="sid-3.15", pyprof_extra=(), tree=None, baseline=None):
    """baseline: (binary, its tree, its name) of an older build of pyprof-bpf,
    run like the BPF backend of the one under test."""
    out = [PyprofBpf(binary, "bpf", pyprof_target, pyprof_extra, tree=tree)]
    if baseline:
        bbin, btree, bname = baseline
        out.append(PyprofBpf(bbin, "bpf", pyprof_target, pyprof_extra, key=BASELINE,
                             label="pyprof-bpf baseline (%s)" % bname, tree=btree))
    return out + [PyprofBpf(binary, "remote", pyprof_target, pyprof_extra, tree=tree),
                  CPython315(), CPython315Cpu(), Austin(), Perf()]
