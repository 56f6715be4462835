"""A target in a hostile container root (test_hostile_root, test_views_html): the
container, an inotify watch on host files, the secret a leak would show."""
import ctypes
import os
import shutil
import signal
import subprocess

from lib import pyenvs


SID_INTERPS = [i for i in pyenvs.supported() if i.root]
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
TARGET = os.path.join(HERE, "targets", "hostile_root.py")
SECRET_NAME = "HOSTSECRET"


IN_OPEN, IN_ACCESS = 0x20, 0x01


class Inotify:
    """Opens of the watched host files, read without blocking."""

    def __init__(self, paths):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        for p in paths:
            wd = self.libc.inotify_add_watch(self.fd, p.encode(), IN_OPEN | IN_ACCESS)
            assert wd >= 0, f"inotify_add_watch {p}: {os.strerror(ctypes.get_errno())}"

    def events(self):
        try:
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return b""

    def close(self):
        os.close(self.fd)


class Container:
    """interp's root as the lower layer of an overlay mounted in a new mount
    namespace: the target may replace any file of its root (its /usr/bin
    too) without touching the shared sid root."""

    def __init__(self, interp, tmp_path, variant, secs, secret, fifo):
        self.dir = tmp_path / "ovl"
        for sub in ("upper/tmp", "work", "merged"):
            (self.dir / sub).mkdir(parents=True)
        shutil.copyfile(TARGET, self.dir / "upper/tmp/hostile_root.py")
        d = self.dir
        script = (f"mount -t overlay overlay -o lowerdir={interp.root},upperdir={d}/upper,"
                  f"workdir={d}/work {d}/merged && mount -t proc proc {d}/merged/proc && "
                  f"exec chroot {d}/merged {interp.exe} -X perf /tmp/hostile_root.py "
                  f"{variant} {secs} {secret} {fifo}")
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private",
                                      "sh", "-c", script], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), f"target did not start: {line!r} {self.proc.stderr.read()}"
        self.pid = int(line.split()[1])
        assert self.pid == self.proc.pid    # unshare, sh and chroot exec in turn

    def finish(self):
        """Ends the target (it runs for secs at most) and waits for it."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGUSR1)
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err
