"""README's first steps, followed as written (issue #37: "README's install and
first-profile steps, followed word for word on a Python program, give a flame
graph in a browser").

- The install block names make targets that exist (`make setup && make`;
  `make -n` of each), and `make` left `./pyprof-bpf` where the README runs it.
- Every `pyprof-bpf` command of "## Your first profile" is taken from the
  README and run as it is written, on a small program of our own called
  app.py. Only what a reader fills in is filled in: the pid `1234` becomes the
  program's, `./pyprof-bpf` the binary under test (PYPROF_BINARY). `sudo`
  stays when it is there to run (we are root), as a reader would type it.
  app.py computes for ~1 s of CPU and exits, so `-d 10` ends at its exit.
- Both commands run at once. Each exits 0 and writes profile.html, which
  headless Chromium opens (tests/consumers/flamegraph_check.cjs, as
  tests/test_formats.py does): no page error, no blocked request, app.py's hot
  function drawn as a frame and named by its tooltip, its share of the width
  as the program spends it.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest

from lib import pyenvs
from lib.formats import CONSUMERS
from lib.tool import binary

pytestmark = [pytest.mark.bpf, pytest.mark.root]

README = os.path.join(pyenvs.REPO, "README.md")
PID_PLACEHOLDER = "1234"

# The reader's program: `python3 app.py --port 8080` in the README. It spends
# ~3/4 of 1 s of CPU in compute() and ~1/4 in render(), then exits. Attached
# to (APP_WAIT set), it says `ready` and works only once SIGUSR1 says the
# recording samples, so that a slow start on a loaded machine cannot miss it.
APP = r'''
import argparse, os, signal, sys, time

def compute(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

def render(n):
    s = 0
    for i in range(n):
        s ^= i
    return s

def handle_request():
    compute(30000)
    render(10000)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8080)
    ap.parse_args()
    if os.environ.get("APP_WAIT"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        print("ready", flush=True)
        signal.sigwait({signal.SIGUSR1})
    end = time.process_time() + 1.0
    while time.process_time() < end:
        handle_request()

main()
'''


def section(text, title):
    """The Markdown of one `## title` section."""
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def code_lines(md):
    """The lines of md's fenced sh blocks, comments and blank lines left out."""
    out = []
    for block in re.findall(r"^```sh\n(.*?)^```", md, re.M | re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_readme_install_steps():
    """The install block's commands are make targets of this Makefile, and
    `make` leaves ./pyprof-bpf where the first-profile commands run it."""
    lines = code_lines(section(readme(), "Install"))
    assert lines, "README's Install section has no sh block"
    targets = []
    for line in lines:
        for cmd in line.split("&&"):
            argv = shlex.split(cmd)
            assert argv[0] == "make", f"README's install step is not a make command: {line}"
            targets.append(argv[1:])
    assert ["setup"] in targets and [] in targets, f"README installs with: {lines}"
    for t in targets:
        p = subprocess.run(["make", "-n"] + t, cwd=pyenvs.REPO, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        assert p.returncode == 0, f"make -n {' '.join(t)}: {p.stderr.decode()}"
    assert os.access(os.path.join(pyenvs.REPO, "pyprof-bpf"), os.X_OK), \
        "`make` left no ./pyprof-bpf at the repository's root"


def first_profile_commands():
    cmds = [shlex.split(l) for l in code_lines(section(readme(), "Your first profile"))]
    cmds = [c for c in cmds if "./pyprof-bpf" in c]
    assert cmds, "README's first profile runs no ./pyprof-bpf"
    for c in cmds:
        assert c[c.index("-o") + 1] == "profile.html", f"README's first profile: {c}"
    return cmds


def as_run(argv, pid):
    """The README's command with the reader's blanks filled in."""
    out = []
    for a in argv:
        if a == "sudo" and not out:
            if os.geteuid() == 0 and shutil.which("sudo"):
                out.append(a)
        elif a == "./pyprof-bpf":
            out.append(binary())
        elif a == PID_PLACEHOLDER:
            assert pid is not None
            out.append(str(pid))
        else:
            out.append(a)
    return out


def check_in_chromium(res, outdir):
    """What flamegraph_check.cjs saw of app.py's profile.html."""
    assert res["errors"] == [] and res["blocked"] == [], res
    assert "compute" in res["tooltip"] and "app.py" in res["tooltip"], res["tooltip"]
    assert res["hot"]["width"] > 0 and (outdir / "flamegraph.png").stat().st_size > 0
    # compute() is ~3/4 of handle_request()'s time: its frame the wider.
    frames = [f for f in res["frames"] if not f["dim"]]
    widest = {n: max((f["width"] for f in frames if f["name"] == n), default=0)
              for n in ("compute", "render")}
    assert widest["compute"] > widest["render"] > 0, widest


@pytest.mark.slow  # ~10 s: make test only (make check's 5-minute budget)
def test_readme_first_profile(node_env, tmp_path, procs):
    """Both forms at once (a recording attached with -p, one that starts the
    program with --), then both pages in Chromium at once: the test's time is
    one recording and one page, not two of each."""
    cmds = first_profile_commands()
    forms = {"attach": [c for c in cmds if PID_PLACEHOLDER in c],
             "launch": [c for c in cmds if "--" in c]}
    for form, found in forms.items():
        assert found, f"README shows no {form} command: {cmds}"
    running = {}
    for form, found in forms.items():
        d = tmp_path / form
        d.mkdir()
        (d / "app.py").write_text(APP)
        pid = None
        if form == "attach":
            # `python3 app.py` as the reader runs it, then its pid (pgrep -f app.py).
            app = subprocess.Popen(["python3", "app.py"], cwd=d, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True,
                                   env=dict(os.environ, APP_WAIT="1"))
            procs.items.append(app)
            assert app.stdout.readline().startswith("ready"), app.stderr.read()
            pid = app.pid
        cmd = as_run(found[0], pid)
        rec = subprocess.Popen(cmd, cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
        procs.items.append(rec)
        first = ""
        if form == "attach":
            # The start line ("sampling process N ..."), then app.py's work.
            while True:
                line = rec.stderr.readline()
                assert line, f"{' '.join(cmd)}: no start line: {first}"
                first += line
                if "sampling process" in line:
                    break
            os.kill(pid, signal.SIGUSR1)
        running[form] = (d, cmd, rec, first)
    pages = {}
    for form, (d, cmd, rec, first) in running.items():
        _, err = rec.communicate(timeout=60)
        err = first + err
        assert rec.returncode == 0, f"{' '.join(cmd)}: exit {rec.returncode}\n{err}"
        # "At the end pyprof-bpf prints one line saying how many samples it took".
        assert re.search(r"\d+ samples", err), err
        html = d / "profile.html"
        assert html.is_file(), f"{' '.join(cmd)} wrote no profile.html:\n{err}"
        pages[form] = subprocess.Popen(
            ["node", os.path.join(CONSUMERS, "flamegraph_check.cjs"), str(html), "compute",
             "^render", str(d)], env=node_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        procs.items.append(pages[form])
    for form, page in pages.items():
        out, err = page.communicate(timeout=120)
        assert page.returncode == 0, f"flamegraph_check.cjs on the {form} form: {err}"
        check_in_chromium(json.loads(out), running[form][0])
