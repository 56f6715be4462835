"""A task that runs (never yields): its thread's running task. Usage:
async_busy.py READY_FILE."""
import asyncio
import os
import sys


def inner(n):
    s = 0
    for i in range(n):
        s += i
    return s


def outer():
    while True:
        inner(1000)


async def spin(path):
    await asyncio.sleep(0.1)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    outer()


async def main(path):
    t = asyncio.create_task(spin(path), name="spinner")
    asyncio.create_task(asyncio.sleep(3600), name="sleeper")
    await t


asyncio.run(main(sys.argv[1]))
