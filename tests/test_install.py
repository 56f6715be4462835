"""Shipping pyprof-bpf (issue #14): `make install`/`uninstall`, the man page
and --help kept in step, bash completion, `--version`, the release binary (run
in a minimal Debian root that has no build tools, no -dev package, no libbpf),
the .deb (dpkg -i into such a root), and the capabilities a non-root user
needs.

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

import pyenvs

REPO = pyenvs.REPO
BINARY = os.environ.get("PYPROF_BPF_BINARY", pyenvs.BINARY)
MAN = os.path.join(REPO, "man", "pyprof-bpf.1")
COMPLETION = os.path.join(REPO, "completion", "pyprof-bpf.bash")
COMMANDS = ["record", "report", "dump", "top"]
# The man page's option sections, per command.
MAN_SECTIONS = {
    "record": ["RECORD OPTIONS", "OUTPUT OPTIONS", "COMMON OPTIONS"],
    "report": ["REPORT OPTIONS", "OUTPUT OPTIONS", "COMMON OPTIONS"],
    "dump": ["DUMP OPTIONS", "COMMON OPTIONS"],
    "top": ["RECORD OPTIONS", "TOP OPTIONS", "COMMON OPTIONS"],
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
    """{option: argument or None} of `pyprof-bpf CMD --help` (argp's layout:
    '  -p, --pid=PID   text' or '      --json   text')."""
    out = {}
    for line in help_text(cmd, binary).splitlines():
        m = re.match(r"^ +(?:(-[^-\s]), +)?(--[a-z][a-z0-9-]*)(?:=(\S+))?", line)
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
    return {re.sub(r"\s*\(default\)", "", f).strip() for f in m.group(1).split(",")}


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
        "bpftool", "python3", "man-db"})
    assert not have, f"the minimal root has {have}"
    for lib in ("libbpf.so", "libelf.so", "libdw.so"):
        found = [f for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
                 for f in os.listdir(os.path.join(minbase, d)) if f.startswith(lib)]
        assert not found, f"{lib} in the minimal root: {found}"


# --------------------------------------------------------------------------
# --version


VERSION_RE = re.compile(r"^pyprof-bpf (\S+) \(commit ([0-9a-f]{7,40})(-dirty)?\)$")


@pytest.mark.parametrize("argv", [["--version"], ["-V"], ["record", "--version"],
                                  ["dump", "-V"], ["report", "--version"]],
                         ids=lambda a: " ".join(a))
def test_version_names_version_and_commit(argv):
    p = run([BINARY] + argv, timeout=30)
    assert p.returncode == 0, show(p)
    m = VERSION_RE.match(p.stdout.strip())
    assert m, f"--version does not say version and commit: {p.stdout!r}"
    assert m.group(1) == makefile_version(), (m.group(1), makefile_version())
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
                "PRIVILEGES", "WHAT IT WRITES INTO A 3.15 TARGET", "EXIT STATUS",
                "EXAMPLES"]:
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
    assert complete([""]) == ["record", "dump", "report", "top", "help"]
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


# --------------------------------------------------------------------------
# make install / uninstall


def test_install_records_and_uninstall_leaves_nothing(tmp_path, procs, shared_dir):
    dest = tmp_path / "dest"
    prefix = "/opt/pyprof"
    make("install", DESTDIR=dest, PREFIX=prefix)
    root = str(dest) + prefix
    files = {
        "bin/pyprof-bpf": 0o755,
        "share/man/man1/pyprof-bpf.1": 0o644,
        "share/bash-completion/completions/pyprof-bpf": 0o644,
    }
    for rel, mode in files.items():
        st = os.stat(os.path.join(root, rel))
        assert stat.S_IMODE(st.st_mode) == mode, (rel, oct(st.st_mode))
    installed = [os.path.relpath(os.path.join(d, f), root)
                 for d, _, fs in os.walk(dest) for f in fs]
    assert sorted(installed) == sorted(files), installed

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
    assert dirs == [".", "bin", "share", "share/bash-completion",
                    "share/bash-completion/completions", "share/man", "share/man/man1"], dirs


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
    for f in ("Package", "Version", "Architecture", "Depends", "Static-Built-Using",
              "Maintainer", "Description"):
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
    listing = run(["dpkg-deb", "-c", deb]).stdout
    for path in ("./usr/bin/pyprof-bpf", "./usr/share/man/man1/pyprof-bpf.1.gz",
                 "./usr/share/bash-completion/completions/pyprof-bpf",
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
