"""Tasks that end while they are read: 40 long-lived tasks ("keep-K") each
start a child ("c-keep-K-N") and await it, over and over; each child lives a
few event-loop rounds. Plus a spawner of short tasks ("s-N") that end at once.
A child is awaited by its parent only. Usage: async_churn.py READY_FILE."""
import asyncio
import os
import sys


async def child(k):
    for _ in range(k % 3 + 1):
        await asyncio.sleep(0)


async def keeper(name):
    n = 0
    while True:
        n += 1
        await asyncio.create_task(child(n), name=f"c-{name}-{n}")


async def short():
    await asyncio.sleep(0)


async def spawner():
    n = 0
    while True:
        for _ in range(20):
            n += 1
            asyncio.create_task(short(), name=f"s-{n}")
        await asyncio.sleep(0)


async def main(path):
    for k in range(40):
        asyncio.create_task(keeper(f"keep-{k}"), name=f"keep-{k}")
    asyncio.create_task(spawner(), name="spawner")
    await asyncio.sleep(0.3)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    await asyncio.sleep(3600)


asyncio.run(main(sys.argv[1]))
