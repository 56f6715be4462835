"""End-to-end tests of `pyprof-bpf agent` (issue #21): continuous profiling
pushed to Pyroscope and Parca, with real BPF, real interpreters, a real
pprof reader and a store that goes away.

The store is the test's own HTTP server on 127.0.0.1 (Receiver), speaking
both documented contracts (Pyroscope `POST /ingest?name=SERVICE{labels}&from=
&until=&format=pprof` with a gzip'd pprof body; Parca `POST /profiles/writeraw`
with JSON series of base64 raw profiles), HTTP/1.1 with keep-alive. Every
request is validated strictly (method, path, content type, query keys and
encoding, UNIX seconds, label names and their uniqueness, JSON shape, base64,
gzip); a bad one is answered 400 and fails the test. It can be switched
between answering 200, answering 500, hanging (a request read and never
answered), and refusing connections (its listening socket closed and its open
connections shut down; later bound again on the same port). A request is
"delivered" when it was answered 200. Every profile of our targets is decoded
by npm `pprof-format` (tests/consumers/pprof_decode_many.cjs, one node run
per test).

The targets are tests/targets/agent_burn.py, burning CPU in burn_a() (the hot
function), on several interpreters. SIGUSR1 switches one to burn_b(), which it
reports once burn_b() has had 0.25 s of its CPU; the agent is then stopped
1.05-1.5 s into a window of the clock, so that the last (partial) window's
`until` is a second no closed window has: it must arrive, with burn_b() in
it. No window that ended before the switch may hold burn_b(), none that began
after it burn_a() (a sample in the wrong window).

1. test_three_versions: `agent -a --window 2` pushing to both sinks and
   writing --output-dir, with system-3.11, pyenv-3.12.1 and sid-3.14 running:
   per sink, per process, one profile per window, each with the hot function
   in its stacks (and nothing but this program's frames), the period of -F,
   the labels (service_name by OTEL_SERVICE_NAME sanitized, over
   PYROSCOPE_APPLICATION_NAME; by PYROSCOPE_APPLICATION_NAME; by the script's
   basename; pid, host, python_version, --label's; container_id for the one
   moved into a cgroup named as Docker names a container's, none for the
   others); the windows abut, none twice, the same windows for the three;
   Parca's profiles are Pyroscope's, in the same order; the output directory
   holds the same profiles under <service>-<pid>-<from>.pb.gz; SIGTERM: exit
   0 and the last window arrives.
2. test_outage (-a implied): the store refuses connections for three
   windows, comes back, answers 500 for two windows, then 200, then hangs past
   --push-timeout, then 200: every window of each target arrives, in order,
   none twice, none missing (they abut); SIGTERM ships the last.
   test_spool_across_restart: SIGTERM while the store is down: exit 0 within
   about --push-timeout, the spool keeps the profiles, and a second agent with
   the same --spool-dir delivers them first, in order, none twice, the last
   window included. test_spool_age: windows older than --spool-age while the
   store is down are dropped (and said so), the others arrive in order.
3. test_start_and_exit: a process that exits during the run and one that
   starts during it (`-m tests.targets.agent_burn`: service_name
   `tests.targets.agent_burn`) are each in exactly the windows they lived in,
   next to one that lives throughout; --retain drops old files.
4. test_bad_options, test_unreadable_auth_file: one error line (argp may add
   its "Try ... --help" hint), exit status > 0, quickly, the secret of a bad
   auth-file line not in it. test_auth: an --auth-file with tenant, user and
   password (or a bearer token) gives the headers as specified on every
   request (to URLs with a base path, one with a trailing slash), and the
   secrets are in no process's argv and not in the agent's log (though the
   store answered 500 at first). test_repeated_label: `--label env=a --label
   env=b` is refused, or sends one env label.

Every profile of test_three_versions (both sinks' bodies and the
--output-dir files) is also read by the real `pprof` (built from Debian's
google/pprof sources, issue #36): `pprof -raw`'s totals are pprof-format's.

Every line an agent writes on stderr is one prefixed line, "pyprof-bpf agent:"
(the agent's) or "pyprof-bpf:" (the recording's) (checked
last). Waits are on conditions (the receiver's state), not fixed sleeps,
except the length of an outage itself.

Run as root from the repository root:
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/test_agent.py </dev/null
"""
import base64
import binascii
import collections
import gzip
import http.server
import json
import math
import os
import random
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

from lib import pyenvs
from lib.tool import binary, run_tool
from lib.interps import by_label
from lib.procs import out_path, stage_unique, wait_file
from lib.formats import CONSUMERS, run
from lib.otelcol import pprof_raw

pytestmark = [pytest.mark.bpf, pytest.mark.root]

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
BURN = os.path.join(TARGETS, "agent_burn.py")
MODULE = "tests.targets.agent_burn"
WINDOW = 2                    # --window of every test
HZ = 99                       # enough samples that a starved target still has some every window
PUSH_TIMEOUT = 3              # --push-timeout where a store hangs or is down at SIGTERM
WAIT = 120                    # seconds any awaited condition may take on a loaded machine
EXIT_WAIT = 60                # seconds an agent may take to exit after SIGTERM
HOST = socket.gethostname()
LABELS = {"env": "ci", "team": "perf-tests"}
LABEL_ARGS = [a for k, v in LABELS.items() for a in ("--label", f"{k}={v}")]
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SERVICE = re.compile(r"[A-Za-z0-9._/:-]+")
PYROSCOPE_KEYS = {"name", "from", "until", "format"}
PYROSCOPE_OPTIONAL = {"sampleRate", "spyName", "units", "aggregationType"}
HOT = {"burn_a", "burn_b"}


# --------------------------------------------------------------------------
# the store

class Delivery:
    """One profile the receiver accepted (answered 200)."""

    def __init__(self, sink, req, labels, service, frm, until, gz, metric=None):
        self.sink, self.req, self.t = sink, req["n"], req["t"]
        self.labels, self.service, self.metric = labels, service, metric
        self.frm, self.until, self.gz = frm, until, gz
        self.pid = int(labels["pid"]) if labels.get("pid", "").isdigit() else None
        self.dec = None

    def __repr__(self):
        w = f"[{self.frm},{self.until}]" if self.frm is not None else ""
        t = f" t={self.dec['timeNanos']}" if self.dec else ""
        return f"<{self.sink} #{self.req} pid {self.pid} {self.service}{w}{t}>"


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A connection reset or cut (by the agent, or by down()) is no news;
        # anything else is a bug of the receiver, which fails the test.
        e = sys.exc_info()[1]
        if not isinstance(e, OSError):
            with self.rx.lock:
                self.rx.problems.append(f"the receiver itself failed: {e!r}")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"          # keep-alive, as real stores do

    def setup(self):
        super().setup()
        self.server.rx._conn(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.rx._conn(self.connection, False)

    def log_message(self, *args):
        pass

    def _any(self):
        self.server.rx._handle(self)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _any


class Receiver:
    """The loopback store. .mode: "up" (200), "500", "hang" (a request is
    read, never answered: the agent's timeout ends it), or "down" (no
    listening socket, open connections shut down). .prefix: the path the
    agent's URLs have before /ingest and /profiles/writeraw."""

    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "up"
        self.prefix = ""
        self.requests = []        # every request read: dicts (n, t, method, path,
                                  # headers, body, sink, status)
        self.deliveries = []      # Delivery, in the order they were answered 200
        self.problems = []        # contract violations, one string each
        self.conns = set()
        self.server = self.port = None
        self._bind()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _bind(self):
        # A port below the ephemeral range, so that no outgoing connection
        # takes it while we are down.
        if self.port is None:
            for _ in range(500):
                port = random.randrange(20000, 32000)
                try:
                    srv = _Server(("127.0.0.1", port), _Handler)
                    break
                except OSError:
                    continue
            else:
                pytest.fail("no free port for the receiver in 20000-32000")
        else:
            deadline = time.monotonic() + 30
            while True:
                try:
                    srv = _Server(("127.0.0.1", self.port), _Handler)
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        pytest.fail(f"cannot bind the receiver's port {self.port} again: {e}")
                    time.sleep(0.1)
        srv.rx = self
        self.server, self.port = srv, srv.server_address[1]
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def _conn(self, sock, add):
        with self.lock:
            (self.conns.add if add else self.conns.discard)(sock)

    def down(self):
        with self.lock:
            self.mode = "down"
            if self.server is not None:
                self.server.shutdown()
                self.server.server_close()
                self.server = None
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def up(self, mode="up"):
        with self.lock:
            if self.server is None:
                self._bind()
            self.mode = mode

    def close(self):
        self.down()

    # ---- one request ----

    def _handle(self, h):
        try:
            body = self._read_body(h)
        except (OSError, ValueError) as e:
            with self.lock:
                if self.mode != "down":
                    self.problems.append(f"{h.command} {h.path}: unreadable body: {e}")
            h.close_connection = True
            return
        with self.lock:
            hung = self.mode == "hang"
            if hung:
                self.requests.append({"n": len(self.requests), "t": time.time(),
                                      "method": h.command, "path": h.path,
                                      "headers": h.headers, "body": body,
                                      "sink": self._sink_of(h.path), "status": "hung"})
        while hung and self.mode == "hang":
            time.sleep(0.02)
        with self.lock:
            if self.mode == "down" or hung:
                # Read while we went down, or hung: the connection dies
                # unanswered.
                h.close_connection = True
                return
            req = {"n": len(self.requests), "t": time.time(), "method": h.command,
                   "path": h.path, "headers": h.headers, "body": body, "sink": None,
                   "status": None}
            self.requests.append(req)
            deliveries, problems = self._parse(req)
            if problems:
                self.problems += [f"request #{req['n']} {h.command} {h.path[:300]}: {p}"
                                  for p in problems]
                status = 400
            else:
                status = 500 if self.mode == "500" else 200
            reply = b"{}" if req["sink"] == "parca" and status == 200 else (
                b"" if status == 200 else b"refused by the test's receiver\n")
            try:
                h.send_response(status)
                h.send_header("Content-Type", "application/json" if reply == b"{}"
                              else "text/plain")
                h.send_header("Content-Length", str(len(reply)))
                h.end_headers()
                h.wfile.write(reply)
                h.wfile.flush()
            except OSError:
                h.close_connection = True
                req["status"] = "unsent"
                return
            req["status"] = status
            if status == 200:
                self.deliveries += deliveries

    @staticmethod
    def _read_body(h):
        te = h.headers.get("Transfer-Encoding")
        if te is not None:
            if te.strip().lower() != "chunked":
                raise ValueError(f"Transfer-Encoding {te!r}")
            chunks = []
            while True:
                size = int(h.rfile.readline(1 << 16).split(b";")[0].strip(), 16)
                if size == 0:
                    while h.rfile.readline(1 << 16) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(h.rfile.read(size))
                h.rfile.readline(1 << 16)
        cl = h.headers.get("Content-Length")
        if cl is None or not cl.strip().isdigit():
            raise ValueError(f"no Content-Length ({cl!r}) and not chunked")
        data = h.rfile.read(int(cl))
        if len(data) != int(cl):
            raise ValueError(f"body of {len(data)} bytes, Content-Length {cl}")
        return data

    @staticmethod
    def _gzip_problem(gz):
        if gz[:2] != b"\x1f\x8b":
            return f"the profile is not gzip'd (starts {gz[:8]!r})"
        try:
            raw = gzip.decompress(gz)
        except (OSError, EOFError, ValueError) as e:
            return f"the profile does not gunzip: {e}"
        if not raw:
            return "the profile is empty"
        return None

    def _sink_of(self, path):
        p = urllib.parse.urlsplit(path).path
        return {self.prefix + "/ingest": "pyroscope",
                self.prefix + "/profiles/writeraw": "parca"}.get(p)

    def _parse(self, req):
        problems = []
        if req["method"] != "POST":
            problems.append(f"method {req['method']}, not POST")
        u = urllib.parse.urlsplit(req["path"])
        ctype = (req["headers"].get("Content-Type") or "").split(";")[0].strip().lower()
        if u.path == self.prefix + "/ingest":
            req["sink"] = "pyroscope"
            if ctype != "application/octet-stream":
                problems.append(f"Content-Type {req['headers'].get('Content-Type')!r}, not "
                                f"application/octet-stream")
            d = self._parse_pyroscope(req, u.query, problems)
            return ([d] if d else []), problems
        if u.path == self.prefix + "/profiles/writeraw":
            req["sink"] = "parca"
            if u.query:
                problems.append(f"a query {u.query!r} on writeraw")
            if ctype != "application/json":
                problems.append(f"Content-Type {req['headers'].get('Content-Type')!r}, not "
                                f"application/json")
            return self._parse_parca(req, problems), problems
        problems.append(f"unknown path {u.path!r}")
        return [], problems

    def _parse_pyroscope(self, req, query, problems):
        n0 = len(problems)
        if not re.fullmatch(r"[A-Za-z0-9._~%&=/:+-]*", query):
            problems.append(f"the query is not URL-encoded: {query!r}")
        try:
            q = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=True)
        except ValueError as e:
            problems.append(f"query {query!r}: {e}")
            return None
        for k, v in q.items():
            if len(v) != 1:
                problems.append(f"query parameter {k!r} {len(v)} times")
        q = {k: v[0] for k, v in q.items()}
        if PYROSCOPE_KEYS - set(q):
            problems.append(f"query lacks {sorted(PYROSCOPE_KEYS - set(q))}: {query!r}")
        if set(q) - PYROSCOPE_KEYS - PYROSCOPE_OPTIONAL:
            problems.append(f"unknown query parameters "
                            f"{sorted(set(q) - PYROSCOPE_KEYS - PYROSCOPE_OPTIONAL)}")
        if q.get("format", "pprof") != "pprof":
            problems.append(f"format={q['format']!r}, not pprof")
        if q.get("spyName") == "pyspy":
            problems.append("spyName=pyspy (makes Pyroscope rewrite the frame names)")
        now = time.time()
        for k in ("from", "until"):
            if k in q and not (re.fullmatch(r"[0-9]{10}", q[k])
                               and abs(int(q[k]) - now) < 86400):
                problems.append(f"{k}={q[k]!r} is not UNIX seconds of today")
        frm = until = None
        if not problems[n0:]:
            frm, until = int(q["from"]), int(q["until"])
            if until < frm:
                problems.append(f"until {until} before from {frm}")
            if until > now + 1:
                problems.append(f"until {until} is in the future (now {now:.3f})")
        m = re.fullmatch(r"([^{}]*)\{([^{}]*)\}", q.get("name", ""))
        labels, service = {}, None
        if not m:
            problems.append(f"name={q.get('name')!r} is not SERVICE{{k=v,...}}")
        else:
            service = m.group(1)
            if not SERVICE.fullmatch(service):
                problems.append(f"service name {service!r} outside [A-Za-z0-9._/:-]+")
            for part in m.group(2).split(",") if m.group(2) else []:
                k, sep, v = part.partition("=")
                if not sep or not LABEL_NAME.fullmatch(k) or k in labels:
                    problems.append(f"bad or repeated label {part!r} in name={q['name']!r}")
                labels[k] = v
        if not labels.get("pid", "").isdigit():
            problems.append(f"no numeric pid label in name={q.get('name')!r}")
        gp = self._gzip_problem(req["body"])
        if gp:
            problems.append(gp)
        if problems[n0:]:
            return None
        return Delivery("pyroscope", req, labels, service, frm, until, req["body"])

    def _parse_parca(self, req, problems):
        def bad(what):
            problems.append(f"{what}; body {req['body'][:300]!r}")
            return []
        try:
            doc = json.loads(req["body"].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return bad(f"the body is not JSON: {e}")
        if not isinstance(doc, dict) or set(doc) != {"series", "normalized"}:
            return bad("the body is not {series, normalized}")
        if doc["normalized"] is not True:
            return bad(f"normalized is {doc['normalized']!r}, not true")
        if not isinstance(doc["series"], list) or not doc["series"]:
            return bad("series is not a non-empty list")
        out = []
        for s in doc["series"]:
            if (not isinstance(s, dict) or set(s) != {"labels", "samples"}
                    or not isinstance(s["labels"], dict) or set(s["labels"]) != {"labels"}
                    or not isinstance(s["labels"]["labels"], list)
                    or not isinstance(s["samples"], list) or not s["samples"]):
                return bad(f"a series is not {{labels: {{labels: [...]}}, samples: [...]}}: "
                           f"{str(s)[:200]}")
            labels = {}
            for lab in s["labels"]["labels"]:
                if (not isinstance(lab, dict) or set(lab) != {"name", "value"}
                        or not isinstance(lab["name"], str)
                        or not isinstance(lab["value"], str)):
                    return bad(f"a label is not {{name, value}} strings: {lab!r}")
                if not LABEL_NAME.fullmatch(lab["name"]) or lab["name"] in labels:
                    return bad(f"bad or repeated label name {lab['name']!r}")
                labels[lab["name"]] = lab["value"]
            metric, service = labels.pop("__name__", None), labels.pop("service_name", None)
            if metric is None or service is None:
                return bad(f"labels without __name__ or service_name: {labels}")
            if not SERVICE.fullmatch(service):
                return bad(f"service_name {service!r} outside [A-Za-z0-9._/:-]+")
            if not labels.get("pid", "").isdigit():
                return bad(f"no numeric pid label: {labels}")
            for smp in s["samples"]:
                if (not isinstance(smp, dict) or set(smp) != {"rawProfile"}
                        or not isinstance(smp["rawProfile"], str)):
                    return bad(f"a sample is not {{rawProfile}}: {str(smp)[:200]}")
                try:
                    gz = base64.b64decode(smp["rawProfile"], validate=True)
                except (binascii.Error, ValueError) as e:
                    return bad(f"rawProfile is not base64: {e}")
                gp = self._gzip_problem(gz)
                if gp:
                    return bad(gp)
                out.append(Delivery("parca", req, dict(labels), service, None, None, gz,
                                    metric=metric))
        return out

    # ---- what the tests read ----

    def of(self, sink, pid):
        with self.lock:
            return [d for d in self.deliveries if d.sink == sink and d.pid == pid]

    def statuses(self, sink):
        with self.lock:
            return collections.Counter(r["status"] for r in self.requests if r["sink"] == sink)

    def describe(self, pids):
        answers = {sink: dict(self.statuses(sink)) for sink in ("pyroscope", "parca")}
        with self.lock:
            lines = [f"receiver {self.url}, mode {self.mode}, {len(self.requests)} requests "
                     f"(answers {answers}), {len(self.problems)} problems"]
            lines += self.problems[:5]
            for pid in pids:
                for sink in ("pyroscope", "parca"):
                    ds = [d for d in self.deliveries if d.sink == sink and d.pid == pid]
                    lines.append(f"  {sink} pid {pid}: {len(ds)}: "
                                 + " ".join(f"{d.frm}-{d.until}" if d.frm is not None
                                            else f"#{d.req}" for d in ds[-12:]))
            return "\n".join(lines)


@pytest.fixture
def rx():
    r = Receiver()
    yield r
    r.close()


# --------------------------------------------------------------------------
# the agent and its targets

class Agent:
    """One `pyprof-bpf agent` run in its own session (killed with the test)."""

    def __init__(self, procs, tmp_path, args, name="agent"):
        self.err_path = str(tmp_path / f"{name}.stderr")
        self.cmd = [binary(), "agent"] + [str(a) for a in args]
        with open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err,
                                      start_new_session=True)
        self.p.stderr_path = self.err_path
        procs.items.append(self.p)
        self.t_start = time.time()
        self.t_kill = None

    @property
    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def running(self):
        if self.p.poll() is not None:
            pytest.fail(f"`{' '.join(self.cmd)}` exited {self.p.returncode} while it should "
                        f"run; stderr:\n{self.stderr}")

    def stop(self, timeout=EXIT_WAIT):
        """SIGTERM; returns the seconds it took to exit, which must be 0."""
        self.running()
        self.t_kill = time.time()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(self.cmd)}` still running {timeout}s after SIGTERM; "
                        f"stderr:\n{self.stderr}")
        took = time.time() - self.t_kill
        assert self.p.returncode == 0, (f"`{' '.join(self.cmd)}` exited {self.p.returncode} "
                                        f"after SIGTERM; stderr:\n{self.stderr}")
        return took

    def check_log(self, secrets=()):
        """No secret in the log, every line of it prefixed (called last: the
        profiles matter more)."""
        err = self.stderr
        for s in secrets:
            assert s not in err, f"a secret ({s[:3]}...) is in the agent's log:\n{err}"
        for line in err.splitlines():
            # The agent's own lines, or the recording's (one line each too).
            assert line.startswith(("pyprof-bpf agent: ", "pyprof-bpf: ")), (
                f"an agent log line without the 'pyprof-bpf agent:' prefix: {line!r}\n"
                f"stderr:\n{err}")


class Burner:
    """agent_burn.py on one interpreter, burning in burn_a()."""

    def __init__(self, interp, procs, tmp_path, name, env=None, module=False):
        self.interp, self.name = interp, name
        if module:
            assert not interp.root
            self.script = BURN
            head = ["-m", MODULE]
        else:
            self.script = stage_unique(interp, BURN, procs)
            head = [self.script]
        state_seen, self.state = out_path(interp, procs, tmp_path, f"{name}.state")
        procs.cleanup_file(self.state + ".b")
        procs.cleanup_file(self.state + ".b.tmp")
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("OTEL_SERVICE_NAME", "PYROSCOPE_APPLICATION_NAME")}
        full_env.update(env or {})
        self.err_path = str(tmp_path / f"{name}.stderr")
        with open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(interp.argv(head + [state_seen]), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err, env=full_env,
                                      cwd=pyenvs.REPO, start_new_session=True)
        self.p.stderr_path = self.err_path
        procs.items.append(self.p)
        self.t_spawn = time.time()
        self.pid = self.p.pid
        self.t_ready = self.t_exit = self.t_switch = self.t_switched = None

    def __repr__(self):
        return f"{self.name} ({self.interp.label}, pid {self.pid})"

    def wait_ready(self):
        wait_file(self.p, self.state, repr(self), timeout=WAIT)
        self.t_ready = time.time()
        with open(self.state) as f:
            pid, version = f.read().split()
        assert int(pid) == self.pid, f"{self}: the state file says pid {pid}"
        self.version = version
        assert version == self.interp.version_str, (self, version)
        return self

    def switch(self):
        self.t_switch = time.time()
        os.kill(self.pid, signal.SIGUSR1)

    def wait_switched(self):
        wait_file(self.p, self.state + ".b", f"{self} after SIGUSR1", timeout=WAIT)
        self.t_switched = time.time()

    def kill(self):
        self.t_exit_lo = time.time()
        os.kill(self.pid, signal.SIGKILL)
        self.p.wait(timeout=30)
        self.t_exit = time.time()


class DockerCgroup:
    """A cgroup named as Docker's systemd driver names a container's
    (docker-<64 hex>.scope): to /proc/PID/cgroup, a process moved into it is
    in that container. Its processes go back to the hierarchy's root (where
    ours start) when it is removed."""

    def __init__(self):
        self.id = os.urandom(32).hex()
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
            if os.path.exists(os.path.join(base, "cgroup.procs")):
                break
        else:
            pytest.fail("no cgroup hierarchy to make a container's cgroup in")
        self.base = base
        self.path = os.path.join(base, f"docker-{self.id}.scope")
        os.mkdir(self.path)

    def add(self, pid):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        with open(f"/proc/{pid}/cgroup") as f:
            assert self.id in f.read()

    def close(self):
        for _ in range(100):
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as f:
                    pids = f.read().split()
                for pid in pids:
                    try:
                        with open(os.path.join(self.base, "cgroup.procs"), "w") as f:
                            f.write(pid)
                    except OSError:
                        pass
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"cannot remove {self.path}")


@pytest.fixture
def docker_cgroup():
    cg = DockerCgroup()
    yield cg
    cg.close()


def push_args(rx, spool):
    return ["--window", WINDOW, "-F", HZ, "--push", f"pyroscope={rx.url}",
            "--push", f"parca={rx.url}", "--spool-dir", spool] + LABEL_ARGS


def wait_for(cond, what, rx, burners, agents=(), timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        for a in agents:
            a.running()
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s\n{rx.describe([b.pid for b in burners])}"
                        + "".join(f"\nagent stderr:\n{a.stderr}" for a in agents))
        time.sleep(0.1)


def each_has(rx, burners, pred):
    """pred(list of deliveries) holds for every burner on both sinks."""
    return lambda: all(pred(rx.of(sink, b.pid)) for b in burners
                       for sink in ("pyroscope", "parca"))


def wait_windows(rx, burners, agents, n, what):
    wait_for(each_has(rx, burners, lambda ds: len(ds) >= n),
             f"{n} windows of each target on both sinks ({what})", rx, burners, agents)


def wait_window_from(rx, burners, agents, t, what):
    """Until every target has a window that began at t or later on
    Pyroscope, and as many on Parca: everything it had before t has arrived
    (or is missing for good, which the sequence checks catch)."""
    def cond():
        for b in burners:
            py = rx.of("pyroscope", b.pid)
            if not py or py[-1].frm < t or len(rx.of("parca", b.pid)) < len(py):
                return False
        return True
    wait_for(cond, f"a window from {t:.0f} on of each target ({what})", rx, burners, agents)


def stop_after_marker(agent, burners):
    """Switches the targets to burn_b() and stops the agent once they have
    burnt 0.25 s of CPU there, at 1.05-1.5 s into a window of the clock (the
    agent's windows are aligned on it): the open window's until, its second,
    is then after every closed window's, so check_marker() can tell it
    arrived. (Late, on a loaded machine, that only makes the check weaker.)"""
    for b in burners:
        b.switch()
    for b in burners:
        b.wait_switched()
    phase = time.time() % WINDOW
    if not 1.05 <= phase <= 1.5:
        time.sleep((1.05 - phase) % WINDOW + 0.02)
    return agent.stop()


# --------------------------------------------------------------------------
# decoding and checking what arrived

def decode(node_env, tmp_path, items):
    """Decodes every Delivery's profile (and (path, None) files) with
    pprof-format in one node run; sets .dec."""
    d = tmp_path / "profiles"
    d.mkdir(exist_ok=True)
    paths = []
    for i, it in enumerate(items):
        if isinstance(it, Delivery):
            path = str(d / f"{i}-{it.sink}-{it.pid}.pb.gz")
            with open(path, "wb") as f:
                f.write(it.gz)
            it.path = path
        else:
            path = it.path
        paths.append(path)
    lst = str(d / "list")
    with open(lst, "w") as f:
        f.write("\n".join(paths) + "\n")
    out = json.loads(run(["node", os.path.join(CONSUMERS, "pprof_decode_many.cjs"), lst],
                         env=node_env, timeout=300).stdout)
    assert len(out) == len(items)
    for it, dec in zip(items, out):
        assert "error" not in dec, f"pprof-format cannot read {it}: {dec['error']}"
        it.dec = dec


def check_pprof_tool(items):
    """The real pprof (issue #36) reads every profile: `pprof -raw`'s totals
    of each sample type are pprof-format's."""
    for it in items:
        raw = pprof_raw(it.path)
        totals = [sum(v[k] for v, _ in raw["samples"]) for k in range(len(raw["sample_types"]))]
        ours = [sum(s["value"][k] for s in it.dec["samples"])
                for k in range(len(it.dec["sampleType"]))]
        assert totals == ours, f"{it}: pprof -raw totals {totals}, ours {ours}"


class OutFile:
    def __init__(self, path, service, pid, frm):
        self.path, self.service, self.pid, self.frm = path, service, pid, frm
        self.sink, self.dec = "file", None

    def __repr__(self):
        return f"<file {os.path.basename(self.path)}>"


def frames(sample):
    """A sample's frames, leaf first, as (name, file, line)."""
    return [tuple(ln) for loc in sample["stack"] for ln in loc]


def content(dec):
    """What a profile says, independent of its encoding's order."""
    return sorted((tuple(frames(s)), tuple(s["value"]), tuple(sorted(s["labels"].items())))
                  for s in dec["samples"])


def hot_in(d, fn):
    return sum(s["value"][0] for s in d.dec["samples"]
               if any(f[0] == fn and f[1] == BURN_FILE[d.pid] for f in frames(s)))


BURN_FILE = {}                 # pid -> the path of agent_burn.py that target sees


def check_profile(d, b):
    """One profile of burner b: pprof-format read it; cpu samples at -F's
    period; only this program's frames once it runs (its start-up before);
    the hot function in it."""
    dec = d.dec
    what = f"{d} of {b}"
    assert dec["gzipped"], what
    assert ["cpu", "nanoseconds"] in dec["sampleType"], f"{what}: sample types {dec['sampleType']}"
    assert dec["periodType"] == ["cpu", "nanoseconds"], f"{what}: {dec['periodType']}"
    assert abs(dec["period"] - 1e9 / HZ) <= 1, f"{what}: period {dec['period']}, -F {HZ}"
    assert int(dec["timeNanos"]) > 0, f"{what}: no timeNanos"
    assert dec["samples"], f"{what}: no samples"
    startup = d.frm is None or d.frm <= b.t_ready + 1
    n, hot, bad = 0, 0, []
    for s in dec["samples"]:
        assert all(v >= 0 for v in s["value"]) and s["value"][0] > 0, f"{what}: {s['value']}"
        if "pid" in s["labels"]:
            assert s["labels"]["pid"] == b.pid, f"{what}: a sample labelled {s['labels']}"
        fr = frames(s)
        # A process root ("python3.14 (pid N)", no file) is allowed, for this pid only.
        while fr and fr[-1][1] == "" and re.fullmatch(r".+ \(pid \d+\)", fr[-1][0]):
            assert fr[-1][0].endswith(f"(pid {b.pid})"), f"{what}: root {fr[-1]}"
            fr = fr[:-1]
        n += s["value"][0]
        if fr and fr[0][0] in HOT and fr[0][1] == b.script:
            hot += s["value"][0]
        if not startup and not any(f[0] == "main" and f[1] == b.script for f in fr):
            bad.append(fr)
    assert not bad, (f"{what}: {len(bad)} samples outside main() of {b.script} in a window "
                     f"after it started; e.g. {bad[:3]}")
    if not startup:
        assert hot >= 0.5 * n and hot > 0, (
            f"{what}: only {hot} of {n} samples in burn_a()/burn_b(): "
            f"{[frames(s) for s in dec['samples']][:5]}")


def check_labels(d, b, service, container=None):
    want = {"pid": str(b.pid), "host": HOST, "python_version": b.interp.version_str, **LABELS}
    if container:
        want["container_id"] = container
    assert d.service == service, f"{d} of {b}: service_name {d.service!r}, expected {service!r}"
    assert d.labels == want, f"{d} of {b}: labels {d.labels}, expected {want}"
    if d.dec is not None:
        # The profile carries them itself (pprof comments), for --output-dir.
        comments = dict(c.split("=", 1) for c in d.dec["comments"])
        assert comments == {"service_name": service, **want}, (
            f"{d} of {b}: comments {d.dec['comments']}, expected {want}")
    if d.sink == "parca":
        assert d.metric == "process_cpu", f"{d}: __name__ {d.metric!r}"


def check_sequence(ds, b, contiguous=True):
    """Pyroscope windows of one process in arrival order: from increasing
    (none twice, in order), each abutting the next."""
    for a, c in zip(ds, ds[1:]):
        assert c.frm > a.frm, (f"{b}: window {c.frm}-{c.until} arrived after {a.frm}-{a.until} "
                               f"(out of order or twice): {[(x.frm, x.until) for x in ds]}")
        if contiguous:
            assert c.frm == a.until, (f"{b}: windows {a.frm}-{a.until} and {c.frm}-{c.until} "
                                      f"do not abut (one missing?): "
                                      f"{[(x.frm, x.until) for x in ds]}")
    for i, d in enumerate(ds):
        assert d.until - d.frm <= 2 * WINDOW + 1, f"{b}: a window {d.frm}-{d.until} too long"
        if 0 < i < len(ds) - 1 and contiguous:
            assert d.until - d.frm >= 1, f"{b}: a middle window {d.frm}-{d.until} too short"


def check_sinks_agree(py, pa, b):
    """Parca got the same profiles as Pyroscope, in the same order; each
    one's timeNanos within its Pyroscope window."""
    assert len(pa) == len(py), (f"{b}: {len(py)} profiles to Pyroscope, {len(pa)} to Parca:\n"
                                f"  {py}\n  {pa}")
    for i, (x, y) in enumerate(zip(py, pa)):
        assert content(x.dec) == content(y.dec), (
            f"{b}: Parca's profile #{i} {y} is not Pyroscope's {x}")
        t = int(y.dec["timeNanos"]) / 1e9
        assert x.frm - 1 <= t <= x.until + 1, f"{b}: timeNanos {t:.3f} of {y} not in {x}"
        assert int(x.dec["timeNanos"]) == int(y.dec["timeNanos"]), (x, y)
    for a, c in zip(pa, pa[1:]):
        assert int(c.dec["timeNanos"]) > int(a.dec["timeNanos"]), (
            f"{b}: Parca's profiles not in time order: {pa}")


def check_marker(py, b, t_kill):
    """The last window reaches SIGTERM and holds the samples of burn_b(),
    which started after the window before it was closed; no window that ended
    before the switch has any, none that began after burn_b() had run has
    burn_a()."""
    assert py[-1].until >= math.floor(t_kill), (
        f"{b}: the last window {py[-1].frm}-{py[-1].until} ends before SIGTERM at "
        f"{t_kill:.3f}: the open window was not shipped")
    assert sum(hot_in(d, "burn_b") for d in py) > 0, (
        f"{b}: no burn_b() sample in any window, though it ran 0.25 s of CPU before SIGTERM: "
        f"the open window at SIGTERM was not shipped? {py}")
    for d in py:
        if d.until <= b.t_switch - 1:
            assert hot_in(d, "burn_b") == 0, (
                f"{b}: burn_b() samples in {d}, which ended before the switch at "
                f"{b.t_switch:.3f}")
        if d.frm >= b.t_switched + 1:
            assert hot_in(d, "burn_a") == 0, (
                f"{b}: burn_a() samples in {d}, which began after burn_b() ran "
                f"({b.t_switched:.3f})")


def check_problems(rx):
    assert not rx.problems, "the receiver got requests outside the contract:\n" + "\n".join(
        rx.problems[:20])


def ours(rx, burners):
    return [d for b in burners for sink in ("pyroscope", "parca") for d in rx.of(sink, b.pid)]


# --------------------------------------------------------------------------
# 1. three versions, both sinks, the output directory

def expected_service(b, env):
    if env.get("OTEL_SERVICE_NAME"):
        name = env["OTEL_SERVICE_NAME"]
    elif env.get("PYROSCOPE_APPLICATION_NAME"):
        name = env["PYROSCOPE_APPLICATION_NAME"]
    else:
        name = os.path.basename(b.script)[:-len(".py")]
    return re.sub(r"[^A-Za-z0-9._/:-]", "_", name)


@pytest.mark.slow
def test_three_versions(rx, procs, tmp_path, node_env, docker_cgroup):
    spool, outdir = str(tmp_path / "spool"), str(tmp_path / "out")
    setups = [("system-3.11", {}),
              ("pyenv-3.12.1", {"PYROSCOPE_APPLICATION_NAME": "billing.worker"}),
              ("sid-3.14", {"OTEL_SERVICE_NAME": "checkout api#3",
                            "PYROSCOPE_APPLICATION_NAME": "not-this-one"})]
    burners, services = [], {}
    for label, env in setups:
        b = Burner(by_label(label), procs, tmp_path, f"burn-{label}", env=env)
        burners.append(b)
        services[b.pid] = expected_service(b, env)
    assert services[burners[0].pid] == "agent_burn" and services[burners[2].pid] == \
        "checkout_api_3"
    for b in burners:
        b.wait_ready()
        BURN_FILE[b.pid] = b.script
    # The chrooted one is in a "container" too.
    docker_cgroup.add(burners[2].pid)
    containers = {burners[2].pid: docker_cgroup.id}
    agent = Agent(procs, tmp_path, ["-a"] + push_args(rx, spool) + ["--output-dir", outdir])
    wait_windows(rx, burners, [agent], 4, "running")
    took = stop_after_marker(agent, burners)
    check_problems(rx)

    files = []
    for name in sorted(os.listdir(outdir)):
        m = re.fullmatch(r"(.+)-(\d+)-(\d+)\.pb\.gz", name)
        assert m, f"{outdir}: a file named {name!r}, not <service>-<pid>-<from>.pb.gz"
        if int(m.group(2)) in services:
            files.append(OutFile(os.path.join(outdir, name), m.group(1), int(m.group(2)),
                                 int(m.group(3))))
    decode(node_env, tmp_path, ours(rx, burners) + files)
    check_pprof_tool(ours(rx, burners) + files)
    grids = {}
    for b in burners:
        py, pa = rx.of("pyroscope", b.pid), rx.of("parca", b.pid)
        for d in py + pa:
            check_labels(d, b, services[b.pid], containers.get(b.pid))
            check_profile(d, b)
        check_sequence(py, b)
        check_sinks_agree(py, pa, b)
        check_marker(py, b, agent.t_kill)
        assert py[0].frm >= math.floor(agent.t_start) - 1, (b, py[0], agent.t_start)
        grids[b.pid] = [(d.frm, d.until) for d in py]
        mine = sorted((f for f in files if f.pid == b.pid), key=lambda f: f.frm)
        assert [(f.service, f.frm) for f in mine] == [(services[b.pid], d.frm) for d in py], (
            f"{b}: the output directory's files {mine} are not its windows {py}")
        for f, d in zip(mine, py):
            assert content(f.dec) == content(d.dec), f"{b}: {f} is not {d}"
    # The same windows for the three (the agent's very first one may be too
    # short for a process to have a sample in it).
    ref = max(grids.values(), key=len)
    for b in burners:
        g = grids[b.pid]
        assert g == ref or g == ref[1:], f"{b}: windows {g}, another target's {ref}"
    print(f"\nthree versions: {len(ref)} windows per target, {len(rx.deliveries)} profiles "
          f"delivered in all, SIGTERM to exit {took:.2f}s")
    agent.check_log()


# --------------------------------------------------------------------------
# 2. the store goes away

@pytest.mark.slow
def test_outage(rx, procs, tmp_path, node_env):
    spool = str(tmp_path / "spool")
    burners = [Burner(by_label(label), procs, tmp_path, f"burn-{label}",
                      env={"OTEL_SERVICE_NAME": f"outage-{label}"})
               for label in ("pyenv-3.12.1", "sid-3.14")]
    for b in burners:
        b.wait_ready()
        BURN_FILE[b.pid] = b.script
    # No -a, no -p: -a is implied.
    agent = Agent(procs, tmp_path, push_args(rx, spool) + ["--push-timeout", PUSH_TIMEOUT])
    wait_windows(rx, burners, [agent], 2, "before the outage")

    rx.down()
    t_down = time.time()
    time.sleep(3 * WINDOW)                  # the outage itself
    agent.running()
    rx.up()
    t_up = time.time()
    wait_window_from(rx, burners, [agent], t_up, "after refusing connections")

    rx.up("500")
    t_500 = time.time()
    wait_for(lambda: all(rx.statuses(s)[500] >= 1 for s in ("pyroscope", "parca")),
             "a request answered 500 on each sink", rx, burners, [agent])
    time.sleep(max(0.0, t_500 + 2 * WINDOW - time.time()))     # two windows of 500
    rx.up()
    t_up2 = time.time()
    wait_window_from(rx, burners, [agent], t_up2, "after answering 500")

    rx.up("hang")
    t_hang = time.time()
    wait_for(lambda: all(rx.statuses(s)["hung"] >= 1 for s in ("pyroscope", "parca")),
             "a request hung on each sink", rx, burners, [agent])
    time.sleep(max(0.0, t_hang + PUSH_TIMEOUT + 1 - time.time()))    # past the timeout
    rx.up()
    t_up3 = time.time()
    wait_window_from(rx, burners, [agent], t_up3, "after timing out")
    stop_after_marker(agent, burners)
    check_problems(rx)

    decode(node_env, tmp_path, ours(rx, burners))
    for b in burners:
        py, pa = rx.of("pyroscope", b.pid), rx.of("parca", b.pid)
        for d in py + pa:
            check_labels(d, b, f"outage-{b.interp.label}")
            check_profile(d, b)
        check_sequence(py, b)
        check_sinks_agree(py, pa, b)
        check_marker(py, b, agent.t_kill)
        # The windows of the outage are there (check_sequence: none missing).
        assert py[0].until <= t_down + 1 and py[-1].frm >= t_up3 - 1, (b, py)
        held = [d for d in py if d.until < t_up - 1 and d.t > t_up]
        assert held, f"{b}: no window closed during the outage arrived after it: {py}"
        print(f"\noutage {b}: {len(py)} windows, {len(held)} held through the outage")
    print(f"outage: answers pyroscope {dict(rx.statuses('pyroscope'))}, "
          f"parca {dict(rx.statuses('parca'))}")
    agent.check_log()


@pytest.mark.slow
def test_spool_across_restart(rx, procs, tmp_path, node_env):
    spool = str(tmp_path / "spool")
    burners = [Burner(by_label(label), procs, tmp_path, f"burn-{label}",
                      env={"OTEL_SERVICE_NAME": f"spool-{label}"})
               for label in ("system-3.11", "sid-3.13")]
    for b in burners:
        b.wait_ready()
        BURN_FILE[b.pid] = b.script
    args = (["-p", ",".join(str(b.pid) for b in burners)] + push_args(rx, spool)
            + ["--push-timeout", PUSH_TIMEOUT])
    a1 = Agent(procs, tmp_path, args, name="agent1")
    wait_windows(rx, burners, [a1], 1, "before the outage")
    rx.down()
    time.sleep(2 * WINDOW)                  # windows pile up in the spool
    took = stop_after_marker(a1, burners)
    assert took <= PUSH_TIMEOUT + 15, (
        f"agent 1 took {took:.1f}s to exit with the store down, --push-timeout {PUSH_TIMEOUT}")
    spooled = [os.path.join(d, f) for d, _, fs in os.walk(spool) for f in fs]
    assert spooled, f"the spool {spool} is empty after SIGTERM with the store down"
    # Agent 2 starts well after agent 1's last window (so they are told apart).
    time.sleep(max(0.0, a1.t_kill + 2.5 - time.time()))
    rx.up()
    a2 = Agent(procs, tmp_path, args, name="agent2")
    wait_window_from(rx, burners, [a2], a2.t_start + WINDOW, "agent 2's own windows")
    a2.stop()
    check_problems(rx)

    decode(node_env, tmp_path, ours(rx, burners))
    for b in burners:
        py, pa = rx.of("pyroscope", b.pid), rx.of("parca", b.pid)
        for d in py + pa:
            check_labels(d, b, f"spool-{b.interp.label}")
            check_profile(d, b)
        check_sequence(py, b, contiguous=False)     # in order and none twice, across both
        check_sinks_agree(py, pa, b)
        first = [d for d in py if d.frm < a1.t_kill + 1]
        second = [d for d in py if d.frm >= a1.t_kill + 1]
        assert first and second and py == first + second, (b, py)
        check_sequence(first, b)
        check_sequence(second, b)
        check_marker(first, b, a1.t_kill)
        assert any(d.t > a2.t_start for d in first), (
            f"{b}: agent 2 delivered none of agent 1's spooled windows: {py}")
        assert second[0].frm >= math.floor(a2.t_start) - 1, (b, second)
    print(f"\nspool: agent 1 exited {took:.2f}s after SIGTERM with the store down, "
          f"{len(spooled)} files in the spool")
    a1.check_log()
    a2.check_log()


@pytest.mark.slow
def test_spool_age(rx, procs, tmp_path, node_env):
    """--spool-age 3s and a store down for four windows: the windows that
    were older than that while it was down are dropped (and said so), the
    rest arrive in order, none twice; once a delivery went through, every
    window does."""
    age = 3
    b = Burner(by_label("pyenv-3.13.0"), procs, tmp_path, "aged",
               env={"OTEL_SERVICE_NAME": "aged"})
    b.wait_ready()
    BURN_FILE[b.pid] = b.script
    agent = Agent(procs, tmp_path, ["-p", b.pid] + push_args(rx, str(tmp_path / "spool"))
                  + ["--spool-age", f"{age}s"])
    wait_windows(rx, [b], [agent], 1, "before the outage")
    rx.down()
    t_down = time.time()
    time.sleep(4 * WINDOW)                  # the outage itself
    rx.up()
    t_up = time.time()
    wait_window_from(rx, [b], [agent], t_up + WINDOW, "after the outage")
    agent.stop()
    check_problems(rx)

    decode(node_env, tmp_path, ours(rx, [b]))
    py, pa = rx.of("pyroscope", b.pid), rx.of("parca", b.pid)
    for d in py + pa:
        check_labels(d, b, "aged")
        check_profile(d, b)
    check_sequence(py, b, contiguous=False)
    check_sinks_agree(py, pa, b)
    stale = [d for d in py if d.until > t_down + 1 and d.frm + age + WINDOW + 2 < t_up]
    assert not stale, (f"windows older than --spool-age {age}s while the store was down "
                       f"were delivered: {stale} (down {t_down:.1f}-{t_up:.1f})")
    t_ok = min(d.t for d in py if d.t > t_up)
    after = [d for d in py if d.frm >= t_ok]
    check_sequence(after, b)
    assert after and py[-1] is after[-1], py
    assert any(d.until <= t_down for d in py), py
    assert "dropped" in agent.stderr, (
        f"the agent did not say it dropped profiles:\n{agent.stderr}")
    agent.check_log()


# --------------------------------------------------------------------------
# 3. processes that start and exit during the run

@pytest.mark.slow
def test_start_and_exit(rx, procs, tmp_path, node_env):
    spool, outdir = str(tmp_path / "spool"), str(tmp_path / "out")
    retain = 5
    r = Burner(by_label("pyenv-3.12.1"), procs, tmp_path, "resident",
               env={"OTEL_SERVICE_NAME": "resident"})
    e = Burner(by_label("sid-3.14"), procs, tmp_path, "exits",
               env={"OTEL_SERVICE_NAME": "exits"})
    for b in (r, e):
        b.wait_ready()
        BURN_FILE[b.pid] = b.script
    agent = Agent(procs, tmp_path, ["-a"] + push_args(rx, spool)
                  + ["--output-dir", outdir, "--retain", f"{retain}s"])
    wait_windows(rx, [r, e], [agent], 2, "before the exit")
    e.kill()
    # Two windows later the newcomer starts (-m: service name from the module).
    wait_window_from(rx, [r], [agent], e.t_exit + WINDOW, "after the exit")
    s = Burner(by_label("system-3.11"), procs, tmp_path, "starts", module=True)
    s.wait_ready()
    BURN_FILE[s.pid] = s.script
    wait_window_from(rx, [r, s], [agent], s.t_ready + 2 * WINDOW, "the newcomer's windows")
    # Long enough for --retain to have dropped something.
    first = rx.of("pyroscope", r.pid)[0].frm
    wait_window_from(rx, [r, s], [agent], first + retain + 3 * WINDOW + 6, "a long run")
    t_files = time.time()
    names = os.listdir(outdir)
    stop_after_marker(agent, [r, s])
    check_problems(rx)

    decode(node_env, tmp_path, ours(rx, [r, e, s]))
    services = {r.pid: "resident", e.pid: "exits", s.pid: MODULE}
    seqs = {}
    for b in (r, e, s):
        py, pa = rx.of("pyroscope", b.pid), rx.of("parca", b.pid)
        assert py, f"{b}: no profile at all"
        for d in py + pa:
            check_labels(d, b, services[b.pid])
            check_profile(d, b)
        check_sequence(py, b)
        check_sinks_agree(py, pa, b)
        seqs[b.pid] = [(d.frm, d.until) for d in py]
    check_marker(rx.of("pyroscope", r.pid), r, agent.t_kill)
    check_marker(rx.of("pyroscope", s.pid), s, agent.t_kill)
    # The agent's first window begins when it does: a short one may hold
    # no sample of a process, so only whole (clock-aligned) windows count.
    grid, ge, gs = ([w for w in seqs[p] if w[0] % WINDOW == 0] for p in (r.pid, e.pid, s.pid))
    # The exiting one: the resident's windows from (about) the start, up to
    # the one it exited in.
    i0 = grid.index(ge[0]) if ge[0] in grid else None
    assert i0 is not None and i0 <= 1 and grid[i0:i0 + len(ge)] == ge, (
        f"{e}: windows {ge} are not a run of the resident's {grid}")
    last = ge[-1]
    assert last[0] <= e.t_exit + 0.5, (
        f"{e}: a window {last} that began after it was killed at {e.t_exit:.3f}")
    assert last[1] >= e.t_exit_lo - 1.5, (
        f"{e}: its last window {last} ends well before it was killed at {e.t_exit_lo:.3f}: "
        f"a window it lived in is missing")
    # The newcomer: a run of the resident's windows from the one it started in
    # to the end.
    j0 = grid.index(gs[0]) if gs[0] in grid else None
    assert j0 is not None and grid[j0:] == gs, (
        f"{s}: windows {gs} are not the resident's {grid} from its start on")
    assert gs[0][1] >= s.t_spawn - 1, f"{s}: a window {gs[0]} ended before it was started"
    assert gs[0][0] <= s.t_ready + 1, (
        f"{s}: its first window {gs[0]} began well after it was running ({s.t_ready:.3f}): "
        f"a window it lived in is missing")
    # --retain: nothing much older than the retention left in the directory.
    froms = sorted(int(re.fullmatch(r".+-(\d+)-(\d+)\.pb\.gz", n).group(2)) for n in names
                   if n.endswith(".pb.gz") and f"-{r.pid}-" in n)
    assert froms and froms[-1] >= t_files - 3 * WINDOW - 2, (froms, t_files)
    old = [f for f in froms if f < t_files - retain - 3 * WINDOW - 4]
    assert not old, (f"files of windows from {old} still in {outdir} at {t_files:.0f}, "
                     f"--retain {retain}s")
    assert min(grid)[0] < t_files - retain - 3 * WINDOW - 4, "the run was too short to tell"
    print(f"\nstart/exit: resident {len(grid)} windows, exiting {len(ge)}, newcomer {len(gs)}")
    agent.check_log()


# --------------------------------------------------------------------------
# 4. errors and credentials

def check_error(proc, what, says):
    err = proc.stderr.decode("utf-8", "replace")
    show = f"exit {proc.returncode}\nstderr:\n{err}stdout:\n{proc.stdout[:2000]!r}"
    assert proc.returncode > 0, f"{what}: expected a failure, got {show}"
    assert proc.stdout == b"", f"{what}: printed on stdout: {show}"
    lines = [ln for ln in err.split("\n") if ln.strip()]
    # One line says what is wrong; argp may add its "Try `... --help'" hint.
    hint = [ln for ln in lines[1:]
            if not (ln.startswith("Try `pyprof-bpf agent --help'") or ln == "information.")]
    assert lines and not hint, f"{what}: expected one error line, got {show}"
    assert lines[0].startswith("pyprof-bpf agent:"), f"{what}: {show}"
    assert re.search(says, lines[0]), f"{what}: the error does not name {says!r}: {show}"


@pytest.mark.parametrize("args,says", [
    (["--push", "foo=http://127.0.0.1:9"], r"foo"),
    (["--push", "pyroscope="], r"(?i)url|pyroscope="),
    (["--push", "parca"], r"(?i)parca|push"),
    (["--push", "=http://127.0.0.1:9"], r"(?i)push|kind|sink"),
    (["--window", "0", "--push", "pyroscope=http://127.0.0.1:9"], r"(?i)window"),
    (["--window", "-3", "--push", "pyroscope=http://127.0.0.1:9"], r"(?i)window"),
    (["--window", "abc", "--push", "pyroscope=http://127.0.0.1:9"], r"(?i)window"),
    (["--label", "novalue", "--push", "pyroscope=http://127.0.0.1:9"], r"(?i)label"),
    (["--retain", "5x", "--output-dir", "/nonexistent/x"], r"(?i)retain"),
], ids=["push-foo", "push-no-url", "push-no-eq", "push-no-kind", "window-0", "window-neg",
        "window-abc", "label-no-eq", "retain-bad"])
def test_bad_options(args, says, tmp_path):
    args = args + ["--spool-dir", str(tmp_path / "spool")]
    check_error(run_tool(["agent"] + args, timeout=15), f"agent {' '.join(args)}", says)


@pytest.mark.parametrize("kind", ["missing", "directory", "bad-line"])
def test_unreadable_auth_file(kind, tmp_path):
    """A credentials file that cannot be read, or has a line that is none of
    the four: an error naming it (never the secret), before any sampling."""
    secret = f"s3cr3t-{random.getrandbits(64):016x}"
    path = str(tmp_path / "nope") if kind == "missing" else str(tmp_path)
    if kind == "bad-line":
        path = str(tmp_path / "auth")
        with open(path, "w") as f:
            f.write(f"user=alice\npasswort={secret}\n")
        os.chmod(path, 0o600)
    args = ["agent", "-a", "--push", "pyroscope=http://127.0.0.1:9", "--auth-file", path,
            "--spool-dir", str(tmp_path / "spool")]
    proc = run_tool(args, timeout=15)
    check_error(proc, " ".join(args), re.escape(path))
    assert secret.encode() not in proc.stderr, proc.stderr


def all_argv():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out.append(f.read())
            except OSError:
                pass
    return out


@pytest.mark.parametrize("kind", ["basic", "bearer"])
def test_auth(kind, rx, procs, tmp_path):
    """Credentials from --auth-file on every request to both stores (whose
    URLs here have a base path, one with a trailing slash)."""
    secret = f"s3cr3t-{random.getrandbits(64):016x}"
    auth = tmp_path / "auth"
    if kind == "basic":
        auth.write_text(f"# the store's credentials\ntenant=team-a\nuser=alice\n"
                        f"password={secret}\n")
        want = {"X-Scope-OrgID": "team-a",
                "Authorization": "Basic " + base64.b64encode(
                    f"alice:{secret}".encode()).decode()}
    else:
        auth.write_text(f"bearer={secret}\n# done\n")
        want = {"X-Scope-OrgID": None, "Authorization": f"Bearer {secret}"}
    os.chmod(auth, 0o600)
    b = Burner(by_label("pyenv-3.12.1"), procs, tmp_path, "auth",
               env={"OTEL_SERVICE_NAME": "auth"})
    b.wait_ready()
    BURN_FILE[b.pid] = b.script
    rx.prefix = "/store/v1"
    rx.up("500")                    # so that the agent has failures to log
    agent = Agent(procs, tmp_path, [
        "-p", b.pid, "--window", WINDOW, "-F", HZ, "--push", f"pyroscope={rx.url}/store/v1/",
        "--push", f"parca={rx.url}/store/v1", "--spool-dir", tmp_path / "spool",
        "--auth-file", auth] + LABEL_ARGS)
    wait_for(lambda: all(rx.statuses(s)[500] >= 1 for s in ("pyroscope", "parca")),
             "a request answered 500 on each sink", rx, [b], [agent])
    argvs = all_argv()
    rx.up()
    wait_windows(rx, [b], [agent], 2, "with credentials")
    argvs += all_argv()
    agent.stop()
    secrets = [secret, want["Authorization"].split(" ", 1)[1]]
    for x in secrets:
        assert x not in agent.stderr, f"a secret is in the agent's log:\n{agent.stderr}"
    check_problems(rx)
    leaks = [a for a in argvs if any(x.encode() in a for x in secrets)]
    assert not leaks, f"the secret is in a process's argv: {leaks}"
    with rx.lock:
        reqs = [r for r in rx.requests if r["sink"]]
    assert reqs
    for r in reqs:
        for h, v in want.items():
            got = r["headers"].get_all(h) or []
            assert got == ([v] if v is not None else []), (
                f"request #{r['n']} to {r['sink']}: header {h}: {got}, expected {v!r}")
    agent.check_log(secrets)


def test_repeated_label(rx, procs, tmp_path):
    """`--label env=a --label env=b`: refused, or one env label per profile
    (a store refuses a series with a label twice, and the agent drops what a
    store refuses)."""
    b = Burner(by_label("pyenv-3.12.1"), procs, tmp_path, "relabel",
               env={"OTEL_SERVICE_NAME": "relabel"})
    b.wait_ready()
    args = ["-p", b.pid, "--window", WINDOW, "-F", HZ, "--push", f"pyroscope={rx.url}",
            "--push", f"parca={rx.url}", "--spool-dir", tmp_path / "spool",
            "--label", "env=a", "--label", "env=b"]
    agent = Agent(procs, tmp_path, args)
    deadline = time.monotonic() + WAIT
    while agent.p.poll() is None and not (rx.requests and rx.statuses("parca")
                                          and rx.statuses("pyroscope")):
        assert time.monotonic() < deadline, rx.describe([b.pid])
        time.sleep(0.1)
    if agent.p.poll() is not None:
        proc = subprocess.CompletedProcess(agent.cmd, agent.p.returncode, b"",
                                           agent.stderr.encode())
        check_error(proc, " ".join(agent.cmd), r"env")
        return
    agent.stop()
    check_problems(rx)
    for d in rx.deliveries:
        assert d.labels.get("env") in ("a", "b"), d.labels
