"""The native_paths.py target and a parser of `--native` perf-script output
(test_native, test_native_formats)."""
import json
import os
import re

from lib import formats as tf
from lib.procs import TARGETS, out_path, stage_unique, wait_file
from lib.perf import FRAME, HEADER, fnv1a


PATHS_PY = os.path.join(TARGETS, "native_paths.py")
KERNEL_DSO = "[kernel.kallsyms]"
CUT = "[unwind-failed]"
OFFSET = re.compile(r"\+0x([0-9a-f]+)$")
PERF_MAP = re.compile(r"/tmp/perf-\d+\.map")


class NFrame:
    """A perf-script frame. Native and kernel frames print as `perf script`
    does: sym is the symbol without its "+0x<off>" (off: the offset, None for
    [unknown]), addr the address printed (a DSO's: relative to where its file
    offset 0 is mapped; the kernel's: as is)."""
    __slots__ = ("sym", "dso", "func", "file", "line", "kind", "addr", "off")

    def __init__(self, sym, dso, addr=None):
        self.sym, self.dso, self.addr, self.off = sym, dso, addr, None
        self.func = self.file = self.line = None
        if PERF_MAP.fullmatch(dso):
            self.kind = "jit"       # named by the target's perf map (-X perf)
        elif sym.startswith("py::"):
            self.func, self.file, self.line = tf.decode_text(sym)
            self.kind = "python"
        elif dso == "[pyprof-bpf]":
            self.kind = "synthetic"
        elif dso == KERNEL_DSO:
            self.kind = "kernel"
        else:
            self.kind = "native"

    def __repr__(self):
        if self.kind == "python":
            return f"{self.func}@{self.line}"
        if self.kind in ("native", "jit"):
            return f"{self.sym}<{os.path.basename(self.dso)}>"
        return self.sym


class NSample:
    __slots__ = ("tid", "frames", "lineno")

    @property
    def root_first(self):
        return list(reversed(self.frames))

    @property
    def cut(self):
        return any(f.kind == "synthetic" and f.sym == CUT for f in self.frames)

    def describe(self):
        return f"tid {self.tid} (line {self.lineno}): " + " > ".join(map(repr, self.root_first))


def parse_native_perf(data):
    text = data.decode("utf-8")
    assert not text or text.endswith("\n\n"), f"unterminated output: ...{text[-300:]!r}"
    samples, cur, known = [], None, {}
    for i, line in enumerate(text.split("\n")[:-1], 1):
        if cur is None:
            m = HEADER.match(line)
            assert m, f"perf-script line {i}: expected a sample header, got {line!r}"
            assert m["event"] == "cpu-clock", line
            cur = NSample()
            cur.tid, cur.frames, cur.lineno = int(m["tid"]), [], i
        elif line == "":
            assert cur.frames, f"perf-script line {cur.lineno}: a sample without frames"
            # kernel frames only at the leaf (frames are leaf first)
            k = 0
            while k < len(cur.frames) and cur.frames[k].kind == "kernel":
                k += 1
            assert not any(f.kind == "kernel" for f in cur.frames[k:]), (
                f"perf-script line {cur.lineno}: a kernel frame below a user frame")
            samples.append(cur)
            cur = None
        elif line in known:
            cur.frames.append(known[line])
        else:
            m = FRAME.match(line)
            assert m, f"perf-script line {i}: expected a frame line, got {line!r}"
            fr = NFrame(m["sym"], m["dso"], int(m["addr"].strip(), 16))
            if fr.kind in ("native", "kernel", "jit"):
                # perf's "%16lx sym+0xoff (dso)", "[unknown]" with no offset
                assert re.fullmatch(r" *[0-9a-f]+", m["addr"]), line
                om = OFFSET.search(fr.sym)
                if fr.sym == "[unknown]":
                    pass
                else:
                    assert om, f"perf-script line {i}: a named frame with no +0x offset: {line!r}"
                    fr.sym, fr.off = fr.sym[:om.start()], int(om.group(1), 16)
                if fr.kind == "kernel":
                    assert fr.addr >= 0xffff800000000000, line
            else:
                assert fr.addr == fnv1a(m["sym"]), (
                    f"perf-script line {i}: address is not the FNV-1a of the symbol: {line!r}")
            if fr.kind == "python":
                assert fr.dso == tf.escape(fr.file, False), line
            elif fr.kind == "synthetic":
                assert fr.sym.startswith("[") or fr.sym == "<GC>", line
            elif fr.kind == "native":
                # a file's path, or a mapping perf names in brackets ([vdso])
                assert fr.dso.startswith("/") or re.fullmatch(r"\[[\w.-]+\]", fr.dso), (
                    f"line {i}: a native dso that is no path: {line!r}")
            cur.frames.append(fr)
            known[line] = fr
    assert cur is None
    return samples


def start_paths(interp, procs, tmp_path, xargs=()):
    script = stage_unique(interp, PATHS_PY, procs)
    seen, host = out_path(interp, procs, tmp_path, "native_info.json")
    p = procs.start(interp.argv(list(xargs) + [script, seen]),
                    str(tmp_path / "native_paths.stderr"))
    wait_file(p, host, f"native_paths.py on {interp.label}")
    with open(host, encoding="utf-8") as f:
        info = json.load(f)
    assert info["python"] == interp.version_str, info
    return p, script, info
