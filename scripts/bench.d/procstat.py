"""What the benchmark reads about processes: CPU time, memory, and the run time
of the BPF programs a process holds.

CPU time comes from /proc/PID/task/*/schedstat (nanoseconds, every live
thread) while a process runs, and from wait4()'s rusage (utime + stime of the
process and of the children it waited for) once it has exited.

BPF run time: statistics are switched on with BPF_ENABLE_STATS, which returns
a file descriptor; they stay on while any such descriptor is open (the
reference-counted form of `sysctl kernel.bpf_stats_enabled=1`: it does not
fight another user of the sysctl, and it ends with this process). The
programs of a profiler are found through its own descriptors
(/proc/PID/fdinfo/*: "prog_id:" of bpf-prog and bpf_link descriptors), and
held here with BPF_PROG_GET_FD_BY_ID, so their final run_time_ns can still be
read from /proc/self/fdinfo after the profiler has exited.
"""
import ctypes
import json
import os
import re
import subprocess
import threading

SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
BPF_PROG_GET_FD_BY_ID = 13
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BenchError(Exception):
    """An error of the benchmark itself (not a profiler's result)."""


def _bpf(cmd, words):
    attr = (ctypes.c_uint32 * 32)(*words)      # 128 zeroed bytes of union bpf_attr
    fd = _libc.syscall(ctypes.c_long(SYS_BPF), ctypes.c_long(cmd),
                       ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


class BpfStats:
    """Keeps kernel BPF run-time statistics on while open."""

    def __init__(self):
        self.fd = None
        self.sysctl_old = None
        self.how = None

    def __enter__(self):
        if SYS_BPF is None:
            raise BenchError("BPF statistics: unsupported architecture %s" % os.uname().machine)
        try:
            self.fd = _bpf(BPF_ENABLE_STATS, [BPF_STATS_RUN_TIME])
            self.how = "BPF_ENABLE_STATS (held for the whole run)"
        except OSError as e:
            # Kernels before 5.8: the global sysctl, restored on exit.
            path = "/proc/sys/kernel/bpf_stats_enabled"
            try:
                with open(path) as f:
                    self.sysctl_old = f.read().strip()
                with open(path, "w") as f:
                    f.write("1")
            except OSError as e2:
                raise BenchError("cannot enable BPF statistics: BPF_ENABLE_STATS: %s; %s: %s"
                                 % (e.strerror, path, e2.strerror))
            self.how = "sysctl kernel.bpf_stats_enabled=1 (BPF_ENABLE_STATS: %s)" % e.strerror
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
        if self.sysctl_old is not None:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(self.sysctl_old)


def _fdinfo(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


class BpfPrograms:
    """The BPF programs a process holds, kept alive by our own descriptors."""

    def __init__(self, pid):
        self.pid = pid
        self.fds = {}          # prog_id -> our fd
        self.lock = threading.Lock()

    def scan(self):
        """Finds the process's programs not seen yet; returns how many it holds."""
        with self.lock:
            return self._scan()

    def _scan(self):
        d = "/proc/%d/fd" % self.pid
        try:
            names = os.listdir(d)
        except OSError:
            return len(self.fds)
        for n in names:
            try:
                target = os.readlink(os.path.join(d, n))
            except OSError:
                continue
            if not target.startswith("anon_inode:bpf"):
                continue
            pid_ = _fdinfo("/proc/%d/fdinfo/%s" % (self.pid, n)).get("prog_id")
            if not pid_ or int(pid_) in self.fds:
                continue
            try:
                self.fds[int(pid_)] = _bpf(BPF_PROG_GET_FD_BY_ID, [int(pid_), 0, 0])
            except OSError:
                pass            # unloaded meanwhile
        return len(self.fds)

    def totals(self):
        """(run_time_ns, run_cnt) summed over the programs held."""
        ns = cnt = 0
        with self.lock:
            fds = list(self.fds.values())
        for fd in fds:
            info = _fdinfo("/proc/self/fdinfo/%d" % fd)
            ns += int(info.get("run_time_ns", 0))
            cnt += int(info.get("run_cnt", 0))
        return ns, cnt

    def names(self):
        """The programs' names, from bpftool (for the report only)."""
        out = set()
        for prog_id in self.fds:
            try:
                r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)],
                                   capture_output=True, text=True, timeout=10)
                out.add(json.loads(r.stdout).get("name", "?"))
            except (OSError, ValueError, subprocess.SubprocessError):
                out.add("?")
        return sorted(out)

    def close(self):
        with self.lock:
            for fd in self.fds.values():
                os.close(fd)
            self.fds = {}


def cpu_ns(pid):
    """CPU time of every live thread of pid, in ns (None once it is gone)."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for t in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def status(pid):
    """VmRSS and VmHWM of pid in kB ({} once it is gone)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                m = re.match(r"(VmRSS|VmHWM):\s+(\d+) kB", line)
                if m:
                    out[m.group(1)] = int(m.group(2))
    except OSError:
        pass
    return out


def perf_event_fds(pid):
    """How many perf event descriptors pid holds (0 once it is gone)."""
    d = "/proc/%d/fd" % pid
    n = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        try:
            if os.readlink(os.path.join(d, name)) == "anon_inode:[perf_event]":
                n += 1
        except OSError:
            pass
    return n


def ctx_switches(pid):
    """Voluntary + involuntary context switches of every live thread of pid."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for t in tids:
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                for line in f:
                    if "ctxt_switches:" in line:    # voluntary_ and nonvoluntary_
                        total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return total


def thread_count(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return 0
