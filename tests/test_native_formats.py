"""Native and kernel frames in every output format (issue 11, item 4).

tests/targets/native_paths.py (sorted(key=), ctypes qsort, zlib, sha256,
os.read of /dev/zero) is recorded with --native --kernel for 2 s at 499 Hz
into perf-script text and a raw recording; `report` writes the other formats
from the raw recording. On sid 3.14 and pyenv 3.12.1 (a shared libpython):

  (a) perf-script: each native frame's address is what `perf script` prints,
      the address relative to where its DSO's file offset 0 is mapped: for a
      named frame, address - offset + the DSO's first PT_LOAD address is the
      value of a symbol of that name in the DSO (readelf -sW), for every
      distinct (DSO, symbol, address) the DSO's table names; each kernel
      frame's address - offset is its symbol's in /proc/kallsyms;
  (a') `report` of the raw recording writes the very same perf-script text
      (the 'M' and 'A' records keep the addresses);
  (b) the perf-script text through stackcollapse-perf.pl --kernel's rules
      (test_formats.stackcollapse_perf) is our collapsed output, byte for
      byte, but for our marker frames, which get no _[k]; kernel frames end
      in _[k] (read_zero_[k] among them), libz frames are there;
  (b') the Firefox Profiler's perf-script rules (test_formats.firefox_perf)
      read every sample's frames: symbols without their +0x, the dso beside;
  (c) the flame graph (HTML) names read_zero_[k] as a kernel frame (kind 4)
      and libz frames as native ones (kind 5) with the DSO as their file;
  (d) pprof, read by `go tool pprof -raw` (Debian's golang-go, the reference
      reader): a mapping for libz and libc with the file's GNU build id, a
      [kernel.kallsyms] mapping; every native and kernel location bound to a
      mapping whose [start, limit) holds its address and whose file is the
      location's function's file; read_zero in the kernel mapping;
  (e) pprof through npm pprof-format (tests/consumers/pprof_decode.cjs): the
      same mappings (start, limit, offset 0, build ids), native functions
      with their DSO as filename and their symbol as system name;
  (f) speedscope (the real app, in Chromium) imports the perf-script text:
      read_zero with file [kernel.kallsyms], libz frames with the libz path.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_native_formats.py </dev/null
"""
import collections
import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from lib import formats as tf
from lib import rawfile
from lib.tool import run_tool
from lib.interps import by_label
from lib.recorder import RECORD_SLACK, Recorder, alive
from lib.perf import read_file
from lib.formats import node, speedscope_import
from lib.native import KERNEL_DSO, parse_native_perf, start_paths

pytestmark = [pytest.mark.bpf, pytest.mark.root, pytest.mark.slow]

LABELS = ["sid-3.14", "pyenv-3.12.1"]
HZ = 499
SECS = 2
MARKER_DSO = b"[pyprof-bpf]"


def readelf(args, path):
    out = subprocess.run(["readelf"] + args + [path], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, f"readelf {args} {path}: {out.stderr}"
    return out.stdout


def elf_symbols(path, cache={}):
    """name -> set of values, .dynsym and .symtab (and the debug file's)."""
    if path not in cache:
        syms = collections.defaultdict(set)
        for line in readelf(["-sW", "--dyn-syms"], path).splitlines():
            f = line.split()
            if len(f) >= 8 and f[0].endswith(":") and f[3] in ("FUNC", "IFUNC", "NOTYPE"):
                syms[f[7].split("@")[0]].add(int(f[1], 16))
        cache[path] = syms
    return cache[path]


def first_load(path, cache={}):
    """The page-aligned address of the first PT_LOAD (0 for a PIE or a DSO)."""
    if path not in cache:
        for line in readelf(["-lW"], path).splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                cache[path] = int(f[2], 16) & ~0xfff
                break
    return cache[path]


def build_id(path, cache={}):
    if path not in cache:
        m = re.search(r"Build ID: ([0-9a-f]+)", readelf(["-n"], path))
        cache[path] = m.group(1) if m else ""
    return cache[path]


def kallsyms():
    syms = collections.defaultdict(set)
    with open("/proc/kallsyms") as f:
        for line in f:
            a, t, name = line.split()[:3]
            if t in "tTwW":
                syms[name].add(int(a, 16))
    return syms


def go_pprof_raw(path):
    go = shutil.which("go")
    assert go, "go is missing: run scripts/install-consumers.sh (golang-go)"
    p = subprocess.run([go, "tool", "pprof", "-raw", path], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, HOME=os.environ.get("HOME", "/root"),
                                             PPROF_TMPDIR="/tmp"))
    assert p.returncode == 0, f"go tool pprof -raw: {p.stderr}"
    locs, maps, part = {}, {}, None
    for line in p.stdout.splitlines():
        if line in ("Locations", "Mappings"):
            part = line
            continue
        if part == "Locations":
            m = re.match(r"^\s*(\d+): 0x([0-9a-f]+) M=(\d+) (\S+) (.*):(\d+) s=(\d+)$", line)
            if m:
                locs[int(m.group(1))] = dict(addr=int(m.group(2), 16), mapping=int(m.group(3)),
                                             func=m.group(4), file=m.group(5))
        elif part == "Mappings":
            m = re.match(r"^\s*(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)"
                         r"(?: ([0-9a-f]+))? *(\[.*)?$", line)
            if m:
                maps[int(m.group(1))] = dict(start=int(m.group(2), 16),
                                             limit=int(m.group(3), 16),
                                             offset=int(m.group(4), 16), file=m.group(5),
                                             build_id=m.group(6) or "")
    assert locs and maps, f"go tool pprof -raw printed no locations or mappings:\n{p.stdout[:2000]}"
    return locs, maps


@pytest.fixture(scope="module")
def recordings():
    """label -> (perf-script bytes, parsed samples, raw recording path, tmp dir)."""
    return {}


def recorded(label, procs, tmp_path, cache):
    if label in cache:
        return cache[label]
    interp = by_label(label)
    p, script, info = start_paths(interp, procs, tmp_path)
    out, raw = str(tmp_path / "nk.perf"), str(tmp_path / "nk.pyprof")
    rec = Recorder(procs, tmp_path, p.pid, ["--native", "--kernel", "-F", HZ, "-d", SECS,
                                            "-o", out, "--raw", raw], name="nk").wait_started()
    rec.wait(SECS + RECORD_SLACK).check_ok()
    assert alive(p), f"native_paths.py on {label} died"
    p.kill()
    data = read_file(out)
    cache[label] = (data, parse_native_perf(data), raw, tmp_path)
    return cache[label]


def report(raw, fmt, path):
    p = run_tool(["report", "-i", raw, "--format", fmt, "-o", path])
    assert p.returncode == 0, f"report --format {fmt}: {p.stderr.decode()}"
    return path


@pytest.mark.parametrize("label", LABELS)
def test_perf_script_addresses(label, procs, tmp_path, recordings):
    data, samples, raw, d = recorded(label, procs, tmp_path, recordings)
    problems, checked, unnamed = [], collections.Counter(), 0
    ks = kallsyms()
    seen = set()
    for s in samples:
        for f in s.frames:
            key = (f.kind, f.dso, f.sym, f.addr, f.off)
            if f.kind not in ("native", "kernel") or key in seen:
                continue
            seen.add(key)
            name = urllib.parse.unquote(f.sym)
            if f.kind == "kernel":
                if f.off is None:
                    continue
                if f.addr - f.off not in ks.get(name, ()):
                    problems.append(f"kernel {name}+{f.off:#x} at {f.addr:#x}: kallsyms has "
                                    f"{sorted(map(hex, ks.get(name, ())))[:4]}")
                checked["kernel"] += 1
                continue
            if f.off is None or not f.dso.startswith("/"):
                unnamed += 1
                continue
            vals = elf_symbols(f.dso).get(name)
            if not vals:
                continue        # named from a debug file's table, or an alias readelf lists elsewhere
            want = f.addr - f.off + first_load(f.dso)
            if want not in vals:
                problems.append(f"{os.path.basename(f.dso)} {name}+{f.off:#x} printed at "
                                f"{f.addr:#x}: the symbol is at {sorted(map(hex, vals))[:4]}, "
                                f"first PT_LOAD {first_load(f.dso):#x}")
            checked[os.path.basename(f.dso)] += 1
    print(f"NATIVE-FORMATS {label} perf-script: {len(samples)} samples, addresses checked "
          f"{dict(checked)}, unnamed native frames {unnamed}")
    assert checked["kernel"] > 0 and sum(checked.values()) - checked["kernel"] > 20, checked
    assert not problems, f"{len(problems)} wrong addresses:\n  " + "\n  ".join(problems[:10])


@pytest.mark.parametrize("label", LABELS)
def test_report_same_text(label, procs, tmp_path, recordings):
    """The raw recording keeps the addresses: report writes the same text."""
    data, samples, raw, d = recorded(label, procs, tmp_path, recordings)
    again = read_file(report(raw, "perf-script", str(tmp_path / "again.perf")))
    assert again == data, "report of the raw recording differs from the recorded perf-script"
    hdr, rs, complete = rawfile.decode(raw)
    assert complete and len(rs) == len(samples)


@pytest.mark.parametrize("label", LABELS)
def test_collapsed_and_flamegraph(label, procs, tmp_path, recordings):
    data, samples, raw, d = recorded(label, procs, tmp_path, recordings)
    ours = read_file(report(raw, "collapsed", str(tmp_path / "nk.folded")))
    want = tf.recollapse(tf.stackcollapse_perf(data, kernel=True, exempt={MARKER_DSO}))
    assert ours == want, "our collapsed output is not stackcollapse-perf.pl --kernel's"
    frames = collections.Counter()
    for line in ours.decode("utf-8").splitlines():
        stack, w = line.rsplit(" ", 1)
        for fr in stack.split(";")[1:]:
            frames[fr] += int(w)
    kern = {f for f in frames if f.endswith("_[k]")}
    assert "read_zero_[k]" in kern, sorted(kern)[:20]
    assert any(f == "deflate" or f.startswith("[libz") for f in frames), sorted(frames)[:40]
    # every kernel frame of the perf-script text is a _[k] frame here
    knames = {f.sym for s in samples for f in s.frames if f.kind == "kernel"}
    assert {k + "_[k]" for k in knames} <= kern
    # the Firefox Profiler's perf-script rules read the same frames (symbols
    # without +0x, the dso beside each) in every sample
    ff = tf.firefox_perf(data.decode("utf-8"))
    assert len(ff) == len(samples)
    for x, smp in zip(ff, samples):
        want = tuple((f.sym, f.dso) for f in reversed(smp.frames))
        assert tuple(x["stack"]) == want, (x["stack"][-4:], want[-4:])
    html = read_file(report(raw, "flamegraph", str(tmp_path / "nk.html"))).decode("utf-8")
    m = re.search(r'<script type="application/json" id="fg-data">(.*?)</script>', html, re.S)
    assert m, "no flame graph data"
    fg = json.loads(m.group(1))
    kinds = collections.defaultdict(set)
    for name, file, line, kind in fg["frames"]:
        kinds[kind].add((name, file))
    assert ("read_zero_[k]", "") in kinds[4], sorted(kinds[4])[:10]
    libz = [(n, f) for n, f in kinds[5] if "libz" in f]
    assert libz and all(f.startswith("/") for _, f in libz), sorted(kinds[5])[:10]
    print(f"NATIVE-FORMATS {label} collapsed: {len(kern)} kernel frames, "
          f"flame graph: {len(kinds[4])} kernel, {len(kinds[5])} native frames")


@pytest.mark.parametrize("label", LABELS)
def test_pprof_readers(label, procs, tmp_path, recordings, node_env):
    data, samples, raw, d = recorded(label, procs, tmp_path, recordings)
    path = report(raw, "pprof", str(tmp_path / "nk.pb.gz"))
    locs, maps = go_pprof_raw(path)
    problems = []
    by_file = {m["file"]: m for m in maps.values()}
    for key in ("libz", "libc.so"):
        hits = [f for f in by_file if key in f]
        if not hits:
            problems.append(f"go tool pprof: no {key} mapping: {sorted(by_file)}")
            continue
        for f in hits:
            if by_file[f]["build_id"] != build_id(f):
                problems.append(f"{f}: build id {by_file[f]['build_id']!r}, the file's "
                                f"{build_id(f)!r}")
    kmaps = [i for i, m in maps.items() if m["file"] == KERNEL_DSO]
    if len(kmaps) != 1:
        problems.append(f"go tool pprof: kernel mappings {kmaps}")
    nat = 0
    for i, l in locs.items():
        m = maps.get(l["mapping"])
        if m is None:
            problems.append(f"location {i} in mapping {l['mapping']}, which is not there")
            continue
        if m["start"] == m["limit"] == 0:
            continue        # the process mapping: Python and marker frames
        nat += 1
        if not m["start"] <= l["addr"] < m["limit"]:
            problems.append(f"location {i} {l['func']} at {l['addr']:#x} outside its mapping "
                            f"{m['file']} {m['start']:#x}-{m['limit']:#x}")
        if l["file"] != m["file"]:
            problems.append(f"location {i} {l['func']} of {l['file']} in mapping {m['file']}")
    rz = [l for l in locs.values() if l["func"] == "read_zero"]
    if not rz or any(l["mapping"] not in kmaps for l in rz):
        problems.append(f"read_zero locations {rz}")
    # pprof-format
    dec = node(node_env, "pprof_decode.cjs", path)
    pm = {m["id"]: m for m in dec["mappings"]}
    for m in dec["mappings"]:
        if m["filename"].startswith("/") and (m["fileOffset"] != "0" or
                                              m["buildId"] != build_id(m["filename"]) or
                                              int(m["memoryStart"]) >= int(m["memoryLimit"])):
            problems.append(f"pprof-format: mapping {m}")
    fnat = 0
    for l in dec["locationDetails"]:
        m = pm.get(l["mappingId"])
        if not m or not m["filename"].startswith("/"):
            continue
        for name, system, file in l["functions"]:
            fnat += 1
            if file != m["filename"] or not system:
                problems.append(f"pprof-format: function {name} ({system}) of {file} at "
                                f"a location in {m['filename']}")
        if not int(m["memoryStart"]) <= int(l["address"]) < int(m["memoryLimit"]):
            problems.append(f"pprof-format: location {l} outside {m}")
    print(f"NATIVE-FORMATS {label} pprof: {len(maps)} mappings, {nat} native/kernel "
          f"locations (go tool pprof), {fnat} native functions (pprof-format)")
    assert nat > 20 and fnat > 20
    assert not problems, f"{len(problems)} problems:\n  " + "\n  ".join(problems[:12])


def test_speedscope_native(procs, tmp_path, recordings, node_env):
    data, samples, raw, d = recorded("sid-3.14", procs, tmp_path, recordings)
    exp = speedscope_import(node_env, os.path.join(d, "nk.perf"), "profile.linux-perf.txt",
                            tmp_path)
    files = collections.defaultdict(set)
    for f in exp["shared"]["frames"]:
        files[f["name"]].add(f.get("file", ""))
    assert KERNEL_DSO in files.get("read_zero", ()), sorted(files)[:30]
    assert any("libz" in fl for n, fs in files.items() for fl in fs), sorted(files)[:30]
    print(f"NATIVE-FORMATS speedscope: {len(files)} frames, read_zero in "
          f"{sorted(files['read_zero'])}")
