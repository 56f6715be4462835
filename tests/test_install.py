"""Shipping pyprof-bpf (issue #14): `make install`/`uninstall`, the man page
and --help kept in step, bash completion, `--version`, the release binary (run
in a minimal Debian root that has no build tools, no -dev package, no libbpf,
no libcurl), the .deb (dpkg -i into such a root), and the capabilities a
non-root user needs. The agent as a service (issue #21): its systemd unit and
settings installed and packaged, the unit checked by systemd-analyze, and the
agent run with exactly the unit's capabilities and mounts.

The minimal root is scripts/provision-minbase.sh's (debootstrap
--variant=minbase, cached under /var/cache/pyprof-bpf/); each test runs in a
throw-away overlay on top of it, with /proc and /sys mounted, all inside a
mount namespace of its own (unshare --mount), so no mount outlives the test
whatever way it ends. Targets are Python processes on the host: the chrooted
pyprof-bpf reads them through /proc/PID/root.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v tests/test_install.py </dev/null
"""
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from lib import pyenvs

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

REPO = pyenvs.REPO
BINARY = os.environ.get("PYPROF_BPF_BINARY", pyenvs.BINARY)
MAN = os.path.join(REPO, "man", "pyprof-bpf.1")
COMPLETION = os.path.join(REPO, "completion", "pyprof-bpf.bash")
AGENT_UNIT = os.path.join(REPO, "packaging", "pyprof-bpf-agent.service")
AGENT_DEFAULTS = os.path.join(REPO, "packaging", "pyprof-bpf-agent.default")
COMMANDS = ["record", "report", "dump", "top", "agent"]
# The man page's option sections, per command.
MAN_SECTIONS = {
    "record": ["RECORD OPTIONS", "OUTPUT OPTIONS", "COMMON OPTIONS"],
    "report": ["REPORT OPTIONS", "OUTPUT OPTIONS", "COMMON OPTIONS"],
    "dump": ["DUMP OPTIONS", "COMMON OPTIONS"],
    "top": ["RECORD OPTIONS", "TOP OPTIONS", "COMMON OPTIONS"],
    "agent": ["RECORD OPTIONS", "AGENT OPTIONS", "COMMON OPTIONS"],
}
CAPS = ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE"]
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
RECORD_SECS = 2
TIMEOUT = 120

TARGET = r'''
import sys


def install_leaf():
    x = 0
    for i in range(20000):
        x += i * i
    return x


def install_outer():
    with open(sys.argv[1], "w") as f:
        f.write("ready")
    while True:
        install_leaf()


install_outer()
'''


def run(argv, timeout=TIMEOUT, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(argv, timeout=timeout, **kw)


def show(p):
    return (f"$ {shlex.join(p.args) if isinstance(p.args, list) else p.args}\n"
            f"exit {p.returncode}\n--- stderr ---\n{p.stderr}--- stdout ---\n{p.stdout[:3000]}")


def make(*targets, **variables):
    argv = ["make", "-C", REPO, "--no-print-directory"] + list(targets)
    argv += [f"{k}={v}" for k, v in variables.items()]
    p = run(argv, timeout=600)
    assert p.returncode == 0, show(p)
    return p


def makefile_version():
    with open(os.path.join(REPO, "Makefile")) as f:
        return re.search(r"^VERSION\s*:=\s*(\S+)", f.read(), re.M).group(1)


# --------------------------------------------------------------------------
# --help, parsed


def help_text(cmd, binary=BINARY):
    p = run([binary, cmd, "--help"], timeout=30)
    assert p.returncode == 0, show(p)
    return p.stdout


def help_options(cmd, binary=BINARY):
    """{option: argument or None} of `pyprof-bpf CMD --help` (argp's layout,
    exactly: '  -p, --pid=PID   text' or '      --json   text'; an example
    line of the text after them is indented otherwise)."""
    out = {}
    for line in help_text(cmd, binary).splitlines():
        m = re.match(r"^(?:  (-[^-\s]), |      )(--[a-z][a-z0-9-]*)(?:=(\S+))?", line)
        if m:
            short, long, arg = m.groups()
            out[long] = arg
            if short:
                out[short] = arg
    assert "--help" in out and "--version" in out, f"{cmd} --help not parsed: {out}"
    return out


def help_formats(cmd):
    """The format names of the 'Formats:' paragraph of CMD --help."""
    text = " ".join(help_text(cmd).split())
    m = re.search(r"Formats: (.*?);", text)
    assert m, f"no 'Formats: ...;' in {cmd} --help"
    # A format's note in parentheses ("(default)", "(a timeline for Perfetto)")
    # is not its name.
    names = re.sub(r"\s*\([^)]*\)", "", m.group(1))
    return {f.strip() for f in names.split(",")}


# --------------------------------------------------------------------------
# the man page, parsed


ALTERNATING = {".BR", ".RB", ".BI", ".IB", ".IR", ".RI"}


def roff_plain(line):
    """A roff line as text, the way man renders it: the arguments of the
    alternating-font macros (.BR, .IR...) joined without spaces, those of the
    others with one; fonts dropped, escapes resolved."""
    macro = None
    if line.startswith("."):
        macro, _, line = line.partition(" ")
    args = re.findall(r'"([^"]*)"|(\S+)', line)
    args = [a or b for a, b in args]
    s = ("" if macro in ALTERNATING else " ").join(args)
    s = re.sub(r"\\f[BIRP]", "", s)
    return s.replace("\\-", "-").replace("\\e", "\\").replace("\\(mu", "x")


def man_sections():
    """{section name: its roff lines}."""
    out, cur = {}, None
    with open(MAN, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(".SH "):
                cur = line[4:].strip().strip('"')
                out[cur] = []
            elif cur:
                out[cur].append(line)
    return out


def man_tags(lines):
    """The tags of the .TP items of a section, as text."""
    return [roff_plain(lines[i + 1]) for i, l in enumerate(lines[:-1]) if l.strip() == ".TP"]


def man_options(cmd):
    """{option: the tag text it was found in} over the sections of cmd."""
    secs = man_sections()
    out = {}
    for name in MAN_SECTIONS[cmd]:
        assert name in secs, f"the man page has no section {name!r}"
        for tag in man_tags(secs[name]):
            for o in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[A-Za-z?])(?![\w-])", tag):
                out[o] = tag
    return out


def man_render(path=MAN, width=80):
    env = dict(os.environ, MANWIDTH=str(width), LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    return run(["man", "--warnings=w", "-l", path], env=env, timeout=60)


# --------------------------------------------------------------------------
# targets and recordings


class Procs:
    """Processes a test started: all killed at the end, whatever happens."""

    def __init__(self):
        self.procs = []
        self.files = []     # staged into a chroot: removed at the end

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
            if p.stderr:
                p.stderr.close()
        for f in self.files:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


@pytest.fixture
def procs():
    ps = Procs()
    yield ps
    ps.close()


@pytest.fixture
def shared_dir():
    """A directory every user can read and write (tmp_path is root's, 0700)."""
    d = tempfile.mkdtemp(prefix="pyprof-install-", dir="/tmp")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def interp(label):
    for i in pyenvs.supported():
        if i.label == label:
            return i
    pytest.fail(f"interpreter {label} is not provisioned (scripts/provision-pythons.sh)")


def host_interp():
    """A host interpreter (not in a chroot) every user can run."""
    for i in pyenvs.supported():
        if not i.root and i.exe.startswith("/usr/"):
            return i
    for i in pyenvs.supported():
        if not i.root:
            return i
    pytest.fail("no host interpreter is provisioned")


class Target:
    def __init__(self, p, interp, script):
        self.p, self.interp, self.script = p, interp, script
        self.pid = p.pid


def start_target(procs, interp, shared_dir, user=None):
    """Starts the workload (as `user`: a setpriv prefix) and waits until it
    runs its loop. The script lives where the interpreter sees it."""
    name = f"install_target_{os.getpid()}_{len(procs.procs)}.py"
    host = os.path.join(shared_dir, name)
    with open(host, "w") as f:
        f.write(TARGET)
    os.chmod(host, 0o644)
    script = interp.stage(host)
    ready_seen = script + ".ready"
    ready_host = interp.host_path(ready_seen)
    if interp.root:
        procs.files += [interp.host_path(script), ready_host]
    argv = interp.argv([script, ready_seen])
    if user:
        if interp.root:
            argv = ["chroot", "--userspec=65534:65534", "--groups=65534"] + argv[1:]
        else:
            argv = user + argv
    p = procs.start(argv)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready_host):
        if p.poll() is not None:
            pytest.fail(f"the target {argv} exited {p.returncode}: {p.stderr.read()}")
        assert time.monotonic() < deadline, f"the target {argv} did not start"
        time.sleep(0.05)
    return Target(p, interp, script)


def check_folded(text, target, what):
    """A collapsed recording of the target: its loop, in its file, named."""
    stacks = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        assert stack and count.isdigit(), f"{what}: not a collapsed line: {line!r}"
        stacks[stack] = stacks.get(stack, 0) + int(count)
    assert stacks, f"{what}: nothing recorded"
    f = re.escape(target.script)
    pat = re.compile(rf"py::install_outer:{f}:\d+;py::install_leaf:{f}:\d+")
    hot = sum(c for s, c in stacks.items() if pat.search(s))
    total = sum(stacks.values())
    assert hot >= 0.5 * total, (
        f"{what}: {hot} of {total} ns in install_outer > install_leaf:\n"
        + "\n".join(f"{c} {s}" for s, c in sorted(stacks.items(), key=lambda x: -x[1])[:10]))


def check_dump(text, target, what):
    d = json.loads(text)
    assert d["pid"] == target.pid, (what, d)
    assert d["python"].startswith(target.interp.version_str[:4]), (what, d["python"])
    frames = [(fr["function"], fr["file"]) for t in d["threads"] for fr in t["frames"]]
    assert ("install_outer", target.script) in frames, f"{what}: {d}"


def check_bpf_summary(stderr, what):
    assert "with the BPF backend" in stderr, f"{what}: not the BPF backend:\n{stderr}"
    m = re.search(r"(\d+) samples in", stderr)
    assert m and int(m.group(1)) >= 10 * RECORD_SECS, f"{what}: too few samples:\n{stderr}"


# --------------------------------------------------------------------------
# a minimal Debian root, in a throw-away overlay


@pytest.fixture(scope="module")
def minbase():
    p = run([os.path.join(REPO, "scripts", "provision-minbase.sh")], timeout=1200)
    assert p.returncode == 0, show(p)
    root = p.stdout.strip().splitlines()[-1]
    assert os.path.isfile(os.path.join(root, ".pyprof-complete")), root
    return root


class Overlay:
    """ROOT seen through an overlay whose writable layer is under WORK: the
    cached root stays untouched. Everything runs in one `unshare --mount`
    shell per call, so the mounts live only as long as that shell."""

    def __init__(self, lower, work):
        self.lower = lower
        self.upper = os.path.join(work, "upper")
        self.work = os.path.join(work, "work")
        self.merged = os.path.join(work, "merged")
        for d in (self.upper, self.work, self.merged):
            os.makedirs(d)

    def put(self, src, dst, mode=0o755):
        """Copies a host file into the overlay's writable layer."""
        path = os.path.join(self.upper, dst.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copyfile(src, path)
        os.chmod(path, mode)

    def file(self, path):
        return os.path.join(self.upper, path.lstrip("/"))

    def run(self, script, timeout=TIMEOUT):
        """Runs a shell script chrooted in the overlay, /proc and /sys mounted."""
        m = shlex.quote(self.merged)
        setup = (f"set -e\n"
                 f"mount -t overlay overlay -o lowerdir={shlex.quote(self.lower)},"
                 f"upperdir={shlex.quote(self.upper)},workdir={shlex.quote(self.work)} {m}\n"
                 f"mount -t proc proc {m}/proc\n"
                 f"mount --rbind /sys {m}/sys\n"
                 f"exec chroot {m} /bin/sh -c {shlex.quote(script)}\n")
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", setup],
                   timeout=timeout)


@pytest.fixture
def overlay(minbase, tmp_path):
    o = Overlay(minbase, str(tmp_path / "ovl"))
    yield o
    # The namespace took its mounts with it: nothing of ours may be mounted.
    with open("/proc/self/mountinfo") as f:
        left = [l for l in f if str(tmp_path) in l]
    assert not left, f"mounts left behind: {left}"


def test_minbase_root_has_no_build_tools(minbase):
    """The root the release binary and the .deb are tried in lacks what a
    build host has: otherwise those tests would prove nothing."""
    p = run(["chroot", minbase, "dpkg-query", "-W", "-f", "${Package}\n"])
    assert p.returncode == 0, show(p)
    pkgs = set(p.stdout.split())
    assert "libc6" in pkgs and "dpkg" in pkgs, pkgs
    have = sorted(x for x in pkgs if x.endswith("-dev") or x in {
        "gcc", "clang", "make", "pkg-config", "libbpf1", "libbpf0", "libelf1", "libdw1",
        "bpftool", "python3", "man-db", "libcurl4", "libcurl4t64"})
    assert not have, f"the minimal root has {have}"
    for lib in ("libbpf.so", "libelf.so", "libdw.so", "libcurl.so"):
        found = [f for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
                 for f in os.listdir(os.path.join(minbase, d)) if f.startswith(lib)]
        assert not found, f"{lib} in the minimal root: {found}"


# --------------------------------------------------------------------------
# --version


VERSION_RE = re.compile(r"^pyprof-bpf (\S+) \(commit ([0-9a-f]{7,40})(-dirty)?, (x86-64|arm64)\)$")
ARCH = {"x86_64": "x86-64", "aarch64": "arm64"}[os.uname().machine]


@pytest.mark.parametrize("argv", [["--version"], ["-V"], ["record", "--version"],
                                  ["dump", "-V"], ["report", "--version"]],
                         ids=lambda a: " ".join(a))
def test_version_names_version_and_commit(argv):
    p = run([BINARY] + argv, timeout=30)
    assert p.returncode == 0, show(p)
    m = VERSION_RE.match(p.stdout.strip())
    assert m, f"--version does not say version and commit: {p.stdout!r}"
    assert m.group(1) == makefile_version(), (m.group(1), makefile_version())
    assert m.group(4) == ARCH, f"--version names {m.group(4)}, not {ARCH}"
    # The commit is one of this repository's.
    g = run(["git", "-C", REPO, "cat-file", "-e", m.group(2) + "^{commit}"], timeout=30)
    assert g.returncode == 0, f"commit {m.group(2)} is not in {REPO}: {g.stderr}"


# --------------------------------------------------------------------------
# the man page


def test_man_page_renders_without_warnings():
    p = man_render()
    assert p.returncode == 0, show(p)
    assert p.stderr == "", f"man -l warns:\n{p.stderr}"
    long = [l for l in p.stdout.splitlines() if len(l) > 80]
    assert not long, "lines wider than 80 columns:\n" + "\n".join(long)
    for sec in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "MODES", "OUTPUT FORMATS",
                "AGENT OPTIONS", "CONTINUOUS PROFILING", "PRIVILEGES",
                "WHAT IT WRITES INTO A 3.15 TARGET", "EXIT STATUS", "FILES", "EXAMPLES"]:
        assert re.search(rf"^{sec}$", p.stdout, re.M), f"no {sec} section"
    # groff itself, every warning on.
    g = run(["groff", "-man", "-ww", "-z", MAN], timeout=60)
    assert g.returncode == 0 and g.stderr == "", show(g)


def test_man_page_version_is_the_makefiles():
    with open(MAN, encoding="utf-8") as f:
        th = next(l for l in f if l.startswith(".TH "))
    assert f'"pyprof-bpf {makefile_version()}"' in th, th


@pytest.mark.parametrize("cmd", COMMANDS)
def test_man_page_describes_every_option(cmd):
    """Every option of `pyprof-bpf CMD --help` is an item of that command's
    sections of the man page, with its short form and argument, every value
    of an enumerated argument named; and the man page has no option there
    that --help does not."""
    helped = help_options(cmd)
    manned = man_options(cmd)
    missing = sorted(set(helped) - set(manned))
    extra = sorted(set(manned) - set(helped))
    assert not missing, f"{cmd}: options of --help missing from the man page: {missing}"
    assert not extra, f"{cmd}: options in the man page that --help lacks: {extra}"
    for opt, arg in helped.items():
        tag = manned[opt]
        if opt.startswith("--") and arg:
            assert f"{opt}=" in tag, f"{cmd} {opt}: the man page's tag {tag!r} lacks ={arg}"
            for value in arg.split("|") if "|" in arg else []:
                assert value in tag, f"{cmd} {opt}: value {value!r} not in {tag!r}"
        elif opt.startswith("--"):
            assert f"{opt}=" not in tag, f"{cmd} {opt} takes no argument: {tag!r}"


def test_man_page_names_every_format_and_mode():
    secs = man_sections()
    fmt_tags = " ".join(man_tags(secs["OUTPUT FORMATS"]))
    for fmt in help_formats("record") | help_formats("report"):
        assert re.search(rf"(?<![\w-]){re.escape(fmt)}(?![\w-])", fmt_tags), (
            f"format {fmt} of --help is not an item of OUTPUT FORMATS")
    modes = help_options("record")["--mode"].split("|")
    mode_tags = [t.strip() for t in man_tags(secs["MODES"])]
    assert sorted(mode_tags) == sorted(modes), (mode_tags, modes)
    # Commands: every one of the top-level usage has its item.
    usage = run([BINARY, "--help"], timeout=30).stdout
    cmd_tags = [t.strip() for t in man_tags(secs["COMMANDS"])]
    for cmd in COMMANDS:
        assert f"pyprof-bpf {cmd}" in usage or f"[{cmd}]" in usage, cmd
        assert cmd in cmd_tags, f"no item for {cmd} in COMMANDS"


# --------------------------------------------------------------------------
# bash completion


def complete(words, binary=BINARY):
    """What the completion offers for the command line `words` (the last one
    being completed), through bash itself."""
    script = (f"source {shlex.quote(COMPLETION)}\n"
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in [binary] + words)})\n"
              f"COMP_CWORD={len(words)}\n"
              "_pyprof_bpf\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = run(["bash", "--norc", "--noprofile", "-c", script], timeout=60)
    assert p.returncode == 0 and not p.stderr, show(p)
    return [w for w in p.stdout.splitlines() if w]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_completion_offers_every_option(cmd):
    helped = set(help_options(cmd))
    offered = set(complete([cmd, "-"]))
    assert offered == helped, (sorted(helped - offered), sorted(offered - helped))
    for opt, arg in help_options(cmd).items():
        if arg and "|" in arg:
            assert complete([cmd, opt, ""]) == arg.split("|"), opt
            assert complete([cmd, opt, "=", ""]) == arg.split("|"), opt


def test_completion_commands_formats_pids(procs, shared_dir):
    assert complete([""]) == ["record", "dump", "report", "top", "agent", "help"]
    assert set(complete(["--"])) == {o for o in help_options("record") if o.startswith("--")}
    man_fmts = " ".join(man_tags(man_sections()["OUTPUT FORMATS"]))
    for cmd in ("record", "report"):
        offered = complete([cmd, "--format", ""])
        assert help_formats(cmd) <= set(offered), (cmd, offered)
        for f in offered:      # aliases: the man page names them
            assert re.search(rf"(?<![\w.-]){re.escape(f)}(?![\w-])", man_fmts), f
    t = start_target(procs, host_interp(), shared_dir)
    assert str(t.pid) in complete(["-p", ""])
    assert f"1,{t.pid}" in complete(["record", "-p", "1,"])
    assert "python3" in complete(["-o", "x", "--", "python"])
    # The agent: its stores, directories, the PIDs of -p.
    assert complete(["agent", "--push", ""]) == ["pyroscope=", "parca="]
    assert complete(["agent", "--push", "py"]) == ["pyroscope="]
    os.mkdir(os.path.join(shared_dir, "agent-dir"))
    for opt in ("--output-dir", "--spool-dir"):
        assert complete(["agent", opt, shared_dir + "/agent-"]) == [
            os.path.join(shared_dir, "agent-dir")], opt
    assert f"1,{t.pid}" in complete(["agent", "-p", "1,"])


# --------------------------------------------------------------------------
# make install / uninstall


def test_install_records_and_uninstall_leaves_nothing(tmp_path, procs, shared_dir):
    dest = tmp_path / "dest"
    prefix = "/opt/pyprof"
    make("install", DESTDIR=dest, PREFIX=prefix)
    root = str(dest) + prefix
    files = {   # relative to DESTDIR
        "opt/pyprof/bin/pyprof-bpf": 0o755,
        "opt/pyprof/share/man/man1/pyprof-bpf.1": 0o644,
        "opt/pyprof/share/bash-completion/completions/pyprof-bpf": 0o644,
        "opt/pyprof/lib/systemd/system/pyprof-bpf-agent.service": 0o644,
        "etc/default/pyprof-bpf-agent": 0o644,
    }
    for rel, mode in files.items():
        st = os.stat(os.path.join(dest, rel))
        assert stat.S_IMODE(st.st_mode) == mode, (rel, oct(st.st_mode))
    installed = [os.path.relpath(os.path.join(d, f), dest)
                 for d, _, fs in os.walk(dest) for f in fs]
    assert sorted(installed) == sorted(files), installed
    # The unit runs the installed binary with the installed settings; the
    # rest of it is the tree's.
    unit = (dest / "opt/pyprof/lib/systemd/system/pyprof-bpf-agent.service").read_text()
    with open(AGENT_UNIT) as f:
        want = f.read().replace("ExecStart=/usr/local/bin/pyprof-bpf ",
                                f"ExecStart={prefix}/bin/pyprof-bpf ")
    assert unit == want
    assert (dest / "etc/default/pyprof-bpf-agent").read_text() == open(AGENT_DEFAULTS).read()

    binary = os.path.join(root, "bin", "pyprof-bpf")
    assert run([binary, "--version"]).stdout == run([BINARY, "--version"]).stdout
    p = man_render(os.path.join(root, "share/man/man1/pyprof-bpf.1"))
    assert p.returncode == 0 and p.stderr == "" and "pyprof-bpf" in p.stdout, show(p)

    t = start_target(procs, host_interp(), shared_dir)
    out = tmp_path / "out.folded"
    p = run([binary, "-p", str(t.pid), "-d", str(RECORD_SECS), "-o", str(out)],
            cwd="/")
    assert p.returncode == 0, show(p)
    check_bpf_summary(p.stderr, "installed binary")
    check_folded(out.read_text(), t, "installed binary")

    make("uninstall", DESTDIR=dest, PREFIX=prefix)
    left = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs]
    assert not left, f"uninstall left {left}"
    # Only the standard directories stay (as automake's uninstall does).
    dirs = sorted(os.path.relpath(d, root) for d, _, _ in os.walk(root))
    assert dirs == [".", "bin", "lib", "lib/systemd", "lib/systemd/system", "share",
                    "share/bash-completion", "share/bash-completion/completions",
                    "share/man", "share/man/man1"], dirs


def test_install_keeps_the_agents_settings(tmp_path):
    """/etc/default/pyprof-bpf-agent is the administrator's once installed:
    `make install` does not overwrite it, and `make uninstall` removes it only
    while it is the shipped one."""
    dest = tmp_path / "dest"
    settings = dest / "etc/default/pyprof-bpf-agent"
    make("install", DESTDIR=dest, PREFIX="/usr")
    mine = 'PYPROF_AGENT_ARGS="--push pyroscope=http://10.0.0.1:4040"\n'
    settings.write_text(mine)
    p = make("install", DESTDIR=dest, PREFIX="/usr")
    assert settings.read_text() == mine, "make install overwrote the settings"
    assert "kept" in p.stderr, show(p)
    make("uninstall", DESTDIR=dest, PREFIX="/usr")
    assert settings.read_text() == mine, "make uninstall removed changed settings"
    assert not (dest / "usr/lib/systemd/system/pyprof-bpf-agent.service").exists()
    settings.unlink()


# --------------------------------------------------------------------------
# the agent's systemd unit


def parse_unit(path):
    """{(section, key): [values]} of a systemd unit file (one value per
    assignment; comments and blank lines skipped, no continuation lines)."""
    out, section = {}, None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                assert line.endswith("]"), f"{path}:{n}: {line!r}"
                section = line[1:-1]
                continue
            assert "=" in line and section, f"{path}:{n}: not key=value: {line!r}"
            assert not line.endswith("\\"), f"{path}:{n}: continuation lines not expected"
            k, _, v = line.partition("=")
            out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def unit_value(unit, key, section="Service", default=None):
    vals = unit.get((section, key))
    return vals[-1] if vals else default


def unit_caps(unit):
    """The unit's capability bounding set, as setpriv names them."""
    caps = unit_value(unit, "CapabilityBoundingSet").split()
    assert caps and all(re.fullmatch(r"CAP_[A-Z_]+", c) for c in caps), caps
    return caps


def unit_bool(unit, key):
    return unit_value(unit, key, default="no") in ("yes", "true", "on", "1")


def default_file_args(path):
    """PYPROF_AGENT_ARGS of the settings file, as both systemd and a shell read
    it (a shell sources it: `. /etc/default/...`)."""
    p = run(["sh", "-c", '. "$1" && printf "%s" "$PYPROF_AGENT_ARGS"', "sh", path])
    assert p.returncode == 0 and not p.stderr, show(p)
    return p.stdout


def test_unit_and_settings_are_sound(tmp_path):
    """The unit as installed passes `systemd-analyze verify` (its man page
    found in the installed tree), or, where systemd-analyze is missing, our
    own reading of what matters in it; the settings file is valid shell and
    systemd environment syntax and ships without arguments (the agent then
    refuses to start: nowhere to send the profiles)."""
    unit = parse_unit(AGENT_UNIT)
    exec_start = unit_value(unit, "ExecStart")
    assert exec_start == "/usr/local/bin/pyprof-bpf agent $PYPROF_AGENT_ARGS", exec_start
    assert unit_value(unit, "EnvironmentFile") == "/etc/default/pyprof-bpf-agent"
    assert unit_value(unit, "StateDirectory") == "pyprof-bpf"
    assert unit_value(unit, "Restart") == "on-failure"
    assert unit_value(unit, "KillSignal") == "SIGTERM"
    # Longer than --push-timeout's default: the last window is shipped.
    assert float(unit_value(unit, "TimeoutStopSec")) > 10
    assert unit_value(unit, "User", default="root") == "root"
    caps = unit_caps(unit)
    assert set(CAPS) <= set(caps) and "CAP_SYS_ADMIN" not in caps, caps
    assert unit_value(unit, "AmbientCapabilities").split() == caps
    assert unit_bool(unit, "NoNewPrivileges")
    assert unit_value(unit, "ProtectSystem") == "strict"
    assert unit_value(unit, "WantedBy", section="Install") == "multi-user.target"
    # Both hide /proc/kallsyms: kernel frames in off-cpu and wall modes.
    assert not unit_bool(unit, "ProtectKernelTunables")
    assert not unit_bool(unit, "ProtectKernelLogs")

    assert default_file_args(AGENT_DEFAULTS) == ""
    with open(AGENT_DEFAULTS) as f:
        active = [l for l in f if l.strip() and not l.startswith("#")]
    assert active == ['PYPROF_AGENT_ARGS=""\n'], active
    p = run([BINARY, "agent"])
    assert p.returncode == 64 and "nowhere to send" in p.stderr, show(p)
    # ...which the unit does not retry.
    assert unit_value(unit, "RestartPreventExitStatus").split() == ["64"]

    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("\nsystemd-analyze is missing: the unit was checked by our own parser only")
        return
    # Installed so that ExecStart= names a binary that exists here.
    dest = tmp_path / "dest"
    make("install", DESTDIR=dest, PREFIX="/usr", BINDIR=os.path.dirname(BINARY))
    installed = dest / "usr/lib/systemd/system/pyprof-bpf-agent.service"
    assert f"ExecStart={BINARY} agent $PYPROF_AGENT_ARGS\n" in installed.read_text()
    env = dict(os.environ, MANPATH=str(dest / "usr/share/man"))
    p = run([analyze, "verify", str(installed)], env=env, cwd=str(tmp_path))
    assert p.returncode == 0 and p.stderr.strip() == "", show(p)
    p = run([analyze, "security", "--offline=yes", str(installed)], cwd=str(tmp_path))
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", p.stdout + p.stderr)
    print(f"\nsystemd-analyze security: {m.group(0) if m else show(p)}")


# --------------------------------------------------------------------------
# the agent under its unit: exactly its capabilities, and its mounts


NODE_CACHE = os.environ.get("PYPROF_NODE_CACHE", "/var/cache/pyprof-bpf/node")
AGENT_WINDOW = 2
AGENT_SECS = 7


@pytest.fixture(scope="module")
def node_env():
    """npm pprof-format (scripts/install-consumers.sh), the pprof reader."""
    if not shutil.which("node"):
        pytest.fail("node is missing: run scripts/install-deps.sh")
    p = run([os.path.join(REPO, "scripts", "install-consumers.sh")], timeout=600)
    assert p.returncode == 0, show(p)
    return dict(os.environ, NODE_PATH=os.path.join(NODE_CACHE, "node_modules"))


def pprof_decode(node_env, path):
    p = run(["node", os.path.join(REPO, "tests", "consumers", "pprof_decode.cjs"), path],
            env=node_env, timeout=120)
    assert p.returncode == 0, show(p)
    return json.loads(p.stdout)


def check_agent_profiles(node_env, out_dir, target, what):
    """The agent's files of the target (DIR/SERVICE-PID-FROM.pb.gz), read by a
    real pprof reader: their samples are in install_outer > install_leaf, in
    the target's script."""
    names = [f for f in os.listdir(out_dir)
             if re.fullmatch(rf".+-{target.pid}-\d+\.pb\.gz", f)]
    assert names, f"{what}: no profile of pid {target.pid} in {sorted(os.listdir(out_dir))}"
    hot = total = 0
    for name in sorted(names):
        dec = pprof_decode(node_env, os.path.join(out_dir, name))
        assert dec["gzipped"], name
        for s in dec["samples"]:
            frames = [(ln["name"], ln["file"]) for loc in s["stack"] for ln in loc]
            total += s["value"][0]
            if (("install_leaf", target.script) in frames
                    and ("install_outer", target.script) in frames):
                hot += s["value"][0]
    assert total and hot >= 0.5 * total, (
        f"{what}: {hot} of {total} samples of pid {target.pid} in install_leaf "
        f"({len(names)} files)")
    return len(names), total


@pytest.fixture
def unit_state():
    """A scratch directory outside /tmp (which the unit's mounts may hide)
    that stands for the unit's state directory, /var/lib/pyprof-bpf."""
    d = tempfile.mkdtemp(prefix="pyprof-bpf-unit-test.", dir="/var/lib")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def setpriv_caps(caps):
    """setpriv options that leave root exactly `caps`: the bounding set (root's
    permitted and effective sets after exec) and no inheritable ones."""
    names = ",".join("+" + c[len("CAP_"):].lower() for c in caps)
    return [f"--bounding-set=-all,{names}" if caps else "--bounding-set=-all",
            "--inh-caps=-all"]


def sandbox_script(unit, work, argv, env):
    """A shell script, to be run by `unshare --mount --propagation private`,
    that runs argv as systemd would run the unit's service, as far as mount
    namespaces and setpriv reproduce it: CapabilityBoundingSet=,
    NoNewPrivileges=, UMask=, ProtectSystem=strict (everything read-only but
    /dev, /proc, /sys and the state directory, WORK/state), ProtectHome=,
    PrivateTmp=, PrivateDevices=, ReadOnlyPaths=, ProtectControlGroups=,
    ProtectKernelModules=. (The system call filters that RestrictNamespaces=,
    RestrictAddressFamilies= and the like install are not reproduced.)"""
    q = shlex.quote
    state = os.path.join(work, "state")
    os.makedirs(state, exist_ok=True)
    s = ["set -e", f"umask {unit_value(unit, 'UMask', default='0022')}",
         f"mount --bind {q(state)} {q(state)}"]
    if unit_bool(unit, "PrivateDevices"):
        dev = os.path.join(work, "dev")
        os.makedirs(dev)
        s += [f"mount -t tmpfs -o mode=755,nosuid tmpfs {q(dev)}",
              f"mkdir {q(dev)}/shm {q(dev)}/pts",
              f"for d in null zero full random urandom tty; do "
              f": > {q(dev)}/$d; mount --bind /dev/$d {q(dev)}/$d; done",
              f"ln -s /proc/self/fd {q(dev)}/fd",
              f"mount --move {q(dev)} /dev",
              "mount -o remount,bind,ro,noexec,nosuid /dev"]
    if unit_value(unit, "ProtectSystem") == "strict":
        s += [f"findmnt -rn -o TARGET | while read -r m; do case $m in "
              f"/dev|/dev/*|/proc|/proc/*|/sys|/sys/*|{q(state)}) continue ;; esac; "
              f"mount -o remount,bind,ro \"$m\" 2>/dev/null || "
              f"echo \"sandbox: $m stays writable\" >&2; done",
              "if touch /.pyprof-unit-test 2>/dev/null; then rm -f /.pyprof-unit-test; "
              "echo 'sandbox: / is writable' >&2; exit 97; fi"]
    home = unit_value(unit, "ProtectHome", default="no")
    for d in ("/home", "/root", "/run/user"):
        if not os.path.isdir(d) or home in ("no", "false"):
            continue
        if home in ("yes", "true"):
            s.append(f"mount -t tmpfs -o ro,mode=000 tmpfs {d}")
        elif home == "tmpfs":
            s.append(f"mount -t tmpfs -o ro tmpfs {d}")
        elif home == "read-only":
            s.append(f"mountpoint -q {d} || mount --bind {d} {d}; "
                     f"mount -o remount,bind,ro {d}")
    if unit_bool(unit, "PrivateTmp"):
        s += ["mount -t tmpfs -o mode=1777 tmpfs /tmp", "mount -t tmpfs -o mode=1777 tmpfs /var/tmp"]
    for p in unit_value(unit, "ReadOnlyPaths", default="").split():
        p = p.lstrip("-")
        if os.path.exists(p):
            s.append(f"mountpoint -q {p} 2>/dev/null || mount --bind {p} {p}; "
                     f"mount -o remount,bind,ro {p}")
    if unit_bool(unit, "ProtectControlGroups"):
        s.append("findmnt -rn -o TARGET | grep '^/sys/fs/cgroup' | "
                 "while read -r m; do mount -o remount,bind,ro \"$m\"; done")
    if unit_bool(unit, "ProtectKernelModules") and os.path.isdir("/usr/lib/modules"):
        s.append("mount -t tmpfs -o ro,mode=000 tmpfs /usr/lib/modules")
    s += [f"export {k}={q(v)}" for k, v in env.items()]
    priv = ["setpriv"] + setpriv_caps(unit_caps(unit))
    if unit_bool(unit, "NoNewPrivileges"):
        priv.append("--no-new-privs")
    s.append("exec " + shlex.join(priv + argv))
    return "\n".join(s) + "\n"


def run_in_unit(unit, work, argv, env, timeout=TIMEOUT):
    script = sandbox_script(unit, work, argv, env)
    return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
               timeout=timeout, cwd="/")


def unit_argv(unit, binary, args):
    """The unit's ExecStart=, its binary replaced, $PYPROF_AGENT_ARGS by args."""
    argv = shlex.split(unit_value(unit, "ExecStart"))
    assert argv[0].endswith("/pyprof-bpf") and "$PYPROF_AGENT_ARGS" in argv, argv
    i = argv.index("$PYPROF_AGENT_ARGS")
    return [binary] + argv[1:i] + list(args) + argv[i + 1:]


def agent_targets(procs, shared_dir):
    """A host Python with its script in /tmp, a pyenv build under /root (what
    ProtectHome= hides) when provisioned, and the sid 3.15 chroot's."""
    ts = [start_target(procs, host_interp(), shared_dir)]
    for i in pyenvs.supported():
        if not i.root and i.exe.startswith(("/root/", "/home/")):
            ts.append(start_target(procs, i, shared_dir))
            break
    ts.append(start_target(procs, interp("sid-3.15"), shared_dir))
    return ts


def test_agent_samples_with_the_units_capabilities_and_mounts(procs, shared_dir, unit_state,
                                                               node_env):
    """The agent as the unit runs it, root with the unit's bounding set alone,
    in the unit's read-only file system, samples every Python of the host
    (`-a`, the default) for a few windows, and on SIGTERM ends with status 0
    and every window written: this proves the unit's capability set and
    mounts suffice. The targets' files are read through /proc/PID/root,
    whatever the agent's own mounts hide."""
    unit = parse_unit(AGENT_UNIT)
    targets = agent_targets(procs, shared_dir)
    out = os.path.join(unit_state, "state", "profiles")
    argv = unit_argv(unit, BINARY, ["--window", str(AGENT_WINDOW), "--output-dir", out])
    argv = ["timeout", "--preserve-status", "-s", "TERM", str(AGENT_SECS)] + argv
    t0 = time.monotonic()
    p = run_in_unit(unit, unit_state, argv,
                    {"STATE_DIRECTORY": os.path.join(unit_state, "state")})
    print(f"\nagent under the unit's sandbox ({' '.join(unit_caps(unit))}): "
          f"{time.monotonic() - t0:.1f} s")
    assert p.returncode == 0, show(p)
    assert "sandbox:" not in p.stderr, show(p)
    for bad in ("CAP_", "Operation not permitted", "ermission denied", "Read-only"):
        assert bad not in p.stderr, f"{bad!r} in the agent's log:\n{p.stderr}"
    for t in targets:
        n, samples = check_agent_profiles(node_env, out, t, f"agent under the unit ({t.interp})")
        print(f"  {t.interp}: {n} profiles, {samples} samples")
        assert n >= 2, f"{t.interp}: {n} profiles in {AGENT_SECS} s of {AGENT_WINDOW} s windows"
    # What it wrote is the unit's UMask=.
    umask = int(unit_value(unit, "UMask", default="0022"), 8)
    for f in os.listdir(out):
        assert stat.S_IMODE(os.stat(os.path.join(out, f)).st_mode) & umask == 0, f


# Each capability of the unit past CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE
# (those three: test_a_missing_capability_is_named), shown needed: with the
# unit's set the case records, without that one capability it does not.
EXTRA_CAPS = ["CAP_DAC_READ_SEARCH", "CAP_CHECKPOINT_RESTORE", "CAP_SYSLOG"]

SLEEPER = r'''
import sys
import time


def install_nap():
    time.sleep(0.005)


with open(sys.argv[1], "w") as f:
    f.write("ready")
while True:
    install_nap()
'''


def kallsyms_needs_syslog():
    """Whether /proc/kallsyms shows addresses only with CAP_SYSLOG
    (kernel/kallsyms.c: kallsyms_show_value)."""
    with open("/proc/sys/kernel/kptr_restrict") as f:
        restrict = int(f.read())
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    return restrict == 1 or (restrict == 0 and paranoid > 1)


def start_program(procs, argv, ready, user=None):
    p = procs.start((user or []) + argv)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        if p.poll() is not None:
            pytest.fail(f"{argv} exited {p.returncode}: {p.stderr.read()}")
        assert time.monotonic() < deadline, f"{argv} did not start"
        time.sleep(0.05)
    return p


@pytest.mark.parametrize("cap", EXTRA_CAPS)
def test_each_capability_of_the_unit_is_needed(procs, shared_dir, tmp_path, cap):
    """CAP_DAC_READ_SEARCH: an interpreter in a directory only its owner can
    read (nobody's, 0700). CAP_CHECKPOINT_RESTORE: an interpreter deleted
    since it started (a package upgrade), opened through
    /proc/PID/map_files. CAP_SYSLOG: kernel frames of off-CPU samples."""
    caps = unit_caps(parse_unit(AGENT_UNIT))
    assert cap in caps, caps
    host = host_interp()
    exe = os.path.realpath(host.exe)
    argv_extra = []
    if cap == "CAP_SYSLOG":
        if not kallsyms_needs_syslog():
            pytest.skip("this kernel shows /proc/kallsyms' addresses to everyone")
        script = os.path.join(shared_dir, "install_nap.py")
        with open(script, "w") as f:
            f.write(SLEEPER)
        ready = script + ".ready"
        p = start_program(procs, [exe, script, ready], ready)
        argv_extra = ["--mode", "off-cpu"]
    else:
        home = os.path.join(shared_dir, "home")
        os.mkdir(home)
        script = os.path.join(home, "install_target.py")
        with open(script, "w") as f:
            f.write(TARGET)
        py = os.path.join(home, "python3")
        shutil.copy2(exe, py)
        ready = script + ".ready"
        if cap == "CAP_DAC_READ_SEARCH":
            for f in (home, script, py):
                os.chown(f, 65534, 65534)
            os.chmod(home, 0o700)
            p = start_program(procs, [py, script, ready], ready, user=NOBODY)
        else:
            os.chmod(home, 0o755)
            p = start_program(procs, [py, script, ready], ready)
            os.unlink(py)       # the running one is now "(deleted)"
            shutil.copy2(exe, py)
    results = {}
    for name, held in (("unit", caps), ("without", [c for c in caps if c != cap])):
        out = str(tmp_path / f"{name}.folded")
        r = run(["setpriv"] + setpriv_caps(held) + [
            BINARY, "-p", str(p.pid), "--backend", "bpf", "-d", str(RECORD_SECS), "-o", out]
            + argv_extra, cwd="/")
        text = open(out).read() if os.path.exists(out) else ""
        results[name] = (r, text)
    r, text = results["unit"]
    assert r.returncode == 0, show(r)
    r2, text2 = results["without"]
    if cap == "CAP_SYSLOG":
        assert re.search(r"py::install_nap:[^;]*;\[syscall\] \w+;.*_\[k\]", text), text[:2000]
        assert "kernel symbols unreadable" in r2.stderr and "_[k]" not in text2, show(r2)
    else:
        t = Target(p, host, script)
        check_folded(text, t, f"the unit's capabilities ({cap})")
        assert r2.returncode == 1 and "permission denied" in r2.stderr.lower(), show(r2)


# --------------------------------------------------------------------------
# the release binary


@pytest.fixture(scope="module")
def release_binary():
    t0 = time.monotonic()
    make("release")
    path = os.path.join(REPO, ".output", "release", "pyprof-bpf")
    print(f"\nmake release: {time.monotonic() - t0:.1f} s, {os.path.getsize(path):,} bytes "
          f"(the regular build: {os.path.getsize(BINARY):,} bytes with its debug info)")
    return path


def test_release_binary_links_only_glibc(release_binary):
    p = run(["readelf", "-d", "-W", release_binary])
    assert p.returncode == 0, show(p)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", p.stdout)
    assert needed and set(needed) <= {"libc.so.6", "libm.so.6"}, needed
    assert "RPATH" not in p.stdout and "RUNPATH" not in p.stdout, p.stdout
    # The newest glibc symbol version it needs: the oldest glibc it runs on.
    t = run(["objdump", "-T", release_binary])
    versions = {tuple(int(x) for x in v.split("."))
                for v in re.findall(r"GLIBC_([0-9.]+)\b", t.stdout)}
    newest = max(versions)
    print(f"\nrelease binary: needs {needed}, glibc >= {'.'.join(map(str, newest))}")
    assert newest <= (2, 36), f"needs glibc {newest}: newer than Debian 12's"
    m = VERSION_RE.match(run([release_binary, "--version"]).stdout.strip())
    assert m and m.group(1) == makefile_version(), m


@pytest.mark.parametrize("label", ["host", "sid-3.15"])
def test_release_binary_in_minimal_root(release_binary, overlay, procs, shared_dir, label):
    """Copied into a minimal Debian root and run there with chroot, the release
    binary records and dumps a Python process of the host (or of another
    root: the sid 3.15 chroot, which it writes the frame-cache anchor into)."""
    t = start_target(procs, host_interp() if label == "host" else interp(label), shared_dir)
    overlay.put(release_binary, "/usr/local/bin/pyprof-bpf")
    t0 = time.monotonic()
    p = overlay.run(
        f"pyprof-bpf -p {t.pid} -d {RECORD_SECS} -o /tmp/out.folded 2>/tmp/record.err; "
        f"echo $? > /tmp/record.rc; "
        f"pyprof-bpf dump --json -p {t.pid} > /tmp/dump.json 2>/tmp/dump.err; "
        f"echo $? > /tmp/dump.rc")
    print(f"\nrelease binary in the minimal root ({label}): {time.monotonic() - t0:.1f} s")
    assert p.returncode == 0, show(p)
    rd = {n: open(overlay.file(f"/tmp/{n}")).read() for n in
          ("record.rc", "record.err", "dump.rc", "dump.err")}
    assert rd["record.rc"].strip() == "0", rd
    check_bpf_summary(rd["record.err"], "release binary in the minimal root")
    with open(overlay.file("/tmp/out.folded")) as f:
        check_folded(f.read(), t, "release binary in the minimal root")
    assert rd["dump.rc"].strip() == "0", rd
    with open(overlay.file("/tmp/dump.json")) as f:
        check_dump(f.read(), t, "release binary's dump in the minimal root")


def test_release_agent_in_minimal_root_without_libcurl(release_binary, overlay, procs,
                                                       shared_dir, node_env):
    """libcurl is opened at run time: in a root without it the release
    binary's agent writes its windows into --output-dir, and --push fails at
    once, in one line that names libcurl and the package to install."""
    t = start_target(procs, host_interp(), shared_dir)
    overlay.put(release_binary, "/usr/local/bin/pyprof-bpf")
    p = overlay.run(
        f"timeout --preserve-status -s TERM {AGENT_SECS} pyprof-bpf agent -p {t.pid} "
        f"--window {AGENT_WINDOW} --output-dir /tmp/agent-out 2>/tmp/agent.err; "
        "echo $? > /tmp/agent.rc; "
        f"timeout 60 pyprof-bpf agent -p {t.pid} --push pyroscope=http://127.0.0.1:1 "
        ">/tmp/push.out 2>/tmp/push.err; echo $? > /tmp/push.rc", timeout=180)
    assert p.returncode == 0, show(p)
    rd = {n: open(overlay.file(f"/tmp/{n}")).read() for n in
          ("agent.rc", "agent.err", "push.rc", "push.err", "push.out")}
    assert rd["agent.rc"].strip() == "0", rd
    n, _ = check_agent_profiles(node_env, overlay.file("/tmp/agent-out"), t,
                                "release agent in the minimal root")
    assert n >= 2, rd
    assert rd["push.rc"].strip() == "1", rd
    lines = rd["push.err"].strip().splitlines()
    assert len(lines) == 1 and "libcurl" in lines[0] and "libcurl4" in lines[0], rd
    assert rd["push.out"] == "", rd


# --------------------------------------------------------------------------
# the Debian package


@pytest.fixture(scope="module")
def deb(release_binary):
    t0 = time.monotonic()
    p = make("deb")
    path = p.stdout.strip().splitlines()[-1]
    path = path if os.path.isabs(path) else os.path.join(REPO, path)
    print(f"\nmake deb: {time.monotonic() - t0:.1f} s, {os.path.getsize(path):,} bytes")
    return path


def test_deb_declares_its_dependencies(deb):
    fields = {}
    for f in ("Package", "Version", "Architecture", "Depends", "Recommends",
              "Static-Built-Using", "Maintainer", "Description"):
        p = run(["dpkg-deb", "-f", deb, f])
        assert p.returncode == 0, show(p)
        fields[f] = p.stdout.strip()
    assert fields["Package"] == "pyprof-bpf" and fields["Version"] == makefile_version(), fields
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    assert fields["Architecture"] == arch, fields
    # glibc alone, with the version its symbols need; the libraries linked
    # in are named as built-in instead.
    assert re.fullmatch(r"libc6 \(>= 2\.\d+\)", fields["Depends"]), fields["Depends"]
    for src in ("libbpf", "elfutils", "zlib"):
        assert re.search(rf"(^|, ){src} \(= [^)]+\)", fields["Static-Built-Using"]), fields
    # agent --push opens libcurl at run time: recommended, not required.
    assert fields["Recommends"] == "libcurl4t64 | libcurl4", fields
    p = run(["dpkg-deb", "-I", deb, "conffiles"])
    assert p.returncode == 0 and p.stdout.split() == ["/etc/default/pyprof-bpf-agent"], show(p)
    listing = run(["dpkg-deb", "-c", deb]).stdout
    for path in ("./usr/bin/pyprof-bpf", "./usr/share/man/man1/pyprof-bpf.1.gz",
                 "./usr/share/bash-completion/completions/pyprof-bpf",
                 "./usr/lib/systemd/system/pyprof-bpf-agent.service",
                 "./etc/default/pyprof-bpf-agent",
                 "./usr/share/doc/pyprof-bpf/copyright",
                 "./usr/share/doc/pyprof-bpf/changelog.gz"):
        assert re.search(rf" {re.escape(path)}$", listing, re.M), f"{path} not in:\n{listing}"
    assert re.search(r"^-\S+ root/root .* \./usr/bin/pyprof-bpf$", listing, re.M), listing


def test_deb_installs_into_minimal_root_and_works(deb, overlay, procs, shared_dir, tmp_path):
    t = start_target(procs, host_interp(), shared_dir)
    overlay.put(deb, "/tmp/pyprof-bpf.deb", 0o644)
    p = overlay.run(
        "set -e\n"
        "dpkg -i /tmp/pyprof-bpf.deb > /tmp/dpkg-i.out 2>&1\n"
        "dpkg-query -W -f '${Status}' pyprof-bpf > /tmp/status\n"
        "command -v pyprof-bpf > /tmp/which\n"
        "pyprof-bpf --version > /tmp/version\n"
        f"pyprof-bpf -p {t.pid} -d {RECORD_SECS} -o /tmp/out.folded 2>/tmp/record.err\n"
        f"pyprof-bpf dump --json -p {t.pid} > /tmp/dump.json\n"
        "dpkg -L pyprof-bpf > /tmp/files\n"
        "dpkg-query -W -f '${Conffiles}' pyprof-bpf > /tmp/conffiles\n"
        "cp /usr/lib/systemd/system/pyprof-bpf-agent.service /tmp/unit\n"
        "cp /etc/default/pyprof-bpf-agent /tmp/settings\n"
        "cp /usr/share/man/man1/pyprof-bpf.1.gz /tmp/man.gz\n"
        "dpkg --purge pyprof-bpf > /tmp/dpkg-purge.out 2>&1\n"
        "if dpkg-query -W pyprof-bpf >/dev/null 2>&1; then echo still; fi > /tmp/after\n"
        # what the package listed and is still there (directories aside)
        "for f in $(cat /tmp/files); do [ -d \"$f\" ] || [ ! -e \"$f\" ] || echo \"$f\"; "
        "done > /tmp/left\n")
    assert p.returncode == 0, show(p) + "\n" + "".join(
        open(overlay.file(f)).read() for f in ("/tmp/dpkg-i.out",)
        if os.path.exists(overlay.file(f)))
    rd = lambda n: open(overlay.file(n)).read()  # noqa: E731
    assert rd("/tmp/status") == "install ok installed", rd("/tmp/status")
    assert rd("/tmp/which").strip() == "/usr/bin/pyprof-bpf"
    assert VERSION_RE.match(rd("/tmp/version").strip()), rd("/tmp/version")
    check_bpf_summary(rd("/tmp/record.err"), ".deb's binary in the minimal root")
    check_folded(rd("/tmp/out.folded"), t, ".deb's binary in the minimal root")
    check_dump(rd("/tmp/dump.json"), t, ".deb's binary's dump")
    files = rd("/tmp/files").split()
    assert "/usr/share/man/man1/pyprof-bpf.1.gz" in files, files
    assert "/usr/share/bash-completion/completions/pyprof-bpf" in files, files
    assert "/usr/lib/systemd/system/pyprof-bpf-agent.service" in files, files
    assert re.fullmatch(r"\s*/etc/default/pyprof-bpf-agent [0-9a-f]{32}\s*",
                        rd("/tmp/conffiles")), rd("/tmp/conffiles")
    assert "ExecStart=/usr/bin/pyprof-bpf agent $PYPROF_AGENT_ARGS\n" in rd("/tmp/unit")
    with open(AGENT_DEFAULTS) as f:
        assert rd("/tmp/settings") == f.read()
    with gzip.open(overlay.file("/tmp/man.gz"), "rt", encoding="utf-8") as f, \
            open(MAN, encoding="utf-8") as g:
        assert f.read() == g.read(), "the installed man page is not the tree's"
    assert rd("/tmp/after") == "", "dpkg --purge left the package"
    assert rd("/tmp/left") == "", f"dpkg --purge left files: {rd('/tmp/left')}"


# --------------------------------------------------------------------------
# capabilities


@pytest.fixture
def cap_binaries(shared_dir):
    """Copies of the binary with file capabilities: all three, and each
    combination with one missing."""
    out = {}
    sets = {"all": CAPS}
    sets.update({f"no-{c}": [x for x in CAPS if x != c] for c in CAPS})
    for name, caps in sets.items():
        path = os.path.join(shared_dir, f"pyprof-bpf.{name}")
        shutil.copyfile(BINARY, path)
        os.chmod(path, 0o755)
        spec = ",".join(c.lower() for c in caps) + "+ep"
        p = run(["setcap", spec, path])
        assert p.returncode == 0, show(p)
        out[name] = path
    return out


@pytest.mark.parametrize("label", ["host", "sid-3.15"])
def test_capabilities_record_a_root_process_with_bpf(cap_binaries, procs, shared_dir,
                                                     tmp_path, label):
    """nobody, holding CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE through the
    binary's file capabilities, records a process of root's with the BPF
    backend (sid 3.15: and writes its frame-cache anchor)."""
    t = start_target(procs, host_interp() if label == "host" else interp(label), shared_dir)
    out = os.path.join(shared_dir, f"caps-{label}.folded")
    p = run(NOBODY + ["--inh-caps=-all", cap_binaries["all"], "-p", str(t.pid),
                      "--backend", "bpf", "-d", str(RECORD_SECS), "-o", out], cwd="/")
    assert p.returncode == 0, show(p)
    check_bpf_summary(p.stderr, f"nobody with the capabilities ({label})")
    with open(out) as f:
        check_folded(f.read(), t, f"nobody with the capabilities ({label})")


def test_ambient_capabilities_record_with_bpf(procs, shared_dir):
    """The man page's other way: ambient capabilities given to one run."""
    t = start_target(procs, host_interp(), shared_dir)
    out = os.path.join(shared_dir, "ambient.folded")
    caps = "+bpf,+perfmon,+sys_ptrace"
    p = run(NOBODY + [f"--inh-caps={caps}", f"--ambient-caps={caps}", BINARY,
                      "-p", str(t.pid), "--backend", "bpf", "-d", str(RECORD_SECS),
                      "-o", out], cwd="/")
    assert p.returncode == 0, show(p)
    check_bpf_summary(p.stderr, "ambient capabilities")
    with open(out) as f:
        check_folded(f.read(), t, "ambient capabilities")


@pytest.mark.parametrize("cap", CAPS)
def test_a_missing_capability_is_named(cap_binaries, procs, shared_dir, cap):
    """With one of the three missing, the BPF backend is refused with an
    error that names that one (the target is nobody's own, so nothing else
    stands in the way); without --backend, the remote backend records and
    the note names it too."""
    t = start_target(procs, host_interp(), shared_dir, user=NOBODY)
    binary = cap_binaries[f"no-{cap}"]
    p = run(NOBODY + ["--inh-caps=-all", binary, "-p", str(t.pid), "--backend", "bpf",
                      "-d", "1", "-o", "/dev/null"], cwd="/")
    assert p.returncode == 1, show(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, show(p)
    m = re.search(r"missing: (.*)$", lines[0])
    assert m and m.group(1) == cap, f"the error does not name exactly {cap}: {lines[0]!r}"

    out = os.path.join(shared_dir, f"fallback-{cap}.folded")
    p = run(NOBODY + ["--inh-caps=-all", binary, "-p", str(t.pid), "-d", str(RECORD_SECS),
                      "-o", out], cwd="/")
    assert p.returncode == 0, show(p)
    assert re.search(rf"cannot use BPF \(.*missing: {cap}\).*remote backend", p.stderr), p.stderr
    assert "with the remote backend" in p.stderr, p.stderr
    with open(out) as f:
        check_folded(f.read(), t, f"remote backend without {cap}")
