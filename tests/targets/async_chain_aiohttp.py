"""record --async target (tests/test_async_chains.py): an aiohttp web
application (Debian's python3-aiohttp, in the sid root) whose handler hands
its CPU work to named sub-tasks it awaits, the way asyncio services do.

    python async_chain_aiohttp.py PORT_FILE KIND [BLOCK_MS]

KIND is how handle() runs its request's work (cpu_work(), a pure-Python
loop of WORK_MS with no call into Python code, so a sample of it has
cpu_work as its innermost Python frame):
  task:      t = asyncio.create_task(cpu_work(), name="work-N"); await t
  gather:    await asyncio.gather(work-Na, work-Nb)  (two named sub-tasks)
  taskgroup: async with asyncio.TaskGroup() as tg: tg.create_task(..., "work-N")
With BLOCK_MS, cpu_work() then
blocks its thread that long (time.sleep: a wait off the CPU in the task, as
a blocking call in a coroutine would). N counts the requests. Besides the clients of another process
(async_chain_clients.py), three client tasks of this loop ("client-0".."2",
aiohttp.ClientSession) request the application too. PORT_FILE gets the
port once the server listens.
"""
import asyncio
import os
import socket
import sys
import time

import aiohttp
from aiohttp import web

PORT_FILE, KIND = sys.argv[1], sys.argv[2]
BLOCK_MS = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
WORK_MS = 2.0
requests = [0]


async def cpu_work(k):
    end = time.perf_counter() + WORK_MS / 1000
    s = 0
    while time.perf_counter() < end:
        for i in range(100):
            s += i * k
    if BLOCK_MS:
        time.sleep(BLOCK_MS / 1000)
    return s


async def handle(request):
    requests[0] += 1
    n = requests[0]
    if KIND == "task":
        t = asyncio.create_task(cpu_work(n), name=f"work-{n}")
        s = await t
    elif KIND == "gather":
        a, b = await asyncio.gather(asyncio.create_task(cpu_work(n), name=f"work-{n}a"),
                                    asyncio.create_task(cpu_work(n), name=f"work-{n}b"))
        s = a + b
    else:
        async with asyncio.TaskGroup() as tg:
            t = tg.create_task(cpu_work(n), name=f"work-{n}")
        s = t.result()
    return web.Response(text=f"{n} {s}\n")


async def client(port):
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/in-loop") as r:
                    await r.read()
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.005)


async def main():
    app = web.Application()
    app.router.add_get("/{what}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    clients = [asyncio.create_task(client(port), name=f"client-{k}") for k in range(3)]
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    await asyncio.gather(*clients)


asyncio.run(main())
