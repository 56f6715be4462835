"""The raw recording (.pyprof) decoder and `pyprof-bpf report` runs (test_report,
test_native_formats, test_views_stream)."""
import subprocess
import zlib

from lib import formats as tf
from lib.tool import binary


TIMEOUT = 120


def run(args, timeout=TIMEOUT, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([binary()] + [str(a) for a in args], capture_output=True,
                          timeout=timeout, **kw)


def ok(p, what):
    assert p.returncode == 0, (f"{what}: exit {p.returncode}\nstderr: "
                               f"{p.stderr.decode(errors='replace')}")
    return p


MAGIC = b"\x89pyprof\n"
STATUS_NAME = {v: k for k, v in tf.STATUS.items()}


class Truncated(Exception):
    pass


def uvarint(b, pos, end):
    v = shift = 0
    while True:
        if pos >= end:
            raise Truncated()
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            assert v < 1 << 64
            return v, pos
        shift += 7


def svarint(b, pos, end):
    u, pos = uvarint(b, pos, end)
    return (u >> 1) ^ -(u & 1), pos


def decode(path):
    """(header, samples as test_formats dicts, complete) of a raw recording."""
    with open(path, "rb") as f:
        data = f.read()
    whole = True
    if data[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(wbits=31)
        data = d.decompress(data)       # raises zlib.error when corrupt
        whole = d.eof                   # the gzip stream ended, its CRC checked
    assert data[:8] == MAGIC and data[8:10] in (b"\x01\x00", b"\x02\x00")
    pos, strs, frames, samples, hdr, end, ts = 10, [None], [], [], None, None, 0
    extras = None

    def string(p, e):
        n, p = uvarint(data, p, e)
        return data[p:p + n].decode("utf-8", "surrogateescape"), p + n

    try:
        while pos < len(data):
            typ = data[pos]
            n, p = uvarint(data, pos + 1, len(data))
            e = p + n
            if e > len(data):
                raise Truncated()
            pos = e
            if typ == ord("H"):
                vals = {}
                vals["pid"], p = uvarint(data, p, e)
                for k in ("comm", "python", "backend"):
                    vals[k], p = string(p, e)
                for k in ("freq", "period", "max_frames", "start_time", "start_mono"):
                    vals[k], p = uvarint(data, p, e)
                hdr = vals
            elif typ == ord("S"):
                strs.append(data[p:e].decode("utf-8", "surrogateescape"))
            elif typ == ord("F"):
                fn, p = uvarint(data, p, e)
                file, p = uvarint(data, p, e)
                line, p = svarint(data, p, e)
                first, p = svarint(data, p, e)
                frames.append((strs[fn] or "", strs[file] or "", line, first))
            elif typ == ord("N"):
                # A native function (kind 5) or a marker (kind 1) of --native.
                kind, p = uvarint(data, p, e)
                fn, p = uvarint(data, p, e)
                file, p = uvarint(data, p, e)
                assert p == e and kind in (1, 5)
                frames.append((strs[fn] or "", strs[file] or "", 0, 0))
            elif typ == ord("C"):
                # A source file (version 2): path, mtime, flags, text.
                n, p = uvarint(data, p, e)
                p += n
                for _ in range(2):
                    _, p = uvarint(data, p, e)
                n, p = uvarint(data, p, e)
                assert p + n == e
            elif typ == ord("M"):
                # --native: a DSO's mapping (start, end, base, build id bytes).
                for _ in range(3):
                    _, p = uvarint(data, p, e)
                n, p = uvarint(data, p, e)
                assert p + n == e and n <= 64
            elif typ == ord("A"):
                # --native: the next sample's native frames' (pc, offset,
                # mapping) and leaf frames' (address, offset).
                n, p = uvarint(data, p, e)
                for _ in range(3 * n):
                    _, p = uvarint(data, p, e)
                n, p = uvarint(data, p, e)
                for _ in range(2 * n):
                    _, p = uvarint(data, p, e)
                assert p == e
            elif typ == ord("X"):
                # The next sample's event and leaf frames (kind 1: a marker,
                # 4: a kernel function), outermost first.
                ev, p = uvarint(data, p, e)
                nl, p = uvarint(data, p, e)
                leaf = []
                for _ in range(nl):
                    kind, p = uvarint(data, p, e)
                    sid, p = uvarint(data, p, e)
                    assert kind in (1, 4) and sid
                    leaf.append((kind, strs[sid]))
                assert p == e and extras is None
                extras = (strs[ev] if ev else None, leaf)
            elif typ == ord("P"):
                f = []
                for _ in range(7):
                    v, p = (svarint if len(f) == 3 else uvarint)(data, p, e)
                    f.append(v)
                tid, name, cpu, dts, period, status, nf = f
                ids = []
                for _ in range(nf):
                    v, p = uvarint(data, p, e)
                    ids.append(v)
                assert p == e
                ts += dts
                ev, leaf = extras or (None, [])
                extras = None
                samples.append(dict(comm=hdr["comm"], pid=hdr["pid"], tid=tid,
                                    thread=strs[name], cpu=cpu, ts=ts, period=period,
                                    status=STATUS_NAME.get(status, f"status-{status}"),
                                    frames=[frames[i] for i in ids], event=ev, leaf=leaf))
            elif typ == ord("E"):
                end = uvarint(data, p, e)[0]
                assert end == len(samples)
            else:
                raise AssertionError(f"record type {typ}")
    except Truncated:
        pass
    return hdr, samples, bool(whole and end is not None and pos == len(data))
