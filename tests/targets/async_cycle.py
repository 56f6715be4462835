"""Await cycles built on purpose: a awaits b and b awaits a; c -> d -> e -> c;
and a task "free" outside them. Usage: async_cycle.py READY_FILE."""
import asyncio
import os
import sys

tasks = {}


async def wait_on(other):
    await asyncio.sleep(0.1)
    await tasks[other]


async def main(path):
    for me, other in (("a", "b"), ("b", "a"), ("c", "d"), ("d", "e"), ("e", "c")):
        tasks[me] = asyncio.create_task(wait_on(other), name=me)
    tasks["free"] = asyncio.create_task(asyncio.sleep(3600), name="free")
    await asyncio.sleep(0.5)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    await asyncio.sleep(3600)


asyncio.run(main(sys.argv[1]))
