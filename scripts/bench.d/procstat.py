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
read from /proc/self/fdinfo after the profiler has exited. Its per-CPU map
named `counters` (enum pyprof_counter in bpf/pyprof.h) is held the same way
(BPF_MAP_GET_FD_BY_ID) and read with BPF_MAP_LOOKUP_ELEM, summed over CPUs.
"""
import ctypes
import json
import os
import re
import subprocess
import threading
import time

SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
BPF_MAP_LOOKUP_ELEM = 1
BPF_PROG_GET_FD_BY_ID = 13
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_MAP_TYPE_PERCPU_ARRAY = 6
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


def _ptr(buf):
    a = ctypes.addressof(buf)
    return [a & 0xFFFFFFFF, a >> 32]


def possible_cpus():
    n = 0
    with open("/sys/devices/system/cpu/possible") as f:
        for part in f.read().strip().split(","):
            lo, _, hi = part.partition("-")
            n += int(hi or lo) - int(lo) + 1
    return n


def _map_info(fd):
    """(type, value_size, max_entries, name) of a map descriptor."""
    info = (ctypes.c_uint32 * 20)()            # struct bpf_map_info's head (80 bytes)
    _bpf(BPF_OBJ_GET_INFO_BY_FD, [fd, ctypes.sizeof(info)] + _ptr(info))
    name = bytes(info)[24:40].split(b"\0")[0].decode(errors="replace")
    return info[0], info[3], info[4], name


def _prog_name(fd):
    """A program descriptor's name (struct bpf_prog_info's name, at byte 64)."""
    info = (ctypes.c_uint32 * 20)()            # struct bpf_prog_info's head (80 bytes)
    try:
        _bpf(BPF_OBJ_GET_INFO_BY_FD, [fd, ctypes.sizeof(info)] + _ptr(info))
    except OSError:
        return "?"
    return bytes(info)[64:80].split(b"\0")[0].decode(errors="replace") or "?"


class BpfPrograms:
    """The BPF programs a process holds, kept alive by our own descriptors;
    and its `counters` map, when it has one."""

    def __init__(self, pid):
        self.pid = pid
        self.fds = {}          # prog_id -> our fd
        self.maps_seen = set()
        self.counters_fd = None
        self.counters_n = 0
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
            if target == "anon_inode:bpf-map":
                self._scan_map(n)
                continue
            pid_ = _fdinfo("/proc/%d/fdinfo/%s" % (self.pid, n)).get("prog_id")
            if not pid_ or int(pid_) in self.fds:
                continue
            try:
                self.fds[int(pid_)] = _bpf(BPF_PROG_GET_FD_BY_ID, [int(pid_), 0, 0])
            except OSError:
                pass            # unloaded meanwhile
        return len(self.fds)

    def _scan_map(self, n):
        if self.counters_fd is not None:
            return
        map_id = _fdinfo("/proc/%d/fdinfo/%s" % (self.pid, n)).get("map_id")
        if not map_id or int(map_id) in self.maps_seen:
            return
        self.maps_seen.add(int(map_id))
        try:
            fd = _bpf(BPF_MAP_GET_FD_BY_ID, [int(map_id), 0, 0])
        except OSError:
            return
        try:
            mtype, vsize, entries, name = _map_info(fd)
        except OSError:
            os.close(fd)
            return
        if name == "counters" and mtype == BPF_MAP_TYPE_PERCPU_ARRAY and vsize == 8:
            self.counters_fd, self.counters_n = fd, entries
        else:
            os.close(fd)

    def counters(self):
        """The counters map's values summed over CPUs (a list, by index), or
        None when the process has none."""
        with self.lock:
            fd, n = self.counters_fd, self.counters_n
            if fd is None:
                return None
            ncpu = possible_cpus()
            key = ctypes.c_uint32()
            vals = (ctypes.c_uint64 * ncpu)()
            out = []
            for i in range(n):
                key.value = i
                _bpf(BPF_MAP_LOOKUP_ELEM, [fd, 0] + _ptr(key) + _ptr(vals) + [0, 0])
                out.append(sum(vals))
            return out

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

    def per_program(self):
        """{name: (run_time_ns, run_cnt)} of the programs held (names from
        BPF_OBJ_GET_INFO_BY_FD; programs of the same name summed)."""
        out = {}
        with self.lock:
            fds = list(self.fds.values())
        for fd in fds:
            info = _fdinfo("/proc/self/fdinfo/%d" % fd)
            name = _prog_name(fd)
            ns, cnt = out.get(name, (0, 0))
            out[name] = (ns + int(info.get("run_time_ns", 0)), cnt + int(info.get("run_cnt", 0)))
        return out

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
            if self.counters_fd is not None:
                os.close(self.counters_fd)
                self.counters_fd = None


def counter_names(header):
    """enum pyprof_counter's names by index, from a tree's bpf/pyprof.h
    (PYPROF_CNT_LOOKUPS -> "lookups"); [] when it cannot be read."""
    try:
        with open(header) as f:
            text = f.read()
    except OSError:
        return []
    m = re.search(r"enum pyprof_counter\s*\{(.*?)\};", text, re.S)
    if not m:
        return []
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    names = []
    for item in body.split(","):
        item = item.strip()
        mm = re.match(r"PYPROF_CNT_(\w+)(\s*=\s*(\d+))?$", item)
        if not mm or mm.group(1) == "NR":
            continue
        if mm.group(3) and int(mm.group(3)) != len(names):
            return []
        names.append(mm.group(1).lower())
    return names


def cpu_ns(pid):
    """CPU time of pid, in ns (None once it is gone): its process CPU clock
    (CLOCK_PROCESS_CPUTIME_ID of another process: exited threads included,
    which a churn of short-lived threads needs), else the sum over its live
    threads."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)    # MAKE_PROCESS_CPUCLOCK(pid, SCHED)
    except OSError:
        if not os.path.exists("/proc/%d" % pid):
            return None
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
