"""record --async=all target: three named tasks that sleep in a loop
(sleeper-0..2, asyncio.sleep(0.02): pending nearly all the time), one that
burns CPU (burner), under the main task (renamed main) gathering them.

    python async_rec_sleepers.py READY_FILE
"""
import asyncio
import os
import sys

READY = sys.argv[1]


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


async def nap(k):
    while True:
        await asyncio.sleep(0.02)


async def burner():
    while True:
        burn(3000)
        await asyncio.sleep(0)


async def main():
    asyncio.current_task().set_name("main")
    ts = [asyncio.create_task(nap(k), name=f"sleeper-{k}") for k in range(3)]
    ts.append(asyncio.create_task(burner(), name="burner"))
    await asyncio.sleep(0.1)
    with open(READY + ".tmp", "w") as f:
        f.write("ready\n")
    os.rename(READY + ".tmp", READY)
    await asyncio.gather(*ts)


asyncio.run(main())
