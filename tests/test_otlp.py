"""OpenTelemetry profiles through the real Collector, and pprof through the real
`pprof` (issue #36).

The Collector is otelcol-pyprof, built from Debian's Go sources by
scripts/provision-otel.sh: its OTLP receiver on a loopback port, the profiles
pipeline on (feature gate service.profilesSupport), exporting to its debug
exporter and, over OTLP/HTTP, to this test's own receiver (Downstream), which
keeps every request body. What the Collector exported is decoded with `protoc
--decode` against Debian's opentelemetry-proto 1.11 (the files the build
generates its C from) and read back by a small text-format parser.

1. test_agent_three_processes: `agent --push otlp=URL` on three interpreters
   (host 3.11, sid 3.14 and 3.15), each named by OTEL_SERVICE_NAME or
   OTEL_RESOURCE_ATTRIBUTES: every request accepted (the agent's log: sent,
   0 refused, 0 left) and exported as it came (one resource each), each
   resource holds its service.name, process.pid, process.runtime.version,
   the target's other resource attributes and host.name, every sample a
   stack of the dictionary, and burn_a() is the hottest function of each
   process once it runs.
2. test_collector_restart: the Collector killed (SIGKILL) after two windows
   and started again on the same port three windows later: no window is
   lost (the spool): the windows exported abut, none twice, and the agent
   says all were sent.
3. test_record_otlp_file: `report --format otlp` and `--format pprof` of the
   same recording: the Collector takes the file as it is (200, nothing
   rejected), and what it exports has the same totals as `pprof -raw` of
   the pprof.
   test_partial_success: a store answering 200 with a partial success
   (rejected_profiles 1, a message) has each profile counted as refused and
   said with the store's reason, not as sent, and not sent again.
4. test_pprof_top_matches_collapsed: `pprof -top` on a `--format pprof` of
   a known workload (tests/targets/otlp_split.py: hot() about 3/4 of the
   CPU, warm() 1/4) gives hot()'s flat share within 3 points of our own
   collapsed output's (the same recording), and the same total.
"""
import http.server
import os
import re
import signal
import socket
import socketserver
import subprocess
import threading
import time

import pytest

from lib.interps import by_label
from lib.pprof_tool import flat_share, raw_totals
from lib.tool import binary
from test_agent import BURN_FILE, Agent, Burner

pytestmark = [pytest.mark.bpf, pytest.mark.root]

CACHE = os.environ.get("PYPROF_CACHE", "/var/cache/pyprof-bpf")
OTELCOL = os.path.join(CACHE, "otel", "otelcol-pyprof")
PROTOS = os.path.join(CACHE, "protos")
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"
WINDOW = 2
WAIT = 120


# --------------------------------------------------------------------------
# protoc's text format, read back

def parse_text(text):
    """`protoc --decode`'s text format as nested dicts: every field a list
    of its values (messages as dicts, scalars as str/int)."""
    toks = re.findall(r'"(?:[^"\\]|\\.)*"|[{}]|[^\s{}:]+:?', text)
    pos = 0

    def value(tok):
        if tok.startswith('"'):
            return bytes(tok[1:-1], "utf-8").decode("unicode_escape").encode(
                "latin-1").decode("utf-8", "replace")
        try:
            return int(tok)
        except ValueError:
            return tok

    def message():
        nonlocal pos
        out = {}
        while pos < len(toks) and toks[pos] != "}":
            name = toks[pos].rstrip(":")
            pos += 1
            if toks[pos] == "{":
                pos += 1
                v = message()
                pos += 1
            else:
                v = value(toks[pos])
                pos += 1
            out.setdefault(name, []).append(v)
        return out

    return message()


def decode_request(body):
    p = subprocess.run(["protoc", f"--decode={REQUEST}", f"-I{PROTOS}", SERVICE_PROTO],
                       input=body, capture_output=True, timeout=60)
    assert p.returncode == 0, f"protoc --decode: {p.stderr.decode(errors='replace')}"
    return parse_text(p.stdout.decode("utf-8", "replace"))


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


def attrs(kvs):
    """KeyValue list as {key: value}."""
    out = {}
    for kv in kvs or []:
        val = one(kv, "value", {})
        out[one(kv, "key")] = one(val, "string_value", one(val, "int_value"))
    return out


class Decoded:
    """One ExportProfilesServiceRequest: per resource, its attributes and
    its profiles' samples as (leaf-first function names, value)."""

    def __init__(self, body):
        req = decode_request(body)
        d = one(req, "dictionary", {})
        strs = d.get("string_table", [])
        fns = d.get("function_table", [])
        locs = d.get("location_table", [])
        stacks = d.get("stack_table", [])
        for table in (fns, locs, stacks):
            assert table and table[0] == {}, f"a dictionary table without its zero entry: {table[:1]}"
        assert strs and strs[0] == "", "string_table[0] is not \"\""

        def fn_name(li):
            lines = locs[li].get("line", []) or locs[li].get("lines", [])
            names = []
            for ln in lines:
                f = fns[one(ln, "function_index", 0)]
                names.append(strs[one(f, "name_strindex", 0)])
            return names

        self.resources = []
        for rp in req.get("resource_profiles", []):
            res = attrs(one(rp, "resource", {}).get("attributes"))
            profiles = []
            for sp in rp.get("scope_profiles", []):
                for prof in sp.get("profiles", []):
                    st = one(prof, "sample_type", {})
                    kind = (strs[one(st, "type_strindex", 0)], strs[one(st, "unit_strindex", 0)])
                    samples = []
                    for s in prof.get("samples", []):
                        stack = stacks[one(s, "stack_index", 0)]
                        frames = [n for li in stack.get("location_indices", []) for n in fn_name(li)]
                        samples.append((frames, sum(s.get("values", [0]))))
                    profiles.append(dict(kind=kind, time=one(prof, "time_unix_nano", 0),
                                         duration=one(prof, "duration_nano", 0),
                                         samples=samples))
            self.resources.append(dict(attrs=res, profiles=profiles))


def self_by_function(profile):
    out = {}
    for frames, v in profile["samples"]:
        if frames:
            out[frames[0]] = out.get(frames[0], 0) + v
    return out


# --------------------------------------------------------------------------
# the Collector and its downstream

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Downstream:
    """What the Collector's otlp_http exporter sends: kept, answered 200."""

    def __init__(self):
        self.bodies = []
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.bodies.append((self.path, self.headers.get("Content-Encoding"), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = _Server(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def decoded(self):
        with self.lock:
            got = list(self.bodies)
        out = []
        for path, enc, body in got:
            assert path == "/v1development/profiles", f"the Collector posted to {path}"
            assert enc in (None, "identity"), f"Content-Encoding {enc} (compression: none asked)"
            out.append(Decoded(body))
        return out

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Collector:
    """otelcol-pyprof on a loopback port, the profiles pipeline exporting to
    its debug exporter and to @down."""

    def __init__(self, tmp_path, down, port=None):
        if not os.access(OTELCOL, os.X_OK):
            pytest.fail(f"{OTELCOL} is missing: run scripts/provision-otel.sh (make test-deps)")
        self.port = port or free_port()
        self.cfg = str(tmp_path / "otelcol.yaml")
        with open(self.cfg, "w") as f:
            f.write(f"""receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{self.port}
exporters:
  debug:
    verbosity: basic
  otlp_http:
    endpoint: http://127.0.0.1:{down.port}
    compression: none
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug, otlp_http]
""")
        self.log_path = str(tmp_path / "otelcol.log")
        self.p = None
        self.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        with open(self.log_path, "ab") as log:
            self.p = subprocess.Popen([OTELCOL, "--config", self.cfg,
                                       "--feature-gates=service.profilesSupport"],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                      start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.p.poll() is None, f"otelcol exited {self.p.returncode}:\n{self.log()}"
            if "Everything is ready" in self.log():
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", self.port)) == 0:
                        return
            time.sleep(0.1)
        pytest.fail(f"otelcol did not start in 60 s:\n{self.log()[-3000:]}")

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=30)

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def check_log(self):
        """Nothing refused, failed or dropped, and profiles exported."""
        log = self.log()
        bad = [ln for ln in log.splitlines()
               if re.search(r"\berror\b|\bwarn\b|refused|dropped|failed", ln, re.I)
               and "Everything is ready" not in ln]
        assert not bad, "the Collector complained:\n" + "\n".join(bad[:10])
        assert re.search(r"resource profiles\W+\d+", log), f"no profiles in the debug exporter:\n{log[-2000:]}"


@pytest.fixture
def down():
    d = Downstream()
    yield d
    d.close()


@pytest.fixture
def collectors():
    cs = []
    yield cs
    for c in cs:
        c.stop()


def wait_for(cond, what, agents=(), timeout=WAIT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for a in agents:
            a.running()
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def by_pid(down):
    out = {}
    for dec in down.decoded():
        assert len(dec.resources) == 1, f"an agent request holds {len(dec.resources)} resources"
        r = dec.resources[0]
        out.setdefault(r["attrs"].get("process.pid"), []).append(r)
    return out


def sent_line(agent, url):
    m = re.search(r"otlp " + re.escape(url) + r": (\d+) profiles? sent, (\d+) refused, "
                  r"(\d+) left", agent.stderr)
    assert m, f"no final otlp line in the agent's log:\n{agent.stderr}"
    return tuple(int(x) for x in m.groups())


# --------------------------------------------------------------------------

def test_agent_three_processes(procs, tmp_path, down, collectors):
    col = Collector(tmp_path, down)
    collectors.append(col)
    setups = [("system-3.11", {"OTEL_SERVICE_NAME": "checkout"}, "checkout", {}),
              ("sid-3.14", {"OTEL_RESOURCE_ATTRIBUTES":
                            "service.name=billing,deployment.environment=ci,team=perf"},
                "billing", {"deployment.environment": "ci", "team": "perf"}),
              ("sid-3.15", {"OTEL_SERVICE_NAME": "search",
                            "OTEL_RESOURCE_ATTRIBUTES": "service.name=not-this,region=eu-1"},
               "search", {"region": "eu-1"})]
    burners = []
    for label, env, service, extra in setups:
        b = Burner(by_label(label), procs, tmp_path, f"burn-{label}", env=env)
        b.service, b.extra = service, extra
        burners.append(b)
    for b in burners:
        b.wait_ready()
        BURN_FILE[b.pid] = b.script
    pids = ",".join(str(b.pid) for b in burners)
    agent = Agent(procs, tmp_path, ["-p", pids, "--window", WINDOW, "-F", 99,
                                    "--spool-dir", str(tmp_path / "spool"),
                                    "--push", f"otlp={col.url}"])
    wait_for(lambda: all(len(by_pid(down).get(b.pid, [])) >= 3 for b in burners),
             "three windows of each process through the Collector", [agent])
    agent.stop()
    sent, refused, left = sent_line(agent, col.url)
    assert refused == 0 and left == 0 and sent > 0, agent.stderr
    # The Collector exports a request after it answered it.
    wait_for(lambda: len(down.bodies) >= sent, f"{sent} requests exported", timeout=30)
    time.sleep(0.5)
    got = by_pid(down)
    assert sum(len(v) for v in got.values()) == sent, (
        f"the agent sent {sent} requests, the Collector exported {sum(map(len, got.values()))}")
    host = socket.gethostname()
    for b in burners:
        mine = got.get(b.pid)
        assert mine, f"{b}: nothing exported"
        hot = 0
        for r in mine:
            a = r["attrs"]
            want = {"service.name": b.service, "process.pid": b.pid,
                    "process.runtime.name": "CPython", "process.runtime.version": b.version,
                    "host.name": host, "process.executable.name": a.get("process.executable.name")}
            want.update(b.extra)
            assert {k: a.get(k) for k in want} == want, f"{b}: resource {a}"
            assert a.get("host.arch") in ("amd64", "arm64"), a
            assert [p["kind"] for p in r["profiles"]] == [("cpu", "nanoseconds")], r["profiles"]
            hot += self_by_function(r["profiles"][0]).get("burn_a", 0) > 0
        # The hottest function of the windows after the first (start-up).
        total = {}
        for r in mine[1:]:
            for fn, v in self_by_function(r["profiles"][0]).items():
                total[fn] = total.get(fn, 0) + v
        top = max(total, key=total.get)
        assert top == "burn_a", f"{b}: the hottest function exported is {top}: {total}"
        print(f"\n{b}: {len(mine)} windows exported, burn_a in {hot}, "
              f"{100 * total['burn_a'] / sum(total.values()):.1f}% of its self time")
    col.check_log()
    agent.check_log()


def test_collector_restart(procs, tmp_path, down, collectors):
    col = Collector(tmp_path, down)
    collectors.append(col)
    b = Burner(by_label("system-3.11"), procs, tmp_path, "burn", env={"OTEL_SERVICE_NAME": "svc"})
    b.wait_ready()
    agent = Agent(procs, tmp_path, ["-p", b.pid, "--window", WINDOW, "-F", 99,
                                    "--push-timeout", 2, "--spool-dir", str(tmp_path / "spool"),
                                    "--push", f"otlp={col.url}"])
    wait_for(lambda: len(by_pid(down).get(b.pid, [])) >= 2, "two windows", [agent])
    col.kill()
    time.sleep(3 * WINDOW)
    agent.running()
    col.start()
    n_before = len(by_pid(down).get(b.pid, []))
    wait_for(lambda: len(by_pid(down).get(b.pid, [])) >= n_before + 4,
             "the windows held while the Collector was away, and more", [agent])
    agent.stop()
    sent, refused, left = sent_line(agent, col.url)
    assert refused == 0 and left == 0, agent.stderr
    wait_for(lambda: len(down.bodies) >= sent, f"{sent} requests exported", timeout=30)
    time.sleep(0.5)
    windows = sorted(r["profiles"][0]["time"] for r in by_pid(down)[b.pid])
    assert len(windows) == len(set(windows)) == sent, (
        f"{sent} sent, windows exported {windows}: one twice or missing")
    # The first window begins when the agent starts, every other one on the
    # clock's grid, right after the one before.
    gaps = [(x, y) for x, y in zip(windows, windows[1:])
            if y % (WINDOW * 10**9) or (y - x != WINDOW * 10**9 and x != windows[0])
            or y - x > WINDOW * 10**9]
    assert not gaps, f"windows do not abut across the Collector's restart: {gaps}"
    assert re.search(r"otlp \S+: .*profiles wait in the spool", agent.stderr), (
        f"the agent never said the Collector was away:\n{agent.stderr}")
    print(f"\nrestart: {len(windows)} windows, all exported, the agent said: "
          + "; ".join(ln for ln in agent.stderr.splitlines() if "otlp" in ln)[:400])


RESPONSE = ("opentelemetry.proto.collector.profiles.v1development."
            "ExportProfilesServiceResponse")


def test_partial_success(procs, tmp_path):
    p = subprocess.run(["protoc", f"--encode={RESPONSE}", f"-I{PROTOS}", SERVICE_PROTO],
                       input=b'partial_success { rejected_profiles: 1 '
                             b'error_message: "profile too old" }',
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    answer, posts = p.stdout, []

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *a):
            pass

    srv = _Server(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        b = Burner(by_label("system-3.11"), procs, tmp_path, "burn")
        b.wait_ready()
        agent = Agent(procs, tmp_path, ["-p", b.pid, "--window", WINDOW, "-F", 99,
                                        "--spool-dir", str(tmp_path / "spool"),
                                        "--push", f"otlp={url}"])
        wait_for(lambda: len(posts) >= 2, "two requests", [agent])
        agent.stop()
    finally:
        srv.shutdown()
        srv.server_close()
    sent, refused, left = sent_line(agent, url)
    assert sent == 0 and refused == len(posts) and left == 0, (
        f"{len(posts)} posts answered with a partial success: the agent says {sent} sent, "
        f"{refused} refused, {left} left:\n{agent.stderr}")
    assert "1 of its profiles rejected (profile too old)" in agent.stderr, agent.stderr


def record_burner(procs, tmp_path, secs=3):
    b = Burner(by_label("system-3.11"), procs, tmp_path, "burn")
    b.wait_ready()
    raw = str(tmp_path / "rec.pyprof")
    p = subprocess.run([binary(), "record", "-p", str(b.pid), "-F", "499", "-d", str(secs),
                        "-o", raw], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return raw


def report(raw, fmt, out):
    p = subprocess.run([binary(), "report", "-i", raw, "--format", fmt, "-o", out, "-q"],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return out


def test_record_otlp_file(procs, tmp_path, down, collectors):
    col = Collector(tmp_path, down)
    collectors.append(col)
    raw = record_burner(procs, tmp_path)
    otlp = report(raw, "otlp", str(tmp_path / "rec.otlp"))
    pprof = report(raw, "pprof", str(tmp_path / "rec.pb.gz"))
    with open(otlp, "rb") as f:
        body = f.read()
    p = subprocess.run(["curl", "-sS", "-o", str(tmp_path / "resp"), "-w", "%{http_code}",
                        "-H", "Content-Type: application/x-protobuf", "--data-binary",
                        "@" + otlp, col.url + "/v1development/profiles"],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout == "200", f"the Collector answered {p.stdout}: {p.stderr}"
    with open(tmp_path / "resp", "rb") as f:
        resp = f.read()
    assert b"rejected" not in resp and len(resp) <= 2, f"a partial success: {resp!r}"
    wait_for(lambda: down.bodies, "the export")
    exported = down.decoded()[0]
    assert Decoded(body).resources == exported.resources, "the Collector changed the profile"
    totals = raw_totals(pprof)
    prof = exported.resources[0]["profiles"][0]
    assert prof["kind"] == ("cpu", "nanoseconds")
    assert sum(v for _, v in prof["samples"]) == totals["cpu"], (
        f"exported cpu total {sum(v for _, v in prof['samples'])}, pprof -raw {totals}")
    col.check_log()


def test_pprof_top_matches_collapsed(procs, tmp_path):
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets", "otlp_split.py")
    p = subprocess.Popen(by_label("system-3.11").argv([target]),
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    procs.items.append(p)
    assert p.stdout.readline().strip() == "ready"
    raw = str(tmp_path / "rec.pyprof")
    r = subprocess.run([binary(), "record", "-p", str(p.pid), "-F", "499", "-d", "4", "-o", raw],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    pprof = report(raw, "pprof", str(tmp_path / "rec.pb.gz"))
    folded = report(raw, "collapsed", str(tmp_path / "rec.folded"))
    total = hot = 0
    with open(folded) as f:
        for ln in f:
            stack, _, n = ln.rstrip("\n").rpartition(" ")
            total += int(n)
            # A Python frame is "py::NAME:FILE:LINE" (usage.md, collapsed).
            if re.match(r"py::hot:", stack.split(";")[-1]):
                hot += int(n)
    ours = 100 * hot / total
    theirs = flat_share(pprof, "hot")
    assert 50 < ours < 95, f"hot() has {ours:.1f}% of the samples: not the workload meant"
    assert abs(theirs - ours) <= 3, f"pprof -top: hot {theirs}% flat, collapsed {ours:.1f}%"
    assert raw_totals(pprof)["cpu"] == total, (raw_totals(pprof), total)
    print(f"\npprof -top: hot {theirs}%, collapsed {ours:.2f}%")
