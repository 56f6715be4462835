"""HTTP clients for tests/test_async_chains.py, in a process of their own:
THREADS threads requesting http://127.0.0.1:PORT/ex-K until killed, half
on one kept-alive connection each (http.client), half with a new connection
per request (urllib). COUNT_FILE is rewritten (atomically) every 0.2 s with
the number of answered requests.

    python async_chain_clients.py PORT COUNT_FILE [THREADS]
"""
import http.client
import os
import sys
import threading
import time
import urllib.request

PORT, COUNT_FILE = int(sys.argv[1]), sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
done = [0] * THREADS


def kept_alive(i):
    c = None
    while True:
        try:
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
            c.request("GET", f"/ex-{i}")
            c.getresponse().read()
            done[i] += 1
        except (OSError, http.client.HTTPException):
            c = None
            time.sleep(0.01)


def new_connections(i):
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/ex-{i}", timeout=10).read()
            done[i] += 1
        except OSError:
            time.sleep(0.01)


for i in range(THREADS):
    threading.Thread(target=kept_alive if i % 2 else new_connections, args=(i,),
                     daemon=True).start()
while True:
    time.sleep(0.2)
    with open(COUNT_FILE + ".tmp", "w") as f:
        f.write(f"{sum(done)}\n")
    os.rename(COUNT_FILE + ".tmp", COUNT_FILE)
