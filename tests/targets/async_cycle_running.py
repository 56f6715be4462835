"""record --async target (tests/test_async_chains.py): a running task whose
chain of awaiters comes back on itself.

    python async_cycle_running.py READY_FILE

Task "burner" runs burn() for ever. Task "a" awaits burner, task "b"
awaits a (both in wait_on()); then a is also registered as an awaiter of b
(asyncio.futures.future_add_to_awaited_by, as gather and TaskGroup do), so
the chain from burner reads burner <- a <- b <- a ... A profiler must mark
the cycle ([task-cycle]) after b instead of following it. READY_FILE is
written just before burner starts burning.
"""
import asyncio
import os
import sys

READY = sys.argv[1]


def burn():
    s = 0
    while True:
        for i in range(1000):
            s += i * i


async def burner():
    await asyncio.sleep(0.2)
    with open(READY + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.rename(READY + ".tmp", READY)
    burn()


async def wait_on(t):
    await t


async def main():
    bt = asyncio.create_task(burner(), name="burner")
    a = asyncio.create_task(wait_on(bt), name="a")
    b = asyncio.create_task(wait_on(a), name="b")
    await asyncio.sleep(0.05)
    asyncio.futures.future_add_to_awaited_by(b, a)
    await asyncio.sleep(3600)


asyncio.run(main())
