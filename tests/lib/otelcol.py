"""The real OpenTelemetry tools of scripts/provision-otel.sh, for the OTLP and pprof
tests: the Collector (otelcol-pyprof, started on a loopback port with a profiles
pipeline), a loopback OTLP/HTTP receiver its otlp_http exporter sends to, protoc
(--encode, --decode against the Debian .proto files) and google/pprof's `pprof`.

    sink = Sink()                           # what the collector exports lands here
    col = Collector(tmp_path, sink=sink)    # OTLP/HTTP receiver -> debug + otlp_http
    col.start()
    ... push to col.url (POST col.url + PROFILES_PATH) ...
    sink.wait(lambda reqs: ...)             # the exported requests, decoded
    col.counts()                            # received, refused, exported (its metrics)
    col.restart()                           # the same ports
    col.close(); sink.close()

A missing tool is a failure naming scripts/provision-otel.sh, never a skip."""
import collections
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import threading
import time
import http.server
import urllib.error
import urllib.request

import pytest

from lib import pyenvs


OTEL = os.environ.get("PYPROF_OTEL", os.path.join(pyenvs.CACHE, "otel"))
COLLECTOR = os.path.join(OTEL, "otelcol-pyprof")
PPROF = os.path.join(OTEL, "pprof")
PROTO_DIR = os.path.join(OTEL, "proto")     # -I for protoc: both trees below
PROVISION = "scripts/provision-otel.sh"

# The profiles signal is alpha in the Collector: a profiles pipeline is refused
# without this gate.
FEATURE_GATE = "service.profilesSupport"
# Where the OTLP receiver takes profiles over HTTP (its default url path), and
# where the otlp_http exporter sends them (its endpoint + this).
PROFILES_PATH = "/v1development/profiles"

SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
RESPONSE = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceResponse"
PPROF_PROTO = "perftools/profiles/profile.proto"
PPROF_MESSAGE = "perftools.profiles.Profile"

START_TIMEOUT = 30
WAIT = 30


# --------------------------------------------------------------------------
# the tools

def tool(path):
    """path, when it is an executable; else a failure naming the script that
    provisions it."""
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run {PROVISION}")
    return path


def protoc():
    p = shutil.which("protoc")
    if not p:
        pytest.fail(f"protoc is missing: run {PROVISION} (it installs protobuf-compiler)")
    if not os.path.isfile(os.path.join(PROTO_DIR, SERVICE_PROTO)):
        pytest.fail(f"{PROTO_DIR}/{SERVICE_PROTO} is missing: run {PROVISION}")
    return p


def _protoc(mode, message, proto, data):
    p = subprocess.run([protoc(), "-I" + PROTO_DIR, f"--{mode}={message}", proto],
                       input=data, capture_output=True, timeout=60)
    if p.returncode != 0:
        pytest.fail(f"protoc --{mode}={message} failed (exit {p.returncode}): "
                    f"{p.stderr.decode(errors='replace')}")
    return p.stdout


def encode(text, message=REQUEST, proto=SERVICE_PROTO):
    """protoc --encode: text format in, the message's bytes out."""
    return _protoc("encode", message, proto, text.encode())


def gunzip(data):
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def decode_text(data, message=REQUEST, proto=SERVICE_PROTO):
    """protoc --decode: the message (gzipped or not) as protoc's text format."""
    return _protoc("decode", message, proto, gunzip(data)).decode("utf-8", "replace")


def decode(data, message=REQUEST, proto=SERVICE_PROTO):
    """The message as nested dicts (parse_text of protoc --decode)."""
    return parse_text(decode_text(data, message, proto))


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", '"': b'"', "'": b"'", "\\": b"\\",
            "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}


def _unquote(s):
    """A text-format string literal (C escapes, octal bytes) as str; bytes that are
    not UTF-8 are kept as surrogates (s.encode('utf-8', 'surrogateescape') gives
    them back)."""
    assert s[0] == s[-1] and s[0] in "\"'", s
    body, out, i = s[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        if n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(m, 8) & 0xFF)
            i += 1 + len(m)
        elif n == "x":
            m = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2:]).group()
            out.append(int(m, 16))
            i += 2 + len(m)
        else:
            out += _ESCAPES[n]
            i += 2
    return out.decode("utf-8", "surrogateescape")


def _scalar(v):
    if v[0] in "\"'":
        return _unquote(v)
    if v in ("true", "false"):
        return v == "true"
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    try:
        return float(v)
    except ValueError:
        return v     # an enum's name


def parse_text(text):
    """protoc's text format (as --decode prints it: one field a line) as a dict of
    field name -> list of values, a message's value a dict of the same kind.
    Every field is a list, repeated or not; a field absent is a default."""
    root = {}
    stack = [root]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        m = re.match(r"([\w.\[\]/]+)\s*\{$", line)
        if m:
            child = {}
            stack[-1].setdefault(m.group(1), []).append(child)
            stack.append(child)
            continue
        m = re.match(r"([\w.\[\]/]+):\s*(.*)$", line)
        assert m, f"not protoc text format: {raw!r}"
        stack[-1].setdefault(m.group(1), []).append(_scalar(m.group(2)))
    assert len(stack) == 1, "unbalanced braces in protoc's output"
    return root


def one(msg, field, default=None):
    """The field's value (its last, as protobuf merges), or default."""
    v = msg.get(field) if msg else None
    return v[-1] if v else default


def any_value(v):
    """An AnyValue message as the Python value it holds."""
    if not v:
        return None
    for k in ("string_value", "bool_value", "int_value", "double_value", "bytes_value"):
        if k in v:
            return v[k][-1]
    if "array_value" in v:
        return [any_value(x) for x in one(v, "array_value", {}).get("values", [])]
    if "kvlist_value" in v:
        return {one(kv, "key", ""): any_value(one(kv, "value"))
                for kv in one(v, "kvlist_value", {}).get("values", [])}
    return None


def key_values(kvs):
    return {one(kv, "key", ""): any_value(one(kv, "value")) for kv in kvs or []}


def profiles(req):
    """The profiles of an ExportProfilesServiceRequest (decoded) with the shared
    dictionary resolved, one dict per Profile:
      resource     {attribute: value} (service.name, process.pid, ...)
      scope        the instrumentation scope's name
      sample_type  (type, unit); period_type too; period, time_unix_nano, duration_nano
      attributes   the profile's own {key: value}
      samples      [{stack: [function names, leaf first], frames: [{function,
                   system_name, file, line, address, mapping}], values: [...],
                   attributes: {key: value}, timestamps: [...], link: (trace_id,
                   span_id) or None}]
    A location without lines is named by its address (0x...)."""
    d = one(req, "dictionary", {})
    strings = d.get("string_table", [])

    def s(i):
        i = i or 0
        assert 0 <= i < len(strings) or i == 0, f"string index {i} out of {len(strings)}"
        return strings[i] if i < len(strings) else ""

    def table(name, i):
        t = d.get(name, [])
        i = i or 0
        assert i == 0 or i < len(t), f"{name} index {i} out of {len(t)}"
        return t[i] if i < len(t) else {}

    def attrs(indices):
        out = {}
        for i in indices or []:
            kv = table("attribute_table", i)
            out[s(one(kv, "key_strindex"))] = any_value(one(kv, "value"))
        return out

    def value_type(vt):
        return (s(one(vt, "type_strindex")), s(one(vt, "unit_strindex")))

    def frames(stack_index):
        out = []
        for li in table("stack_table", stack_index).get("location_indices", []):
            loc = table("location_table", li)
            mapping = s(one(table("mapping_table", one(loc, "mapping_index")),
                            "filename_strindex"))
            addr = one(loc, "address", 0)
            lines = loc.get("lines", [])
            for ln in lines:     # the inlined ones first, their caller last
                fn = table("function_table", one(ln, "function_index"))
                out.append({"function": s(one(fn, "name_strindex")),
                            "system_name": s(one(fn, "system_name_strindex")),
                            "file": s(one(fn, "filename_strindex")),
                            "line": one(ln, "line", 0), "address": addr,
                            "mapping": mapping})
            if not lines:
                out.append({"function": "0x%x" % addr, "system_name": "", "file": "",
                            "line": 0, "address": addr, "mapping": mapping})
        return out

    result = []
    for rp in req.get("resource_profiles", []):
        resource = key_values(one(rp, "resource", {}).get("attributes"))
        for sp in rp.get("scope_profiles", []):
            scope = one(one(sp, "scope", {}), "name", "")
            for p in sp.get("profiles", []):
                samples = []
                for smp in p.get("samples", []):
                    fr = frames(one(smp, "stack_index"))
                    link = None
                    if one(smp, "link_index"):
                        lk = table("link_table", one(smp, "link_index"))
                        link = (one(lk, "trace_id", ""), one(lk, "span_id", ""))
                    samples.append({"stack": [f["function"] for f in fr], "frames": fr,
                                    "values": smp.get("values", []),
                                    "attributes": attrs(smp.get("attribute_indices")),
                                    "timestamps": smp.get("timestamps_unix_nano", []),
                                    "link": link})
                result.append({
                    "resource": resource, "scope": scope,
                    "sample_type": value_type(one(p, "sample_type")),
                    "period_type": value_type(one(p, "period_type")),
                    "period": one(p, "period", 0),
                    "time_unix_nano": one(p, "time_unix_nano", 0),
                    "duration_nano": one(p, "duration_nano", 0),
                    "attributes": attrs(p.get("attribute_indices")),
                    "samples": samples})
    return result


def leaf_totals(profs, value=0):
    """{leaf function: the sum of the samples' values[value]} over profiles."""
    out = collections.Counter()
    for p in profs:
        for smp in p["samples"]:
            if smp["stack"] and len(smp["values"]) > value:
                out[smp["stack"][0]] += smp["values"][value]
    return out


# --------------------------------------------------------------------------
# pprof

def pprof(args, timeout=60):
    """google/pprof's tool run with args; its stdout (a failure shows stderr)."""
    p = subprocess.run([tool(PPROF)] + list(args), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=timeout,
                       env=dict(os.environ, PPROF_TMPDIR=os.environ.get("TMPDIR", "/tmp")))
    if p.returncode != 0:
        pytest.fail(f"pprof {' '.join(args)} exited {p.returncode}: "
                    f"{p.stderr.decode(errors='replace')}")
    return p.stdout.decode("utf-8", "replace")


_UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "mins": 60e9, "hrs": 3600e9,
          "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "KB": 1024, "MiB": 2**20, "GiB": 2**30,
          "": 1}


def pprof_number(s):
    """A value as pprof -top prints it (10, 1.50s, 70ms, 12kB) in its base unit
    (count, nanoseconds, bytes)."""
    m = re.fullmatch(r"(-?[\d.]+(?:e[+-]?\d+)?)([A-Za-zµ]*)", s)
    assert m and m.group(2) in _UNITS, f"not a pprof value: {s!r}"
    return float(m.group(1)) * _UNITS[m.group(2)]


def pprof_top(path, *args):
    """pprof -top of path: {"type", "total", "rows": [{flat, flat_pct, cum, cum_pct,
    name}]}; values in their base unit (pprof_number)."""
    out = pprof(["-top"] + list(args) + [path])
    m = re.search(r"^Showing nodes accounting for \S+, [\d.]+% of (\S+) total$", out, re.M)
    assert m, f"pprof -top printed no total:\n{out}"
    t = re.search(r"^Type: (.*)$", out, re.M)
    rows = []
    for line in out.splitlines():
        r = re.match(r"^\s*(\S+)\s+([\d.]+)%\s+[\d.]+%\s+(\S+)\s+([\d.]+)%\s+(.*)$", line)
        if r:
            rows.append({"flat": pprof_number(r.group(1)), "flat_pct": float(r.group(2)),
                         "cum": pprof_number(r.group(3)), "cum_pct": float(r.group(4)),
                         "name": r.group(5)})
    return {"type": t.group(1) if t else None, "total": pprof_number(m.group(1)),
            "rows": rows, "text": out}


def pprof_raw(path):
    """pprof -raw of path: {"sample_types": ["samples/count", ...], "samples":
    [(values, [location ids])], "locations": {id: [function names]}, "text"}."""
    out = pprof(["-raw", path])
    lines = out.splitlines()
    res = {"sample_types": [], "samples": [], "locations": {}, "text": out}
    section = None
    for i, line in enumerate(lines):
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            if line == "Samples:" and i + 1 < len(lines):
                res["sample_types"] = lines[i + 1].split()
            continue
        if section == "Samples:" and ":" in line and re.match(r"^\s+-?\d", line):
            vals, locs = line.split(":", 1)
            res["samples"].append(([int(v) for v in vals.split()],
                                   [int(x) for x in locs.split()]))
        elif section == "Locations":
            # "     1: 0x0 M=1 NAME FILE:LINE:COL s=START", a line inlined into the
            # one above on the next line with the id and address blank
            m = re.match(r"^\s*(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(?:\[F\] )?(.*)$", line)
            if m:
                last = int(m.group(1))
                res["locations"][last] = []
                rest = m.group(2)
            elif line.startswith(" " * 13) and res["locations"]:
                rest = line.strip()
            else:
                continue
            f = re.match(r"^(.*) \S*:-?\d+:-?\d+ s=-?\d+(?:\(.*\))?$", rest)
            if f:
                res["locations"][last].append(f.group(1))
    return res


# --------------------------------------------------------------------------
# ports

def free_port():
    """A free loopback port below the ephemeral range (no outgoing connection
    takes it while a collector is down between restarts)."""
    for _ in range(500):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    pytest.fail("no free port in 20000-32000")


def _connects(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# --------------------------------------------------------------------------
# the receiver the collector exports to

class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True
    daemon_threads = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        enc = (self.headers.get("Content-Encoding") or "").lower()
        body = gzip.decompress(raw) if enc == "gzip" else raw
        status = self.server.sink.status
        self.server.sink._add({"path": self.path, "headers": dict(self.headers),
                               "raw": raw, "body": body, "status": status,
                               "t": time.time()})
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")    # an empty Export...ServiceResponse
        self.end_headers()


class Sink:
    """A loopback OTLP/HTTP receiver in the test process: every POST's body kept
    (gunzipped when Content-Encoding says so), answered .status (200: an empty
    ExportProfilesServiceResponse, i.e. everything accepted)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.requests = []    # dicts: path, headers, raw, body, status, t (decoded, once read)
        self.status = 200
        self.port = free_port()
        self.server = _Server(("127.0.0.1", self.port), _Handler)
        self.server.sink = self
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _add(self, req):
        with self.cond:
            self.requests.append(req)
            self.cond.notify_all()

    def bodies(self, path=PROFILES_PATH):
        """The raw protobuf bodies (gunzipped) of the requests to path, answered 200."""
        with self.lock:
            return [r["body"] for r in self.requests if r["path"] == path and r["status"] == 200]

    def decoded(self, path=PROFILES_PATH):
        """Those bodies as ExportProfilesServiceRequest dicts (decode; each
        request's decoded once)."""
        with self.lock:
            reqs = [r for r in self.requests if r["path"] == path and r["status"] == 200]
        for r in reqs:
            if "decoded" not in r:
                r["decoded"] = decode(r["body"])
        return [r["decoded"] for r in reqs]

    def profiles(self, path=PROFILES_PATH):
        """Every profile of every request received (profiles())."""
        return [p for req in self.decoded(path) for p in profiles(req)]

    def wait(self, pred=lambda profs: profs, timeout=WAIT, what="the exported profiles"):
        """Waits until pred(self.profiles()) is true; returns the profiles. A
        timeout is a failure that shows what came."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                n = len(self.requests)
            profs = self.profiles()
            if pred(profs):
                return profs
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"{what}: not there after {timeout}s; {n} requests, "
                            f"profiles: {summary(profs)}")
            with self.cond:
                if len(self.requests) == n:
                    self.cond.wait(min(left, 0.5))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def summary(profs, limit=20):
    """A short text of profiles, for failure messages."""
    out = []
    for p in profs[:limit]:
        r = p["resource"]
        out.append(f"{r.get('service.name')}/{r.get('process.pid')} {p['sample_type']} "
                   f"{len(p['samples'])} samples, top {leaf_totals([p]).most_common(3)}")
    return "; ".join(out) + (f" (+{len(profs) - limit})" if len(profs) > limit else "")


# --------------------------------------------------------------------------
# the collector

class Collector:
    """otelcol-pyprof on loopback ports, with a profiles pipeline from the OTLP
    receiver (HTTP; gRPC with grpc=True) to the debug exporter (detailed
    verbosity, into the log) and, given a Sink, an otlp_http exporter sending to
    it. Its internal metrics are served on .metrics_port (Prometheus text).

    .url is what an OTLP/HTTP client is given; profiles go to .url + PROFILES_PATH.
    The log (stdout and stderr of every run, appended) is in .log_path."""

    def __init__(self, workdir, sink=None, debug=True, grpc=False, extra_config=""):
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        self.sink = sink
        self.port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.port:
            self.metrics_port = free_port()
        self.grpc_port = None
        if grpc:
            self.grpc_port = free_port()
            while self.grpc_port in (self.port, self.metrics_port):
                self.grpc_port = free_port()
        self.config_path = os.path.join(self.dir, "otelcol.yaml")
        self.log_path = os.path.join(self.dir, "otelcol.log")
        self.proc = None
        self.past = []     # counts() of the runs before this one
        exporters = []
        cfg = ["receivers:", "  otlp:", "    protocols:", "      http:",
               f"        endpoint: 127.0.0.1:{self.port}"]
        if grpc:
            cfg += ["      grpc:", f"        endpoint: 127.0.0.1:{self.grpc_port}"]
        cfg += ["exporters:"]
        if debug:
            cfg += ["  debug:", "    verbosity: detailed"]
            exporters.append("debug")
        if sink is not None:
            cfg += ["  otlp_http:", f"    endpoint: {sink.url}",
                    "    retry_on_failure:", "      initial_interval: 100ms",
                    "      max_interval: 1s"]
            exporters.append("otlp_http")
        assert exporters, "a collector needs an exporter: debug or a sink"
        cfg += ["service:", "  telemetry:", "    metrics:", "      level: detailed",
                "      readers:", "        - pull:", "            exporter:",
                "              prometheus:", "                host: 127.0.0.1",
                f"                port: {self.metrics_port}",
                "  pipelines:", "    profiles:", "      receivers: [otlp]",
                f"      exporters: [{', '.join(exporters)}]"]
        with open(self.config_path, "w") as f:
            f.write("\n".join(cfg) + "\n" + extra_config)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def profiles_url(self):
        return self.url + PROFILES_PATH

    @property
    def grpc_endpoint(self):
        return f"127.0.0.1:{self.grpc_port}" if self.grpc_port else None

    def argv(self):
        return [tool(COLLECTOR), f"--config={self.config_path}",
                f"--feature-gates={FEATURE_GATE}"]

    def start(self, timeout=START_TIMEOUT):
        """Starts it and waits until it is ready (its log says so and its ports
        take connections)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log_path, "ab") as log:
            mark = log.seek(0, os.SEEK_END)
            log.write(f"==== start {time.strftime('%H:%M:%S')}\n".encode())
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"the collector exited {self.proc.returncode} at start:\n"
                            f"{self.log(mark)[-4000:]}")
            ready = "Everything is ready" in self.log(mark)
            if ready and _connects(self.port) and _connects(self.metrics_port):
                return self
            if time.monotonic() > deadline:
                self.stop(kill=True)
                pytest.fail(f"the collector was not ready after {timeout}s:\n"
                            f"{self.log(mark)[-4000:]}")
            time.sleep(0.05)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, kill=False, timeout=30):
        """SIGTERM (it flushes and shuts down) or, with kill, SIGKILL. The run's
        counts() are kept first (with kill, as they were just before)."""
        if not self.running():
            return
        try:
            self.past.append(self.counts())
        except OSError:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            pytest.fail(f"the collector did not stop within {timeout}s of SIGTERM")

    def restart(self, kill=False):
        """Stops it and starts it again on the same ports."""
        self.stop(kill=kill)
        # The port is free again once the process is gone (Go's listener sets
        # SO_REUSEADDR); wait for that, a killed process's socket included.
        deadline = time.monotonic() + 30
        while _connects(self.port):
            if time.monotonic() > deadline:
                pytest.fail(f"port {self.port} still taken after the collector stopped")
            time.sleep(0.05)
        return self.start()

    def close(self):
        self.stop(kill=True)

    def log(self, since=0):
        """Everything it printed, every run (its own log lines, and the debug
        exporter's detailed dumps); from byte offset since."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def metrics(self):
        """Its internal metrics now: {(name, ((label, value), ...)): value}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)", line)
            if not m:
                continue
            labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
        return out

    def counts(self):
        """This run's profile sample counts from its metrics: received (accepted
        by the receiver), refused, failed (the receiver's), and per exporter
        exported and export_failed ({exporter: n})."""
        def total(name, by=None):
            acc = collections.Counter()
            for (n, labels), v in self.metrics().items():
                if n in (name, name + "_total"):
                    acc[dict(labels).get(by) if by else None] += v
            return dict(acc) if by else int(acc[None])
        return {"received": total("otelcol_receiver_accepted_profile_samples"),
                "refused": total("otelcol_receiver_refused_profile_samples"),
                "failed": total("otelcol_receiver_failed_profile_samples"),
                "exported": {k: int(v) for k, v in
                             total("otelcol_exporter_sent_profile_samples", "exporter").items()},
                "export_failed": {k: int(v) for k, v in total(
                    "otelcol_exporter_send_failed_profile_samples", "exporter").items()}}

    def wait_counts(self, pred, timeout=WAIT, what="the collector's counts"):
        """Waits until pred(self.counts()) is true (an exporter's queue sends
        after the receiver answered); returns the counts."""
        deadline = time.monotonic() + timeout
        while True:
            c = self.counts()
            if pred(c):
                return c
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not there after {timeout}s: {c}")
            time.sleep(0.05)

    def totals(self):
        """counts() summed over every run (those stopped, and this one if it runs)."""
        runs = self.past + ([self.counts()] if self.running() else [])
        out = {"received": 0, "refused": 0, "failed": 0,
               "exported": collections.Counter(), "export_failed": collections.Counter()}
        for c in runs:
            for k in ("received", "refused", "failed"):
                out[k] += c[k]
            for k in ("exported", "export_failed"):
                out[k].update(c[k])
        out["exported"], out["export_failed"] = dict(out["exported"]), dict(out["export_failed"])
        return out

    def debug_batches(self):
        """What the debug exporter logged, every run: one dict a batch it
        exported, {"resource profiles": n, "sample records": n}."""
        out = []
        for m in re.finditer(r"\tinfo\tProfiles\t(\{.*\})$", self.log(), re.M):
            d = json.loads(m.group(1))
            out.append({k: d[k] for k in ("resource profiles", "sample records") if k in d})
        return out

    def debug_resources(self):
        """The resource attributes of every profile the debug exporter dumped
        (detailed verbosity), as the text it printed: [{key: "Str(x)"|"Int(1)"...}].
        Its dump has no stacks: for those, export to a Sink."""
        out = []
        for block in re.findall(r"^Resource attributes:\n((?:\s+-> .*\n)*)", self.log(), re.M):
            out.append(dict(re.findall(r"^\s+-> ([^:]+): (.*)$", block, re.M)))
        return out


def post(url, body, gz=False, timeout=30, content_type="application/x-protobuf"):
    """POSTs an OTLP/HTTP body; (status, response body, headers)."""
    headers = {"Content-Type": content_type}
    if gz:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)

