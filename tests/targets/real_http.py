"""A real thread-per-request server: the stdlib's http.server.ThreadingHTTPServer
on 127.0.0.1, driven by a client in another process.

    python real_http.py SECONDS [LOG]

The profiled process is this one, the server: every connection gets a new
thread (socketserver.ThreadingMixIn), which parses the request with the
stdlib's own http.server code and runs JsonHandler.do_GET / do_POST, each
doing some real CPU work (building and encoding JSON, decoding the request
body, escaping HTML). The client (this file run with `client PORT SECONDS`,
started with sys.executable) sends many short requests, one per connection,
from two threads, with http.client and urllib.request.

Prints "ready" on stdout once the client is sending, then serves for SECONDS
and exits 0. With LOG, appends a line "TID START_NS END_NS" to it for every
request thread (flushed every 50 ms): the thread's native id and
time.monotonic_ns() when process_request_thread began and ended, the first
and last moments this program can see of it (Python frames are on the
thread's stack throughout, and a little before and after). The first line is
"main TID" for each long-lived thread. Stdlib only; runs on CPython 3.8+.
"""
import hashlib
import html
import http.client
import http.server
import json
import random
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request


def build_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
        rows.append({
            "id": i,
            "name": name,
            "title": html.escape(f"<b>{name}</b> & \"{i}\""),
            "score": rng.random() * 100,
            "tags": [name[:k] for k in range(1, 6)],
            "digest": hashlib.sha1(name.encode()).hexdigest(),
        })
    rows.sort(key=lambda r: (r["score"], r["name"]))
    return rows


def summarize(doc):
    total = 0.0
    seen = set()
    for row in doc["rows"]:
        total += row["score"]
        seen.update(row["tags"])
    return {"n": len(doc["rows"]), "total": total, "tags": sorted(seen)[:50]}


class LoggingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    spans = []             # (tid, start_ns, end_ns); list.append is atomic

    def process_request_thread(self, request, client_address):
        t0 = time.monotonic_ns()
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.spans.append((threading.get_native_id(), t0, time.monotonic_ns()))


class JsonHandler(http.server.BaseHTTPRequestHandler):
    server_version = "real_http/1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, obj):
        body = json.dumps(obj, sort_keys=True, indent=1).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        n = int(query.get("n", ["60"])[0])
        seed = int(query.get("seed", ["0"])[0])
        rows = build_rows(n, seed)
        doc = {"path": url.path, "rows": rows}
        # a round trip, as a cache layer would
        doc = json.loads(json.dumps(doc))
        self.send_json({"summary": summarize(doc), "rows": doc["rows"][:20]})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        doc = json.loads(self.rfile.read(length).decode("utf-8"))
        out = summarize(doc)
        out["echo"] = [html.escape(r["name"]) for r in doc["rows"]]
        self.send_json(out)


def client(port, seconds):
    deadline = time.monotonic() + seconds

    def loop(k):
        i = 0
        rng = random.Random(k)
        while time.monotonic() < deadline:
            i += 1
            try:
                if i % 2:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    conn.request("GET", f"/items?n={rng.randint(30, 90)}&seed={i}")
                    conn.getresponse().read()
                    conn.close()
                else:
                    body = json.dumps({"rows": build_rows(40, i)}).encode()
                    req = urllib.request.Request(f"http://127.0.0.1:{port}/sum", data=body,
                                                 headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=10) as r:
                        r.read()
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.01)

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    seconds = float(sys.argv[1])
    log = open(sys.argv[2], "a") if len(sys.argv) > 2 else None
    server = LoggingServer(("127.0.0.1", 0), JsonHandler)
    port = server.server_address[1]
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                               name="serve_forever", daemon=True)
    serving.start()
    # The client runs a little longer than the server is asked to, so that
    # the server is busy for all of SECONDS.
    cl = subprocess.Popen([sys.executable, __file__, "client", str(port), str(seconds + 2)],
                          stdin=subprocess.DEVNULL)
    # Ready once the first requests have been served.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/warmup?n=5", timeout=30) as r:
        r.read()
    print("ready", flush=True)
    if log:
        log.write(f"main {threading.get_native_id()}\nmain {serving.native_id}\n")
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if log:
            n = len(server.spans)
            log.write("".join("%d %d %d\n" % x for x in server.spans[done:n]))
            log.flush()
            done = n
    server.shutdown()
    cl.kill()
    cl.wait()
    server.server_close()


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
