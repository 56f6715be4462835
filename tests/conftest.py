"""The fixtures every test module may ask for (helpers are in tests/lib/)."""
import glob
import os
import re
import shutil
import stat
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lib import pyenvs  # noqa: E402
from lib.procs import Procs  # noqa: E402
from lib.formats import NODE_CACHE, ROOT, outdrv_input, run, workload  # noqa: E402
from lib.frame_cache import Target  # noqa: E402
from lib.container import SECRET_NAME  # noqa: E402


@pytest.fixture
def procs():
    ps = Procs()
    yield ps
    ps.close()


@pytest.fixture(scope="session")
def node_env():
    if not shutil.which("node"):
        pytest.fail("node is missing: run scripts/install-deps.sh")
    run([os.path.join(ROOT, "scripts", "install-consumers.sh")], timeout=600)
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_CACHE, "node_modules"))
    if not os.access(env.get("CHROMIUM", "/usr/bin/chromium"), os.X_OK):
        pytest.fail("chromium is missing: run scripts/install-deps.sh")
    return env


@pytest.fixture(scope="session")
def outdrv(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("gcc")
    if not cc:
        pytest.fail("gcc is missing: run scripts/install-deps.sh")
    exe = str(tmp_path_factory.mktemp("outdrv") / "outdrv")
    srcs = [os.path.join(ROOT, "tests", "tools", "outdrv.c")] + sorted(
        os.path.join(ROOT, "user", "output", f)
        for f in os.listdir(os.path.join(ROOT, "user", "output"))
        if re.match(r"(output.*|otlp.*|json_writer|frame_name|flamegraph_js)\.c$", f)) + sorted(
        os.path.join(ROOT, "user", "util", f)
        for f in os.listdir(os.path.join(ROOT, "user", "util")) if f.endswith(".c"))
    # pprof's and OTLP's messages: the C the build generated (make first).
    proto = os.path.join(ROOT, ".output", "proto")
    gen = sorted(glob.glob(os.path.join(proto, "**", "*.pb-c.c"), recursive=True))
    if not gen:
        pytest.fail(".output/proto has no generated .pb-c.c: run make")
    run([cc, "-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror",
         "-Wno-missing-field-initializers", "-D_GNU_SOURCE", "-Iuser", "-Ibpf",
         "-I" + proto, "-o", exe] + srcs + gen + ["-lprotobuf-c", "-lz"], cwd=ROOT)
    return exe


@pytest.fixture(scope="session")
def samples():
    return workload()


@pytest.fixture(scope="session")
def produce(outdrv, samples, tmp_path_factory):
    """produce(name, fmt=None, opts=()) -> path of the workload written as @name."""
    d = tmp_path_factory.mktemp("formats")
    data = outdrv_input(samples).encode()
    flags = {"threads": "-t", "no_lines": "-n", "comm_root": "-c"}

    def make(name, fmt=None, opts=()):
        path = str(d / name)
        cmd = [outdrv, "-o", path] + (["-f", fmt] if fmt else []) + [flags[o] for o in opts]
        run(cmd, input=data, stdin=None)
        return path
    return make


@pytest.fixture
def target():
    started = []

    def start(py, script, *args, files=()):
        t = Target(py, script, *args, files=files)
        started.append(t)
        return t
    yield start
    for t in started:
        t.stop()


@pytest.fixture(scope="module")
def host_files():
    """A root-only host file (a perf map that would name every address) and a
    host FIFO, the targets of the container's symlinks."""
    d = "/root/pyprof-hostile"
    os.makedirs(d, mode=0o700, exist_ok=True)
    secret, fifo = os.path.join(d, "secret.map"), os.path.join(d, "fifo")
    with open(secret, "w") as f:
        f.write(f"0 7fffffffffff {SECRET_NAME}\n")
    os.chmod(secret, 0o600)
    if not os.path.exists(fifo):
        os.mkfifo(fifo, 0o600)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    yield secret, fifo
    shutil.rmtree(d, ignore_errors=True)


# `make check` (PYPROF_CHECK=1): one interpreter of each kind, pyenv (a shared
# libpython), system (Debian's static 3.11) and sid (a static build in a chroot),
# instead of every one; PYPROF_CHECK_INTERPS names another choice.
CHECK_INTERPS = os.environ.get("PYPROF_CHECK_INTERPS", "pyenv-3.12.1,system-3.11,sid-3.15")


def interp_labels(item):
    """The interpreter labels a test's parameters name (an Interp or its label)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return set()
    known = {i.label for i in pyenvs.load()}
    out = set()
    for v in callspec.params.values():
        label = v.label if isinstance(v, pyenvs.Interp) else v
        if isinstance(label, str) and label in known:
            out.add(label)
    return out


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYPROF_CHECK") != "1":
        return
    keep = set(CHECK_INTERPS.split(","))
    chosen, dropped = [], []
    for item in items:
        (dropped if interp_labels(item) - keep else chosen).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = chosen
