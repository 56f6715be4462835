"""record --async target: an asyncio.start_server echo service. Each
connection's handler task (unnamed: Task-N, made by the server) reads a
line, burns CPU in work() in proportion, and writes the line back.

    python async_rec_echo.py PORT_FILE

PORT_FILE gets the listening port.
"""
import asyncio
import os
import sys

PORT_FILE = sys.argv[1]


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


async def handle(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        work(int(line))
        writer.write(line)
        await writer.drain()
    writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    async with server:
        await server.serve_forever()


asyncio.run(main())
