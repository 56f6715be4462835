"""The stdlib's http.server.ThreadingHTTPServer under load from a client
process, for off-CPU mode on a real program (tests/test_modes.py).

    python modes_http.py INFO LOG [SECONDS]
    python modes_http.py --client PORT CONNECTIONS   (the child it starts)

The server (this process) speaks HTTP/1.1 with keep-alive: every connection
gets a thread (socketserver.ThreadingMixIn) that runs the stdlib's
BaseHTTPRequestHandler.handle_one_request() for request after request. GET
/blob returns 512 KiB. Its socket's send buffer is 64 KiB and the client
reads slowly (16 KiB, then a 2 ms nap), so sending the reply blocks; between
two requests the client thinks for 20 ms, so the handler waits for the next
one in the stdlib's readline() of its socket. serve_forever() (its own
thread) waits in PollSelector.select() with a 0.5 s timeout: its accept loop.

Each handler appends to LOG (flushed every 50 ms by the main thread) one line
per request: "TID T_REQ T_SEND0 T_SEND1" (CLOCK_MONOTONIC ns): when the
request line and headers had been read, and before and after writing the
reply. INFO (JSON): {"python", "pid", "serve_tid", "main_tid"}, written once
the client has been served. Runs for SECONDS (default 120). CPython 3.11+.
"""
import http.client
import http.server
import faulthandler
import json
import os
import socket
import subprocess
import sys
import threading
import time

BLOB = bytes(range(256)) * (512 * 4)          # 512 KiB
records = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        t_req = time.monotonic_ns()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BLOB)))
        self.end_headers()
        t0 = time.monotonic_ns()
        self.wfile.write(BLOB)
        t1 = time.monotonic_ns()
        records.append("%d %d %d %d" % (threading.get_native_id(), t_req, t0, t1))


def client(port, connections):
    def loop():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.connect()
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        while True:
            conn.request("GET", "/blob")
            r = conn.getresponse()
            while r.read(16 * 1024):
                time.sleep(0.002)
            time.sleep(0.02)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    faulthandler.enable(all_threads=True)   # a crash says where, on stderr
    info_path, log_path = sys.argv[1:3]
    lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5},
                               name="serve_forever", daemon=True)
    serving.start()
    port = server.server_address[1]
    cl = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--client", str(port),
                           "3"], stdin=subprocess.DEVNULL)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    deadline = time.monotonic() + lifetime
    done, announced = 0, False
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
            n = len(records)
            if n > done:
                os.write(log, "".join(r + "\n" for r in records[done:n]).encode())
                done = n
            if not announced and n >= 3:
                info = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
                        "serve_tid": serving.native_id, "main_tid": threading.get_native_id()}
                with open(info_path + ".tmp", "w") as f:
                    json.dump(info, f)
                os.replace(info_path + ".tmp", info_path)
                announced = True
            if cl.poll() is not None:
                raise SystemExit(f"the client exited {cl.returncode}")
    finally:
        cl.kill()


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        client(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
