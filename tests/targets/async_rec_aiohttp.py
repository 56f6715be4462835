"""record --async on a real program: an aiohttp (Debian's python3-aiohttp,
installed in the sid root by make setup) web application. Each request is
handled in a task aiohttp makes for it (short-lived: a new connection per
request from the test's client); the handler renders JSON.

    python async_rec_aiohttp.py PORT_FILE
"""
import json
import os
import socket
import sys

from aiohttp import web

PORT_FILE = sys.argv[1]


def render(n):
    data = [{"i": i, "sq": i * i, "s": str(i)} for i in range(n)]
    return json.dumps(data)


async def handle(request):
    return web.Response(text=render(int(request.match_info["n"])))


def main():
    app = web.Application()
    app.router.add_get("/{n}", handle)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


main()
