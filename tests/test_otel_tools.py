"""The real OpenTelemetry tools of scripts/provision-otel.sh work on their own,
without pyprof-bpf: the Collector (otelcol-pyprof) takes an OTLP/HTTP profiles request
that protoc encoded from the Debian .proto files, and exports it (its debug exporter's
log, an otlp_http exporter to a loopback receiver, decoded again with protoc); it
refuses a profiles pipeline without its feature gate, and comes back on the same port
after a kill. google/pprof's `pprof` reads a profile.proto that protoc encoded, with
the totals it holds. A missing tool fails, naming the script."""
import gzip
import struct
import subprocess
import urllib.error

import pytest

from lib import otelcol
from lib.otelcol import Collector, Sink


HOT, MAIN = "hot_function", "main"
COLD = "c\u00f6ld_\u51fd\u6570"      # not ASCII: protoc --decode escapes its bytes

# An ExportProfilesServiceRequest of opentelemetry-proto 1.11: one resource, one cpu
# profile, two samples (hot_function <- main: 7, COLD <- main: 3). Every dictionary
# table starts with its zero value, as the spec requires.
REQUEST = f"""
resource_profiles {{
  resource {{
    attributes {{ key: "service.name" value {{ string_value: "otel-smoke" }} }}
    attributes {{ key: "process.pid" value {{ int_value: 4242 }} }}
  }}
  scope_profiles {{
    scope {{ name: "pyprof-bpf-test" version: "0" }}
    profiles {{
      sample_type {{ type_strindex: 1 unit_strindex: 2 }}
      period_type {{ type_strindex: 1 unit_strindex: 2 }}
      period: 10101010
      time_unix_nano: 1700000000000000000
      duration_nano: 1000000000
      profile_id: "0123456789abcdef"
      samples {{ stack_index: 1 values: 70707070 attribute_indices: 1 }}
      samples {{ stack_index: 2 values: 30303030 attribute_indices: 1 }}
    }}
  }}
}}
dictionary {{
  string_table: ""
  string_table: "cpu"
  string_table: "nanoseconds"
  string_table: "{HOT}"
  string_table: "{MAIN}"
  string_table: "/app/smoke.py"
  string_table: "{COLD}"
  string_table: "thread.name"
  mapping_table {{}}
  location_table {{}}
  location_table {{ lines {{ function_index: 1 line: 10 }} }}
  location_table {{ lines {{ function_index: 2 line: 20 }} }}
  location_table {{ lines {{ function_index: 3 line: 30 }} }}
  function_table {{}}
  function_table {{ name_strindex: 3 filename_strindex: 5 start_line: 9 }}
  function_table {{ name_strindex: 4 filename_strindex: 5 start_line: 19 }}
  function_table {{ name_strindex: 6 filename_strindex: 5 start_line: 29 }}
  stack_table {{}}
  stack_table {{ location_indices: [1, 2] }}
  stack_table {{ location_indices: [3, 2] }}
  link_table {{}}
  attribute_table {{}}
  attribute_table {{ key_strindex: 7 value {{ string_value: "MainThread" }} }}
}}
"""


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


@pytest.fixture
def collector(tmp_path, sink):
    started = []

    def start(**kw):
        c = Collector(tmp_path / f"otelcol{len(started)}", sink=sink, **kw)
        started.append(c)
        return c.start()
    yield start
    for c in started:
        c.close()


def smoke_profiles(profs):
    return [p for p in profs if p["resource"].get("service.name") == "otel-smoke"]


def check_smoke(p):
    assert p["resource"] == {"service.name": "otel-smoke", "process.pid": 4242}, p
    assert p["scope"] == "pyprof-bpf-test"
    assert p["sample_type"] == ("cpu", "nanoseconds")
    assert p["period"] == 10101010
    stacks = sorted((s["stack"], s["values"]) for s in p["samples"])
    assert stacks == sorted([([HOT, MAIN], [70707070]), ([COLD, MAIN], [30303030])]), stacks
    hot = next(s for s in p["samples"] if s["stack"][0] == HOT)
    assert hot["frames"][0]["file"] == "/app/smoke.py" and hot["frames"][0]["line"] == 10
    assert hot["attributes"] == {"thread.name": "MainThread"}


def test_collector_takes_and_exports_profiles(collector, sink):
    col = collector()
    body = otelcol.encode(REQUEST)
    # What we send decodes back to itself, the non-ASCII name included.
    check_smoke(otelcol.profiles(otelcol.decode(body))[0])

    for gz in (False, True):       # plain, and gzipped as pyprof-bpf's pushes are
        status, resp, _ = otelcol.post(col.profiles_url, body, gz=gz)
        assert status == 200, (status, resp, col.log()[-3000:])
        # An empty ExportProfilesServiceResponse or one with an empty
        # partial_success: nothing rejected.
        text = otelcol.decode_text(resp, otelcol.RESPONSE)
        assert "rejected_profiles" not in text and "error_message" not in text, text

    profs = sink.wait(lambda ps: len(smoke_profiles(ps)) >= 2, what="both requests exported")
    assert len(smoke_profiles(profs)) == 2, otelcol.summary(profs)
    for p in smoke_profiles(profs):
        check_smoke(p)
    assert otelcol.leaf_totals(profs) == {HOT: 2 * 70707070, COLD: 2 * 30303030}
    text = otelcol.decode_text(sink.bodies()[0])
    assert 'string_value: "otel-smoke"' in text and f'"{HOT}"' in text, text
    assert all(r["headers"].get("Content-Type") == "application/x-protobuf"
               for r in sink.requests)

    # The collector's own account: 4 samples in, none refused, 4 out of each exporter.
    c = col.wait_counts(lambda c: sum(c["exported"].values()) >= 8)
    assert (c["received"], c["refused"], c["failed"]) == (4, 0, 0), c
    assert c["exported"] == {"debug": 4, "otlp_http": 4}, c
    assert not any(c["export_failed"].values()), c
    assert col.debug_batches() == [{"resource profiles": 1, "sample records": 2}] * 2
    res = col.debug_resources()
    assert res and res[0] == {"service.name": "Str(otel-smoke)", "process.pid": "Int(4242)"}


def test_collector_comes_back_on_its_port(collector, sink):
    col = collector()
    body = otelcol.encode(REQUEST)
    assert otelcol.post(col.profiles_url, body)[0] == 200
    sink.wait(lambda ps: len(smoke_profiles(ps)) >= 1)
    port = col.port
    col.stop(kill=True)
    with pytest.raises(urllib.error.URLError):
        otelcol.post(col.profiles_url, body, timeout=5)
    col.start()
    assert col.port == port
    assert otelcol.post(col.profiles_url, body)[0] == 200
    sink.wait(lambda ps: len(smoke_profiles(ps)) >= 2)
    col.wait_counts(lambda c: c["exported"].get("otlp_http", 0) == 2)    # this run's
    t = col.totals()
    assert (t["received"], t["refused"]) == (4, 0), t
    # The first run's export, if its counter was read before the kill.
    assert t["exported"]["otlp_http"] in (2, 4), t
    assert col.log().count("==== start") == 2


def test_profiles_need_the_feature_gate(tmp_path):
    c = Collector(tmp_path, debug=True)
    argv = [a for a in c.argv() if not a.startswith("--feature-gates")]
    p = subprocess.run(argv[:1] + ["validate"] + argv[1:], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode != 0 and otelcol.FEATURE_GATE in p.stderr, p
    p = subprocess.run([otelcol.tool(otelcol.COLLECTOR), "validate"] + c.argv()[1:],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == 0, p


# A pprof profile.proto: two sample types, the same two stacks as above.
PPROF_TEXT = f"""
sample_type {{ type: 1 unit: 2 }}
sample_type {{ type: 3 unit: 4 }}
sample {{ location_id: [1, 2] value: [7, 70707070] }}
sample {{ location_id: [3, 2] value: [3, 30303030] }}
location {{ id: 1 line {{ function_id: 1 line: 10 }} }}
location {{ id: 2 line {{ function_id: 2 line: 20 }} }}
location {{ id: 3 line {{ function_id: 3 line: 30 }} }}
function {{ id: 1 name: 5 system_name: 5 filename: 7 }}
function {{ id: 2 name: 6 system_name: 6 filename: 7 }}
function {{ id: 3 name: 8 system_name: 8 filename: 7 }}
string_table: ""
string_table: "samples"
string_table: "count"
string_table: "cpu"
string_table: "nanoseconds"
string_table: "{HOT}"
string_table: "{MAIN}"
string_table: "/app/smoke.py"
string_table: "{COLD}"
period_type {{ type: 3 unit: 4 }}
period: 10101010
"""


def test_pprof_reads_a_profile(tmp_path):
    path = tmp_path / "smoke.pb.gz"
    path.write_bytes(gzip.compress(otelcol.encode(PPROF_TEXT, otelcol.PPROF_MESSAGE,
                                                  otelcol.PPROF_PROTO)))
    top = otelcol.pprof_top(str(path), "-sample_index=samples")
    assert top["type"] == "samples" and top["total"] == 10, top["text"]
    rows = {r["name"]: r for r in top["rows"]}
    assert (rows[HOT]["flat"], rows[HOT]["flat_pct"]) == (7, 70.0), top["text"]
    assert (rows[COLD]["flat"], rows[COLD]["flat_pct"]) == (3, 30.0), top["text"]
    assert (rows[MAIN]["flat"], rows[MAIN]["cum"]) == (0, 10), top["text"]

    top = otelcol.pprof_top(str(path))         # the last sample type: cpu
    assert top["type"] == "cpu" and top["total"] == pytest.approx(101010100, rel=1e-3), \
        top["text"]

    raw = otelcol.pprof_raw(str(path))
    assert raw["sample_types"] == ["samples/count", "cpu/nanoseconds"], raw["text"]
    assert sorted(raw["samples"]) == [([3, 30303030], [3, 2]), ([7, 70707070], [1, 2])]
    assert raw["locations"] == {1: [HOT], 2: [MAIN], 3: [COLD]}, raw["text"]


def test_tools_are_static():
    """They run on the host as they are: no program interpreter (PT_INTERP), so
    nothing of the sid root they were built in."""
    for path in (otelcol.COLLECTOR, otelcol.PPROF):
        with open(otelcol.tool(path), "rb") as f:
            elf = f.read(1 << 16)
        assert elf[:5] == b"\x7fELF\x02", f"{path}: not a 64-bit ELF file"
        phoff, = struct.unpack_from("<Q", elf, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
        types = [struct.unpack_from("<I", elf, phoff + i * phentsize)[0] for i in range(phnum)]
        assert 3 not in types, f"{path} is dynamically linked"
    out = subprocess.run([otelcol.COLLECTOR, "--version"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=30).stdout
    assert out.startswith("otelcol-pyprof version 0."), out
