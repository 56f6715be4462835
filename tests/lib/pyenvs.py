"""The test interpreters, as provisioned by scripts/provision-pythons.sh.

Each line of $PYPROF_CACHE/pythons.txt is "label<TAB>launcher", where the
launcher is a path, or "chroot:ROOT:/usr/bin/pythonX.Y" for an interpreter in
the Debian sid root. A chroot target sees only files inside ROOT, so scripts
are staged into ROOT/tmp/pyprof-tests/ and the path it sees is returned.
"""
import os
import shutil
import subprocess
import functools

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
LIST = os.path.join(CACHE, "pythons.txt")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# PYPROF_BINARY (or PYPROF_BPF_BINARY, the name some modules read before tests/lib/)
# runs every test with another build (e.g. .output/san/pyprof-bpf).
BINARY = (os.environ.get("PYPROF_BINARY") or os.environ.get("PYPROF_BPF_BINARY")
          or os.path.join(REPO, "pyprof-bpf"))


class Interp:
    def __init__(self, label, launcher):
        self.label = label
        if launcher.startswith("chroot:"):
            _, self.root, self.exe = launcher.split(":", 2)
        else:
            self.root, self.exe = None, launcher

    def __repr__(self):
        return self.label

    @functools.cached_property
    def version(self):
        out = subprocess.run(self.argv(["-c", "import sys; print(*sys.version_info[:3])"]),
                             capture_output=True, text=True, check=True, timeout=60)
        return tuple(int(x) for x in out.stdout.split())

    @property
    def version_str(self):
        return ".".join(map(str, self.version))

    def argv(self, args, pidns=False):
        """The command line that runs this interpreter with args. pidns=True
        runs it in a new PID namespace (unshare --pid --fork --mount-proc)."""
        cmd = [self.exe] + list(args)
        if self.root:
            cmd = ["chroot", self.root] + cmd
        if pidns:
            cmd = ["unshare", "--pid", "--fork", "--mount-proc"] + cmd
        return cmd

    def stage(self, path):
        """Make a file visible to the interpreter; returns the path it sees."""
        if not self.root:
            return os.path.abspath(path)
        d = os.path.join(self.root, "tmp", "pyprof-tests")
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, os.path.basename(path))
        shutil.copyfile(path, dst)
        return os.path.join("/tmp/pyprof-tests", os.path.basename(path))

    def host_path(self, seen_path):
        """The host path of a file the interpreter sees as seen_path."""
        return os.path.join(self.root, seen_path.lstrip("/")) if self.root else seen_path


def load():
    if not os.path.exists(LIST):
        raise RuntimeError(f"{LIST} is missing: run scripts/provision-pythons.sh")
    out = []
    with open(LIST) as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                label, launcher = line.split("\t", 1)
                out.append(Interp(label, launcher))
    return out


def supported():
    """Interpreters pyprof-bpf supports (3.11+)."""
    return [i for i in load() if i.version >= (3, 11)]


def unsupported():
    return [i for i in load() if i.version < (3, 11)]


def leaf_pid(pid):
    """With unshare --fork the Python process is a child of unshare: follow
    single-child chains down to the process that runs Python."""
    for _ in range(5):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = f.read().split()
        except OSError:
            return pid
        if len(kids) != 1:
            return pid
        comm = open(f"/proc/{pid}/comm").read().strip()
        if comm.startswith("python"):
            return pid
        pid = int(kids[0])
    return pid
