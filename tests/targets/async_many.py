"""N pending asyncio tasks (default 10,000): a parent task gathers them all, so
each one is awaited by it. Usage: async_many.py READY_FILE [N]."""
import asyncio
import os
import sys


async def leaf(i):
    await asyncio.sleep(3600)


async def parent(n, path):
    kids = [asyncio.create_task(leaf(i), name=f"t{i}") for i in range(n)]
    g = asyncio.gather(*kids)
    await asyncio.sleep(0.2)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    await g


asyncio.run(parent(int(sys.argv[2]) if len(sys.argv) > 2 else 10000, sys.argv[1]))
