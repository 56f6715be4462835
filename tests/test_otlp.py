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
import socket
import subprocess
import threading
import time

import pytest

from lib import otelcol
from lib.interps import by_label
from lib.tool import binary
from test_agent import BURN_FILE, Agent, Burner

pytestmark = [pytest.mark.bpf, pytest.mark.root]

WINDOW = 2
WAIT = 120


@pytest.fixture
def sink():
    s = otelcol.Sink()
    yield s
    s.close()


@pytest.fixture
def collector(tmp_path, sink):
    c = otelcol.Collector(tmp_path / "otelcol", sink=sink)
    c.start()
    yield c
    c.close()


def wait_for(cond, what, agents=(), timeout=WAIT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for a in agents:
            a.running()
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def by_pid(sink):
    """The exported profiles of each process: one resource and one cpu
    profile a request (an agent's window)."""
    out = {}
    for req in sink.decoded():
        profs = otelcol.profiles(req)
        assert len(req.get("resource_profiles", [])) == 1 and len(profs) == 1, (
            f"an agent request holds {len(req.get('resource_profiles', []))} resources, "
            f"{len(profs)} profiles")
        out.setdefault(profs[0]["resource"].get("process.pid"), []).append(profs[0])
    return out


def sent_line(agent, url):
    m = re.search(r"otlp " + re.escape(url) + r": (\d+) profiles? sent, (\d+) refused, "
                  r"(\d+) left", agent.stderr)
    assert m, f"no final otlp line in the agent's log:\n{agent.stderr}"
    return tuple(int(x) for x in m.groups())


def accepted_all(col):
    """The Collector's own counts: samples received, none refused or failed,
    all exported."""
    t = col.totals()
    assert not t["refused"] and not t.get("failed"), f"the Collector refused some: {t}"
    return t


# --------------------------------------------------------------------------

def self_by_function(prof):
    return otelcol.leaf_totals([prof])


@pytest.mark.slow  # ~8 s: make test only (make check's 5-minute budget)
def test_agent_three_processes(procs, tmp_path, sink, collector):
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
                                    "--push", f"otlp={collector.url}"])
    wait_for(lambda: all(len(by_pid(sink).get(b.pid, [])) >= 3 for b in burners),
             "three windows of each process through the Collector", [agent])
    agent.stop()
    sent, refused, left = sent_line(agent, collector.url)
    assert refused == 0 and left == 0 and sent > 0, agent.stderr
    # The Collector exports a request after it answered it.
    wait_for(lambda: len(sink.bodies()) >= sent, f"{sent} requests exported", timeout=30)
    time.sleep(0.5)
    got = by_pid(sink)
    assert sum(len(v) for v in got.values()) == sent, (
        f"the agent sent {sent} requests, the Collector exported {sum(map(len, got.values()))}")
    host = socket.gethostname()
    for b in burners:
        mine = got.get(b.pid)
        assert mine, f"{b}: nothing exported"
        hot = 0
        for prof in mine:
            a = prof["resource"]
            want = {"service.name": b.service, "process.pid": b.pid,
                    "process.runtime.name": "CPython", "process.runtime.version": b.version,
                    "host.name": host, "process.executable.name": a.get("process.executable.name")}
            want.update(b.extra)
            assert {k: a.get(k) for k in want} == want, f"{b}: resource {a}"
            assert a.get("host.arch") in ("amd64", "arm64"), a
            assert prof["sample_type"] == ("cpu", "nanoseconds"), prof["sample_type"]
            assert all(s["attributes"].get("thread.id") for s in prof["samples"]), (
                f"{b}: a sample without thread.id")
            hot += self_by_function(prof).get("burn_a", 0) > 0
        # The hottest function of the windows after the first (start-up).
        total = otelcol.leaf_totals(mine[1:])
        top = max(total, key=total.get)
        assert top == "burn_a", f"{b}: the hottest function exported is {top}: {total}"
        print(f"\n{b}: {len(mine)} windows exported, burn_a in {hot}, "
              f"{100 * total['burn_a'] / sum(total.values()):.1f}% of its self time")
    accepted_all(collector)
    agent.check_log()


@pytest.mark.slow  # ~14 s: make test only (make check's 5-minute budget)
def test_collector_restart(procs, tmp_path, sink, collector):
    b = Burner(by_label("system-3.11"), procs, tmp_path, "burn", env={"OTEL_SERVICE_NAME": "svc"})
    b.wait_ready()
    agent = Agent(procs, tmp_path, ["-p", b.pid, "--window", WINDOW, "-F", 99,
                                    "--push-timeout", 2, "--spool-dir", str(tmp_path / "spool"),
                                    "--push", f"otlp={collector.url}"])
    wait_for(lambda: len(by_pid(sink).get(b.pid, [])) >= 2, "two windows", [agent])
    collector.stop(kill=True)
    time.sleep(3 * WINDOW)
    agent.running()
    collector.restart()
    n_before = len(by_pid(sink).get(b.pid, []))
    wait_for(lambda: len(by_pid(sink).get(b.pid, [])) >= n_before + 4,
             "the windows held while the Collector was away, and more", [agent])
    agent.stop()
    sent, refused, left = sent_line(agent, collector.url)
    assert refused == 0 and left == 0, agent.stderr
    wait_for(lambda: len(sink.bodies()) >= sent, f"{sent} requests exported", timeout=30)
    time.sleep(0.5)
    windows = sorted(p["time_unix_nano"] for p in by_pid(sink)[b.pid])
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
    accepted_all(collector)
    print(f"\nrestart: {len(windows)} windows, all exported")


def test_partial_success(procs, tmp_path):
    answer = otelcol.encode('partial_success { rejected_profiles: 1 '
                            'error_message: "profile too old" }', message=otelcol.RESPONSE)
    posts = []

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

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
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


def raw_totals(path):
    """{sample type: total} that `pprof -raw` lists."""
    raw = otelcol.pprof_raw(path)
    types = [t.split("/")[0] for t in raw["sample_types"]]
    return {t: sum(v[k] for v, _ in raw["samples"]) for k, t in enumerate(types)}


def test_record_otlp_file(procs, tmp_path, sink, collector):
    raw = record_burner(procs, tmp_path)
    otlp = report(raw, "otlp", str(tmp_path / "rec.otlp"))
    pprof = report(raw, "pprof", str(tmp_path / "rec.pb.gz"))
    with open(otlp, "rb") as f:
        body = f.read()
    status, resp, _ = otelcol.post(collector.profiles_url, body)
    assert status == 200, f"the Collector answered {status}: {resp[:300]!r}"
    assert b"rejected" not in resp and len(resp) <= 2, f"a partial success: {resp!r}"
    exported = sink.wait(what="the export")
    assert otelcol.profiles(otelcol.decode(body)) == exported, "the Collector changed the profile"
    totals = raw_totals(pprof)
    assert exported[0]["sample_type"] == ("cpu", "nanoseconds")
    ours = sum(s["values"][0] for s in exported[0]["samples"])
    assert ours == totals["cpu"], f"exported cpu total {ours}, pprof -raw {totals}"
    accepted_all(collector)


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
    top = otelcol.pprof_top(pprof, "-nodecount=100000", "-nodefraction=0", "-edgefraction=0")
    theirs = sum(r["flat_pct"] for r in top["rows"] if r["name"] == "hot")
    assert 50 < ours < 95, f"hot() has {ours:.1f}% of the samples: not the workload meant"
    assert abs(theirs - ours) <= 3, f"pprof -top: hot {theirs}% flat, collapsed {ours:.1f}%"
    assert raw_totals(pprof)["cpu"] == total, (raw_totals(pprof), total)
    print(f"\npprof -top: hot {theirs}%, collapsed {ours:.2f}%")
